package check_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios"
)

func variantReport(t *testing.T, scenario, variant string, sets ...string) *check.VariantReport {
	t.Helper()
	sc, ok := scenarios.Lookup(scenario)
	require.True(t, ok, scenario)
	v, ok := sc.Variant(variant)
	require.True(t, ok, variant)
	rep, err := check.RunVariant(sc, v, check.Options{Extra: sets})
	require.NoError(t, err)
	return rep
}

// TestEveryReplayChecked: symm-pad-aliasing's buggy variant, captured and
// replayed, corrupts its first replay (the groups' signals alias while the
// ranks start apart) and not its second (the first left them in step).
// With one replay that is corruption; with two, only the final state was
// compared and a clean second replay hid the first: the verdict read
// mismatch. Every replay is now compared with its own reference, and the
// finding names the first bad one. Clean programs stay clean when each
// replay computes on inputs of its own.
func TestEveryReplayChecked(t *testing.T) {
	one := variantReport(t, "symm-pad-aliasing", "buggy", "mode=graph", "replays=1", "budget=0")
	require.Equal(t, check.Corruption, one.Verdict)

	two := variantReport(t, "symm-pad-aliasing", "buggy", "mode=graph", "replays=2", "budget=0")
	require.Equal(t, check.Corruption, two.Verdict)
	var named bool
	for _, f := range two.Findings {
		if f.Kind == check.Corruption && strings.HasPrefix(f.Message, "replay 0 (1st of 2") && strings.HasSuffix(f.Resource, "(replay 0)") {
			named = true
		}
	}
	require.True(t, named, "a corruption finding names replay 0: %v", two.Findings)

	for _, c := range []struct {
		scenario, variant string
		sets              []string
	}{
		{"symm-pad-aliasing", "per-group-pads", nil},
		{"tp8-shared-expert", "fixed", []string{"tp=2", "layers=1"}},
		{"p2p-oneshot-probe", "fixed", nil},
	} {
		rep := variantReport(t, c.scenario, c.variant, append([]string{"mode=graph", "replays=3", "budget=4"}, c.sets...)...)
		require.Equal(t, check.OK, rep.Verdict, "%s %s: %v", c.scenario, c.variant, rep.Findings)
	}
}
