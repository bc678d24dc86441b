package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Shards of an exploration, merged, print what one machine prints.
func TestShardsMergeToTheSingleMachineSummary(t *testing.T) {
	dir := t.TempDir()
	base := []string{"explore", "tp8-shared-expert", "--variant", "buggy", "--strategy", "random", "--budget", "24", "--set", "layers=1", "--set", "tp=2", "--set", "strategy=p2p-oneshot", "--outcomes"}
	code, single, stderr := simctl(t, append(base, "--format", "json")...)
	require.Equal(t, 0, code, stderr)
	var files []string
	for _, sh := range []string{"2/3", "0/3", "1/3"} {
		code, out, stderr := simctl(t, append(base, "--shard", sh)...)
		require.Equal(t, 0, code, stderr)
		f := filepath.Join(dir, "shard-"+sh[:1]+".json")
		require.NoError(t, os.WriteFile(f, []byte(out), 0o644))
		files = append(files, f)
	}
	code, merged, stderr := simctl(t, append([]string{"merge", "--format", "json"}, files...)...)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, single, merged, "merged shards equal the single-machine summary byte for byte")

	code, _, stderr = simctl(t, "merge", files[0], files[1])
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "incomplete: a 3-way split needs 3 shard files, 2 given; missing shard 1/3")
	code, _, stderr = simctl(t, "merge", files[0], files[0], files[1], files[2])
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "given twice")
	code, _, stderr = simctl(t, append(base, "--shard", "3/3")...)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "0 ≤ i < n")
	code, _, stderr = simctl(t, "explore", "p2p-oneshot-probe", "--strategy", "dpor", "--shard", "0/2")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "cannot be sharded")
}

// explore and replay take a scenario file as well as a built-in name; the
// witness records the path, so the replay finds the same file.
func TestExploreAndReplayAFile(t *testing.T) {
	file, err := filepath.Abs(filepath.Join("..", "..", "docs", "examples", "two-stream.yaml"))
	require.NoError(t, err)
	w := filepath.Join(t.TempDir(), "w.json")
	code, out, stderr := simctl(t, "explore", file, "--variant", "overlapped", "--strategy", "pct", "--budget", "20", "--witness", w)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "verdict: corruption")
	// The witness lies elsewhere than the scenario: replay reads that
	// file only when told to, and replays the copy the witness holds
	// otherwise.
	code, out, stderr = simctl(t, "replay", w)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "outside its own directory; pass --allow-path")
	require.Contains(t, out, "replaying the copy the witness holds")
	require.Contains(t, out, "reproduced")
	code, out, stderr = simctl(t, "replay", w, "--allow-path")
	require.NotContains(t, out, "note:")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "reproduced")
}

// A witness next to (or above) its scenario names it relative to its own
// directory, so the pair can move together and replay from anywhere.
func TestWitnessNamesItsScenarioRelatively(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "examples", "two-stream.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sc"), 0o755))
	file := filepath.Join(dir, "sc", "two-stream.yaml")
	require.NoError(t, os.WriteFile(file, data, 0o644))
	w := filepath.Join(dir, "w.json")
	code, _, stderr := simctl(t, "explore", file, "--variant", "overlapped", "--strategy", "pct", "--budget", "20", "--witness", w)
	require.Equal(t, 0, code, stderr)
	wdata, err := os.ReadFile(w)
	require.NoError(t, err)
	require.Contains(t, string(wdata), `"scenario": "sc/two-stream.yaml"`)
	code, out, stderr := simctl(t, "replay", w)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "reproduced")
}

// A sharded run with a checkpoint holds no records: its shard file is read
// back from the checkpoint, byte for byte the file a run without one
// prints, and so is the file of a run resumed from a cut checkpoint.
func TestShardFileFromItsCheckpoint(t *testing.T) {
	dir := t.TempDir()
	base := []string{"explore", "aux-stream-lifetime", "--variant", "buggy", "--strategy", "pct", "--budget", "60", "--outcomes", "--shard", "1/3"}
	code, want, stderr := simctl(t, base...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, want, `"witness": {`)
	ck := filepath.Join(dir, "c.ckpt")
	code, got, stderr := simctl(t, append(base, "--checkpoint", ck, "--checkpoint-every", "0s")...)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, want, got)
	data, err := os.ReadFile(ck)
	require.NoError(t, err)
	lines := strings.SplitAfter(string(data), "\n")
	cut := filepath.Join(dir, "cut.ckpt")
	require.NoError(t, os.WriteFile(cut, []byte(strings.Join(lines[:len(lines)/2], "")+lines[len(lines)/2][:20]), 0o644))
	code, got, stderr = simctl(t, append(base, "--resume", cut)...)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, want, got)
	code, got, stderr = simctl(t, "explore", "aux-stream-lifetime", "--variant", "buggy", "--strategy", "pct", "--budget", "2", "--shard", "2/3", "--checkpoint", filepath.Join(dir, "none.ckpt"))
	require.Equal(t, 0, code, stderr)
	require.Contains(t, got, `"records": null`)
}
