package streamsched_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
	"github.com/collsim/collsim/streamsched"
)

// lowerReplicas lowers two MoE layers onto dp replicas of a TP=2 group
// with split MULTIMEM all-reduces, each replica folded onto the first;
// odd, when positive, is a rank whose weights differ from its proto's, so
// that it cannot fold.
func lowerReplicas(t testing.TB, dp, odd int, noFold bool) *ranks.World {
	const tp, chunks = 2, 4
	hw := ranks.Profiles["h200"]
	g := streamsched.BuildMoE(2, streamsched.MoEOptions{Tokens: 8, Hidden: 1024, SharedInter: 1024, ExpertInter: 256,
		Experts: 128, TopK: 8, TP: tp, Shared: streamsched.SharedTrailing, Comm: "tp"})
	s, err := streamsched.Place(g, streamsched.Fixed)
	require.NoError(t, err)
	w := ranks.NewWorld(tp*dp, ranks.Config{}, sim.NewEngine(sim.Timed, nil))
	if noFold {
		w.NoFold()
	}
	comms := make([]*collectives.Comm, dp)
	for d := range comms {
		comms[d] = collectives.NewComm(w, fmt.Sprintf("tp%d", d), []int{d * tp, d*tp + 1}, collectives.SharedWorkspace, hw, chunks)
	}
	_, err = streamsched.Lower(w, g, s, nil, streamsched.LowerConfig{HW: hw, MultiStream: true, Strategy: collectives.Multimem, Chunks: chunks,
		CommFor: func(name string, r int) (*collectives.Comm, bool) { return comms[r/tp], name == "tp" },
		Weight: func(op string, r int) int64 {
			if r == odd {
				return 1
			}
			return streamsched.DefaultWeight(op, r%tp)
		},
		FoldOnto: func(r int) int { return r % tp }})
	require.NoError(t, err)
	return w
}

// TestLowerFoldKeepsUnfolded: Lower builds a rank it folds in the storage
// the last folded rank left (ranks.KernelStore); a rank whose fold fails
// keeps the kernels it was built with, untouched by the ranks built after
// it, and the world runs exactly as when no rank folds.
func TestLowerFoldKeepsUnfolded(t *testing.T) {
	const dp, odd = 4, 3
	folded := lowerReplicas(t, dp, odd, false)
	var protos []int
	for r := range folded.N {
		if _, ok := folded.Folded(r); !ok {
			protos = append(protos, r)
		}
	}
	require.Equal(t, []int{0, 1, odd}, protos, "every replica folds but the odd rank")
	a, err := folded.Run()
	require.NoError(t, err)
	b, err := lowerReplicas(t, dp, odd, true).Run()
	require.NoError(t, err)
	require.Equal(t, b.TraceHash, a.TraceHash)
	require.Equal(t, b.Findings, a.Findings)
}

// TestLowerReusesFoldedKernels: a folded rank's kernels cost no
// allocations of their own: each rank a replica adds allocates less than
// half what it does when it keeps its kernels (no rank folds).
func TestLowerReusesFoldedKernels(t *testing.T) {
	perRank := func(noFold bool) float64 {
		allocs := func(dp int) float64 {
			return testing.AllocsPerRun(2, func() { lowerReplicas(t, dp, -1, noFold) })
		}
		return (allocs(6) - allocs(2)) / 8
	}
	folded, kept := perRank(false), perRank(true)
	t.Logf("allocations per rank: %.0f folded, %.0f kept", folded, kept)
	require.Less(t, folded, kept/2)
}
