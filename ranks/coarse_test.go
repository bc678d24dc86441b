package ranks

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/collsim/collsim/sim"
)

// TestPropRingEndsClosedForm: the O(n) longest-path form of the ring's end
// times equals the step-by-step recurrence it solves, for any start times,
// durations (the first step longer or shorter than the others, or zero)
// and FIFO depth.
func TestPropRingEndsClosedForm(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(2, 40).Draw(rt, "n")
		cp := rapid.IntRange(2, 10).Draw(rt, "cap")
		a := sim.Time(rapid.IntRange(0, 5000).Draw(rt, "a"))
		b := sim.Time(rapid.IntRange(0, 5000).Draw(rt, "b"))
		spread := rapid.IntRange(0, 200000).Draw(rt, "spread")
		start := make([]sim.Time, n)
		for i := range start {
			start[i] = sim.Time(rapid.IntRange(0, spread).Draw(rt, fmt.Sprintf("s%d", i)))
		}
		require.Equal(rt, ringEndsNaive(start, a, b, cp), ringEnds(start, a, b, cp))
	})
}

// TestRingEndsTogether: ranks that start together end together, after the
// first step and 2n−2 more (a 512-rank ring at NCCL's depth of 8).
func TestRingEndsTogether(t *testing.T) {
	start := make([]sim.Time, 512)
	for _, e := range ringEnds(start, 1500, 1200, 8) {
		require.Equal(t, sim.Time(1500+1022*1200), e)
	}
}
