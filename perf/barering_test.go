package perf

import (
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
		w, err := ringWorld(8, 1<<10, 8, tc.sd)
		require.NoError(t, err)
		res, err := w.Run()
		require.NoError(t, err)
		require.Equal(t, tc.race, res.Counts["race"] > 0, "side %d: %v", tc.sd, res.Counts)
	}
}
