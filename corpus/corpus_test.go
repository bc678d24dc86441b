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

// TestBenchmark imports and checks every corpus program and requires
// collsim's verdict to match the GPU's label on each: racy → race or worse,
// clean → ok with DPOR complete, frozen → the import names the frozen host
// value. -v prints the table docs/benchmark.md shows.
func TestBenchmark(t *testing.T) {
	progs, err := corpus.Load(dir)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(progs), 30)
	budget := 20000
	if testing.Short() {
		budget = 5000
	}
	rs := corpus.Score(dir, progs, corpus.Options{DPORBudget: budget})
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
		require.InDelta(t, 1, float64(r.SimulatedNs)/float64(r.RecordedNs), tol, "%s: simulated %d ns, recorded %d ns", r.Name, r.SimulatedNs, r.RecordedNs)
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
