package main

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// growSink keeps what TestWatchdogStopsAGrowingRun's child allocates.
var growSink [][]byte

// TestMain lets a test run simctl as a child process (SIMCTL_CHILD=1, its
// arguments in SIMCTL_ARGS, one per line), so the child can be killed.
func TestMain(m *testing.M) {
	if os.Getenv("SIMCTL_GROW") == "1" { // TestWatchdogStopsAGrowingRun
		startWatchdog(64 << 20)
		for range 1 << 14 { // 16 GiB, if nothing stopped it
			growSink = append(growSink, make([]byte, 1<<20))
			time.Sleep(time.Millisecond)
		}
		os.Exit(0)
	}
	if os.Getenv("SIMCTL_CHILD") == "1" {
		watchdogOn = true
		os.Exit(run(strings.Split(os.Getenv("SIMCTL_ARGS"), "\n"), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// child starts simctl args in a child process writing stdout to out.
func child(t *testing.T, out string, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	f, err := os.Create(out)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	c := exec.Command(exe, "-test.run=^$")
	c.Env = append(os.Environ(), "SIMCTL_CHILD=1", "SIMCTL_ARGS="+strings.Join(args, "\n"))
	c.Stdout = f
	require.NoError(t, c.Start())
	return c
}

// TestCheckpointSurvivesSIGKILL: an exploration killed with SIGKILL at a
// random moment and resumed from its checkpoint prints the JSON summary
// and writes the witness an uninterrupted run does, byte for byte.
func TestCheckpointSurvivesSIGKILL(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("SIGKILL")
	}
	dir := t.TempDir()
	budget := "1500"
	if testing.Short() {
		budget = "600"
	}
	base := []string{"explore", "tp8-shared-expert", "--variant", "buggy", "--set", "layers=1", "--set", "tp=2", "--set", "strategy=p2p-oneshot",
		"--budget", budget, "--format", "json", "--workers", "2"}
	want := filepath.Join(dir, "want.json")
	wantW := filepath.Join(dir, "want-w.json")
	require.NoError(t, child(t, want, append(base, "--witness", wantW)...).Wait())
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("kill points from seed %d", seed)
	killed := 0
	for trial := range 4 {
		ck := filepath.Join(dir, "c.jsonl")
		os.Remove(ck)
		w := filepath.Join(dir, "w.json")
		c := child(t, filepath.Join(dir, "killed.json"), append(base, "--checkpoint", ck, "--checkpoint-every", "10ms", "--witness", w)...)
		// The kill point is a number of checkpointed records, not a
		// time, so a fast or a loaded machine kills mid-run alike.
		n, _ := strconv.Atoi(budget)
		killAt := 1 + rng.IntN(n/2)
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if data, _ := os.ReadFile(ck); strings.Count(string(data), "\n") > killAt {
				break
			}
		}
		require.NoError(t, c.Process.Signal(syscall.SIGKILL))
		if err := c.Wait(); err != nil {
			killed++
		}
		data, _ := os.ReadFile(ck)
		t.Logf("trial %d: killed with %d lines checkpointed", trial, strings.Count(string(data), "\n"))
		got := filepath.Join(dir, "got.json")
		r := child(t, got, append(base, "--resume", ck, "--witness", w)...)
		require.NoError(t, r.Wait(), "trial %d: resume", trial)
		requireSameFile(t, want, got)
		requireSameFile(t, wantW, w)
	}
	require.Positive(t, killed, "at least one child was killed before it finished")
}

func requireSameFile(t *testing.T, want, got string) {
	t.Helper()
	a, err := os.ReadFile(want)
	require.NoError(t, err)
	b, err := os.ReadFile(got)
	require.NoError(t, err)
	require.Equal(t, string(a), string(b), "%s and %s differ", want, got)
}

// TestSIGINTPrintsPartial: SIGINT stops handing out schedules, flushes the
// checkpoint and prints the partial summary, marked partial; resuming
// completes it.
func TestSIGINTPrintsPartial(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("SIGINT")
	}
	dir := t.TempDir()
	ck := filepath.Join(dir, "c.jsonl")
	out := filepath.Join(dir, "partial.json")
	base := []string{"explore", "tp8-shared-expert", "--variant", "buggy", "--set", "layers=1", "--budget", "100000", "--format", "json"}
	c := child(t, out, append(base, "--checkpoint", ck)...)
	time.Sleep(700 * time.Millisecond)
	require.NoError(t, c.Process.Signal(syscall.SIGINT))
	err := c.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 1, ee.ExitCode())
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Contains(t, string(data), `"partial": true`)
	require.Contains(t, string(data), `"planned": 100000`)
	lines, err := os.ReadFile(ck)
	require.NoError(t, err)
	require.Greater(t, strings.Count(string(lines), "\n"), 1, "the checkpoint holds the schedules that ran")
}

// TestWatchdogStopsAGrowingRun: a process whose heap passes --max-memory
// ends with exit 2 and a message, not a runtime "fatal error" (a child
// that allocates 1 MiB a millisecond, watched at 64 MiB).
func TestWatchdogStopsAGrowingRun(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	c := exec.Command(exe, "-test.run=^$")
	c.Env = append(os.Environ(), "SIMCTL_GROW=1")
	out, err := c.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%s", out)
	require.Equal(t, 2, ee.ExitCode(), "%s", out)
	require.Contains(t, string(out), "simctl: out of memory: the heap reached")
	require.Contains(t, string(out), "over --max-memory 64.0 MiB")
	require.NotContains(t, string(out), "fatal error")
}
