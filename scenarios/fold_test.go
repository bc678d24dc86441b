package scenarios_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// TestFoldMoE: the MoE builder folds every data-parallel replica onto the
// first (ranks.World.Fold), and a folded world runs exactly as the same
// world built with every rank's own program: the same verdict, trace hash,
// steps, findings and final values, for every all-reduce strategy (the
// NCCL ring runs its collective steps coarse where it may: a folded
// rank's may not), eager and graph, buggy and fixed, nominal and random
// schedules.
func TestFoldMoE(t *testing.T) {
	sc, ok := scenarios.Lookup("tp8-shared-expert")
	require.True(t, ok)
	strategies := []string{"multimem", "nccl", "multimem-twoshot", "p2p-oneshot", "nccl-tree", "p2p-twoshot"}
	if testing.Short() {
		strategies = strategies[:2]
	}
	for _, strategy := range strategies {
		for _, variant := range []string{"buggy", "fixed", "eager-buggy"} {
			v, ok := sc.Variant(variant)
			require.True(t, ok)
			cfg, err := sc.VariantConfig(v, []string{"tp=4", "dp=3", "layers=2", "strategy=" + strategy})
			require.NoError(t, err)
			p := sc.Program(cfg, nil)
			for seed := range 3 {
				t.Run(fmt.Sprintf("%s/%s/%d", strategy, variant, seed), func(t *testing.T) {
					run := func(noFold bool) (*check.Outcome, [][]uint64, int) {
						var ch sim.Chooser = sim.Nominal{}
						if seed > 0 {
							ch = sim.NewRandom(uint64(seed), 300)
						}
						b, err := p.Build(check.BuildOptions{NoFold: noFold}, sim.NewEngine(sim.Timed, ch))
						require.NoError(t, err)
						folded := 0
						for r := range b.World.N {
							if _, ok := b.World.Folded(r); ok {
								folded++
							}
						}
						o, err := check.RunBuilt(b, nil)
						require.NoError(t, err)
						o.Explain()
						var vals [][]uint64
						for _, bufs := range b.Compare {
							for _, x := range bufs {
								var row []uint64
								for _, v := range x.Vals {
									row = append(row, v.N)
								}
								vals = append(vals, row)
							}
						}
						return o, vals, folded
					}
					on, von, folded := run(false)
					off, voff, unfolded := run(true)
					require.Equal(t, 8, folded, "two replicas of four ranks fold onto the first")
					require.Zero(t, unfolded)
					require.Equal(t, off.Verdict, on.Verdict)
					require.Equal(t, off.TraceHash, on.TraceHash)
					require.Equal(t, off.Steps, on.Steps)
					require.Equal(t, off.Findings, on.Findings)
					require.Equal(t, voff, von)
				})
			}
		}
	}
}
