package ranks

// NewSignalPad returns an empty signal pad of slots uint32 flags on rank
// (PyTorch allocates 2048 bytes per rank per allocation: 512 slots).
func NewSignalPad(name string, rank, slots int) *SignalPad {
	p := &SignalPad{Name: name, Rank: rank, Slots: make([]sigSlot, slots)}
	p.side(true)
	p.side(false)
	return p
}

// SlotSet reports whether slot i of p currently holds a signal (for tests
// and reports).
func (p *SignalPad) SlotSet(i int) bool { return i >= 0 && i < len(p.Slots) && p.Slots[i].val != 0 }
