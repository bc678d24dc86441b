package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// TestFineStepsFlag: --fine-steps reaches the world. On nccl-order-mismatch
// (4-rank NCCL ring all-reduces), the consistent variant's rings run as
// coarse steps on the nominal schedule without the flag and micro-op by
// micro-op with it: the same verdict, a different trace hash. The swapped
// variant's rings meet in different orders on different ranks, so none
// runs coarse: the same trace hash either way. The JSON config says so.
func TestFineStepsFlag(t *testing.T) {
	type variant struct {
		Name      string          `json:"name"`
		Verdict   string          `json:"verdict"`
		TraceHash string          `json:"trace_hash"`
		Config    json.RawMessage `json:"config"`
	}
	runJSON := func(extra ...string) map[string]variant {
		args := append([]string{"run", "nccl-order-mismatch", "--variant", "consistent,swapped", "--set", "budget=0", "--format", "json"}, extra...)
		code, out, errOut := simctl(t, args...)
		require.Zero(t, code, errOut)
		var rep struct {
			Variants []variant `json:"variants"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &rep))
		m := map[string]variant{}
		for _, v := range rep.Variants {
			m[v.Name] = v
		}
		return m
	}
	coarse, fine := runJSON(), runJSON("--fine-steps")
	for _, name := range []string{"consistent", "swapped"} {
		require.Equal(t, coarse[name].Verdict, fine[name].Verdict, name)
		require.NotContains(t, string(coarse[name].Config), "fine_steps", name)
		require.Contains(t, string(fine[name].Config), `"fine_steps": true`, name)
	}
	require.NotEqual(t, coarse["consistent"].TraceHash, fine["consistent"].TraceHash, "the consistent rings ran coarse without --fine-steps")
	require.Equal(t, coarse["swapped"].TraceHash, fine["swapped"].TraceHash, "the swapped rings never run coarse")
}

// TestFineStepsSteps: the scenario [scenarios.Scenario.WithFineSteps]
// makes (what --fine-steps runs) takes more engine steps on the nominal
// schedule of a ring all-reduce whose ranks nothing else touches, and
// gives the same verdict and end time.
func TestFineStepsSteps(t *testing.T) {
	sc, ok := scenarios.Lookup("nccl-order-mismatch")
	require.True(t, ok)
	v, ok := sc.Variant("consistent")
	require.True(t, ok)
	var outs [2]*check.Outcome
	for i, fine := range []bool{false, true} {
		su, err := sc.WithFineSteps(fine).Setup(v, []string{"budget=0"})
		require.NoError(t, err)
		ref, err := check.NewReference(su.Program)
		require.NoError(t, err)
		outs[i], err = check.RunSchedule(su.Program, ref, sim.Timed, sim.Nominal{})
		require.NoError(t, err)
	}
	c, f := outs[0], outs[1]
	require.Equal(t, f.Verdict, c.Verdict)
	require.Equal(t, f.StepTime, c.StepTime)
	require.Less(t, c.Steps, f.Steps, "coarse steps take fewer engine steps")
	require.False(t, sc.Base.FineSteps, "the built-in itself is unchanged")
}

// TestFineStepsWitness: a witness explored with --fine-steps records it,
// and its replay runs that way and reproduces.
func TestFineStepsWitness(t *testing.T) {
	file := filepath.Join(t.TempDir(), "w.json")
	code, _, errOut := simctl(t, "explore", "nccl-order-mismatch", "--variant", "swapped", "--budget", "2", "--witness", file, "--fine-steps")
	require.Zero(t, code, errOut)
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Contains(t, string(data), `"fine_steps": true`)
	code, out, errOut := simctl(t, "replay", file)
	require.Zero(t, code, errOut)
	require.Contains(t, out, "reproduced")
}

// TestFineStepsShow: show --fine-steps draws the fine run: the same
// verdict and step time, another trace hash where rings ran coarse.
func TestFineStepsShow(t *testing.T) {
	type report struct {
		Verdict   string `json:"verdict"`
		TraceHash string `json:"trace_hash"`
		StepTime  int64  `json:"step_time_ns"`
	}
	show := func(extra ...string) report {
		code, out, errOut := simctl(t, append([]string{"show", "nccl-order-mismatch", "--variant", "consistent", "--format", "json"}, extra...)...)
		require.Zero(t, code, errOut)
		var r report
		require.NoError(t, json.Unmarshal([]byte(out), &r))
		return r
	}
	c, f := show(), show("--fine-steps")
	require.Equal(t, c.Verdict, f.Verdict)
	require.Equal(t, c.StepTime, f.StepTime)
	require.NotEqual(t, c.TraceHash, f.TraceHash)
}
