package main

import (
	"errors"
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
	if g := os.Getenv("SIMCTL_GROW"); g != "" { // TestWatchdogStopsAGrowingRun
		if g == "as" { // the address space only: a heap limit never reached
			fewerMallocArenas()
			startWatchdog(1<<40, addressSpaceLimit(), adviceFor("import"))
		} else {
			startWatchdog(64<<20, 0, adviceFor("run"))
		}
		for range 1 << 14 { // 16 GiB, if nothing stopped it
			growSink = append(growSink, make([]byte, 1<<20))
			time.Sleep(time.Millisecond)
		}
		os.Exit(0)
	}
	if os.Getenv("SIMCTL_CHILD") == "1" {
		fewerMallocArenas() // as main does
		watchdogOn = true
		os.Exit(run(strings.Split(os.Getenv("SIMCTL_ARGS"), "\n"), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// childProc is a simctl child process; done is closed when it has exited,
// and err is then what Wait returned.
type childProc struct {
	*exec.Cmd
	done chan struct{}
	err  error
}

// wait waits for the child to exit and returns Wait's error.
func (c *childProc) wait() error { <-c.done; return c.err }

// signal sends sig to the child; a child that has already exited is no
// error (wait then says how it ended).
func (c *childProc) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := c.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		require.NoError(t, err)
	}
}

// child starts simctl args in a child process writing stdout to out.
func child(t *testing.T, out string, args ...string) *childProc {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	f, err := os.Create(out)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	c := &childProc{Cmd: exec.Command(exe, "-test.run=^$"), done: make(chan struct{})}
	c.Env = append(os.Environ(), "SIMCTL_CHILD=1", "SIMCTL_ARGS="+strings.Join(args, "\n"))
	c.Stdout = f
	require.NoError(t, c.Start())
	go func() { c.err = c.Cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			_ = c.Process.Kill()
			<-c.done
		}
	})
	return c
}

// waitForLines waits until the file at path holds at least n lines: the
// child's own signal that it has got that far. It fails the test if the
// child exits first. It polls the file (a child's checkpoint is written
// by the child alone, and a file is all the two share), with no bound of
// its own: go test's -timeout ends a child that never gets there.
func waitForLines(t *testing.T, c *childProc, path string, n int) {
	t.Helper()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		if data, _ := os.ReadFile(path); strings.Count(string(data), "\n") >= n {
			return
		}
		select {
		case <-c.done:
			if data, _ := os.ReadFile(path); strings.Count(string(data), "\n") >= n {
				return
			}
			require.FailNow(t, "the child exited before it got there", "%s holds fewer than %d lines; exit: %v", path, n, c.err)
		case <-tick.C:
		}
	}
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
	require.NoError(t, child(t, want, append(base, "--witness", wantW)...).wait())
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
		waitForLines(t, c, ck, killAt+1)
		c.signal(t, syscall.SIGKILL)
		if err := c.wait(); err != nil {
			killed++
		}
		data, _ := os.ReadFile(ck)
		t.Logf("trial %d: killed with %d lines checkpointed", trial, strings.Count(string(data), "\n"))
		got := filepath.Join(dir, "got.json")
		r := child(t, got, append(base, "--resume", ck, "--witness", w)...)
		require.NoError(t, r.wait(), "trial %d: resume", trial)
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
	// The first schedule record in the checkpoint is the ready signal:
	// explore installs its SIGINT handler (onSignals) before it runs any
	// schedule, so a record there means the handler is in. A fixed sleep
	// was not enough on a loaded machine: the signal came before the
	// handler and killed the child.
	c := child(t, out, append(base, "--checkpoint", ck, "--checkpoint-every", "1ms")...)
	waitForLines(t, c, ck, 3) // the header and two schedules
	c.signal(t, syscall.SIGINT)
	err := c.wait()
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

// TestWatchdogStopsAtTheAddressSpaceLimit: under ulimit -v 2 GiB, a
// process whose heap grows (1 MiB a millisecond, no heap limit that could
// fire) ends with exit 2 and a message naming the address-space limit and
// the command's own knobs, before the runtime dies with "fatal error: out
// of memory" (which it did with a limit computed from the heap alone).
func TestWatchdogStopsAtTheAddressSpaceLimit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ulimit -v and /proc: linux")
	}
	if raceEnabled {
		t.Skip("the race detector's shadow memory does not fit ulimit -v 2 GiB: .ci/run runs this test without -race")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	c := exec.Command("/bin/sh", "-c", `ulimit -v 2097152 && exec "$0" -test.run='^$'`, exe)
	c.Env = append(os.Environ(), "SIMCTL_GROW=as")
	out, err := c.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%s", out)
	require.Equal(t, 2, ee.ExitCode(), "%s", out)
	require.Contains(t, string(out), "simctl: out of memory: the process mapped")
	require.Contains(t, string(out), "its address-space limit (ulimit -v) allows; import one step")
	require.NotContains(t, string(out), "fatal error")
}
