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

// Property (NCCL usage/communicators.rst): with calls on two communicators
// ordered on each GPU by host program order — one stream per rank, or
// NCCL_LAUNCH_ORDER_IMPLICIT across streams — the run hangs exactly when
// the ranks' host orders disagree; when it does not hang, every output
// equals the ideal sum. Per-rank compute before each call and random
// timing change nothing.
func TestTwoCommsHangIffHostOrdersDisagree(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(2, 6).Draw(rt, "n")
		implicit := rapid.Bool().Draw(rt, "implicit")
		twoStreams := implicit && rapid.Bool().Draw(rt, "twoStreams")
		aFirst := make([]bool, n)
		for r := range aFirst {
			aFirst[r] = rapid.Bool().Draw(rt, fmt.Sprintf("aFirst%d", r))
		}
		seed := rapid.Uint64().Draw(rt, "seed")
		hw := ranks.Profiles["h100"]
		w := ranks.NewWorld(n, ranks.Config{Mode: ranks.Eager, LaunchCost: hw.Launch}, sim.NewEngine(sim.Timed, sim.NewRandom(seed, 300)))
		group := iota(0, n, 1)
		comms := [2]*collectives.Comm{
			collectives.NewComm(w, "A", group, collectives.SharedWorkspace, hw, 2),
			collectives.NewComm(w, "B", group, collectives.SharedWorkspace, hw, 2),
		}
		outs := map[[2]int]*ranks.Buffer{}
		for r := range n {
			p := &ranks.Program{Streams: []string{"s0", "s1"}}
			order := []int{0, 1}
			if !aFirst[r] {
				order = []int{1, 0}
			}
			for _, c := range order {
				comms[c].ImplicitOrder = implicit
				stream := 0
				if twoStreams {
					stream = c
				}
				work := sim.Time(rapid.IntRange(0, 50).Draw(rt, fmt.Sprintf("work%d_%d", r, c))) * sim.Microsecond
				p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: stream, Kernel: &ranks.KernelSpec{Name: "work", Instrs: []ranks.Instr{{Op: ranks.OpDelay, Dur: work}}}})
				in := w.Alloc(r, fmt.Sprintf("in%d", c), 1<<16, 2)
				w.Init(in, func(ch int) uint64 { return initVal(r, c, ch) })
				out := w.Alloc(r, fmt.Sprintf("out%d", c), 1<<16, 2)
				k, err := comms[c].Collective(r, collectives.Call{Name: comms[c].Name, Op: collectives.AllReduce, Strategy: collectives.NCCL, In: in, Out: out})
				require.NoError(rt, err)
				p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: stream, Kernel: k})
				outs[[2]int{r, c}] = out
			}
			w.SetProgram(r, p)
		}
		res, err := w.Run()
		require.NoError(rt, err)
		disagree := false
		for r := range n {
			disagree = disagree || aFirst[r] != aFirst[0]
		}
		require.Equal(rt, disagree, res.Hung, "findings: %v", res.Findings)
		if res.Hung {
			require.Contains(rt, res.Findings[len(res.Findings)-1].Message, "wait-for cycle")
			return
		}
		require.Empty(rt, res.Findings)
		for r := range n {
			for c := range 2 {
				for ch := range 2 {
					var want uint64
					for q := range n {
						want += initVal(q, c, ch)
					}
					require.Equal(rt, want, outs[[2]int{r, c}].Vals[ch].N)
				}
			}
		}
	})
}
