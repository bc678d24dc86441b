package hb

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
//   - the lane's cached snapshot (ranks' World.snap), until the lane's next one;
//   - a signal slot, until the wait that clears it;
//   - a message, until a receive has acquired it;
//   - a finished task (task.done), until its last dependent has acquired
//     it (retire.go);
//   - a flag word and the clock history (tests) keep theirs for good.
//
// A holder that is never let go is safe: the snapshot is then the
// collector's to take back, as before. Only a hold missed while the
// snapshot is still read would be wrong, and ranks' World.KeepHistory,
// which TestRetireSameResults compares with every built-in scenario,
// turns recycling off with the rest of retirement.

// Pool holds the snapshots let go of, by capacity class, for reuse.
type Pool struct {
	free [snapClasses][]*VC
	// Poison: a snapshot let go is never reused, so that a read of one
	// recycled while still held shows ([Pool.CheckHeld]; tests).
	Poison bool
}

// Own counts one more holder of snapshot v.
func (p *Pool) Own(v *VC) {
	if v != nil && v.box != 0 {
		v.refs++
	}
}

// Disown lets go of one holder of snapshot v, recycling it after the
// last unless keep (nothing is recycled while a run keeps its history).
func (p *Pool) Disown(v *VC, keep bool) {
	if v == nil || v.box == 0 {
		return
	}
	if v.refs--; v.refs > 0 || keep {
		return
	}
	if v.refs < 0 {
		panic("ranks: a clock snapshot let go more often than held")
	}
	if p.Poison {
		v.refs = freedSnapshot // never handed out again: checkHeld sees it
		return
	}
	p.free[v.box] = append(p.free[v.box], v)
}

// freedSnapshot marks a snapshot that a poisoning run let go of.
const freedSnapshot = -1 << 30

// CheckHeld panics when o, about to be acquired, is a snapshot nothing
// holds: it was recycled while still in use (a hold missed). A test run
// with Poison never reuses a snapshot, so that every such read shows.
func (p *Pool) CheckHeld(o *VC) {
	if o != nil && o.box != 0 && o.refs <= 0 {
		panic("ranks: acquired a recycled clock snapshot")
	}
}

// snapClasses bounds the capacities recycled: 1<<1 … 1<<(snapClasses-1).
const snapClasses = 7

// New returns a sparse clock of n entries for a snapshot to fill in: a
// recycled one of its capacity class when one is free.
func (p *Pool) New(n int) *VC {
	c := max(1, bits.Len(uint(n-1))) // capacity 1<<c
	if c >= snapClasses {
		return &VC{e: make([]Entry, n)}
	}
	if k := len(p.free[c]); k > 0 {
		s := p.free[c][k-1]
		p.free[c] = p.free[c][:k-1]
		s.e = s.e[:n]
		return s
	}
	var s *VC
	switch c {
	case 1: // a TP group's, with the carry filter: one allocation
		b := &struct {
			v VC
			a [2]Entry
		}{}
		s = &b.v
		s.e = b.a[:n]
	case 2:
		b := &struct {
			v VC
			a [4]Entry
		}{}
		s = &b.v
		s.e = b.a[:n]
	default:
		s = &VC{e: make([]Entry, n, 1<<c)}
	}
	s.box = int8(c)
	return s
}

// Shared returns a snapshot of sparse clock v without the entries of
// lanes that share no memory (shared[lane] false: ranks' sharedLanes);
// Empty, allocating nothing, when no entry is left.
func (p *Pool) Shared(v *VC, shared []bool) *VC {
	n := 0
	for _, x := range v.e {
		if shared[x.Lane] {
			n++
		}
	}
	if n == 0 {
		return Empty
	}
	s := p.New(n)
	i := 0
	for _, x := range v.e {
		if shared[x.Lane] {
			s.e[i] = x
			i++
		}
	}
	return s
}
