package ranks_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// flagRig is two ranks: rank 0 writes data d0 and puts into rank 1's copy
// of flag buffer f; rank 1 waits on its copy of f and reads rank 0's data
// into out. The cases change one step and say what the race detector,
// the values and the hang detector must see.
type flagCase struct {
	name string
	// initFlag is rank 1's flag before anything runs.
	initFlag uint64
	// put is what rank 0 stores (ignored when noPut).
	put   uint64
	noPut bool
	// relaxed makes rank 0's store a reset-like relaxed store.
	relaxed bool
	cmp     ranks.FlagCmp
	want    uint64
	// wantRace: the data read on rank 1 races with rank 0's data write.
	wantRace bool
	wantHang bool
	// wantRead is what rank 1 reads from rank 0's data (when it runs).
	wantRead uint64
}

func runFlagCase(t *testing.T, c flagCase) (*ranks.Result, *ranks.Buffer) {
	t.Helper()
	w := ranks.NewWorld(2, ranks.Config{LaunchCost: 1000}, sim.NewEngine(sim.Timed, nil))
	data := w.AllocSymmetric("data", []int{0, 1}, 64, 1, 0)
	flag := w.AllocSymmetric("flag", []int{0, 1}, 64, 1, 0)
	w.Init(flag.Bufs[1], func(int) uint64 { return c.initFlag })
	src := w.Alloc(0, "src", 64, 1)
	w.Init(src, func(int) uint64 { return 7 })
	out := w.Alloc(1, "out", 64, 1)
	// rank 0: 5µs of work, data ← 1·src, then the flag store
	k0 := &ranks.KernelSpec{Name: "writer", Instrs: []ranks.Instr{
		{Op: ranks.OpDelay, Dur: 5000},
		{Op: ranks.OpCompute, Dur: 100, Dst: data.Bufs[0], N: 1, Srcs: []ranks.Src{{Buf: src, Coef: 1}}, Fresh: true},
	}}
	if !c.noPut {
		k0.Instrs = append(k0.Instrs, ranks.Instr{Op: ranks.OpFlagPut, Dur: 100, Dst: flag.Bufs[1], N: 1, Slot: int(c.put), Fresh: c.relaxed, Peer: 1})
	}
	k1 := &ranks.KernelSpec{Name: "reader", Spins: true, Blocks: 1, Instrs: []ranks.Instr{
		{Op: ranks.OpFlagWait, Dur: 100, Dst: flag.Bufs[1], N: 1, Cmp: c.cmp, Slot: int(c.want), Peer: -1},
		{Op: ranks.OpCompute, Dur: 100, Dst: out, N: 1, Srcs: []ranks.Src{{Buf: data.Bufs[0], Coef: 1}}},
	}}
	w.SetProgram(0, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{{Kind: ranks.Launch, Kernel: k0}}})
	w.SetProgram(1, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{{Kind: ranks.Launch, Kernel: k1}}})
	res, err := w.Run()
	require.NoError(t, err)
	return res, out
}

// TestFlagWaitAcquiresWhatItObserved: a flag wait orders the reads after it
// behind the writes before a put exactly when the value it saw is that
// put's (a release store): a stale value, a relaxed store or no store at
// all orders nothing, so the data read races; a wait that never holds
// hangs. The comparisons are the six of the format.
func TestFlagWaitAcquiresWhatItObserved(t *testing.T) {
	cases := []flagCase{
		{name: "eq observes the put", put: 1, cmp: ranks.FlagEq, want: 1, wantRead: 7},
		{name: "ge observes a later colour", put: 3, cmp: ranks.FlagGe, want: 2, wantRead: 7},
		{name: "ne on a sentinel observes the put (Lamport)", initFlag: 9, put: 5, cmp: ranks.FlagNe, want: 9, wantRead: 7},
		{name: "stale flag satisfies at once: no order", initFlag: 1, put: 1, cmp: ranks.FlagEq, want: 1, wantRace: true, wantRead: 0},
		{name: "flag never reset, old colour", initFlag: 4, put: 5, cmp: ranks.FlagGe, want: 3, wantRace: true, wantRead: 0},
		{name: "relaxed store releases nothing", put: 1, relaxed: true, cmp: ranks.FlagEq, want: 1, wantRace: true, wantRead: 7},
		{name: "no put: the wait never holds", noPut: true, cmp: ranks.FlagEq, want: 1, wantHang: true},
		{name: "wrong colour: the wait never holds", put: 1, cmp: ranks.FlagEq, want: 2, wantHang: true},
		{name: "gt", put: 2, cmp: ranks.FlagGt, want: 1, wantRead: 7},
		{name: "lt", initFlag: 5, put: 1, cmp: ranks.FlagLt, want: 2, wantRead: 7},
		{name: "le", initFlag: 5, put: 2, cmp: ranks.FlagLe, want: 2, wantRead: 7},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, out := runFlagCase(t, c)
			require.Equal(t, c.wantHang, res.Hung, "hang: %v", res.Findings)
			if c.wantHang {
				require.Contains(t, res.Findings[len(res.Findings)-1].Message, "flag wait on rank 1's copy of symmetric buffer \"flag\"")
				return
			}
			races := raceOn(res, `symmetric buffer "data"`)
			if c.wantRace {
				require.NotEmpty(t, races, "the wait did not observe a release of the data write")
			} else {
				require.Empty(t, res.Findings)
			}
			require.Equal(t, c.wantRead, out.Vals[0].N, "what rank 1 read")
		})
	}
}

// TestFlagAtomicsDoNotRaceEachOther: two flag stores into one chunk that
// nothing orders are atomics and no race; a plain store into the chunk
// that nothing orders with a flag store is one.
func TestFlagAtomicsDoNotRaceEachOther(t *testing.T) {
	for _, plain := range []bool{false, true} {
		w := ranks.NewWorld(2, ranks.Config{LaunchCost: 1000}, sim.NewEngine(sim.Timed, nil))
		flag := w.AllocSymmetric("flag", []int{0, 1}, 64, 1, 0)
		one := w.Alloc(0, "one", 64, 1)
		w.Init(one, func(int) uint64 { return 1 })
		second := ranks.Instr{Op: ranks.OpFlagPut, Dur: 100, Dst: flag.Bufs[1], N: 1, Slot: 2, Peer: 1}
		if plain {
			second = ranks.Instr{Op: ranks.OpCompute, Dur: 100, Dst: flag.Bufs[1], N: 1, Srcs: []ranks.Src{{Buf: one, Coef: 1}}}
		}
		w.SetProgram(0, &ranks.Program{Streams: []string{"a", "b"}, Ops: []ranks.HostOp{
			{Kind: ranks.Launch, Stream: 0, Kernel: &ranks.KernelSpec{Name: "p1", Instrs: []ranks.Instr{{Op: ranks.OpFlagPut, Dur: 100, Dst: flag.Bufs[1], N: 1, Slot: 1, Peer: 1}}}},
			{Kind: ranks.Launch, Stream: 1, Kernel: &ranks.KernelSpec{Name: "p2", Instrs: []ranks.Instr{second}}},
		}})
		res, err := w.Run()
		require.NoError(t, err)
		if plain {
			require.NotEmpty(t, raceOn(res, `symmetric buffer "flag"`), "a plain store races with an unordered flag store")
		} else {
			require.Empty(t, res.Findings, "flag stores are atomics")
		}
	}
}

// TestFlagWaitSpinsOnItsSMs: a flag wait is a spinning kernel: with as
// many blocks as the GPU has SMs it keeps the put its peer needs from
// becoming resident behind it on the same GPU (the put on a second
// stream) — a hang; with fewer blocks the two fit side by side.
func TestFlagWaitSpinsOnItsSMs(t *testing.T) {
	for _, blocks := range []int{4, 2} {
		w := ranks.NewWorld(1, ranks.Config{LaunchCost: 1000, SMs: 4}, sim.NewEngine(sim.Timed, nil))
		flag := w.Alloc(0, "flag", 64, 1)
		wait := &ranks.KernelSpec{Name: "wait", Spins: true, Blocks: blocks, Instrs: []ranks.Instr{{Op: ranks.OpFlagWait, Dur: 100, Dst: flag, N: 1, Slot: 1, Peer: -1}}}
		put := &ranks.KernelSpec{Name: "put", Blocks: 2, Instrs: []ranks.Instr{{Op: ranks.OpFlagPut, Dur: 100, Dst: flag, N: 1, Slot: 1, Peer: 0}}}
		w.SetProgram(0, &ranks.Program{Streams: []string{"a", "b"}, Ops: []ranks.HostOp{
			{Kind: ranks.Launch, Stream: 0, Kernel: wait},
			{Kind: ranks.Launch, Stream: 1, Kernel: put},
		}})
		res, err := w.Run()
		require.NoError(t, err)
		require.Equal(t, blocks == 4, res.Hung, "blocks %d: %v", blocks, res.Findings)
	}
}

// TestFaultIsInvalidAccess: an access through an unmapped address is an
// invalid-access finding naming the kernel and the buffer, once.
func TestFaultIsInvalidAccess(t *testing.T) {
	w := ranks.NewWorld(2, ranks.Config{LaunchCost: 1000}, sim.NewEngine(sim.Timed, nil))
	buf := w.AllocSymmetric("ipc", []int{0, 1}, 64, 1, 0)
	k := &ranks.KernelSpec{Name: "car", Instrs: []ranks.Instr{
		{Op: ranks.OpFault, Dst: buf.Bufs[1], Peer: 1, Phase: "not registered"},
		{Op: ranks.OpFault, Dst: buf.Bufs[1], Peer: 1, Phase: "not registered"},
	}}
	w.SetProgram(0, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{{Kind: ranks.Launch, Kernel: k}}})
	res, err := w.Run()
	require.NoError(t, err)
	require.Len(t, res.Findings, 1)
	f := res.Findings[0]
	require.Equal(t, ranks.KindInvalidAccess, f.Kind)
	require.Contains(t, f.Message, `car touches rank 1's copy of symmetric buffer "ipc", which rank 0 never mapped (not registered)`)
}

// TestFlagWaitOnOverwrittenPutAcquiresNothing: rank 0 writes data and
// puts its flag early; later rank 1 overwrites that flag with a plain
// store of the same number and waits for it. The wait observes rank 1's
// own store, not rank 0's put, so it orders nothing: the data read races.
func TestFlagWaitOnOverwrittenPutAcquiresNothing(t *testing.T) {
	w := ranks.NewWorld(2, ranks.Config{LaunchCost: 1000}, sim.NewEngine(sim.Timed, nil))
	data := w.AllocSymmetric("data", []int{0, 1}, 64, 1, 0)
	flag := w.AllocSymmetric("flag", []int{0, 1}, 64, 1, 0)
	src := w.Alloc(0, "src", 64, 1)
	w.Init(src, func(int) uint64 { return 7 })
	one := w.Alloc(1, "one", 64, 1)
	w.Init(one, func(int) uint64 { return 1 })
	out := w.Alloc(1, "out", 64, 1)
	k0 := &ranks.KernelSpec{Name: "writer", Instrs: []ranks.Instr{
		{Op: ranks.OpCompute, Dur: 100, Dst: data.Bufs[0], N: 1, Srcs: []ranks.Src{{Buf: src, Coef: 1}}, Fresh: true},
		{Op: ranks.OpFlagPut, Dur: 100, Dst: flag.Bufs[1], N: 1, Slot: 1, Peer: 1},
	}}
	k1 := &ranks.KernelSpec{Name: "reader", Instrs: []ranks.Instr{
		{Op: ranks.OpDelay, Dur: 5000},
		{Op: ranks.OpCompute, Dur: 100, Dst: flag.Bufs[1], N: 1, Srcs: []ranks.Src{{Buf: one, Coef: 1}}, Fresh: true},
		{Op: ranks.OpFlagWait, Dur: 100, Dst: flag.Bufs[1], N: 1, Cmp: ranks.FlagNe, Slot: 0, Peer: -1},
		{Op: ranks.OpCompute, Dur: 100, Dst: out, N: 1, Srcs: []ranks.Src{{Buf: data.Bufs[0], Coef: 1}}},
	}}
	w.SetProgram(0, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{{Kind: ranks.Launch, Kernel: k0}}})
	w.SetProgram(1, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{{Kind: ranks.Launch, Kernel: k1}}})
	res, err := w.Run()
	require.NoError(t, err)
	require.False(t, res.Hung)
	require.NotEmpty(t, raceOn(res, `symmetric buffer "data"`), "the wait saw rank 1's plain store, not rank 0's put")
}

// TestWrittenTensorIsNoReplayInputInACopy: a tensor set with Init that a
// kernel writes carries state from one replay to the next (a device-side
// counter), so it is no per-replay input — in a template's copy too, whose
// micro-ops name the template's buffers. Before the copy resolved them,
// the counter was re-filled as an input in every copy, with values that
// differ by rank: a flag protocol keyed on it hung.
func TestWrittenTensorIsNoReplayInputInACopy(t *testing.T) {
	build := func() *ranks.World {
		w := ranks.NewWorld(1, ranks.Config{Mode: ranks.Graph, Replays: 3, LaunchCost: 1000}, sim.NewEngine(sim.Timed, nil))
		w.SetIndependentReplays(true)
		c := w.Alloc(0, "counter", 4, 1)
		w.Init(c, func(int) uint64 { return 1 })
		k := &ranks.KernelSpec{Name: "double", Instrs: []ranks.Instr{{Op: ranks.OpCompute, Dur: 100, Dst: c, N: 1, Srcs: []ranks.Src{{Buf: c, Coef: 2}}, Fresh: true}}}
		w.SetProgram(0, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{{Kind: ranks.Launch, Kernel: k}}})
		return w
	}
	fresh := build()
	_, err := fresh.Run()
	require.NoError(t, err)
	require.Equal(t, uint64(8), fresh.Buffers()[0].Vals[0].N, "three replays double the counter three times")
	tmpl, err := ranks.NewTemplate(build())
	require.NoError(t, err)
	cp := tmpl.Instantiate(sim.NewEngine(sim.Timed, nil))
	_, err = cp.Run()
	require.NoError(t, err)
	require.Equal(t, uint64(8), cp.Buffers()[0].Vals[0].N, "a template's copy counts the same")
}

// TestEveryWriteWakesFlagWaits: a flag wait is re-evaluated after every
// write to a location it compares, whatever makes the write — a flag put,
// a kernel's plain store, an NCCL receive into the polled tensor, or a
// write to the tensor it compares against (DESIGN.md, Wakeups). In each
// case the wait first finds its condition false (the writer is late) and
// must hold once the write lands; a model that wakes it only on flag puts
// reports a hang while the condition holds. The first case is the issue's
// one-rank example: put fl=1 on main, increment col on main, an aux wait
// fl against col.
func TestEveryWriteWakesFlagWaits(t *testing.T) {
	type rig struct {
		w       *ranks.World
		fl, col *ranks.Buffer
		one     *ranks.Buffer
		one0    *ranks.Buffer // rank 0's
		fifo    *ranks.Fifo
		out     *ranks.Buffer
		r0, r1  []ranks.HostOp
	}
	late := ranks.Instr{Op: ranks.OpDelay, Dur: 20000} // the writer comes after the first check
	cases := []struct {
		name  string
		build func(r *rig)
	}{
		{"against tensor advanced by a kernel (the issue's example)", func(r *rig) {
			r.r1 = []ranks.HostOp{
				{Kind: ranks.Launch, Stream: 0, Kernel: &ranks.KernelSpec{Name: "p", Instrs: []ranks.Instr{{Op: ranks.OpFlagPut, Dur: 100, Dst: r.fl, N: 1, Slot: 1, Peer: -1}}}},
				{Kind: ranks.Launch, Stream: 0, Kernel: &ranks.KernelSpec{Name: "col.increment", Instrs: []ranks.Instr{late,
					{Op: ranks.OpCompute, Dur: 100, Dst: r.col, N: 1, Srcs: []ranks.Src{{Buf: r.col, Coef: 1}, {Buf: r.one, Coef: 1}}, Fresh: true}}}},
				{Kind: ranks.Launch, Stream: 1, Kernel: &ranks.KernelSpec{Name: "w", Spins: true, Blocks: 1, Instrs: []ranks.Instr{
					{Op: ranks.OpFlagWait, Dur: 100, Dst: r.fl, N: 1, Cmp: ranks.FlagEq, Srcs: []ranks.Src{{Buf: r.col}}, Peer: -1},
					{Op: ranks.OpCompute, Dur: 100, Dst: r.out, N: 1, Srcs: []ranks.Src{{Buf: r.one, Coef: 1}}, Fresh: true}}}},
			}
		}},
		{"flag written by a kernel's plain store", func(r *rig) {
			r.r1 = []ranks.HostOp{
				{Kind: ranks.Launch, Stream: 0, Kernel: &ranks.KernelSpec{Name: "store", Instrs: []ranks.Instr{late,
					{Op: ranks.OpCompute, Dur: 100, Dst: r.fl, N: 1, Srcs: []ranks.Src{{Buf: r.one, Coef: 1}}, Fresh: true}}}},
				{Kind: ranks.Launch, Stream: 1, Kernel: &ranks.KernelSpec{Name: "w", Spins: true, Blocks: 1, Instrs: []ranks.Instr{
					{Op: ranks.OpFlagWait, Dur: 100, Dst: r.fl, N: 1, Cmp: ranks.FlagEq, Slot: 1, Peer: -1},
					{Op: ranks.OpCompute, Dur: 100, Dst: r.out, N: 1, Srcs: []ranks.Src{{Buf: r.one, Coef: 1}}, Fresh: true}}}},
			}
		}},
		{"flag written by an NCCL receive", func(r *rig) {
			r.r0 = []ranks.HostOp{{Kind: ranks.Launch, Stream: 0, Kernel: &ranks.KernelSpec{Name: "send", Instrs: []ranks.Instr{late,
				{Op: ranks.OpSend, Dur: 100, Fifo: r.fifo, N: 1, Srcs: []ranks.Src{{Buf: r.one0, Coef: 1}}, Peer: 1}}}}}
			r.r1 = []ranks.HostOp{
				{Kind: ranks.Launch, Stream: 0, Kernel: &ranks.KernelSpec{Name: "recv", Instrs: []ranks.Instr{
					{Op: ranks.OpRecv, Dur: 100, Fifo: r.fifo, N: 1, Dst: r.fl, Peer: 0}}}},
				{Kind: ranks.Launch, Stream: 1, Kernel: &ranks.KernelSpec{Name: "w", Spins: true, Blocks: 1, Instrs: []ranks.Instr{
					{Op: ranks.OpFlagWait, Dur: 100, Dst: r.fl, N: 1, Cmp: ranks.FlagEq, Slot: 1, Peer: -1},
					{Op: ranks.OpCompute, Dur: 100, Dst: r.out, N: 1, Srcs: []ranks.Src{{Buf: r.one, Coef: 1}}, Fresh: true}}}},
			}
		}},
		{"against tensor written by an NCCL receive", func(r *rig) {
			r.r0 = []ranks.HostOp{{Kind: ranks.Launch, Stream: 0, Kernel: &ranks.KernelSpec{Name: "send", Instrs: []ranks.Instr{late,
				{Op: ranks.OpSend, Dur: 100, Fifo: r.fifo, N: 1, Srcs: []ranks.Src{{Buf: r.one0, Coef: 1}}, Peer: 1}}}}}
			r.r1 = []ranks.HostOp{
				{Kind: ranks.Launch, Stream: 0, Kernel: &ranks.KernelSpec{Name: "p", Instrs: []ranks.Instr{{Op: ranks.OpFlagPut, Dur: 100, Dst: r.fl, N: 1, Slot: 1, Peer: -1}}}},
				{Kind: ranks.Launch, Stream: 0, Kernel: &ranks.KernelSpec{Name: "recv", Instrs: []ranks.Instr{
					{Op: ranks.OpRecv, Dur: 100, Fifo: r.fifo, N: 1, Dst: r.col, Peer: 0}}}},
				{Kind: ranks.Launch, Stream: 1, Kernel: &ranks.KernelSpec{Name: "w", Spins: true, Blocks: 1, Instrs: []ranks.Instr{
					{Op: ranks.OpFlagWait, Dur: 100, Dst: r.fl, N: 1, Cmp: ranks.FlagEq, Srcs: []ranks.Src{{Buf: r.col}}, Peer: -1},
					{Op: ranks.OpCompute, Dur: 100, Dst: r.out, N: 1, Srcs: []ranks.Src{{Buf: r.one, Coef: 1}}, Fresh: true}}}},
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := ranks.NewWorld(2, ranks.Config{LaunchCost: 1000}, sim.NewEngine(sim.Timed, nil))
			r := &rig{w: w, fl: w.Alloc(1, "fl", 64, 1), col: w.Alloc(1, "col", 64, 1), one: w.Alloc(1, "one", 64, 1),
				out: w.Alloc(1, "out", 64, 1), fifo: w.NewFifo("0→1", 0, 1, 1)}
			r.one0 = w.Alloc(0, "one", 64, 1)
			w.Init(r.one, func(int) uint64 { return 1 })
			w.Init(r.one0, func(int) uint64 { return 1 })
			c.build(r)
			w.SetProgram(0, &ranks.Program{Streams: []string{"main"}, Ops: r.r0})
			w.SetProgram(1, &ranks.Program{Streams: []string{"main", "aux"}, Ops: r.r1})
			res, err := w.Run()
			require.NoError(t, err)
			require.False(t, res.Hung, "the write that makes the wait hold must wake it: %v", res.Findings)
			require.Equal(t, uint64(1), r.out.Vals[0].N, "the wait held and the kernel after it ran")
		})
	}
}
