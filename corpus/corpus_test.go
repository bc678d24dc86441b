package corpus_test

import (
	"os"
	"strings"
	"testing"

	"github.com/collsim/collsim/corpus"
	"github.com/stretchr/testify/require"
)

const dir = "../validation/corpus"

// knownMiss lists the programs collsim gets wrong today, each with why. The
// test fails when one of them starts to pass (take it off) or another fails.
var knownMiss = map[string]string{}

// knownSlow lists the recordings whose imported step time is outside the
// tolerance below, each with why; the test fails when one comes inside it.
var knownSlow = map[string]string{
	"GraphFreeWhileReadMarked": "the graph executor ran the capture's main-stream chain (mul, memset, mm, cos, add) on two replay streams; " +
		"the capture does not say which stream each launch was captured on, so the edge cos → add between them is lost " +
		"and the simulated replay is 12 % short (8 % on the first recording, whose replay had smaller gaps between nodes)",
}

// TestBenchmark imports and checks every corpus program, as recorded with
// the current recorder, and requires collsim's verdict to match the GPU's
// label on each: racy → race or worse, clean → ok with DPOR complete,
// frozen → the import names the frozen host value. -v prints the table
// docs/benchmark.md shows.
func TestBenchmark(t *testing.T) {
	benchmark(t, "traces", knownMiss, knownSlow)
}

// TestBenchmarkFirstRecordings does the same on each program's first
// recording: a second trace of the same program, some recorded before the
// recorder's probes existed (as a plain profiler's trace is). The labels
// are the same; the traces differ in timing, in what other threads did
// and in what the recorder added.
func TestBenchmarkFirstRecordings(t *testing.T) {
	benchmark(t, "traces-first", knownMiss, map[string]string{})
}

func benchmark(t *testing.T, traces string, knownMiss, knownSlow map[string]string) {
	progs, err := corpus.Load(dir)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(progs), 30)
	budget := 20000
	if testing.Short() {
		budget = 5000
	}
	rs := corpus.Score(dir, progs, corpus.Options{DPORBudget: budget, Traces: traces})
	var b strings.Builder
	corpus.Table(&b, rs)
	if testing.Verbose() {
		os.Stdout.WriteString(b.String())
	}
	for _, r := range rs {
		require.Empty(t, r.ImportErr, r.Name)
		require.True(t, r.Right || knownMiss[r.Name] != "", "%s (label %s): run %s, dpor %s complete %v; notes: %s", r.Name, r.Label, r.Run, r.DPOR, r.Complete, strings.Join(r.Notes, "; "))
	}
	// The imported step takes the time the trace recorded: within 5 % for an
	// eager import (its host gaps and durations are the recorded ones);
	// within 10 % for a graph-mode import, whose replay has no host gaps.
	for _, r := range rs {
		tol := 0.05
		if r.Mode == "graph" {
			tol = 0.10
		}
		ratio := float64(r.SimulatedNs) / float64(r.RecordedNs)
		if knownSlow[r.Name] != "" {
			require.False(t, ratio >= 1-tol && ratio <= 1+tol, "%s: simulated %d ns, recorded %d ns: take it off knownSlow", r.Name, r.SimulatedNs, r.RecordedNs)
			continue
		}
		require.InDelta(t, 1, ratio, tol, "%s: simulated %d ns, recorded %d ns", r.Name, r.SimulatedNs, r.RecordedNs)
	}
	for _, r := range rs {
		if knownMiss[r.Name] != "" {
			require.False(t, r.Right, "%s now gets its label: take it off knownMiss", r.Name)
		}
	}
	// The only wrong answers are the known misses: a clean one is a false
	// positive, a racy one a false negative.
	fp, fn := 0, 0
	for _, r := range rs {
		if knownMiss[r.Name] != "" {
			if r.Label == "clean" {
				fp++
			} else {
				fn++
			}
		}
	}
	c, _, _ := corpus.Totals(rs)
	require.Equal(t, fp, c.FP)
	require.Equal(t, fn, c.FN)
}
