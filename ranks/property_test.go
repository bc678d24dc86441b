package ranks_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// genOp is one generated kernel: it reads some chunks and writes one.
type genOp struct {
	Stream int
	Reads  [][2]int // (buffer, chunk)
	Write  [2]int
}

type genProg struct {
	Streams int
	Ops     []genOp
	Edges   [][2]int // event edges (i, j), i < j, on different streams
}

const genBufs, genChunks = 3, 2

func drawProg(t *rapid.T) genProg {
	p := genProg{Streams: rapid.IntRange(2, 3).Draw(t, "streams")}
	loc := rapid.Custom(func(t *rapid.T) [2]int {
		return [2]int{rapid.IntRange(0, genBufs-1).Draw(t, "buf"), rapid.IntRange(0, genChunks-1).Draw(t, "chunk")}
	})
	n := rapid.IntRange(2, 7).Draw(t, "ops")
	for range n {
		p.Ops = append(p.Ops, genOp{
			Stream: rapid.IntRange(0, p.Streams-1).Draw(t, "stream"),
			Reads:  rapid.SliceOfN(loc, 1, 2).Draw(t, "reads"),
			Write:  loc.Draw(t, "write"),
		})
	}
	// One event edge for every conflicting pair on different streams.
	for j := range p.Ops {
		for i := range j {
			if p.Ops[i].Stream != p.Ops[j].Stream && conflict(p.Ops[i], p.Ops[j]) {
				p.Edges = append(p.Edges, [2]int{i, j})
			}
		}
	}
	return p
}

func conflict(a, b genOp) bool {
	if a.Write == b.Write {
		return true
	}
	for _, r := range a.Reads {
		if r == b.Write {
			return true
		}
	}
	for _, r := range b.Reads {
		if r == a.Write {
			return true
		}
	}
	return false
}

// ordered reports whether op i happens before op j through stream order and
// edges (a deliberately naive reachability).
func (p genProg) ordered(i, j int) bool {
	reach := make([]bool, len(p.Ops))
	reach[i] = true
	for k := i + 1; k <= j; k++ {
		for m := i; m < k; m++ {
			if !reach[m] {
				continue
			}
			if p.Ops[m].Stream == p.Ops[k].Stream {
				reach[k] = true
			}
			for _, e := range p.Edges {
				if e == [2]int{m, k} {
					reach[k] = true
				}
			}
		}
	}
	return reach[j]
}

// build lowers p into a one-rank world: a fork event makes every stream join
// stream 0 first and a join event per stream brings it back at the end (so the
// program is also a valid CUDA-graph capture); edge (i, j) is a record after op
// i on i's stream and a wait before op j on j's stream.
func (p genProg) build(mode ranks.Mode, ch sim.Chooser, engMode sim.Mode) (*ranks.World, []*ranks.Buffer) {
	w := ranks.NewWorld(1, ranks.Config{Mode: mode, LaunchCost: 2000, EventCost: 500}, sim.NewEngine(engMode, ch))
	var bufs []*ranks.Buffer
	for b := range genBufs {
		x := w.Alloc(0, fmt.Sprintf("b%d", b), 1024, genChunks)
		w.Init(x, func(c int) uint64 { return uint64(1 + 10*b + c) })
		bufs = append(bufs, x)
	}
	prog := &ranks.Program{}
	for s := range p.Streams {
		prog.Streams = append(prog.Streams, fmt.Sprintf("s%d", s))
	}
	event := func(name string) int {
		prog.Events = append(prog.Events, name)
		return len(prog.Events) - 1
	}
	fork := event("fork")
	prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Record, Stream: 0, Event: fork})
	for s := 1; s < p.Streams; s++ {
		prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Wait, Stream: s, Event: fork})
	}
	evOf := map[[2]int]int{}
	for _, e := range p.Edges {
		evOf[e] = event(fmt.Sprintf("e%d_%d", e[0], e[1]))
	}
	for j, op := range p.Ops {
		for _, e := range p.Edges {
			if e[1] == j {
				prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Wait, Stream: op.Stream, Event: evOf[e]})
			}
		}
		in := ranks.Instr{Op: ranks.OpCompute, Dur: 3000, Dst: bufs[op.Write[0]], DstLo: op.Write[1], N: 1, Fresh: true}
		for k, r := range op.Reads {
			in.Srcs = append(in.Srcs, ranks.Src{Buf: bufs[r[0]], Lo: r[1], Coef: int64(k + 2)})
		}
		prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: op.Stream, Kernel: &ranks.KernelSpec{Name: fmt.Sprintf("op%d", j), Instrs: []ranks.Instr{in}}})
		for _, e := range p.Edges {
			if e[0] == j {
				prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Record, Stream: op.Stream, Event: evOf[e]})
			}
		}
	}
	for s := 1; s < p.Streams; s++ {
		j := event(fmt.Sprintf("join%d", s))
		prog.Ops = append(prog.Ops,
			ranks.HostOp{Kind: ranks.Record, Stream: s, Event: j},
			ranks.HostOp{Kind: ranks.Wait, Stream: 0, Event: j})
	}
	w.SetProgram(0, prog)
	return w, bufs
}

func races(res *ranks.Result) int { return res.Counts[ranks.KindRace] }

// TestPropEventOrderedProgramsAreRaceFree is property (d): a multi-stream
// program whose conflicting ops are all ordered by events never reports a
// race, under any schedule (timed with jitter, or untimed); removing one event
// edge that leaves a conflicting pair unordered always reports one.
func TestPropEventOrderedProgramsAreRaceFree(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		p := drawProg(rt)
		mode := rapid.SampledFrom([]ranks.Mode{ranks.Eager, ranks.Graph}).Draw(rt, "mode")
		engMode := rapid.SampledFrom([]sim.Mode{sim.Timed, sim.Untimed}).Draw(rt, "engine")
		seed := rapid.Uint64().Draw(rt, "seed")
		w, _ := p.build(mode, sim.NewRandom(seed, 300), engMode)
		res, err := w.Run()
		require.NoError(rt, err)
		require.Zero(rt, races(res), "ordered program reported %v", res.Findings)

		var cands []int
		for k, e := range p.Edges {
			q := p
			q.Edges = append(append([][2]int{}, p.Edges[:k]...), p.Edges[k+1:]...)
			if !q.ordered(e[0], e[1]) {
				cands = append(cands, k)
			}
		}
		if len(cands) == 0 {
			return
		}
		k := rapid.SampledFrom(cands).Draw(rt, "removed")
		q := p
		q.Edges = append(append([][2]int{}, p.Edges[:k]...), p.Edges[k+1:]...)
		w, _ = q.build(mode, sim.NewRandom(seed, 300), engMode)
		res, err = w.Run()
		require.NoError(rt, err)
		require.NotZero(rt, races(res), "removing edge %v left ops %d and %d unordered", p.Edges[k], p.Edges[k][0], p.Edges[k][1])
	})
}

// TestPropGraphReplayEqualsEager is property (e): for race-free programs, a
// CUDA-graph replay computes the same values as eager execution, whatever the
// schedule of either.
func TestPropGraphReplayEqualsEager(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		p := drawProg(rt)
		seedA, seedB := rapid.Uint64().Draw(rt, "seedEager"), rapid.Uint64().Draw(rt, "seedGraph")
		engMode := rapid.SampledFrom([]sim.Mode{sim.Timed, sim.Untimed}).Draw(rt, "engine")
		we, be := p.build(ranks.Eager, sim.NewRandom(seedA, 300), engMode)
		_, err := we.Run()
		require.NoError(rt, err)
		wg, bg := p.build(ranks.Graph, sim.NewRandom(seedB, 300), engMode)
		_, err = wg.Run()
		require.NoError(rt, err)
		for b := range be {
			for c := range be[b].Vals {
				require.Equal(rt, be[b].Vals[c].N, bg[b].Vals[c].N, "buffer %s chunk %d", be[b].Name, c)
			}
		}
	})
}
