// Package slab holds the two containers a world recycles its memory with
// (ranks/arena.go, ranks/kstore.go): [Slabs], which hands out slices of T
// and takes every one of them back at once for the next world to reuse,
// and [Seq], which hands out slices of T in order and, after a reset, the
// same ones again in the same order.
//
// Recycled memory never reaches a result: a slice is cleared before it is
// handed out again (but by [Slabs.GetUnzeroed], for callers that write
// every element before reading it), so a caller sees exactly the zero
// memory a fresh allocation would give it. Neither is safe for concurrent
// use.
package slab

// Slabs hands out slabs of T, reusing released ones when they are big
// enough. The zero value is ready to use.
type Slabs[T any] struct {
	used [][]T // handed out since the last Recycle
	free [][]T // released by Recycle, ready to be handed out
}

// Get returns n zero values of T: a released slab when the last one is big
// enough (cleared), else a new one.
func (s *Slabs[T]) Get(n int) []T {
	var x []T
	if k := len(s.free); k > 0 && cap(s.free[k-1]) >= n {
		x = s.free[k-1][:n]
		s.free[k-1] = nil
		s.free = s.free[:k-1]
		clear(x)
	} else {
		x = make([]T, n)
	}
	s.used = append(s.used, x)
	return x
}

// GetUnzeroed is Get, but a recycled slab keeps what was last written in
// it: for slabs whose every element is written before anything reads it.
func (s *Slabs[T]) GetUnzeroed(n int) []T {
	if k := len(s.free); k > 0 && cap(s.free[k-1]) >= n {
		x := s.free[k-1][:n]
		s.free[k-1] = nil
		s.free = s.free[:k-1]
		s.used = append(s.used, x)
		return x
	}
	return s.Get(n)
}

// Recycle makes every slab handed out free again, in the order they were
// handed out: a caller that asks for the same sizes in the same order
// finds each request's own slab again.
func (s *Slabs[T]) Recycle() {
	for i := len(s.used) - 1; i >= 0; i-- {
		s.free = append(s.free, s.used[i])
		s.used[i] = nil
	}
	s.used = s.used[:0]
}

// Seq hands out slices of T in order; after [Seq.Reset] it hands out the
// same ones again, in the same order, each cleared (or a new one when a
// request is larger than the one it replaces). Nothing handed out may be
// used after the Reset that reuses it. The zero value is ready to use.
type Seq[T any] struct {
	got [][]T
	n   int
}

// Get returns n zero values of T (nil for none).
func (r *Seq[T]) Get(n int) []T {
	if n == 0 {
		return nil
	}
	if r.n < len(r.got) && cap(r.got[r.n]) >= n {
		x := r.got[r.n][:n]
		clear(x)
		r.n++
		return x
	}
	x := Fresh[T](n)
	if r.n < len(r.got) {
		r.got[r.n] = x
	} else {
		r.got = append(r.got, x)
	}
	r.n++
	return x
}

// Reset makes everything handed out so far available again, to be handed
// out in the same order.
func (r *Seq[T]) Reset() { r.n = 0 }

// Fresh is n new zero values of T (nil for none).
func Fresh[T any](n int) []T {
	if n == 0 {
		return nil
	}
	return make([]T, n)
}
