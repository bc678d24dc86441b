package scenarios_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios"
)

var familyScenarios = []string{"nccl-order-mismatch", "two-comms-opposite-order", "symm-block-mismatch", "trt-fused-collective", "moe-ep-dropped-allreduce"}

func runVariant(t *testing.T, name, variant string, extra ...string) *check.VariantReport {
	t.Helper()
	sc, ok := scenarios.Lookup(name)
	require.True(t, ok, name)
	v, ok := sc.Variant(variant)
	require.True(t, ok, variant)
	rep, err := check.RunVariant(sc, v, check.Options{Extra: append([]string{"budget=2"}, extra...)})
	require.NoError(t, err)
	return rep
}

// Every variant of the family scenarios meets its expected verdict, and the
// verdict comes with the finding that explains it.
func TestFamilyScenariosMeetExpectations(t *testing.T) {
	for _, name := range familyScenarios {
		sc, _ := scenarios.Lookup(name)
		for _, v := range sc.Variants {
			t.Run(name+"/"+v.Name, func(t *testing.T) {
				rep := runVariant(t, name, v.Name)
				require.True(t, rep.Met, "verdict %s, want %s: %v", rep.Verdict, v.Expect, rep.Findings)
				if rep.Verdict != check.OK {
					require.NotEmpty(t, rep.Findings)
					require.Equal(t, rep.Verdict, rep.Findings[0].Kind, "most severe finding first")
				}
			})
		}
	}
}

func findingOf(rep *check.VariantReport, kind string) string {
	for _, f := range rep.Findings {
		if f.Kind == kind {
			return f.Message
		}
	}
	return ""
}

// The hang report names the wait-for cycle: every rank, both calls, and
// what holds each GPU.
func TestHangReportNamesCycle(t *testing.T) {
	msg := findingOf(runVariant(t, "two-comms-opposite-order", "per-comm-order"), check.Hang)
	require.Contains(t, msg, "wait-for cycle")
	for _, s := range []string{"rank 0 s1: A blocked on recv", "waits for the GPU: B holds", "rank 3 s2: B blocked on recv", "(back to start)"} {
		require.Contains(t, msg, s)
	}
	msg = findingOf(runVariant(t, "symm-block-mismatch", "swapped-differ"), check.Hang)
	require.Contains(t, msg, "wait-for cycle")
	require.Contains(t, msg, `blocked on wait_signal on own pad "tp.ws"`)
}

// The dropped report names the engine and the ranks; the build error names
// the fused node.
func TestTRTReportsNameEngineAndNode(t *testing.T) {
	rep := runVariant(t, "moe-ep-dropped-allreduce", "per-layer")
	msg := findingOf(rep, check.Dropped)
	require.Contains(t, msg, "_run_on_acc_2(layers.0.all_reduce)")
	require.Contains(t, msg, "on ranks 0, 1")
	require.Contains(t, strings.Join(rep.Notes, "\n"), "setCommunicator: 2 of 96 bind attempts succeed")
	require.NotEmpty(t, findingOf(rep, check.Corruption), "a dropped all-reduce leaves wrong values")

	msg = findingOf(runVariant(t, "trt-fused-collective", "fused"), check.BuildError)
	require.Contains(t, msg, "Could not find any implementation for node {ForeignNode[[SHUFFLE]-[L0.qkv_reshape]...[SHUFFLE]-[L0.proj_out_reshape_copy]]}")
	require.Contains(t, msg, "L0.a2a_in")
}

// The workaround's graph breaks cost step time against the hypothetical
// engine that works; fixed-overlap wins back part of what fixed costs.
func TestStepTimeComparisons(t *testing.T) {
	work := runVariant(t, "trt-fused-collective", "workaround")
	ideal := runVariant(t, "trt-fused-collective", "ideal")
	require.Greater(t, work.StepTimeNs, ideal.StepTimeNs)
	buggy := runVariant(t, "tp8-shared-expert", "buggy", "budget=0")
	fixed := runVariant(t, "tp8-shared-expert", "fixed", "budget=0")
	overlap := runVariant(t, "tp8-shared-expert", "fixed-overlap", "budget=0")
	require.Greater(t, fixed.StepTimeNs, overlap.StepTimeNs)
	require.Greater(t, overlap.StepTimeNs, buggy.StepTimeNs)
}

// Same scenario and schedule, byte-identical report.
func TestFamilyDeterministic(t *testing.T) {
	for _, name := range familyScenarios {
		sc, _ := scenarios.Lookup(name)
		v := sc.Variants[len(sc.Variants)-1]
		a, err := json.Marshal(runVariant(t, name, v.Name))
		require.NoError(t, err)
		b, err := json.Marshal(runVariant(t, name, v.Name))
		require.NoError(t, err)
		require.Equal(t, string(a), string(b), name)
	}
}

// Bad knobs are errors naming what was expected.
func TestFamilyBadKnobs(t *testing.T) {
	sc, _ := scenarios.Lookup("trt-fused-collective")
	_, err := check.RunVariant(sc, sc.Variants[0], check.Options{Extra: []string{"tp=8"}})
	require.ErrorIs(t, err, scenarios.ErrBadKnob)
	require.ErrorContains(t, err, "SP=2 × TP=2 on 4 ranks")
	sc, _ = scenarios.Lookup("moe-ep-dropped-allreduce")
	_, err = check.RunVariant(sc, sc.Variants[0], check.Options{Extra: []string{"engines=ideal", "engines=bogus"}})
	require.ErrorContains(t, err, "want one of")
	sc, _ = scenarios.Lookup("nccl-order-mismatch")
	_, err = check.RunVariant(sc, sc.Variants[0], check.Options{Extra: []string{"tp=1"}})
	require.ErrorContains(t, err, "rank 2 is out of range")
}
