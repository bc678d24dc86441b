package explore

import (
	"fmt"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// tinyInstr is one generated micro-op of a tiny program.
type tinyInstr struct {
	Op       string // "copy", "put", "wait", "send", "recv"
	DstRank  int    // copy: whose mem (or own out when DstOut)
	DstOut   bool
	DstChunk int
	SrcRank  int
	SrcChunk int
	Slot     int
	// Shift moves the micro-op's destination by its kernel's slot index
	// (an "ix" micro-op loads it: ranks/slotindex.go).
	Shift bool
}

type tinyKernel struct {
	Stream int
	Instrs []tinyInstr
}

// tinyProgram is a generated 2-rank program over one shared buffer per rank
// (mem), an output per rank, a signal pad per rank and a one-slot FIFO each
// way; eager, or captured into a CUDA graph (fork and join events added so the
// capture is valid) replayed Replays times.
type tinyProgram struct {
	Kernels [2][]tinyKernel
	Graph   bool
	Replays int
}

// lower turns ti into rank r's micro-op over the tiny world's memory: the
// symmetric buffers and pads, r's output and the FIFOs between the two
// ranks (fifos[r] is r's sending side). The DPOR tests and the naive
// enumeration property build their kernels with it.
func (ti tinyInstr) lower(r int, sym *ranks.Symmetric, out *ranks.Buffer, fifos [2]*ranks.Fifo) ranks.Instr {
	in := ti.lowerOp(r, sym, out, fifos)
	if ti.Shift {
		in.Ix = &ranks.IxShift{Stride: 1, Dst: true}
	}
	return in
}

func (ti tinyInstr) lowerOp(r int, sym *ranks.Symmetric, out *ranks.Buffer, fifos [2]*ranks.Fifo) ranks.Instr {
	switch ti.Op {
	case "ix": // load the kernel's slot index: the own mem chunk SrcChunk mod 2
		return ranks.Instr{Op: ranks.OpIndex, Srcs: []ranks.Src{{Buf: sym.Bufs[r], Lo: ti.SrcChunk, Coef: 1}}, N: 1, Slot: 2, Peer: -1}
	case "copy":
		dst := sym.Bufs[ti.DstRank]
		if ti.DstOut {
			dst = out
		}
		return ranks.Instr{Op: ranks.OpCompute, Dur: 100, Dst: dst, DstLo: ti.DstChunk, N: 1,
			Srcs: []ranks.Src{{Buf: sym.Bufs[ti.SrcRank], Lo: ti.SrcChunk, Coef: 2}}}
	case "put":
		return ranks.Instr{Op: ranks.OpPut, Dur: 100, Pad: sym.Pads[1-r], Slot: ti.Slot, Peer: 1 - r}
	case "wait":
		return ranks.Instr{Op: ranks.OpWait, Dur: 100, Pad: sym.Pads[r], Slot: ti.Slot, Peer: 1 - r}
	case "send":
		return ranks.Instr{Op: ranks.OpSend, Dur: 100, Fifo: fifos[r], N: 1,
			Srcs: []ranks.Src{{Buf: sym.Bufs[r], Lo: ti.SrcChunk, Coef: 1}}, Peer: 1 - r}
	case "recv":
		return ranks.Instr{Op: ranks.OpRecv, Dur: 100, Fifo: fifos[1-r], N: 1,
			Dst: out, DstLo: ti.DstChunk, Srcs: []ranks.Src{{Buf: out, Lo: ti.DstChunk, Coef: 1}}, Peer: 1 - r}
	case "fput": // a release flag store of Slot+1 into the peer's mem chunk DstChunk (ranks/flags.go)
		return ranks.Instr{Op: ranks.OpFlagPut, Dur: 100, Dst: sym.Bufs[1-r], DstLo: ti.DstChunk, N: 1, Slot: ti.Slot + 1, Peer: 1 - r}
	case "fputown": // a release flag store of Slot+1 into the own mem chunk DstChunk
		return ranks.Instr{Op: ranks.OpFlagPut, Dur: 100, Dst: sym.Bufs[r], DstLo: ti.DstChunk, N: 1, Slot: ti.Slot + 1, Peer: r}
	case "freset": // a relaxed store of 0 into the own mem chunk DstChunk
		return ranks.Instr{Op: ranks.OpFlagPut, Dur: 100, Dst: sym.Bufs[r], DstLo: ti.DstChunk, N: 1, Fresh: true, Peer: r}
	case "fwait": // spin until the own mem chunk DstChunk is Slot+1 or more
		return ranks.Instr{Op: ranks.OpFlagWait, Dur: 100, Dst: sym.Bufs[r], DstLo: ti.DstChunk, N: 1, Cmp: ranks.FlagGe, Slot: ti.Slot + 1, Peer: -1}
	case "fwaiteq": // spin until the own mem chunk DstChunk is Slot+1 (never at first: mem starts at 10 and more)
		return ranks.Instr{Op: ranks.OpFlagWait, Dur: 100, Dst: sym.Bufs[r], DstLo: ti.DstChunk, N: 1, Cmp: ranks.FlagEq, Slot: ti.Slot + 1, Peer: -1}
	case "fwaitv": // spin until the own mem chunk DstChunk is at most the own out chunk SrcChunk (an against: value in memory)
		return ranks.Instr{Op: ranks.OpFlagWait, Dur: 100, Dst: sym.Bufs[r], DstLo: ti.DstChunk, N: 1, Cmp: ranks.FlagLe, Srcs: []ranks.Src{{Buf: out, Lo: ti.SrcChunk}}, Peer: -1}
	case "frecv": // a receive into the own mem chunk DstChunk: an NCCL receive into a polled tensor
		return ranks.Instr{Op: ranks.OpRecv, Dur: 100, Fifo: fifos[1-r], N: 1, Dst: sym.Bufs[r], DstLo: ti.DstChunk, Peer: 1 - r}
	case "recvsend": // NCCL's fused ring step: it can spin on either FIFO
		return ranks.Instr{Op: ranks.OpRecvSend, Dur: 100, Fifo: fifos[1-r], Fwd: fifos[r], N: 1,
			Dst: out, DstLo: ti.DstChunk, Srcs: []ranks.Src{{Buf: out, Lo: ti.DstChunk, Coef: 1}}, Peer: 1 - r}
	}
	panic("tinyInstr: unknown op " + ti.Op)
}

func (p tinyProgram) scenario() *scenarios.Scenario {
	return &scenarios.Scenario{Name: "tiny", Build: func(_ scenarios.Config, _ scenarios.BuildOptions, eng *sim.Engine) (*scenarios.Built, error) {
		mode := ranks.Eager
		if p.Graph {
			mode = ranks.Graph
		}
		w := ranks.NewWorld(2, ranks.Config{Mode: mode, Replays: p.Replays, LaunchCost: 1000, EventCost: 500}, eng)
		sym := w.AllocSymmetric("mem", []int{0, 1}, 64, 2, 2)
		var outs [2]*ranks.Buffer
		// One-slot FIFOs between the ranks, so that sends also block.
		fifos := [2]*ranks.Fifo{w.NewFifo("f0→1", 0, 1, 1), w.NewFifo("f1→0", 1, 0, 1)}
		for r := range 2 {
			w.Init(sym.Bufs[r], func(c int) uint64 { return uint64(10*(r+1) + c) })
			outs[r] = w.Alloc(r, "out", 64, 2)
			outs[r].Output = true
		}
		for r := range 2 {
			prog := &ranks.Program{Streams: []string{"main", "aux"}, Events: []string{"fork", "join"}}
			if p.Graph {
				prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Record, Stream: 0, Event: 0}, ranks.HostOp{Kind: ranks.Wait, Stream: 1, Event: 0})
			}
			for k, tk := range p.Kernels[r] {
				ks := &ranks.KernelSpec{Name: fmt.Sprintf("k%d.%d", r, k)}
				for _, ti := range tk.Instrs {
					ks.Instrs = append(ks.Instrs, ti.lower(r, sym, outs[r], fifos))
				}
				prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: tk.Stream, Kernel: ks})
			}
			if p.Graph {
				prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Record, Stream: 1, Event: 1}, ranks.HostOp{Kind: ranks.Wait, Stream: 0, Event: 1})
			}
			w.SetProgram(r, prog)
		}
		return &scenarios.Built{World: w}, nil
	}}
}

func genTiny(t *rapid.T) tinyProgram {
	var p tinyProgram
	instr := rapid.Custom(func(t *rapid.T) tinyInstr {
		return tinyInstr{
			Op:      rapid.SampledFrom([]string{"copy", "copy", "put", "wait", "send", "recv", "recvsend"}).Draw(t, "op"),
			DstRank: rapid.IntRange(0, 1).Draw(t, "dstRank"), DstOut: rapid.Bool().Draw(t, "dstOut"),
			DstChunk: rapid.IntRange(0, 1).Draw(t, "dstChunk"),
			SrcRank:  rapid.IntRange(0, 1).Draw(t, "srcRank"), SrcChunk: rapid.IntRange(0, 1).Draw(t, "srcChunk"),
			Slot: rapid.IntRange(0, 1).Draw(t, "slot"),
		}
	})
	total := 0
	for r := range 2 {
		nk := rapid.IntRange(1, 2).Draw(t, fmt.Sprintf("kernels%d", r))
		for range nk {
			k := tinyKernel{Stream: rapid.IntRange(0, 1).Draw(t, "stream")}
			k.Instrs = rapid.SliceOfN(instr, 1, 2).Draw(t, "instrs")
			total += len(k.Instrs)
			p.Kernels[r] = append(p.Kernels[r], k)
		}
	}
	_ = total
	p.Graph = rapid.Bool().Draw(t, "graph")
	p.Replays = 1
	if p.Graph {
		p.Replays = rapid.IntRange(1, 2).Draw(t, "replays")
	}
	return p
}

// treeChooser enumerates every schedule of an untimed run: it follows path and
// records how many options each decision had.
type treeChooser struct {
	path   []int
	widths []int
	w      *ranks.World
}

func (c *treeChooser) Choose(sim.Decision, int) int { return 0 }

// Attach keeps the world, so that a run that hung can be checked.
func (c *treeChooser) Attach(w *ranks.World) { c.w = w }

// lostWakeup returns, after a run that hung, a task the world left
// spinning although its step would now proceed (a flag wait whose
// condition holds, a put whose slot is clear): the naive check that a
// hang is real, that no write which could still wake a waiter was lost
// (DESIGN.md, Wakeups). It returns -1 when there is none.
func (c *treeChooser) lostWakeup() int32 {
	for _, a := range c.w.Blocked() {
		if !c.w.WouldBlock(a) {
			return a
		}
	}
	return -1
}
func (c *treeChooser) ChooseItem(items []sim.Item) int {
	i := len(c.widths)
	c.widths = append(c.widths, len(items))
	if i < len(c.path) {
		return c.path[i]
	}
	return 0
}

type outcomeKey struct{ out, verdict string }

// naiveOutcomes runs every interleaving of t (a deliberately naive reference
// for DPOR); ok is false past limit runs.
func naiveOutcomes(t *Target, limit int) (map[outcomeKey]bool, int, bool) {
	seen := map[outcomeKey]bool{}
	var path []int
	for runs := 1; ; runs++ {
		if runs > limit {
			return seen, runs, false
		}
		c := &treeChooser{path: path}
		s, err := t.Run(sim.Untimed, c)
		if err != nil {
			panic(err)
		}
		seen[outcomeKey{s.OutHash, s.Verdict}] = true
		for _, f := range s.Findings {
			if f.Kind == ranks.KindHang {
				if a := c.lostWakeup(); a >= 0 {
					panic(fmt.Sprintf("run %d hung with actor %d spinning on a condition that holds (a lost wakeup): %s", runs, a, f.Message))
				}
				break
			}
		}
		// Odometer: next path in depth-first order.
		full := make([]int, len(c.widths))
		copy(full, path)
		i := len(full) - 1
		for i >= 0 && full[i]+1 >= c.widths[i] {
			i--
		}
		if i < 0 {
			return seen, runs, true
		}
		full[i]++
		path = full[:i+1]
	}
}

func dporOutcomes(t *Target, budget int) (map[outcomeKey]bool, *Summary) {
	sum, err := Explore(t, &DPOR{}, 0, Options{Budget: budget})
	if err != nil {
		panic(err)
	}
	got := map[outcomeKey]bool{}
	for _, o := range sum.Outcomes {
		got[outcomeKey{o.Hash, o.Verdict}] = true
	}
	return got, sum
}

func keys(m map[outcomeKey]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k.out+"/"+k.verdict)
	}
	sort.Strings(out)
	return out
}

// TestDPORMatchesNaiveEnumeration: on generated tiny programs (two ranks, two
// streams each, copies across symmetric buffers, signal puts and waits, sends,
// receives and fused receive-sends on one-slot FIFOs), the
// outcomes DPOR reaches (output values and verdict) are exactly those of the
// naive enumeration of every interleaving, and DPOR says it is complete.
func TestDPORMatchesNaiveEnumeration(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		p := genTiny(rt)
		tg := &Target{Scenario: p.scenario(), Variant: "tiny"}
		want, runs, ok := naiveOutcomes(tg, scale(4000, 800))
		if !ok {
			rt.Skipf("naive enumeration too large (> %d runs)", runs-1)
		}
		// DPOR's traces are distinct paths of the tree naive enumeration
		// walks, so it must finish within as many.
		got, sum := dporOutcomes(tg, runs)
		require.True(rt, *sum.Complete, "dpor must finish within %d traces", runs)
		require.Equal(rt, keys(want), keys(got), "dpor outcomes (%d traces) vs naive (%d runs)", sum.Schedules, runs)
		require.LessOrEqual(rt, sum.Schedules, runs, "dpor never runs more traces than there are interleavings")
	})
}

// TestDPORProbe: the p2p-oneshot-probe's fixed variant has one class of
// interleavings and one outcome, (300, 3); the buggy variant's exhaustive
// search is complete and reaches corruption.
func TestDPORProbe(t *testing.T) {
	fixed, err := NewTarget("p2p-oneshot-probe", "fixed", nil)
	require.NoError(t, err)
	sum, err := Explore(fixed, &DPOR{}, 0, Options{Budget: 1000, Outcomes: true})
	require.NoError(t, err)
	require.True(t, *sum.Complete)
	require.Equal(t, "ok", sum.Verdict)
	require.Len(t, sum.Outcomes, 1)
	r0 := sum.Outcomes[0].Ranks[0].Outputs
	require.Equal(t, []uint64{300}, r0["shared"])
	require.Equal(t, []uint64{3}, r0["routed"])

	if testing.Short() || raceEnabled {
		t.Skip("buggy probe exhaustive search (4k traces) skipped in -short and under -race")
	}
	buggy, err := NewTarget("p2p-oneshot-probe", "buggy", nil)
	require.NoError(t, err)
	sum, err = Explore(buggy, &DPOR{}, 0, Options{Budget: 100000, Outcomes: true})
	require.NoError(t, err)
	require.True(t, *sum.Complete)
	require.Equal(t, "corruption", sum.Verdict)
	pairs := map[[2]uint64]bool{}
	for _, o := range sum.Outcomes {
		r0 := o.Ranks[0].Outputs
		pairs[[2]uint64{r0["shared"][0], r0["routed"][0]}] = true
	}
	require.True(t, pairs[[2]uint64{300, 3}], "the right answer is reachable too")
	require.Greater(t, len(pairs), 1)

	// Every outcome PCT samples is one DPOR reached.
	all := map[string]bool{}
	for _, o := range sum.Outcomes {
		all[o.Hash] = true
	}
	pct, err := New("pct", buggy, 3)
	require.NoError(t, err)
	ps, err := Explore(buggy, pct, 3, Options{Budget: 500, Workers: 2})
	require.NoError(t, err)
	for _, o := range ps.Outcomes {
		require.True(t, all[o.Hash], "pct outcome %s (schedule %d) missing from dpor's %d", o.Hash, o.First, len(all))
	}
}
