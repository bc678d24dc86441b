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
// caching allocator's hand-outs are independent of the schedule: every
// scenario that uses the allocator (aux-stream-lifetime; a file with alloc
// and free ops) decides which block each tensor gets while the world is
// built, in host issue order, before any scheduling choice: a build with a
// chooser that refuses every choice succeeds, and each schedule runs a copy
// of that one world.
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
	}
}
