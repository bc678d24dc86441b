package collectives_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// runAllReduces runs calls all-reduces back to back on one stream per rank and
// returns the outputs, the result and the world's sources (for provenance).
func runAllReduces(t *testing.T, n, chunks, calls int, s collectives.Strategy, ch sim.Chooser) ([][]*ranks.Buffer, *ranks.Result, *ranks.Sources) {
	t.Helper()
	hw := ranks.Profiles["b200"]
	w := ranks.NewWorld(n, ranks.Config{Mode: ranks.Eager, LaunchCost: hw.Launch, EventCost: hw.EventOp}, sim.NewEngine(sim.Timed, ch))
	group := make([]int, n)
	for i := range group {
		group[i] = i
	}
	comm := collectives.NewComm(w, "tp", group, collectives.SharedWorkspace, hw, chunks)
	outs := make([][]*ranks.Buffer, n)
	for r := range n {
		p := &ranks.Program{Streams: []string{"main"}}
		for k := range calls {
			in := w.Alloc(r, fmt.Sprintf("in%d", k), 1<<16, chunks)
			w.Init(in, func(c int) uint64 { return uint64((r+1)*(c+1) + 1000*k) })
			out := w.Alloc(r, fmt.Sprintf("out%d", k), 1<<16, chunks)
			out.Output = true
			ks, err := comm.AllReduce(r, fmt.Sprintf("ar%d", k), s, in, out)
			require.NoError(t, err)
			p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Kernel: ks})
			outs[r] = append(outs[r], out)
		}
		w.SetProgram(r, p)
	}
	res, err := w.Run()
	require.NoError(t, err)
	return outs, res, &w.Srcs
}

func TestAllReduceEqualsIdealSum(t *testing.T) {
	for _, s := range []collectives.Strategy{collectives.NCCL, collectives.Multimem, collectives.P2POneShot} {
		for n := 2; n <= 16; n++ {
			for _, chunks := range []int{1, 3, 4, 8} {
				t.Run(fmt.Sprintf("%s/n=%d/chunks=%d", s, n, chunks), func(t *testing.T) {
					outs, res, srcs := runAllReduces(t, n, chunks, 3, s, nil)
					require.Empty(t, res.Findings)
					for r := range n {
						for k, out := range outs[r] {
							for c := range chunks {
								want := uint64(0)
								for q := range n {
									want += uint64((q+1)*(c+1) + 1000*k)
								}
								require.Equal(t, want, out.Vals[c].N, "rank %d call %d chunk %d", r, k, c)
								require.Len(t, srcs.Terms(out.Vals[c]), n, "one term per rank")
							}
						}
					}
				})
			}
		}
	}
}
