package collectives_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// TestPropAllReduceIdealWhenOrdered is property (f): every all-reduce
// algorithm equals the ideal semantics (out = Σ over ranks of in, with one
// provenance term per rank) when its calls are ordered (back to back on one
// stream), under any schedule: timed with random jitter and skew, or untimed
// with any pending item going next.
func TestPropAllReduceIdealWhenOrdered(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(2, 8).Draw(rt, "ranks")
		chunks := rapid.IntRange(1, 4).Draw(rt, "chunks")
		calls := rapid.IntRange(1, 3).Draw(rt, "calls")
		s := rapid.SampledFrom([]collectives.Strategy{collectives.NCCL, collectives.Multimem, collectives.P2POneShot}).Draw(rt, "strategy")
		ws := rapid.SampledFrom([]collectives.Workspace{collectives.SharedWorkspace, collectives.PerCallWorkspace}).Draw(rt, "workspace")
		mode := rapid.SampledFrom([]sim.Mode{sim.Timed, sim.Untimed}).Draw(rt, "mode")
		seed := rapid.Uint64().Draw(rt, "seed")

		hw := ranks.Profiles["h200"]
		w := ranks.NewWorld(n, ranks.Config{Mode: ranks.Eager, LaunchCost: hw.Launch, EventCost: hw.EventOp},
			sim.NewEngine(mode, sim.NewRandom(seed, 300)))
		group := make([]int, n)
		for i := range group {
			group[i] = i
		}
		comm := collectives.NewComm(w, "tp", group, ws, hw, chunks)
		outs := make([][]*ranks.Buffer, n)
		for r := range n {
			p := &ranks.Program{Streams: []string{"main"}}
			for k := range calls {
				in := w.Alloc(r, fmt.Sprintf("in%d", k), 1<<12, chunks)
				w.Init(in, func(c int) uint64 { return inputValue(r, k, c) })
				out := w.Alloc(r, fmt.Sprintf("out%d", k), 1<<12, chunks)
				ks, err := comm.AllReduce(r, fmt.Sprintf("ar%d", k), s, in, out)
				require.NoError(rt, err)
				p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Kernel: ks})
				outs[r] = append(outs[r], out)
			}
			w.SetProgram(r, p)
		}
		res, err := w.Run()
		require.NoError(rt, err)
		require.Empty(rt, res.Findings)
		requireCallSums(rt, w, outs, chunks)
	})
}

// inputValue is chunk c of call k's input on rank r in the sum properties:
// distinct per rank, chunk and call, so a term taken twice or from the
// wrong call shows in the sum.
func inputValue(r, k, c int) uint64 { return uint64(7*(r+1)*(c+1) + 1000*k) }

// requireCallSums requires every rank's output of every call (outs[rank][call])
// to hold the sum over ranks of that call's inputs (inputValue), with one
// provenance term per rank.
func requireCallSums(t require.TestingT, w *ranks.World, outs [][]*ranks.Buffer, chunks int) {
	n := len(outs)
	for r := range n {
		for k, out := range outs[r] {
			for c := range chunks {
				want := uint64(0)
				for q := range n {
					want += inputValue(q, k, c)
				}
				require.Equal(t, want, out.Vals[c].N, "rank %d call %d chunk %d", r, k, c)
				require.Len(t, w.Srcs.Terms(out.Vals[c]), n, "one provenance term per rank")
			}
		}
	}
}
