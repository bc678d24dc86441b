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

// coarseProg is a generated program around NCCL collectives of one kind
// (by default the ring all-reduce's generator): what ranks/coarse.go must
// run coarse where nothing can interleave, and micro-op by micro-op
// everywhere else.
type coarseProg struct {
	kind             coarseKind
	bytes            int64 // each tensor's size (the list kinds send it in pieces of 512 KiB)
	root             int   // a broadcast's root
	n, chunks, calls int
	inPlace          bool
	graph            bool
	replays          int
	startDur, step   sim.Time   // the profile's KStart and StepLat
	pre              []sim.Time // per rank: a kernel on main before the calls (0: none)
	side             []int      // per rank: what its second stream does (sideNone…)
	sideCall         []int      // per rank: which call's tensors the side kernel touches
	sideAfter        []bool     // per rank: the side kernel waits for the calls (an event)
	swap             bool       // rank 0 issues its first two calls in the other order
	timeline         bool       // record spans, phases and flows
	template         bool       // run a copy of the built world (ranks.Template), as exploration does
	block            int        // 1 + a rank whose main stream blocks forever before the calls (0: none)
}

// What a rank's second stream does.
const (
	sideNone     = 0
	sideOwn      = 1 // a kernel on a buffer of its own
	sideReadIn   = 2 // reads a call's input
	sideWriteIn  = 3 // writes a call's input
	sideReadOut  = 4 // reads a call's output
	sideWriteOut = 5 // writes a call's output
	sideKinds    = 6
)

// coarseKind is which collective a coarseProg calls.
type coarseKind string

const (
	kindRing          coarseKind = ""               // Comm.AllReduce with NCCL: the ring's generator (ranks.CoarseRing)
	kindAllGather     coarseKind = "allgather"      // the ring family's lists (family.go)
	kindReduceScatter coarseKind = "reducescatter"  //
	kindAllReduceList coarseKind = "allreduce-list" //
	kindBroadcast     coarseKind = "broadcast"      //
	kindAllToAll      coarseKind = "alltoall"       //
	kindTree          coarseKind = "tree"           // NCCL's tree all-reduce
)

// listKinds are the kinds made of micro-op lists.
var listKinds = []coarseKind{kindAllGather, kindReduceScatter, kindAllReduceList, kindBroadcast, kindAllToAll, kindTree}

// shapes returns a call's input and output chunk counts.
func (p coarseProg) shapes() (in, out int) {
	switch p.kind {
	case kindAllGather:
		return p.chunks, p.n * p.chunks
	case kindReduceScatter:
		return p.n * p.chunks, p.chunks
	case kindAllToAll:
		return p.n * p.chunks, p.n * p.chunks
	}
	return p.chunks, p.chunks
}

func drawCoarseProg(t *rapid.T) coarseProg { return drawCoarseProgOf(t, kindRing) }

func drawCoarseProgOf(t *rapid.T, kind coarseKind) coarseProg {
	p := coarseProg{
		kind:     kind,
		bytes:    1 << 12,
		n:        rapid.IntRange(2, 11).Draw(t, "ranks"),
		calls:    rapid.IntRange(1, 3).Draw(t, "calls"),
		inPlace:  rapid.Bool().Draw(t, "inPlace"),
		graph:    rapid.Bool().Draw(t, "graph"),
		replays:  rapid.IntRange(1, 2).Draw(t, "replays"),
		startDur: sim.Time(rapid.IntRange(0, 3000).Draw(t, "startDur")),
		step:     sim.Time(rapid.IntRange(0, 3000).Draw(t, "stepLat")),
	}
	p.chunks = rapid.IntRange(1, 2*p.n).Draw(t, "chunks")
	if kind != kindRing {
		// Up to 12 pieces a step: more than a connection's 8 slots
		// deadlock the ring family's steps (all send before any receives).
		p.bytes = rapid.SampledFrom([]int64{1 << 12, 1 << 20, 3 << 20, 6 << 20}).Draw(t, "bytes")
		p.chunks = rapid.IntRange(1, 4).Draw(t, "chunks")
		p.root = rapid.IntRange(0, p.n-1).Draw(t, "root")
		if p.kind == kindAllGather || p.kind == kindReduceScatter {
			p.inPlace = false
		}
	}
	skew := rapid.Bool().Draw(t, "skew")
	shared := rapid.IntRange(0, 3).Draw(t, "sharedRanks") // how many ranks get a second stream
	for r := range p.n {
		d := sim.Time(0)
		if skew {
			d = sim.Time(rapid.IntRange(0, 40000).Draw(t, fmt.Sprintf("pre%d", r)))
		}
		p.pre = append(p.pre, d)
		s := sideNone
		if r < shared {
			s = rapid.IntRange(sideOwn, sideKinds-1).Draw(t, fmt.Sprintf("side%d", r))
		}
		p.side = append(p.side, s)
		p.sideCall = append(p.sideCall, rapid.IntRange(0, p.calls-1).Draw(t, fmt.Sprintf("sideCall%d", r)))
		p.sideAfter = append(p.sideAfter, rapid.Bool().Draw(t, fmt.Sprintf("sideAfter%d", r)))
	}
	p.swap = p.calls > 1 && rapid.IntRange(0, 4).Draw(t, "swap") == 0
	p.timeline = rapid.Bool().Draw(t, "timeline")
	p.template = rapid.Bool().Draw(t, "template")
	if rapid.IntRange(0, 5).Draw(t, "hang") == 0 {
		p.block = 1 + rapid.IntRange(0, p.n-1).Draw(t, "blockRank")
	}
	return p
}

// build makes p's world; fine forces every micro-op to be its own event.
func (p coarseProg) build(t require.TestingT, fine bool) *ranks.World {
	hw := ranks.Profiles["h200"]
	hw.KStart, hw.StepLat = p.startDur, p.step
	cfg := ranks.Config{Mode: ranks.Eager, LaunchCost: hw.Launch, EventCost: hw.EventOp, FineSteps: fine, Timeline: p.timeline}
	if p.graph {
		cfg.Mode, cfg.Replays = ranks.Graph, p.replays
	}
	w := ranks.NewWorld(p.n, cfg, sim.NewEngine(sim.Timed, sim.Nominal{}))
	group := make([]int, p.n)
	for i := range group {
		group[i] = i
	}
	comm := collectives.NewComm(w, "world", group, collectives.SharedWorkspace, hw, p.chunks)
	for r := range p.n {
		prog := &ranks.Program{Streams: []string{"main", "side"}, Events: []string{"done", "fork", "join"}}
		if p.graph { // the side stream joins the capture, and rejoins main at the end
			prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Record, Stream: 0, Event: 1},
				ranks.HostOp{Kind: ranks.Wait, Stream: 1, Event: 1})
		}
		if p.block == r+1 {
			pad := ranks.NewSignalPad("never", r, 1)
			prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Launch, Kernel: &ranks.KernelSpec{Name: "stuck",
				Instrs: []ranks.Instr{{Op: ranks.OpWait, Pad: pad, Slot: 0, Peer: -1}}}})
		}
		if p.pre[r] > 0 {
			own := w.Alloc(r, "pre", 1<<10, 1)
			prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Launch, Kernel: &ranks.KernelSpec{Name: "pre",
				Instrs: []ranks.Instr{{Op: ranks.OpCompute, Dst: own, N: 1, Fresh: true, Dur: p.pre[r]}}}})
		}
		var ins, outs []*ranks.Buffer
		var launches []ranks.HostOp
		ci, co := p.shapes()
		for k := range p.calls {
			in := w.Alloc(r, fmt.Sprintf("in%d", k), p.bytes, ci)
			w.Init(in, func(c int) uint64 { return inputValue(r, k, c) })
			out := in
			if !p.inPlace {
				out = w.Alloc(r, fmt.Sprintf("out%d", k), p.bytes*int64(co)/int64(ci), co)
			}
			var ks *ranks.KernelSpec
			var err error
			name := fmt.Sprintf("ar%d", k)
			switch p.kind {
			case kindRing:
				ks, err = comm.AllReduce(r, name, collectives.NCCL, in, out)
			default:
				call := collectives.Call{Name: name, Op: collectives.AllReduce, Strategy: collectives.NCCL, In: in, Out: out, Root: p.root}
				switch p.kind {
				case kindAllGather:
					call.Op = collectives.AllGather
				case kindReduceScatter:
					call.Op = collectives.ReduceScatter
				case kindBroadcast:
					call.Op = collectives.Broadcast
				case kindAllToAll:
					call.Op = collectives.AllToAll
				case kindTree:
					call.Strategy = collectives.NCCLTree
				}
				ks, err = comm.Collective(r, call)
			}
			require.NoError(t, err)
			ins, outs = append(ins, in), append(outs, out)
			launches = append(launches, ranks.HostOp{Kind: ranks.Launch, Kernel: ks})
		}
		if p.swap && r == 0 {
			launches[0], launches[1] = launches[1], launches[0]
		}
		prog.Ops = append(prog.Ops, launches...)
		if s := p.side[r]; s != sideNone {
			own := w.Alloc(r, "side", 1<<12, max(ci, co))
			in := ranks.Instr{Op: ranks.OpCompute, N: ci, Dur: 700}
			if s == sideReadOut || s == sideWriteOut {
				in.N = co
			}
			k := p.sideCall[r]
			switch s {
			case sideOwn:
				in.Dst, in.Fresh = own, true
			case sideReadIn:
				in.Dst, in.Srcs = own, []ranks.Src{{Buf: ins[k], Coef: 1}}
			case sideWriteIn:
				in.Dst, in.Srcs = ins[k], []ranks.Src{{Buf: own, Coef: 2}}
			case sideReadOut:
				in.Dst, in.Srcs = own, []ranks.Src{{Buf: outs[k], Coef: 1}}
			case sideWriteOut:
				in.Dst, in.Srcs = outs[k], []ranks.Src{{Buf: own, Coef: 3}}
			}
			if p.sideAfter[r] {
				prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Record, Stream: 0, Event: 0},
					ranks.HostOp{Kind: ranks.Wait, Stream: 1, Event: 0})
			}
			prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: 1, Kernel: &ranks.KernelSpec{Name: "side", Instrs: []ranks.Instr{in}}})
		}
		if p.graph {
			prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Record, Stream: 1, Event: 2},
				ranks.HostOp{Kind: ranks.Wait, Stream: 0, Event: 2})
		}
		w.SetProgram(r, prog)
	}
	if p.template && !fine {
		tm, err := ranks.NewTemplate(w)
		require.NoError(t, err)
		return tm.Instantiate(sim.NewEngine(sim.Timed, sim.Nominal{}))
	}
	return w
}

// TestPropCoarseEqualsFine: on generated programs around NCCL ring
// all-reduces (skewed starts, in-place calls, graph replays, a second
// stream that touches a call's tensors or not, ordered by an event or not,
// calls issued in another order on one rank, a rank that never gets to
// its calls, a timeline or none), the run that may take coarse steps and
// the run with FineSteps give the same findings (races included), verdict,
// times, values with the same provenance, and timeline (spans, phases,
// marks, issues, flows); where no call was held for a coarse step, the
// same trace hash too. And no call runs coarse on a lane another stream shares
// memory with.
func TestPropCoarseEqualsFine(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) { requireCoarseEqualsFine(rt, drawCoarseProg(rt)) })
}

// TestPropCoarseListEqualsFine is TestPropCoarseEqualsFine for every other
// NCCL collective the collectives package makes, stored micro-op lists
// that ranks/coarse.go runs coarse in a loop over their micro-ops: ring
// all-gather, reduce-scatter, the list form of all-reduce, all-to-all,
// the tree all-reduce, and the broadcast (never coarse: its root may finish
// before the others start). Sizes reach a step of 12 pieces, more than a
// connection's 8 slots: the steps deadlock, in both runs alike.
func TestPropCoarseListEqualsFine(t *testing.T) {
	for _, kind := range listKinds {
		t.Run(string(kind), func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) { requireCoarseEqualsFine(rt, drawCoarseProgOf(rt, kind)) })
		})
	}
}

// requireCoarseEqualsFine runs p with and without coarse steps and requires
// what TestPropCoarseEqualsFine says.
func requireCoarseEqualsFine(rt require.TestingT, p coarseProg) (ran int) {
	var resumed int
	wc, wf := p.build(rt, false), p.build(rt, true)
	rc, err := wc.Run()
	require.NoError(rt, err)
	rf, err := wf.Run()
	require.NoError(rt, err)
	require.Equal(rt, rf.Findings, rc.Findings)
	require.Equal(rt, rf.Counts, rc.Counts)
	require.Equal(rt, rf.Hung, rc.Hung)
	require.Equal(rt, [3]sim.Time{rf.Start, rf.End, rf.StepTime}, [3]sim.Time{rc.Start, rc.End, rc.StepTime})
	// Spans of kernels that end at one instant, and FIFO flows received
	// at one instant, may be listed in another order.
	require.ElementsMatch(rt, wf.Spans(), wc.Spans())
	require.ElementsMatch(rt, wf.Flows(), wc.Flows())
	require.Equal(rt, wf.Marks(), wc.Marks())
	require.Equal(rt, wf.Issues(), wc.Issues())
	ran, resumed = wc.CoarseCalls()
	fran, fresumed := wf.CoarseCalls()
	require.Zero(rt, fran+fresumed)
	for i, bf := range wf.Buffers() {
		bc := wc.Buffers()[i]
		for c := range bf.Vals {
			require.Equal(rt, bf.Vals[c].N, bc.Vals[c].N, "%s rank %d chunk %d", bf.Name, bf.Rank, c)
			require.Equal(rt, wf.Srcs.Terms(bf.Vals[c]), wc.Srcs.Terms(bc.Vals[c]), "%s rank %d chunk %d", bf.Name, bf.Rank, c)
		}
	}
	touches := false
	for r := range p.n {
		// A broadcast reads only its root's input.
		input := p.side[r] == sideReadIn || p.side[r] == sideWriteIn
		touches = touches || p.side[r] > sideOwn && !(p.kind == kindBroadcast && input && r != p.root && !p.inPlace)
	}
	if touches {
		require.Zero(rt, ran+resumed, "a second stream touches a call's tensors: no call may run coarse")
	}
	if ran+resumed == 0 {
		require.Equal(rt, rf.TraceHash, rc.TraceHash)
		require.Equal(rt, rf.Steps, rc.Steps)
	}
	return ran
}

// TestCoarseWhereNothingInterleaves: which rings run coarse. Alone, or
// beside a stream that touches only its own memory, every call does; when
// a second stream reads or writes a call's tensors, even ordered after it
// by an event, none does (the race check must run on that lane), and the
// race a write makes is found.
func TestCoarseWhereNothingInterleaves(t *testing.T) {
	for _, tc := range []struct {
		name   string
		side   int
		after  bool
		coarse int
		race   bool
	}{
		{"alone", sideNone, false, 2, false},
		{"side-own-memory", sideOwn, false, 2, false},
		{"side-reads-input", sideReadIn, false, 0, false},
		{"side-writes-input", sideWriteIn, false, 0, true},
		{"side-writes-input-after", sideWriteIn, true, 0, false},
		{"side-writes-output", sideWriteOut, false, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := coarseProg{n: 6, chunks: 6, calls: 2, startDur: 1500, step: 1200, replays: 1,
				pre: make([]sim.Time, 6), side: make([]int, 6), sideCall: make([]int, 6), sideAfter: make([]bool, 6)}
			p.side[2], p.sideAfter[2] = tc.side, tc.after
			w := p.build(t, false)
			res, err := w.Run()
			require.NoError(t, err)
			require.Equal(t, tc.race, res.Counts["race"] > 0, "%v", res.Findings)
			ran, _ := w.CoarseCalls()
			require.Equal(t, tc.coarse, ran)
		})
	}
}

// TestCoarseListKinds: which list collectives run coarse alone on a
// 6-rank communicator, two calls each: every one but the broadcast, whose
// positions before the last finish without the ones after them.
func TestCoarseListKinds(t *testing.T) {
	for _, tc := range []struct {
		kind   coarseKind
		coarse int
	}{
		{kindAllGather, 2}, {kindReduceScatter, 2}, {kindAllReduceList, 2}, {kindAllToAll, 2}, {kindTree, 2}, {kindBroadcast, 0},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			p := coarseProg{kind: tc.kind, bytes: 1 << 20, n: 6, chunks: 2, calls: 2, startDur: 1500, step: 1200, replays: 1,
				pre: make([]sim.Time, 6), side: make([]int, 6), sideCall: make([]int, 6), sideAfter: make([]bool, 6)}
			w := p.build(t, false)
			res, err := w.Run()
			require.NoError(t, err)
			require.Empty(t, res.Findings)
			ran, _ := w.CoarseCalls()
			require.Equal(t, tc.coarse, ran)
		})
	}
}

// TestCoarseListFollowsEarlierMessages: a call's first sends wait for room
// that the previous call's messages still hold. Two 2-rank broadcasts of
// 12 pieces (more than a connection's 8 slots, so the root waits for the
// receiver and every position's end follows every start: coarse) back to
// back: the root starts the second while the receiver is still taking the
// first's last pieces, and its sends wait for them as in the fine run
// (World.coarsePops).
func TestCoarseListFollowsEarlierMessages(t *testing.T) {
	p := coarseProg{kind: kindBroadcast, bytes: 6 << 20, n: 2, chunks: 1, calls: 2, replays: 1, timeline: true,
		pre: make([]sim.Time, 2), side: make([]int, 2), sideCall: make([]int, 2), sideAfter: make([]bool, 2)}
	require.Equal(t, 2, requireCoarseEqualsFine(t, p))
}
