package ranks

// Slot indices from a device counter.
//
// A kernel may pick the slot of a buffer it uses from a counter in device
// memory: a Lamport all-reduce rotating over three buffers takes buffer
// counter % 3, where the counter is advanced by a kernel at every call
// (TensorRT-LLM's lamport buffers, vLLM's and SGLang's custom all-reduce
// flags). The kernel loads the counter once, when it starts; the slot it
// computes from that load is the one every later access of the call uses,
// whatever the counter holds by then.
//
// The model: the kernel's first micro-op is an OpIndex, a plain read of
// the counter (a data read: checked against happens-before like any other,
// so a counter advanced by an unordered kernel is a race, and the value
// read is whatever the schedule left there), which keeps value mod Slot as
// the task's index. A later micro-op with an Ix moves its destination
// (Ix.Dst) and the sources Ix.Srcs marks by index × Ix.Stride chunks
// before it runs, and everything that reads its regions (a flag wait's
// polled region, a step's footprint for DPOR) sees the moved ones. The
// moved regions stay inside the buffer the micro-op names (the format
// checks that every slot fits), so the static passes, which work per
// buffer, need nothing more.

// IxShift says which regions of a micro-op move with its kernel's slot
// index, and by how many chunks per slot.
type IxShift struct {
	Stride int
	Dst    bool
	Srcs   uint64 // bit i: Srcs[i] moves
}

// execIndex is OpIndex: load the counter and keep its slot.
func (w *World) execIndex(t *task, in *Instr) {
	v := w.read(t, in.Srcs[0].Buf, in.Srcs[0].Lo)
	k := int64(v.N % uint64(max(in.Slot, 1)))
	if w.slotIx == nil {
		w.slotIx = map[int32]int64{}
	}
	w.slotIx[t.id] = k
	w.eng.Mix2(uint64(t.id)|1<<61, uint64(k))
}

// shifted returns in with its regions moved by t's slot index: a copy of
// its own (the caller may keep it), or in itself when it has no Ix.
func (w *World) shifted(t *task, in *Instr) *Instr {
	if in.Ix == nil {
		return in
	}
	off := int(w.slotIx[t.id]) * in.Ix.Stride
	c := *in
	c.Ix = nil
	if in.Ix.Dst {
		c.DstLo += off
	}
	if in.Ix.Srcs != 0 {
		c.Srcs = append([]Src(nil), in.Srcs...)
		for i := range c.Srcs {
			if i < 64 && in.Ix.Srcs&(1<<i) != 0 {
				c.Srcs[i].Lo += off
			}
		}
	}
	return &c
}
