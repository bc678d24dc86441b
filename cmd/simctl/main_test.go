package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func simctl(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run with -update to create %s", path)
	if string(want) != got {
		t.Fatalf("golden %s differs (rerun with -update if the change is intended): %s", path, firstDiff(string(want), got))
	}
}

// firstDiff describes the first differing line, so a failure stays readable.
func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(wl), len(gl)); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d:\n  want %q\n  got  %q", i+1, w, g)
		}
	}
	return "identical lines"
}

func TestRunGolden(t *testing.T) {
	args := []string{"run", "tp8-shared-expert", "--set", "budget=16", "--set", "layers=1"}
	code, out, _ := simctl(t, append(args, "--format", "json")...)
	require.Equal(t, 0, code)
	var doc struct {
		Scenario string `json:"scenario"`
		Variants []struct {
			Name      string          `json:"name"`
			Config    json.RawMessage `json:"config"`
			Expect    string          `json:"expect"`
			Verdict   string          `json:"verdict"`
			Met       bool            `json:"met"`
			Schedules int             `json:"schedules"`
			StepTime  int64           `json:"step_time_ns"`
			Findings  []struct {
				Kind, Message, Resource string
				Ranks                   []int
				Ops, Streams            []string
			} `json:"findings"`
			WitnessSeed *string `json:"witness_seed"` // a decimal string: exact above 2^53
			TraceHash   string  `json:"trace_hash"`
		} `json:"variants"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	require.Equal(t, "tp8-shared-expert", doc.Scenario)
	require.Len(t, doc.Variants, 6)
	golden(t, "run_tp8.json", out)
	_, out2, _ := simctl(t, append(args, "--format", "json")...)
	require.Equal(t, out, out2, "two runs print byte-identical output")
	code, text, _ := simctl(t, args...)
	require.Equal(t, 0, code)
	golden(t, "run_tp8.txt", text)
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"unknown scenario", []string{"run", "nope"}, 2, `unknown scenario "nope"`},
		{"unknown variant", []string{"run", "tp8-shared-expert", "--variant", "nope"}, 2, `no variant "nope"`},
		{"bad knob", []string{"run", "tp8-shared-expert", "--set", "tp=zero"}, 2, "want an integer"},
		{"unknown knob", []string{"run", "tp8-shared-expert", "--set", "colour=blue"}, 2, `unknown key "colour"`},
		{"not key=value", []string{"run", "tp8-shared-expert", "--set", "tp"}, 2, "want key=value"},
		{"bad format", []string{"run", "tp8-shared-expert", "--format", "yaml"}, 2, "want text or json"},
		{"unknown flag", []string{"run", "tp8-shared-expert", "--frobnicate"}, 2, "unknown flag"},
		{"missing arg", []string{"run"}, 2, "accepts 1 arg"},
		{"expectation not met", []string{"run", "tp8-shared-expert", "--variant", "buggy", "--set", "workspace=per-call", "--set", "budget=4", "--set", "layers=1"}, 1, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := simctl(t, tc.args...)
			require.Equal(t, tc.code, code, stderr)
			require.Contains(t, stderr, tc.msg)
		})
	}
}

// skipUnderRace skips a test that runs long single-goroutine simulations
// and nothing concurrent of its own: under -race it takes minutes of a
// loaded CI machine and finds nothing. .ci/run runs it again without
// -race (its "without -race" step lists these tests).
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("long single-goroutine runs: .ci/run runs this test without -race")
	}
}

func TestBenchQuickJSON(t *testing.T) {
	skipUnderRace(t)
	code, out, stderr := simctl(t, "bench", "--quick", "--format", "json")
	require.Equal(t, 0, code, stderr)
	var doc struct {
		Rows []struct {
			Name     string   `json:"name"`
			Value    float64  `json:"value"`
			Unit     string   `json:"unit"`
			Baseline *float64 `json:"baseline"`
			Ratio    *float64 `json:"ratio"`
		} `json:"rows"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	names := map[string]bool{}
	for _, r := range doc.Rows {
		names[r.Name] = true
		require.Positive(t, r.Value, r.Name)
	}
	require.False(t, names["tp1024-1layer-s"] || names["scale-4096x61-s"], "the minutes-long rows run only with --large")
	for _, want := range []string{"engine-vs-btree", "tp8-1layer-schedules-per-s", "ring512-ms", "ring512-shared-ms", "scale-1024x61-s", "scale-1024x61-peak-mib", "clocks-vs-full-s", "tp-sweep-exponent", "layers-sweep-exponent", "workers2-speedup"} {
		require.True(t, names[want], "row %s", want)
	}
}
