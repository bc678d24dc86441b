package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExploreGolden pins the JSON documents of explorations (they depend only
// on scenario, strategy, seed and budget; timing goes to the text report only).
func TestExploreGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"explore-probe-fixed-dpor.json", []string{"explore", "p2p-oneshot-probe", "--variant", "fixed", "--strategy", "dpor", "--outcomes", "--format", "json"}},
		{"explore-tp2-fixed-dpor.json", []string{"explore", "tp8-shared-expert", "--variant", "fixed", "--set", "tp=2", "--set", "layers=1", "--strategy", "dpor", "--format", "json"}},
		{"explore-tp8-buggy-pct.json", []string{"explore", "tp8-shared-expert", "--variant", "buggy", "--set", "layers=1", "--strategy", "pct", "--budget", "3", "--format", "json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := simctl(t, tc.args...)
			require.Equal(t, 0, code, errs)
			golden(t, tc.name, out)
		})
	}
}

// TestExploreWorkersIndependent: the JSON summary is byte-identical with 1 and
// 3 workers.
func TestExploreWorkersIndependent(t *testing.T) {
	args := []string{"explore", "tp8-shared-expert", "--variant", "buggy", "--set", "tp=4", "--set", "layers=1", "--set", "strategy=p2p-oneshot", "--strategy", "random", "--budget", "12", "--format", "json", "--outcomes"}
	_, one, _ := simctl(t, append(args, "--workers", "1")...)
	_, three, _ := simctl(t, append(args, "--workers", "3")...)
	require.Equal(t, one, three)
}

// TestWitnessReplayShrink: a witness written by explore replays with the same
// trace hash, and --shrink writes a witness with fewer deviations that still
// reproduces.
func TestWitnessReplayShrink(t *testing.T) {
	dir := t.TempDir()
	w := filepath.Join(dir, "w.json")
	code, out, errs := simctl(t, "explore", "p2p-oneshot-probe", "--variant", "buggy", "--strategy", "pct", "--budget", "20", "--witness", w)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "verdict: corruption")
	code, out, errs = simctl(t, "replay", w)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, ": reproduced")
	code, out, errs = simctl(t, "replay", w, "--shrink", "--max-runs", "300")
	require.Equal(t, 0, code, errs)
	require.NotContains(t, out, "NOT reproduced")
	var before, after struct{ Deviations int }
	data, err := os.ReadFile(w)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &before))
	data, err = os.ReadFile(filepath.Join(dir, "w.min.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &after))
	require.Less(t, after.Deviations, before.Deviations)
}

// TestExploreBadInput: bad input exits 2 with a message saying what was
// expected, never a panic.
func TestExploreBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"version": 9}`), 0o644))
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"explore", "nope"}, "unknown scenario"},
		{[]string{"explore", "p2p-oneshot-probe", "--variant", "nope"}, "no variant"},
		{[]string{"explore", "p2p-oneshot-probe", "--strategy", "bfs"}, "want random, pct or dpor"},
		{[]string{"explore", "p2p-oneshot-probe", "--set", "tp=zero"}, "want an integer"},
		{[]string{"explore", "p2p-oneshot-probe", "--budget", "-1"}, "want a positive"},
		{[]string{"explore", "p2p-oneshot-probe", "--format", "xml"}, "want text or json"},
		{[]string{"replay", filepath.Join(dir, "missing.json")}, "no such file"},
		{[]string{"replay", bad}, "want 1"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, errs := simctl(t, tc.args...)
			require.Equal(t, 2, code)
			require.Contains(t, errs, tc.msg)
		})
	}
}
