package explore

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/sim"
)

// TestShrinkPCTWitness: a PCT witness of the tp8 bug (thousands of
// deviations from the nominal untimed schedule) shrinks to a handful that
// still corrupt, and the shrunk witness replays with its own trace hash.
func TestShrinkPCTWitness(t *testing.T) {
	tg, err := NewTarget("tp8-shared-expert", "buggy", []string{"layers=1", "replays=1"})
	require.NoError(t, err)
	s, err := New("pct", tg, 1)
	require.NoError(t, err)
	sum, err := Explore(tg, s, 1, Options{Budget: 5})
	require.NoError(t, err)
	require.Equal(t, "corruption", sum.Verdict)
	w := sum.Witness
	require.Greater(t, w.Deviations, 100)

	small, runs, err := Shrink(tg, w, 300)
	require.NoError(t, err)
	require.LessOrEqual(t, runs, 300)
	require.LessOrEqual(t, small.Deviations, 10, "shrunk from %d to %d deviations", w.Deviations, small.Deviations)
	require.Equal(t, sim.Deviations(small.Choices), small.Deviations)
	sc, diverged, err := Replay(tg, small)
	require.NoError(t, err)
	require.Zero(t, diverged)
	require.Equal(t, small.TraceHash, sc.TraceHash)
	require.True(t, sc.Has("corruption"))
}
