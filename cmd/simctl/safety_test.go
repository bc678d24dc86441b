package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestCheckpointNeverOverwrites: whatever is at --checkpoint's path (no
// file, an empty one, a scenario file, a checkpoint of another
// exploration, this exploration's checkpoint cut at any byte as a kill
// leaves it, a FIFO, a link to the scenario), explore never truncates what
// is not its own checkpoint: it continues a checkpoint of the same
// exploration to the result an uninterrupted run prints, and refuses
// anything else with exit 2, leaving its bytes as they were.
func TestCheckpointNeverOverwrites(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("FIFOs")
	}
	args := []string{"explore", "tp8-shared-expert", "--variant", "buggy", "--set", "layers=1", "--set", "tp=2", "--set", "strategy=p2p-oneshot", "--budget", "6", "--format", "json"}
	code, want, stderr := simctl(t, args...)
	require.Equal(t, 0, code, stderr)
	dir := t.TempDir()
	full := filepath.Join(dir, "full.ckpt")
	code, _, stderr = simctl(t, append(args, "--checkpoint", full, "--checkpoint-every", "0s")...)
	require.Equal(t, 0, code, stderr)
	ckpt, err := os.ReadFile(full)
	require.NoError(t, err)
	other := filepath.Join(dir, "other.ckpt")
	code, _, stderr = simctl(t, append(append([]string{}, args[:len(args)-4]...), "--budget", "5", "--format", "json", "--checkpoint", other)...)
	require.Equal(t, 0, code, stderr)
	otherData, err := os.ReadFile(other)
	require.NoError(t, err)
	scenario, err := os.ReadFile(filepath.Join("..", "..", "docs", "examples", "two-stream.yaml"))
	require.NoError(t, err)
	header := bytes.IndexByte(ckpt, '\n') + 1

	rapid.Check(t, func(rt *rapid.T) {
		d := t.TempDir()
		path := filepath.Join(d, "c.ckpt")
		kind := rapid.SampledFrom([]string{"none", "empty", "scenario", "other", "cut", "fifo", "link"}).Draw(rt, "kind")
		var before []byte
		own := false // a checkpoint of this exploration (or nothing yet)
		switch kind {
		case "none":
			own = true
		case "empty":
			before, own = []byte{}, true
		case "scenario":
			before = scenario
		case "other":
			before = otherData
		case "cut":
			at := rapid.IntRange(1, len(ckpt)).Draw(rt, "cut at")
			before, own = ckpt[:at], at >= header
		case "fifo":
			require.NoError(rt, syscall.Mkfifo(path, 0o644))
		case "link":
			target := filepath.Join(d, "s.yaml")
			require.NoError(rt, os.WriteFile(target, scenario, 0o644))
			require.NoError(rt, os.Symlink(target, path))
			before = scenario
		}
		if before != nil && kind != "link" {
			require.NoError(rt, os.WriteFile(path, before, 0o644))
		}
		code, out, stderr := simctl(t, append(args, "--checkpoint", path)...)
		if own {
			require.Equal(rt, 0, code, stderr)
			require.Equal(rt, want, out, "a continued checkpoint gives the uninterrupted result")
			return
		}
		require.Equal(rt, 2, code, stderr)
		require.Contains(rt, stderr, "--checkpoint")
		if before != nil {
			after, err := os.ReadFile(path)
			require.NoError(rt, err)
			require.Equal(rt, before, after, "the file is kept")
		}
	})
}
