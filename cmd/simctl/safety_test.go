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

// TestOutputNeverDestroysAnInput: import -o PATH, for any PATH that names
// the input however it is spelled or linked (the same path, ./ and ..
// forms, a symbolic link, a hard link, a link to a link), is refused with
// exit 2 and the input kept byte for byte; any other PATH (a new file, an
// existing one of any mode, a link to a file) gets the scenario, through
// the link, which stays a link, and an existing file keeps its mode; a
// FIFO is refused at once.
func TestOutputNeverDestroysAnInput(t *testing.T) {
	trace, err := os.ReadFile(filepath.Join("..", "..", "validation", "traces", "a_eager.json"))
	require.NoError(t, err)
	code, want, stderr := simctl(t, "import", filepath.Join("..", "..", "validation", "traces", "a_eager.json"), "--name", "a")
	require.Equal(t, 0, code, stderr)
	rapid.Check(t, func(rt *rapid.T) {
		d := t.TempDir()
		sub := filepath.Join(d, "sub")
		require.NoError(rt, os.Mkdir(sub, 0o755))
		in := filepath.Join(d, "a_eager.json") // the description names it
		require.NoError(rt, os.WriteFile(in, trace, 0o644))
		kind := rapid.SampledFrom([]string{"same", "dotted", "symlink", "hardlink", "linklink", "new", "existing", "link-to-new", "fifo"}).Draw(rt, "kind")
		out := filepath.Join(d, "out.yaml")
		alias, mode := false, os.FileMode(0o644)
		switch kind {
		case "same":
			out, alias = in, true
		case "dotted":
			out, alias = filepath.Join(sub, "..", ".", "a_eager.json"), true
		case "symlink":
			require.NoError(rt, os.Symlink("a_eager.json", out))
			alias = true
		case "hardlink":
			require.NoError(rt, os.Link(in, out))
			alias = true
		case "linklink":
			require.NoError(rt, os.Symlink(in, filepath.Join(sub, "l1")))
			require.NoError(rt, os.Symlink(filepath.Join(sub, "l1"), out))
			alias = true
		case "existing":
			mode = os.FileMode(rapid.SampledFrom([]int{0o600, 0o640, 0o644, 0o664}).Draw(rt, "mode"))
			require.NoError(rt, os.WriteFile(out, []byte("old"), mode))
			require.NoError(rt, os.Chmod(out, mode))
		case "link-to-new":
			require.NoError(rt, os.Symlink("target.yaml", out))
		case "fifo":
			require.NoError(rt, syscall.Mkfifo(out, 0o644))
		}
		code, _, stderr := simctl(t, "import", in, "--name", "a", "-o", out)
		after, err := os.ReadFile(in)
		require.NoError(rt, err)
		require.Equal(rt, trace, after, "the input is kept")
		switch {
		case alias:
			require.Equal(rt, 2, code, stderr)
			require.Contains(rt, stderr, "is the input")
		case kind == "fifo":
			require.Equal(rt, 2, code, stderr)
			require.Contains(rt, stderr, "not a regular file")
		default:
			require.Equal(rt, 0, code, stderr)
			got, err := os.ReadFile(out)
			require.NoError(rt, err)
			require.Equal(rt, want, string(got))
			st, err := os.Stat(out)
			require.NoError(rt, err)
			require.Equal(rt, mode, st.Mode().Perm())
			if kind == "link-to-new" {
				lst, err := os.Lstat(out)
				require.NoError(rt, err)
				require.Equal(rt, os.ModeSymlink, lst.Mode().Type(), "the link stays a link")
			}
		}
	})
}
