package explore

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// noChoice fails the test on any choice: building a world must make none.
type noChoice struct{ t *testing.T }

func (c noChoice) Choose(d sim.Decision, n int) int {
	c.t.Fatalf("build made a %v choice", d)
	return 0
}

func (c noChoice) ChooseItem([]sim.Item) int {
	c.t.Fatalf("build made an item choice")
	return 0
}

// TestAllocatorIsNotAScheduleChoice backs the claim in dpor.go that the
// caching allocator's hand-outs need no choice of their own: a build with
// a chooser that refuses every choice succeeds. Where no free waits for
// record_stream events (aux-stream-lifetime's buggy and fp32-routed), the
// allocator decides every block while the world is built, in host issue
// order, and each schedule runs a copy of that one world. Where one does
// (record-stream), no block is decided at build time: the host makes
// each call as it reaches it in the run (ranks/dynalloc.go), and what it
// depends on, whether a recorded stream's work is done, is a step order
// DPOR explores (TestDPORDeferredFreesMatchNaive).
func TestAllocatorIsNotAScheduleChoice(t *testing.T) {
	for _, v := range []string{"buggy", "record-stream", "fp32-routed"} {
		sc, ok := scenarios.Lookup("aux-stream-lifetime")
		require.True(t, ok)
		vv, ok := sc.Variant(v)
		require.True(t, ok)
		cfg, err := sc.VariantConfig(vv, nil)
		require.NoError(t, err)
		b, err := sc.Build(cfg, scenarios.BuildOptions{}, sim.NewEngine(sim.Untimed, noChoice{t}))
		require.NoError(t, err)
		require.NotEmpty(t, b.World.Buffers())
		placed := 0
		for _, x := range b.World.Buffers() {
			if x.Block != nil && x.Block.Block != nil {
				placed++
			}
		}
		if v == "record-stream" {
			require.Zero(t, placed, "blocks are placed as the run reaches each malloc")
		} else {
			require.NotZero(t, placed, "blocks are placed while the world is built")
		}
	}
}
