package perf

import (
	"math"

	"testing"

	"github.com/stretchr/testify/require"
)

// TestBareRingSums: every rank ends with the sum of every segment, for
// small rings (1 and 2 ranks are the edge cases of the hop count).
func TestBareRingSums(t *testing.T) {
	for _, n := range []int{1, 2, 3, 8, 33} {
		require.NoError(t, checkBareRing(BareRing(n)), "n=%d", n)
	}
}

// TestRingSideStream: the shared ring row's second stream makes the ring's
// input a buffer two lanes touch, so the ring's accesses to it are race
// checked: reading it beside the ring is no race, writing it is one.
func TestRingSideStream(t *testing.T) {
	for _, tc := range []struct {
		sd   side
		race bool
	}{{noSide, false}, {sideReads, false}, {sideWrites, true}} {
		w, err := ringWorld(8, 1<<10, 8, tc.sd, false)
		require.NoError(t, err)
		res, err := w.Run()
		require.NoError(t, err)
		require.Equal(t, tc.race, res.Counts["race"] > 0, "side %d: %v", tc.sd, res.Counts)
	}
}

// TestFitSlope: the growth exponent of exact powers is the power.
func TestFitSlope(t *testing.T) {
	var xs, ys []float64
	for _, x := range []float64{8, 16, 32, 64} {
		xs, ys = append(xs, math.Log(x)), append(ys, math.Log(3*x*x*x))
	}
	require.InDelta(t, 3, fitSlope(xs, ys), 1e-9)
	require.InDelta(t, 3, fitSlope(xs[2:], ys[2:]), 1e-9)
}
