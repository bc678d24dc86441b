package streamsched_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/streamsched"
)

func layout(t *testing.T, layers int, o streamsched.MoEOptions, p streamsched.Placement) (string, *streamsched.Schedule) {
	t.Helper()
	g := streamsched.BuildMoE(layers, o)
	s, err := streamsched.Place(g, p)
	require.NoError(t, err)
	var parts []string
	for _, pl := range s.Layout(g) {
		name := strings.TrimPrefix(pl.Op, "L0.")
		if pl.Stream == "aux" {
			name = "aux:" + name
		}
		parts = append(parts, name)
	}
	return strings.Join(parts, " "), s
}

func opts(shared streamsched.SharedKind, routedFirst bool) streamsched.MoEOptions {
	return streamsched.MoEOptions{Tokens: 8, Hidden: 64, SharedInter: 64, ExpertInter: 16, Experts: 8, TopK: 2, TP: 2, Shared: shared, RoutedFirst: routedFirst, Comm: "tp"}
}

// The topologies of TensorRT-LLM's test_multi_stream_moe.py (research notes
// table T1–T9) under each placement.
func TestPlacementsOnTopologies(t *testing.T) {
	tests := []struct {
		name      string
		o         streamsched.MoEOptions
		placement streamsched.Placement
		want      string
		skipped   string // substring of the skip reason, if the layer is skipped
	}{
		{"T9 trailing AR, shared first, buggy", opts(streamsched.SharedTrailing, false), streamsched.Buggy,
			"gate begin_aux aux:sh_up aux:sh_down aux:shared_ar aux:end_aux moe routed_ar wait_aux merge", ""},
		{"T9 trailing AR, shared first, fixed", opts(streamsched.SharedTrailing, false), streamsched.Fixed,
			"gate begin_aux aux:sh_up aux:sh_down aux:end_aux wait_aux shared_ar moe routed_ar merge", ""},
		{"T9 trailing AR, shared first, fixed-overlap", opts(streamsched.SharedTrailing, false), streamsched.FixedOverlap,
			"gate begin_aux aux:sh_up aux:sh_down aux:end_aux moe wait_aux shared_ar routed_ar merge", ""},
		{"T7 trailing AR, routed first, buggy", opts(streamsched.SharedTrailing, true), streamsched.Buggy,
			"gate moe routed_ar begin_aux aux:sh_up aux:sh_down aux:shared_ar aux:end_aux wait_aux merge", ""},
		{"T7 trailing AR, routed first, fixed", opts(streamsched.SharedTrailing, true), streamsched.Fixed,
			"gate moe routed_ar begin_aux aux:sh_up aux:sh_down aux:end_aux wait_aux shared_ar merge", ""},
		{"T8 mid-branch AR, buggy moves it to aux", opts(streamsched.SharedMidBranch, false), streamsched.Buggy,
			"gate begin_aux aux:sh_up aux:shared_mid_ar aux:sh_down aux:end_aux moe routed_ar wait_aux merge", ""},
		{"T8 mid-branch AR, fixed skips the layer", opts(streamsched.SharedMidBranch, false), streamsched.Fixed,
			"gate sh_up shared_mid_ar sh_down moe routed_ar merge", "mid-branch collective"},
		{"T3 no collective, fixed keeps the old behaviour", opts(streamsched.SharedPlain, false), streamsched.Fixed,
			"gate begin_aux aux:sh_up aux:sh_down aux:end_aux moe routed_ar wait_aux merge", ""},
		{"T2 no shared expert", opts(streamsched.NoShared, false), streamsched.Fixed,
			"gate moe routed_ar", "no merge"},
		{"single stream", opts(streamsched.SharedTrailing, false), streamsched.Single,
			"gate sh_up sh_down shared_ar moe routed_ar merge", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, s := layout(t, 1, tc.o, tc.placement)
			require.Equal(t, tc.want, got)
			if tc.skipped != "" {
				require.Len(t, s.Layers, 1)
				require.False(t, s.Layers[0].Matched)
				require.Contains(t, s.Layers[0].Reason, tc.skipped)
			}
		})
	}
}

func TestPlacementStacksLayers(t *testing.T) {
	for _, p := range []streamsched.Placement{streamsched.Buggy, streamsched.Fixed, streamsched.FixedOverlap} {
		t.Run(string(p), func(t *testing.T) {
			got, s := layout(t, 3, opts(streamsched.SharedTrailing, false), p)
			require.Len(t, s.Layers, 3)
			for _, l := range s.Layers {
				require.True(t, l.Matched, l.Reason)
			}
			require.Equal(t, 3, strings.Count(got, "begin_aux"))
			require.Equal(t, 3, strings.Count(got, "wait_aux"))
			if p != streamsched.Buggy {
				require.NotContains(t, got, "aux:L1.shared_ar", "no collective on aux after the fix")
				require.NotContains(t, got, "aux:L2.shared_ar")
			}
		})
	}
}

func ExamplePlace() {
	g := streamsched.BuildMoE(1, streamsched.MoEOptions{Tokens: 8, Hidden: 64, SharedInter: 64, ExpertInter: 16, Experts: 8, TopK: 2, TP: 8, Shared: streamsched.SharedTrailing, Comm: "tp"})
	s, _ := streamsched.Place(g, streamsched.Fixed)
	for _, p := range s.Layout(g) {
		fmt.Printf("%-5s %s\n", p.Stream, p.Op)
	}
	// Output:
	// main  L0.gate
	// main  begin_aux
	// aux   L0.sh_up
	// aux   L0.sh_down
	// aux   end_aux
	// main  wait_aux
	// main  L0.shared_ar
	// main  L0.moe
	// main  L0.routed_ar
	// main  L0.merge
}
