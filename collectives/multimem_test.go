package collectives_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// TestMultimemGrid: the grid PyTorch's init_elementwise_launch_config gives
// multimem_all_reduce_ (CUDASymmetricMemoryOps.cu: 16-byte alignment, world
// size splits, at most 8 blocks of 1024 threads), for bf16 tensors.
func TestMultimemGrid(t *testing.T) {
	for _, c := range []struct {
		bytes  int64
		ranks  int
		blocks int
	}{
		{8 * 8192 * 2, 8, 1},           // decode, 8 tokens × 8192: 8192 elements a rank, one block of 1024 × 8
		{8 * 8192 * 2, 2, 4},           // the same on 2 ranks: 32768 a rank
		{2048 * 8192 * 2, 8, 8},        // prefill: capped at 8
		{64, 8, 1},                     // tiny
		{8*8192*2 + 2, 8, 2},           // one element over: the slice rounds up past one block
		{9 * 8192 * 2 * 8 / 8, 8, 2},   // 9216 elements a rank
		{8 * 1024 * 8 * 2 * 8, 8, 8},   // exactly 8 blocks a rank
		{8*1024*8*2*8 + 256, 8, 8},     // and over: still 8
		{3 * 1024 * 8 * 2 * 4, 4, 3},   // 3 blocks a rank on 4 ranks
		{3*1024*8*2*4 - 128, 4, 3},     // rounding up to 16 B × 4 splits keeps 3
		{1024 * 8 * 2 * 6, 6, 1},       // 6 ranks, exactly one block each
		{1024*8*2*6 + 16*6*2, 6, 2},    // and a little over
		{1024 * 8 * 2 * 6 * 100, 6, 8}, // large
	} {
		require.Equal(t, c.blocks, collectives.MultimemGrid(c.bytes, c.ranks), "%d bytes on %d ranks", c.bytes, c.ranks)
	}
}

// step is one micro-op of a kernel as the phase table lists it.
type step struct {
	phase string
	op    ranks.InstrOp
	pad   int // rank whose pad a put or wait touches (-1 otherwise)
	slot  int
	dst   string // buffer a compute writes, with its first chunk
}

func steps(k *ranks.KernelSpec) []step {
	var out []step
	for _, in := range k.Expand() {
		s := step{phase: in.Phase, op: in.Op, pad: -1}
		if in.Pad != nil {
			s.pad, s.slot = in.Pad.Rank, in.Slot
		}
		if in.Dst != nil {
			s.dst = fmt.Sprintf("%s/r%d[%d:%d]", in.Dst.Name, in.Dst.Rank, in.DstLo, in.DstLo+in.N)
		}
		out = append(out, s)
	}
	return out
}

// TestMultimemPhases is the table of a split MULTIMEM all-reduce on rank 1
// of 2 with a grid of 2 blocks and 4 chunks: three kernels on the calling
// stream; in the middle one, every block signals slot block·2 + 1 (its own
// rank) on both pads, its own included, and waits on slots block·2 + 0 and
// block·2 + 1 of its own (sync_remote_blocks); each block reduces its half
// of rank 1's slice (chunks 2 and 3) with ld_reduce into registers and
// stores it into both copies (multimem.st), its own last.
func TestMultimemPhases(t *testing.T) {
	hw := ranks.Profiles["b200"]
	w := ranks.NewWorld(2, ranks.Config{}, sim.NewEngine(sim.Timed, nil))
	comm := collectives.NewComm(w, "tp", []int{0, 1}, collectives.SharedWorkspace, hw, 4)
	in := w.Alloc(1, "x", 1<<12, 4)
	out := w.Alloc(1, "y", 1<<12, 4)
	call := collectives.Call{Name: "ar", Op: collectives.AllReduce, Strategy: collectives.Multimem, In: in, Out: out, Blocks: 2}
	require.True(t, comm.Splits(call))
	ks, err := comm.Launches(1, call)
	require.NoError(t, err)
	require.Len(t, ks, 3)

	require.Equal(t, []string{"ar.copy_in", "ar", "ar.copy_out"}, []string{ks[0].Name, ks[1].Name, ks[2].Name})
	require.Equal(t, []string{"", "ar", ""}, []string{ks[0].Coll, ks[1].Coll, ks[2].Coll}, "only the reduce is the collective")
	require.Equal(t, []step{{"copy-in", ranks.OpCompute, -1, 0, "tp.ws/r1[0:4]"}}, steps(ks[0]))
	require.Equal(t, []step{{"copy-out", ranks.OpCompute, -1, 0, "y/r1[0:4]"}}, steps(ks[2]))
	require.Equal(t, 2, ks[1].Blocks)
	require.True(t, ks[1].Spins)
	require.False(t, ks[0].Spins || ks[2].Spins, "the copies wait on no peer")

	const put, wait, comp, delay = ranks.OpPut, ranks.OpWait, ranks.OpCompute, ranks.OpDelay
	regs := "tp.scratch.ar/regs"
	want := []step{
		{"launch", delay, -1, 0, ""},
		// block 0 then block 1 signal slot 2b+1 on pad 1 (own) and pad 0
		{"barrier-entry", put, 1, 1, ""}, {"barrier-entry", put, 0, 1, ""},
		{"barrier-entry", put, 1, 3, ""}, {"barrier-entry", put, 0, 3, ""},
		// and wait on slots 2b+1 (self) and 2b+0 of pad 1
		{"barrier-entry", wait, 1, 1, ""}, {"barrier-entry", wait, 1, 0, ""},
		{"barrier-entry", wait, 1, 3, ""}, {"barrier-entry", wait, 1, 2, ""},
		// block 0: chunk 2; block 1: chunk 3
		{"multimem.ld_reduce", comp, -1, 0, regs + "/r1[2:3]"},
		{"multimem.st", comp, -1, 0, "tp.ws/r1[2:3]"}, {"multimem.st", comp, -1, 0, "tp.ws/r0[2:3]"},
		{"multimem.ld_reduce", comp, -1, 0, regs + "/r1[3:4]"},
		{"multimem.st", comp, -1, 0, "tp.ws/r1[3:4]"}, {"multimem.st", comp, -1, 0, "tp.ws/r0[3:4]"},
		{"barrier-exit", put, 1, 1, ""}, {"barrier-exit", put, 0, 1, ""},
		{"barrier-exit", put, 1, 3, ""}, {"barrier-exit", put, 0, 3, ""},
		{"barrier-exit", wait, 1, 1, ""}, {"barrier-exit", wait, 1, 0, ""},
		{"barrier-exit", wait, 1, 3, ""}, {"barrier-exit", wait, 1, 2, ""},
	}
	require.Equal(t, want, steps(ks[1]))

	// Every slot of a rank's pad is put by exactly one (block, rank) pair
	// and waited on by the pad's owner: the layout PyTorch computes,
	// b·world_size + rank (collectives.Slot).
	for b := range 2 {
		for r := range 2 {
			require.Equal(t, b*2+r, collectives.Slot(2, b, r))
		}
	}

	// The ld_reduce reads every rank's copy of the block's chunks.
	ld := ks[1].Expand()[9]
	require.Len(t, ld.Srcs, 2)
	for p, s := range ld.Srcs {
		require.Equal(t, p, s.Buf.Rank)
		require.Equal(t, 2, s.Lo)
	}
}

// guardedPair runs two split (or fused) MULTIMEM all-reduces of 2 ranks,
// "a" on stream s1 and "b" on stream s2, forked from s1 and joined back,
// captured into a graph with PyTorch's GroupStreamGuard on: the two calls'
// pad kernels run in issue order on every rank. It returns the outputs'
// values and the result.
func guardedPair(t *testing.T, fused bool) (a, b [][]uint64, res *ranks.Result) {
	t.Helper()
	hw := ranks.Profiles["b200"]
	const n, chunks = 2, 4
	w := ranks.NewWorld(n, ranks.Config{Mode: ranks.Graph, LaunchCost: hw.Launch, EventCost: hw.EventOp}, sim.NewEngine(sim.Timed, nil))
	comm := collectives.NewComm(w, "tp", []int{0, 1}, collectives.SharedWorkspace, hw, chunks)
	comm.StreamGuard = true
	comm.FusedMultimem = fused
	outs := map[string][]*ranks.Buffer{}
	for r := range n {
		p := &ranks.Program{Streams: []string{"s1", "s2"}, Events: []string{"fork", "join"}}
		p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Record, Stream: 0, Event: 0}, ranks.HostOp{Kind: ranks.Wait, Stream: 1, Event: 0})
		for s, name := range []string{"a", "b"} {
			in := w.Alloc(r, name+".in", 1<<12, chunks)
			w.Init(in, func(c int) uint64 { return uint64(100*(s+1) + 10*r + c) })
			out := w.Alloc(r, name+".out", 1<<12, chunks)
			outs[name] = append(outs[name], out)
			ks, err := comm.Launches(r, collectives.Call{Name: name, Op: collectives.AllReduce, Strategy: collectives.Multimem, In: in, Out: out})
			require.NoError(t, err)
			for _, k := range ks {
				p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: s, Kernel: k})
			}
		}
		p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Record, Stream: 1, Event: 1}, ranks.HostOp{Kind: ranks.Wait, Stream: 0, Event: 1})
		w.SetProgram(r, p)
	}
	res, err := w.Run()
	require.NoError(t, err)
	vals := func(bs []*ranks.Buffer) [][]uint64 {
		var out [][]uint64
		for _, b := range bs {
			var row []uint64
			for c := range chunks {
				row = append(row, b.Vals[c].N)
			}
			out = append(out, row)
		}
		return out
	}
	return vals(outs["a"]), vals(outs["b"]), res
}

// TestStreamGuardLeavesTheCopiesRacing: with PyTorch's GroupStreamGuard two
// MULTIMEM all-reduces on two streams have their pad kernels ordered, but
// TensorRT-LLM's copies in and out of the shared workspace are not pad
// kernels: b's copy-in overwrites the workspace a's reduce reads. Split into
// its three kernels, the pair races and corrupts; modelled as one fused
// kernel, the guard orders all of it and the pair is clean — the fused
// model misses the bug.
func TestStreamGuardLeavesTheCopiesRacing(t *testing.T) {
	want := func(s int) [][]uint64 { // Σ over 2 ranks of 100(s+1) + 10r + c
		row := make([]uint64, 4)
		for c := range row {
			row[c] = uint64(2*(100*(s+1)+c) + 10)
		}
		return [][]uint64{row, row}
	}

	a, b, res := guardedPair(t, true)
	require.Empty(t, res.Findings, "fused: the guard orders the whole of each call")
	require.Equal(t, want(0), a)
	require.Equal(t, want(1), b)

	a, b, res = guardedPair(t, false)
	kinds := map[string]bool{}
	var racy []string
	for _, f := range res.Findings {
		kinds[f.Kind] = true
		if f.Kind == ranks.KindRace {
			racy = append(racy, f.Ops...)
		}
	}
	require.True(t, kinds[ranks.KindRace], "split: the copies race with the other call's kernels")
	require.True(t, slices.Contains(racy, "b.copy_in") || slices.Contains(racy, "a.copy_in"), "a copy is one side of a race: %v", racy)
	require.False(t, kinds[ranks.KindMismatch], "the guard keeps the pads paired")
	require.False(t, slices.Equal(want(0)[0], a[0]) && slices.Equal(want(1)[0], b[0]), "split: some output is wrong: a=%v b=%v", a, b)
}

// TestPropMultimemSplitIsTheSum: on one stream, split MULTIMEM all-reduces
// (any ranks, chunks, grid, calls; the guard on or off; eager or captured
// into a graph) equal the sum with
// one provenance term per rank and no finding, under any schedule — timed
// with noise, or untimed with any pending micro-op going next.
func TestPropMultimemSplitIsTheSum(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.SampledFrom([]int{2, 3, 4, 6, 8}).Draw(rt, "ranks")
		chunks := rapid.IntRange(1, 9).Draw(rt, "chunks")
		blocks := rapid.IntRange(0, collectives.MultimemMaxBlocks).Draw(rt, "blocks")
		calls := rapid.IntRange(1, 3).Draw(rt, "calls")
		guard := rapid.Bool().Draw(rt, "guard")
		run := rapid.SampledFrom([]ranks.Mode{ranks.Eager, ranks.Graph}).Draw(rt, "run")
		mode := rapid.SampledFrom([]sim.Mode{sim.Timed, sim.Untimed}).Draw(rt, "mode")
		seed := rapid.Uint64().Draw(rt, "seed")

		hw := ranks.Profiles["b200"]
		w := ranks.NewWorld(n, ranks.Config{Mode: run, LaunchCost: hw.Launch, EventCost: hw.EventOp},
			sim.NewEngine(mode, sim.NewRandom(seed, 300)))
		group := make([]int, n)
		for i := range group {
			group[i] = i
		}
		comm := collectives.NewComm(w, "tp", group, collectives.SharedWorkspace, hw, chunks)
		comm.StreamGuard = guard
		outs := make([][]*ranks.Buffer, n)
		for r := range n {
			p := &ranks.Program{Streams: []string{"main"}}
			for k := range calls {
				in := w.Alloc(r, fmt.Sprintf("in%d", k), 1<<16, chunks)
				w.Init(in, func(c int) uint64 { return inputValue(r, k, c) })
				out := w.Alloc(r, fmt.Sprintf("out%d", k), 1<<16, chunks)
				ks, err := comm.Launches(r, collectives.Call{Name: fmt.Sprintf("ar%d", k), Op: collectives.AllReduce, Strategy: collectives.Multimem, In: in, Out: out, Blocks: blocks})
				require.NoError(rt, err)
				require.Len(rt, ks, 3)
				for _, k := range ks {
					p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Kernel: k})
				}
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

// Comm.Launches returns what a rank's host launches for one call, in order
// on the calling stream: a MULTIMEM all-reduce is TensorRT-LLM's three
// kernels, and only the middle one is the collective that uses the pad.
func ExampleComm_Launches() {
	hw := ranks.Profiles["b200"]
	w := ranks.NewWorld(8, ranks.Config{Mode: ranks.Graph, LaunchCost: hw.Launch}, sim.NewEngine(sim.Timed, nil))
	group := []int{0, 1, 2, 3, 4, 5, 6, 7}
	comm := collectives.NewComm(w, "tp", group, collectives.SharedWorkspace, hw, 4)
	outs := make([]*ranks.Buffer, 8)
	for r := range 8 {
		in := w.Alloc(r, "x", 8*8192*2, 4) // 8 tokens × 8192, bf16
		w.Init(in, func(c int) uint64 { return uint64(r + 1) })
		outs[r] = w.Alloc(r, "y", 8*8192*2, 4)
		ks, err := comm.Launches(r, collectives.Call{Name: "ar", Op: collectives.AllReduce, Strategy: collectives.Multimem, In: in, Out: outs[r]})
		if err != nil {
			panic(err)
		}
		p := &ranks.Program{Streams: []string{"main"}}
		for _, k := range ks {
			if r == 0 {
				fmt.Printf("%-12s blocks=%d pad=%v\n", k.Name, k.Blocks, k.Coll != "")
			}
			p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Kernel: k})
		}
		w.SetProgram(r, p)
	}
	res, _ := w.Run()
	fmt.Println(outs[5].Vals[0].N, len(res.Findings), "findings")
	// Output:
	// ar.copy_in   blocks=0 pad=false
	// ar           blocks=1 pad=true
	// ar.copy_out  blocks=0 pad=false
	// 36 0 findings
}
