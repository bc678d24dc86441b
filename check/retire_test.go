package check_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// retireSeen is everything a run's result is made of: verdict, findings
// with their messages, trace hash, every value and its provenance.
type retireSeen struct {
	hash, verdict string
	findings      []ranks.Finding
	vals          []uint64
	prov          []string
}

func retireRun(t *testing.T, sc *scenarios.Scenario, cfg scenarios.Config, ref *check.Reference, seed uint64, keep bool) (retireSeen, ranks.History) {
	t.Helper()
	var ch sim.Chooser = sim.Nominal{}
	if seed != 0 {
		ch = sim.NewRandom(seed, check.RandomPerMille)
	}
	b, err := sc.Build(cfg, check.BuildOptions{}, sim.NewEngine(sim.Timed, ch))
	require.NoError(t, err)
	if keep {
		b.World.KeepHistory()
	}
	o, err := check.RunBuilt(b, ref)
	require.NoError(t, err)
	o.Explain()
	s := retireSeen{hash: o.TraceHash, verdict: o.Verdict, findings: o.Findings}
	w := o.Built.World
	for _, b := range w.Buffers() {
		for _, v := range b.Vals {
			s.vals = append(s.vals, v.N)
			s.prov = append(s.prov, w.Srcs.Format(v))
		}
	}
	return s, w.History()
}

// TestRetireSameResults runs every variant of every built-in scenario, at
// the nominal schedule and two random ones, with retirement (ranks/retire.go)
// and without (World.KeepHistory): verdicts, findings, trace hashes, values
// and provenance must be identical.
func TestRetireSameResults(t *testing.T) {
	seeds := []uint64{0, 1, 7}
	if testing.Short() {
		seeds = seeds[:2]
	}
	for _, name := range scenarios.Names() {
		sc, _ := scenarios.Lookup(name)
		for _, v := range sc.Variants {
			cfg, err := sc.VariantConfig(v, nil)
			require.NoError(t, err)
			ref, err := check.NewReference(sc.Program(cfg, nil))
			require.NoError(t, err)
			for _, seed := range seeds {
				got, _ := retireRun(t, sc, cfg, ref, seed, false)
				want, _ := retireRun(t, sc, cfg, ref, seed, true)
				require.Equal(t, want, got, "%s/%s seed %d: retirement changed the result", name, v.Name, seed)
			}
		}
	}
}

// TestRetireFlatInLayers shows retirement happening: the clock snapshots
// held at once do not grow with the number of layers (they follow the
// work in flight), while a run that keeps its history holds one per task.
func TestRetireFlatInLayers(t *testing.T) {
	sc, _ := scenarios.Lookup("tp8-shared-expert")
	v, _ := sc.Variant("fixed")
	peak := func(layers string, keep bool) ranks.History {
		cfg, err := sc.VariantConfig(v, []string{"dp=2", "replays=2", "layers=" + layers})
		require.NoError(t, err)
		_, h := retireRun(t, sc, cfg, nil, 0, keep)
		return h
	}
	n, n2 := peak("4", false), peak("8", false)
	k, k2 := peak("4", true), peak("8", true)
	t.Logf("peak snapshots held: 4 layers %d, 8 layers %d; keeping history: %d, %d", n.PeakSnapshots, n2.PeakSnapshots, k.PeakSnapshots, k2.PeakSnapshots)
	t.Logf("peak tasks alive: 4 layers %d, 8 layers %d", n.PeakTasks, n2.PeakTasks)
	require.Positive(t, n.PeakSnapshots)
	require.LessOrEqual(t, n2.PeakSnapshots, n.PeakSnapshots+n.PeakSnapshots/4, "retired: the peak must not grow with layers")
	require.Greater(t, k2.PeakSnapshots, k.PeakSnapshots+k.PeakSnapshots/2, "kept: the peak grows with layers (else this test measures nothing)")
	require.Positive(t, n.PeakTasks)
	require.LessOrEqual(t, n2.PeakTasks, n.PeakTasks+n.PeakTasks/4, "tasks made on demand and retired: the peak must not grow with layers")
	require.Zero(t, k.PeakTasks, "kept: every task is made at launch")
	require.Positive(t, n2.FoldedOps, "dp=2 folds the second replica")
	require.LessOrEqual(t, n2.FoldedOps, n2.PeakTasks, "a retired task's folded op is the next one's")
}
