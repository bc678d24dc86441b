package slab_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks/slab"
)

// A slab is handed out zeroed, and a released world's slabs come back in
// the order they were first handed out: a caller that asks for the same
// sizes gets each one back.
func TestSlabsRecycleZeroedInOrder(t *testing.T) {
	var s slab.Slabs[int32]
	a, b := s.Get(4), s.Get(8)
	a[0], b[7] = 1, 2
	s.Recycle()
	a2, b2 := s.Get(4), s.Get(8)
	require.Same(t, &a[0], &a2[0])
	require.Same(t, &b[0], &b2[0])
	require.Equal(t, []int32{0, 0, 0, 0}, a2)
	require.Equal(t, make([]int32, 8), b2)
	s.Recycle()
	big := s.Get(16) // the last free slab (4) is too small: a new one
	require.Len(t, big, 16)
	require.NotSame(t, &a[0], &big[0])
}

// GetUnzeroed hands a recycled slab back as it was left; a new one is zero.
func TestGetUnzeroedKeepsContents(t *testing.T) {
	var s slab.Slabs[int32]
	a := s.GetUnzeroed(4)
	require.Equal(t, []int32{0, 0, 0, 0}, a)
	a[2] = 7
	s.Recycle()
	a2 := s.GetUnzeroed(4)
	require.Same(t, &a[0], &a2[0])
	require.Equal(t, []int32{0, 0, 7, 0}, a2)
}

// A Seq hands out the same slices again after a Reset, in order, each
// cleared; a larger request gets a new slice in that place, and nothing
// is made for zero.
func TestSeqResetReusesInOrder(t *testing.T) {
	var q slab.Seq[int64]
	require.Nil(t, q.Get(0))
	a, b := q.Get(3), q.Get(5)
	a[0], b[4] = 1, 2
	q.Reset()
	a2, b2 := q.Get(3), q.Get(6)
	require.Same(t, &a[0], &a2[0])
	require.Equal(t, []int64{0, 0, 0}, a2)
	require.NotSame(t, &b[0], &b2[0], "a larger request than the slice in its place gets a new one")
	q.Reset()
	_, b3 := q.Get(3), q.Get(6)
	require.Same(t, &b2[0], &b3[0], "and the new one takes that place")
	require.Nil(t, slab.Fresh[int64](0))
	require.Len(t, slab.Fresh[int64](2), 2)
}
