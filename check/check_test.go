package check_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios"
)

func runVariant(t *testing.T, variant string, sets ...string) *check.VariantReport {
	t.Helper()
	sc, ok := scenarios.Lookup("tp8-shared-expert")
	require.True(t, ok)
	v, ok := sc.Variant(variant)
	require.True(t, ok)
	rep, err := check.RunVariant(sc, v, check.Options{Extra: append([]string{"budget=24", "layers=1"}, sets...)})
	require.NoError(t, err)
	return rep
}

func hasFinding(rep *check.VariantReport, kind string, substrs ...string) bool {
	for _, f := range rep.Findings {
		if f.Kind != kind {
			continue
		}
		ok := true
		for _, s := range substrs {
			ok = ok && strings.Contains(f.Message, s)
		}
		if ok {
			return true
		}
	}
	return false
}

// The verdict table of tp8-shared-expert, and the knob flips that show the
// verdicts follow the mechanics rather than the names.
func TestTP8Verdicts(t *testing.T) {
	tests := []struct {
		variant string
		sets    []string
		want    string
	}{
		{"buggy", nil, "corruption"},
		{"fixed", nil, "ok"},
		{"fixed-overlap", nil, "ok"},
		{"tp4-buggy", nil, "ok"},
		{"prefill-buggy", nil, "ok"},
		{"eager-buggy", nil, "race|corruption"},
		{"buggy", []string{"workspace=per-call"}, "ok"},
		{"buggy", []string{"strategy=nccl"}, "ok"},
		{"tp4-buggy", []string{"strategy=multimem"}, "corruption"},
		{"buggy", []string{"tp=2", "strategy=p2p-oneshot"}, "corruption"},
		{"fixed", []string{"strategy=p2p-oneshot"}, "ok"},
		{"buggy", []string{"order=routed-first"}, "ok"},        // aux waits for the routed all-reduce
		{"buggy", []string{"arch=sm90", "tp=4"}, "corruption"}, // MULTIMEM is on for 4 ranks on SM90
		{"buggy", []string{"tp=6"}, "corruption"},
		{"buggy", []string{"shared=mid"}, "corruption"}, // the old transform moves a mid-branch AR to aux too
		{"fixed", []string{"shared=mid"}, "ok"},         // the fix skips the layer
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%s", tc.variant, strings.Join(tc.sets, ",")), func(t *testing.T) {
			rep := runVariant(t, tc.variant, tc.sets...)
			require.True(t, check.Meets(rep.Verdict, tc.want), "verdict %s, want %s; findings: %v", rep.Verdict, tc.want, rep.Findings)
		})
	}
}

func TestBuggyReportNamesTheMechanism(t *testing.T) {
	rep := runVariant(t, "buggy")
	require.Equal(t, "corruption", rep.Verdict)
	require.NotNil(t, rep.WitnessSeed)
	require.True(t, hasFinding(rep, "race", "L0.shared_ar", "L0.routed_ar", "stream aux", "stream main", `symmetric buffer "tp.ws"`), "race naming both all-reduces, streams and the workspace")
	require.True(t, hasFinding(rep, "mismatch", `signal pad "tp.ws"`), "a mis-consumed signal")
	require.True(t, hasFinding(rep, "corruption", "expected", "observed", "L0.sh_y", "L0.rt_y"), "expected vs observed with provenance that mixes shared and routed")
}

func TestFixedOverlapIsFaster(t *testing.T) {
	fixed := runVariant(t, "fixed")
	overlap := runVariant(t, "fixed-overlap")
	buggy := runVariant(t, "buggy")
	require.Less(t, overlap.StepTimeNs, fixed.StepTimeNs)
	require.Less(t, buggy.StepTimeNs, fixed.StepTimeNs, "the bug overlapped more")
}

func TestDeterministic(t *testing.T) {
	a, err := json.Marshal(runVariant(t, "buggy"))
	require.NoError(t, err)
	b, err := json.Marshal(runVariant(t, "buggy"))
	require.NoError(t, err)
	require.Equal(t, string(a), string(b))
}

func TestMeets(t *testing.T) {
	require.True(t, check.Meets("race", "race|corruption"))
	require.False(t, check.Meets("ok", "race|corruption"))
	require.True(t, check.Worse("hang", "corruption"))
}
