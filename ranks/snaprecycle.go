package ranks

import "math/bits"

// Recycling clock snapshots.
//
// Every release hands out a snapshot of the releasing lane's clock (a
// signal put, a message sent, a finished task): at 4,096 ranks × 61 layers
// tens of millions of them, most of two or four entries once the carry
// filter has dropped the rest, and most dead a few steps later, when their
// one acquirer has joined them. Allocating each was a quarter of the bytes
// such a run allocated, and the collector's work follows those bytes.
//
// So a sparse snapshot of up to 64 entries counts the places that hold it,
// and goes back to a free list of its capacity (a power of two) when the
// last lets go:
//
//   - the lane's cached snapshot (World.snap), until the lane's next one;
//   - a signal slot, until the wait that clears it;
//   - a message, until a receive has acquired it;
//   - a finished task (task.done), until its last dependent has acquired
//     it (retire.go);
//   - a flag word and the clock history (tests) keep theirs for good.
//
// A holder that is never let go is safe: the snapshot is then the
// collector's to take back, as before. Only a hold missed while the
// snapshot is still read would be wrong, and [World.KeepHistory], which
// TestRetireSameResults compares with every built-in scenario, turns
// recycling off with the rest of retirement.

// own counts one more holder of snapshot v.
func (w *World) own(v *VC) {
	if v != nil && v.box != 0 {
		v.refs++
	}
}

// disown lets go of one holder of snapshot v, recycling it after the last.
func (w *World) disown(v *VC) {
	if v == nil || v.box == 0 {
		return
	}
	if v.refs--; v.refs > 0 || w.keepHistory {
		return
	}
	if v.refs < 0 {
		panic("ranks: a clock snapshot let go more often than held")
	}
	if w.snapPoison {
		v.refs = freedSnapshot // never handed out again: checkHeld sees it
		return
	}
	w.snapFree[v.box] = append(w.snapFree[v.box], v)
}

// freedSnapshot marks a snapshot that a poisoning run let go of.
const freedSnapshot = -1 << 30

// checkHeld panics when o, about to be acquired, is a snapshot nothing
// holds: it was recycled while still in use (a hold missed). A test run
// with snapPoison never reuses a snapshot, so that every such read shows.
func (w *World) checkHeld(o *VC) {
	if o != nil && o.box != 0 && o.refs <= 0 {
		panic("ranks: acquired a recycled clock snapshot")
	}
}

// snapClasses bounds the capacities recycled: 1<<1 … 1<<(snapClasses-1).
const snapClasses = 7

// newSnapshot returns a sparse clock of n entries for a snapshot to fill
// in: a recycled one of its capacity class when one is free.
func (w *World) newSnapshot(n int) *VC {
	c := max(1, bits.Len(uint(n-1))) // capacity 1<<c
	if c >= snapClasses {
		return &VC{e: make([]clockEntry, n)}
	}
	if k := len(w.snapFree[c]); k > 0 {
		s := w.snapFree[c][k-1]
		w.snapFree[c] = w.snapFree[c][:k-1]
		s.e = s.e[:n]
		return s
	}
	var s *VC
	switch c {
	case 1: // a TP group's, with the carry filter: one allocation
		b := &struct {
			v VC
			a [2]clockEntry
		}{}
		s = &b.v
		s.e = b.a[:n]
	case 2:
		b := &struct {
			v VC
			a [4]clockEntry
		}{}
		s = &b.v
		s.e = b.a[:n]
	default:
		s = &VC{e: make([]clockEntry, n, 1<<c)}
	}
	s.box = int8(c)
	return s
}

// sharedSnapshot returns a snapshot of sparse clock v without the entries
// of lanes that share no memory (see [sharedLanes]); emptyVC, allocating
// nothing, when no entry is left.
func (w *World) sharedSnapshot(v *VC) *VC {
	n := 0
	for _, x := range v.e {
		if w.shared[x.lane] {
			n++
		}
	}
	if n == 0 {
		return emptyVC
	}
	s := w.newSnapshot(n)
	i := 0
	for _, x := range v.e {
		if w.shared[x.lane] {
			s.e[i] = x
			i++
		}
	}
	return s
}
