package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestREADMEFlipKnobs: every "flip it" knob the README shows (the bug-class
// table and the tp8 paragraph) still flips the verdict it says, and the
// README still shows it. A built-in that moves from Go to a file must keep
// these knobs working.
func TestREADMEFlipKnobs(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	tests := []struct {
		scenario, variant string
		set               string // one key=value, as the README spells it
		want              string // the verdict after the flip
		shown             string // how the README shows the flip
		// says, when set, is what the report says after the flip; the
		// verdict may then stay what it was (tp=8 still over-counts, 8×).
		says string
	}{
		{"tp8-shared-expert", "buggy", "workspace=per-call", "ok", "--variant buggy --set workspace=per-call", ""},
		{"tp8-shared-expert", "tp4-buggy", "strategy=multimem", "corruption", "--variant tp4-buggy --set strategy=multimem", ""},
		{"aux-stream-lifetime", "buggy", "record_stream=on", "ok", "--variant buggy --set record_stream=on", ""},
		{"aux-stream-lifetime", "buggy", "join_before_free=on", "ok", "`join_before_free=on`", ""},
		{"aux-stream-lifetime", "buggy", "caching=off", "ok", "`caching=off`", ""},
		{"aux-stream-lifetime", "buggy", "routed_dtype=fp32", "race", "`routed_dtype=fp32` → still a race", "overlaps freed"},
		{"shared-expert-times-w", "buggy", "tp=1", "ok", "--variant buggy --set tp=1", ""},
		{"shared-expert-times-w", "buggy", "shared_shard=sharded", "ok", "`shared_shard=sharded`", ""},
		{"shared-expert-times-w", "buggy", "shared_merge=after-ar", "ok", "`shared_merge=after-ar`", ""},
		{"shared-expert-times-w", "buggy", "tp=8", "corruption", "`tp=8` → counted 8 times", "counted 8 times"},
		{"graph-double-shared-expert", "buggy", "capture_shared=once", "ok", "--variant buggy --set capture_shared=once", ""},
		{"graph-double-shared-expert", "host-step", "step_counter=device", "ok", "--variant host-step --set step_counter=device", ""},
		{"symm-pad-aliasing", "buggy", "pad=per-group", "ok", "--variant buggy --set pad=per-group", ""},
		{"symm-two-streams-one-group", "buggy", "streams=one", "ok", "--variant buggy --set streams=one", ""},
		{"symm-two-streams-one-group", "buggy", "stream_guard=on", "ok", "`stream_guard=on`", ""},
		{"symm-two-streams-one-group", "buggy", "coresident=both", "corruption", "`--set coresident=both` → corruption", ""},
		{"symm-two-streams-one-group", "host-sync", "issue_order=same", "ok", "--variant host-sync --set issue_order=same", ""},
	}
	for _, tt := range tests {
		t.Run(tt.scenario+"/"+tt.variant+"/"+tt.set, func(t *testing.T) {
			require.Contains(t, string(readme), tt.shown, "the README shows this flip")
			// The variant as it is: its own (non-ok) verdict, so the flip
			// is a change.
			if tt.says != "" {
				code, out, stderr := simctl(t, "run", tt.scenario, "--variant", tt.variant, "--no-expect", "--set", "budget=8", "--set", tt.set)
				require.NotEqual(t, 2, code, stderr)
				require.Contains(t, out, tt.says)
				require.Equal(t, tt.want, runVerdict(t, tt.scenario, tt.variant, tt.set))
				return
			}
			before := runVerdict(t, tt.scenario, tt.variant)
			after := runVerdict(t, tt.scenario, tt.variant, tt.set)
			require.Equal(t, tt.want, after, "--set %s", tt.set)
			require.NotEqual(t, before, after, "--set %s flips the verdict", tt.set)
		})
	}
}

// runVerdict runs one variant with a small budget (and sets) and returns
// its verdict.
func runVerdict(t *testing.T, scenario, variant string, sets ...string) string {
	t.Helper()
	args := []string{"run", scenario, "--variant", variant, "--no-expect", "--set", "budget=8", "--format", "json"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	code, out, stderr := simctl(t, args...)
	require.NotEqual(t, 2, code, "simctl %s: %s", strings.Join(args, " "), stderr)
	var rep struct {
		Variants []struct {
			Verdict string `json:"verdict"`
		} `json:"variants"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.Len(t, rep.Variants, 1)
	return rep.Variants[0].Verdict
}
