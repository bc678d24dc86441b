package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRunWitnessReplays: run --witness writes the schedule behind the
// worst verdict, and replay reproduces it (verdict and trace hash); the
// printed "--budget N reaches it" gives the same witness schedule.
func TestRunWitnessReplays(t *testing.T) {
	dir := t.TempDir()
	w := filepath.Join(dir, "w.json")
	args := []string{"run", "tp8-shared-expert", "--variant", "buggy", "--set", "layers=1", "--budget", "6"}
	code, out, stderr := simctl(t, append(args, "--witness", w)...)
	require.Equal(t, 0, code, stderr)
	m := regexp.MustCompile(`witness: schedule (\d+) of seed 1 \((pct|random), trace ([0-9a-f]+)\): --budget (\d+) reaches it`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	code, rout, stderr := simctl(t, "replay", w)
	require.Equal(t, 0, code, "%s%s", rout, stderr)
	require.Contains(t, rout, "trace "+m[3]+" (recorded "+m[3]+"): reproduced")
	// As printed: the run cut after that schedule finds the same witness.
	code, out2, _ := simctl(t, "run", "tp8-shared-expert", "--variant", "buggy", "--set", "layers=1", "--budget", m[4])
	require.Equal(t, 0, code)
	require.Contains(t, out2, "witness: schedule "+m[1]+" of seed 1 ("+m[2]+", trace "+m[3]+")")
	// A file scenario's witness replays too.
	src, err := os.ReadFile("../../check/testdata/aux-use-after-free.yaml")
	require.NoError(t, err)
	f := filepath.Join(dir, "uaf.yaml")
	require.NoError(t, os.WriteFile(f, src, 0o644))
	w2 := filepath.Join(dir, "w2.json")
	code, _, stderr = simctl(t, "run", f, "--variant", "buggy", "--witness", w2)
	require.Equal(t, 0, code, stderr)
	code, rout, _ = simctl(t, "replay", w2)
	require.Equal(t, 0, code, rout)
	require.Contains(t, rout, "verdict corruption (recorded corruption)")
}

// TestOneBudget: --budget and --set budget= are one budget for run and
// explore; given both, they must agree.
func TestOneBudget(t *testing.T) {
	code, out, _ := simctl(t, "run", "tp8-shared-expert", "--variant", "fixed", "--set", "layers=1", "--budget", "3")
	require.Equal(t, 0, code)
	require.Contains(t, out, "schedules: 4 (nominal")
	code, _, stderr := simctl(t, "run", "tp8-shared-expert", "--budget", "3", "--set", "budget=4")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--budget 3 and --set budget=4 disagree")
	code, out, _ = simctl(t, "explore", "tp8-shared-expert", "--variant", "fixed", "--set", "layers=1", "--set", "budget=5")
	require.Equal(t, 0, code)
	require.Contains(t, out, "schedules: 5 in")
	code, _, stderr = simctl(t, "explore", "tp8-shared-expert", "--budget", "3", "--set", "budget=4")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--budget 3 and --set budget=4 disagree")
}

// TestWitnessTravels: a witness holds its scenario file's hash and, under
// 1 MiB, the file itself: copied to another directory it replays from its
// copy; after the file is edited, replay says so and replays the copy.
func TestWitnessTravels(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("../../check/testdata/aux-use-after-free.yaml")
	require.NoError(t, err)
	f := filepath.Join(dir, "uaf.yaml")
	require.NoError(t, os.WriteFile(f, src, 0o644))
	w := filepath.Join(dir, "w.json")
	code, _, stderr := simctl(t, "explore", f, "--variant", "buggy", "--strategy", "pct", "--budget", "4", "--witness", w)
	require.Equal(t, 0, code, stderr)
	data, err := os.ReadFile(w)
	require.NoError(t, err)
	require.Contains(t, string(data), `"scenario_sha256": "`)
	require.Contains(t, string(data), `"scenario_file": "name: aux-use-after-free`)

	other := filepath.Join(t.TempDir(), "copied.json")
	require.NoError(t, os.WriteFile(other, data, 0o644))
	code, out, _ := simctl(t, "replay", other)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "is not where the witness names it")
	require.Contains(t, out, ": reproduced")

	require.NoError(t, os.WriteFile(f, append(src, []byte("# edited\n")...), 0o644))
	code, out, _ = simctl(t, "replay", w)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "changed since the witness was written")
	require.Contains(t, out, ": reproduced")

	// A built-in's witness names it, and travels by name.
	bw := filepath.Join(dir, "b.json")
	code, _, stderr = simctl(t, "explore", "tp8-shared-expert", "--variant", "buggy", "--set", "layers=1", "--strategy", "pct", "--budget", "2", "--witness", bw)
	require.Equal(t, 0, code, stderr)
	data, err = os.ReadFile(bw)
	require.NoError(t, err)
	require.NotContains(t, string(data), "scenario_file")
	other = filepath.Join(t.TempDir(), "b.json")
	require.NoError(t, os.WriteFile(other, data, 0o644))
	code, out, _ = simctl(t, "replay", other)
	require.Equal(t, 0, code, out)
	require.NotContains(t, out, "note:")
}

// TestShowWitness: show --witness draws the witness's schedule (its trace
// hash), not the nominal one; the legend names the compute kernels and
// says the axis covers every graph replay.
func TestShowWitness(t *testing.T) {
	w := filepath.Join(t.TempDir(), "w.json")
	code, out, stderr := simctl(t, "run", "tp8-shared-expert", "--variant", "buggy", "--set", "layers=1", "--budget", "4", "--witness", w)
	require.Equal(t, 0, code, stderr)
	m := regexp.MustCompile(`witness: schedule \d+ of seed 1 \((?:pct|random), trace ([0-9a-f]+)\)`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	code, out, stderr = simctl(t, "show", "--witness", w)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "witness "+w)
	require.Contains(t, out, "trace "+m[1])
	require.Contains(t, out, "the timeline shows all 2 graph replays")
	require.Contains(t, out, "compute kernels, in start order: L0.gate")
	code, _, _ = simctl(t, "show", "tp8-shared-expert", "--witness", w)
	require.Equal(t, 2, code)
}
