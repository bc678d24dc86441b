package ranks

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/collsim/collsim/sim"
)

// carryProg is a generated multi-rank program: kernels of a few micro-ops
// on each rank's streams (local and peer computes, messages, signals,
// forwarded messages), event edges, host syncs; eager or a captured graph
// replayed once or twice.
type carryProg struct {
	ranks, streams, bufs int
	graph                bool
	replays              int
	kernels              []carryKernel
	seed                 uint64
}

type carryKernel struct {
	rank, stream int
	ins          []carryIns
	record       bool // the rank's next kernel waits for this one (an event)
	syncBefore   int  // eager: 1 + the stream the host syncs before it (-1+1: the device), 0: none
}

// carryIns is one micro-op: op 'c' compute (dst = buf of rank peer ← src
// of own rank), 's' send to peer, 'r' receive from peer, 'f' receive
// from peer and forward to peer2, 'p' put into peer's pad, 'w' wait on own
// pad for peer, 'F' store flag value 1+slot into peer's flag buffer, 'W'
// wait for value 1+slot in the own flag buffer.
type carryIns struct {
	op         byte
	peer, p2   int
	src, dst   int
	slot       int
	peerAccess bool // compute: dst is the peer's buffer (peer memory)
}

func drawCarryProg(t *rapid.T) carryProg {
	p := carryProg{
		ranks:   rapid.IntRange(2, 4).Draw(t, "ranks"),
		streams: rapid.IntRange(1, 3).Draw(t, "streams"),
		bufs:    rapid.IntRange(1, 2).Draw(t, "bufs"),
		graph:   rapid.Bool().Draw(t, "graph"),
		seed:    rapid.Uint64().Draw(t, "seed"),
	}
	p.replays = 1
	if p.graph {
		p.replays = rapid.IntRange(1, 2).Draw(t, "replays")
	}
	other := func(r int, name string) int {
		return (r + 1 + rapid.IntRange(0, p.ranks-2).Draw(t, name)) % p.ranks
	}
	stream := func() int { return rapid.IntRange(0, p.streams-1).Draw(t, "stream") }
	compute := func(r int) carryIns {
		return carryIns{op: 'c', src: rapid.IntRange(0, p.bufs-1).Draw(t, "src"), dst: rapid.IntRange(0, p.bufs-1).Draw(t, "dst"),
			peer: other(r, "peer"), peerAccess: rapid.IntRange(0, 3).Draw(t, "peerAccess") == 0}
	}
	kernel := func(r, s int, ins ...carryIns) {
		k := carryKernel{rank: r, stream: s, ins: ins}
		k.record = rapid.IntRange(0, 2).Draw(t, "record") == 0
		if !p.graph && rapid.IntRange(0, 5).Draw(t, "sync") == 0 {
			k.syncBefore = rapid.IntRange(0, p.streams).Draw(t, "syncStream") // 0: the device (-1)
			if k.syncBefore == 0 {
				k.syncBefore = -1
			}
		}
		p.kernels = append(p.kernels, k)
	}
	for range rapid.IntRange(1, 6).Draw(t, "items") {
		r := rapid.IntRange(0, p.ranks-1).Draw(t, "rank")
		switch rapid.IntRange(0, 3).Draw(t, "item") {
		case 0: // a kernel of any micro-ops, matched or not
			var ins []carryIns
			for range rapid.IntRange(1, 3).Draw(t, "ins") {
				in := compute(r)
				in.op = rapid.SampledFrom([]byte("ccsrfpwFW")).Draw(t, "op")
				in.p2 = other(r, "peer2")
				in.slot = rapid.IntRange(0, 1).Draw(t, "slot")
				in.peerAccess = in.peerAccess && in.op == 'c'
				ins = append(ins, in)
			}
			kernel(r, stream(), ins...)
		case 1: // a message: compute, send; receive, compute
			q := other(r, "to")
			kernel(r, stream(), compute(r), carryIns{op: 's', peer: q})
			kernel(q, stream(), carryIns{op: 'r', peer: r, dst: rapid.IntRange(0, p.bufs-1).Draw(t, "dst")}, compute(q))
		case 2: // a signal: compute, put; wait, compute
			q := other(r, "to")
			slot := rapid.IntRange(0, 1).Draw(t, "slot")
			kernel(r, stream(), compute(r), carryIns{op: 'p', peer: q, slot: slot})
			kernel(q, stream(), carryIns{op: 'w', peer: r, slot: slot}, compute(q))
		case 3: // a round trip through another rank: messages (forwarded or not), signals or flags
			q := other(r, "to")
			switch rapid.IntRange(0, 3).Draw(t, "by") {
			case 0:
				kernel(r, stream(), compute(r), carryIns{op: 's', peer: q})
				kernel(q, stream(), carryIns{op: 'f', peer: r, p2: r})
				kernel(r, stream(), carryIns{op: 'r', peer: q, dst: rapid.IntRange(0, p.bufs-1).Draw(t, "dst")}, compute(r))
			case 1:
				kernel(r, stream(), compute(r), carryIns{op: 's', peer: q})
				kernel(q, stream(), carryIns{op: 'r', peer: r}, carryIns{op: 's', peer: r})
				kernel(r, stream(), carryIns{op: 'r', peer: q, dst: rapid.IntRange(0, p.bufs-1).Draw(t, "dst")}, compute(r))
			case 2:
				slot := rapid.IntRange(0, 1).Draw(t, "slot")
				kernel(r, stream(), compute(r), carryIns{op: 'p', peer: q, slot: slot})
				kernel(q, stream(), carryIns{op: 'w', peer: r, slot: slot}, carryIns{op: 'p', peer: r, slot: slot})
				kernel(r, stream(), carryIns{op: 'w', peer: q, slot: slot}, compute(r))
			case 3: // through one more rank when there is one: a flag buffer is its writers' and waiters' partner
				v := rapid.IntRange(0, 1).Draw(t, "value")
				q2 := other(q, "then")
				kernel(r, stream(), compute(r), carryIns{op: 'F', peer: q, slot: v})
				kernel(q, stream(), carryIns{op: 'W', slot: v}, carryIns{op: 'F', peer: q2, slot: v})
				if q2 != r {
					kernel(q2, stream(), carryIns{op: 'W', slot: v}, carryIns{op: 'F', peer: r, slot: v})
				}
				kernel(r, stream(), carryIns{op: 'W', slot: v}, compute(r))
			}
		}
	}
	return p
}

// carryRun says how a run's clocks work.
type carryRun struct {
	sparse, noCarry bool
	hist            *clockHistory
	poison          bool // snapshots let go are never reused (snaprecycle.go)
}

func (p carryProg) run(t require.TestingT, how carryRun) (*World, *Result) {
	w := p.world(1)
	w.sparse, w.noCarry, w.clockHist, w.snapPool.Poison = how.sparse, how.noCarry, how.hist, how.poison
	if how.hist != nil {
		// A replay's join acquires each snapshot as it is (no
		// accumulator, retire.go), so that the history names them all.
		w.KeepHistory()
	}
	for r, pr := range p.programs(w, 0) {
		w.SetProgram(r, pr)
	}
	res, err := w.Run()
	require.NoError(t, err)
	return w, res
}

// world is an empty world for p's programs, copies in groups of p.ranks
// ranks each.
func (p carryProg) world(groups int) *World {
	mode := Eager
	if p.graph {
		mode = Graph
	}
	return NewWorld(groups*p.ranks, Config{Mode: mode, Replays: p.replays, LaunchCost: 1000, EventCost: 200}, sim.NewEngine(sim.Timed, sim.NewRandom(p.seed, 300)))
}

// programs allocates the memory of group g (ranks g·p.ranks onwards) in w
// and returns its programs, in rank order.
func (p carryProg) programs(w *World, g int) []*Program {
	base := g * p.ranks
	bufs := make([][]*Buffer, p.ranks)
	group := make([]int, p.ranks)
	for r := range group {
		group[r] = base + r
	}
	pads := w.AllocSymmetric("sym", group, 64, 1, 2*p.ranks).Pads
	flag := make([]*Buffer, p.ranks)
	for r := range p.ranks {
		flag[r] = w.Alloc(base+r, "flag", 64, 1)
		w.Init(flag[r], func(int) uint64 { return 0 })
		for b := range p.bufs {
			x := w.Alloc(base+r, fmt.Sprintf("b%d", b), 64, 1)
			w.Init(x, func(int) uint64 { return uint64(1 + 10*(base+r) + b) })
			bufs[r] = append(bufs[r], x)
		}
	}
	fifos := map[[2]int]*Fifo{}
	fifo := func(a, b int) *Fifo {
		if fifos[[2]int{a, b}] == nil {
			fifos[[2]int{a, b}] = w.NewFifo(fmt.Sprintf("%d→%d", base+a, base+b), base+a, base+b, 4)
		}
		return fifos[[2]int{a, b}]
	}
	progs := make([]*Program, p.ranks)
	for r := range progs {
		progs[r] = &Program{}
		for s := range p.streams {
			progs[r].Streams = append(progs[r].Streams, fmt.Sprintf("s%d", s))
		}
	}
	pending := make([][]int, p.ranks)
	for i, k := range p.kernels {
		pr := progs[k.rank]
		r := k.rank
		var ins []Instr
		for _, c := range k.ins {
			in := Instr{Dur: 700, N: 1}
			switch c.op {
			case 'c':
				dst := bufs[r][c.dst]
				if c.peerAccess {
					dst = bufs[c.peer][c.dst]
				}
				in.Op, in.Dst, in.Srcs = OpCompute, dst, []Src{{Buf: bufs[r][c.src], Coef: 2}}
			case 's':
				in.Op, in.Fifo, in.Peer, in.Srcs = OpSend, fifo(r, c.peer), base+c.peer, []Src{{Buf: bufs[r][c.src], Coef: 1}}
			case 'r':
				in.Op, in.Fifo, in.Peer, in.Dst = OpRecv, fifo(c.peer, r), base+c.peer, bufs[r][c.dst]
			case 'f':
				in.Op, in.Fifo, in.Fwd, in.Peer, in.Srcs = OpRecvSend, fifo(c.peer, r), fifo(r, c.p2), base+c.peer, []Src{{Buf: bufs[r][c.src], Coef: 1}}
			case 'p':
				in.Op, in.Pad, in.Slot, in.Peer = OpPut, pads[c.peer], r*2+c.slot, base+c.peer
			case 'w':
				in.Op, in.Pad, in.Slot, in.Peer = OpWait, pads[r], c.peer*2+c.slot, base+c.peer
			case 'F':
				in.Op, in.Dst, in.Slot = OpFlagPut, flag[c.peer], 1+c.slot
			case 'W':
				in.Op, in.Dst, in.Slot, in.Cmp = OpFlagWait, flag[r], 1+c.slot, FlagEq
			}
			ins = append(ins, in)
		}
		if k.syncBefore != 0 {
			s := k.syncBefore
			if s > 0 {
				s--
			}
			pr.Ops = append(pr.Ops, HostOp{Kind: Sync, Stream: s})
		}
		for _, ev := range pending[r] {
			pr.Ops = append(pr.Ops, HostOp{Kind: Wait, Stream: k.stream, Event: ev})
		}
		pending[r] = nil
		pr.Ops = append(pr.Ops, HostOp{Kind: Launch, Stream: k.stream, Kernel: &KernelSpec{Name: fmt.Sprintf("k%d", i), Instrs: ins}})
		if k.record {
			pr.Events = append(pr.Events, fmt.Sprintf("e%d", i))
			pr.Ops = append(pr.Ops, HostOp{Kind: Record, Stream: k.stream, Event: len(pr.Events) - 1})
			pending[r] = append(pending[r], len(pr.Events)-1)
		}
	}
	if p.graph {
		// A capture forks every stream from the first and joins them back.
		for r, pr := range progs {
			var head, tail []HostOp
			pr.Events = append(pr.Events, "fork")
			fork := len(pr.Events) - 1
			head = append(head, HostOp{Kind: Record, Stream: 0, Event: fork})
			for s := 1; s < p.streams; s++ {
				head = append(head, HostOp{Kind: Wait, Stream: s, Event: fork})
				pr.Events = append(pr.Events, fmt.Sprintf("join%d", s))
				tail = append(tail, HostOp{Kind: Record, Stream: s, Event: len(pr.Events) - 1}, HostOp{Kind: Wait, Stream: 0, Event: len(pr.Events) - 1})
			}
			progs[r].Ops = append(append(head, pr.Ops...), tail...)
		}
	}
	return progs
}

// replayOnReference replays a clock history on plain vector clocks of nl
// lanes that carry every entry everywhere, and checks that every
// happens-before query got the answer they give. It returns how many
// queries asked about another lane than the querying one.
func replayOnReference(t require.TestingT, h *clockHistory, nl int) int {
	ref := make([][]uint32, nl)
	for l := range ref {
		ref[l] = make([]uint32, nl)
		ref[l][l] = 1
	}
	released := map[*VC][]uint32{}
	cross := 0
	for i, ev := range h.Events {
		switch ev.Kind {
		case 'r':
			if o, ok := released[ev.Clock]; ok {
				// The lane hands out its last release again (it did
				// nothing since): the reference clock has not moved but
				// for the tick that followed that release.
				require.False(t, ev.Tick, "event %d: a release handed out again starts a new epoch", i)
				for l, c := range o {
					if int32(l) != ev.Lane {
						require.Equal(t, c, ref[ev.Lane][l], "event %d: lane %d hands out an old release after learning of lane %d", i, ev.Lane, l)
					}
				}
				require.LessOrEqual(t, ref[ev.Lane][ev.Lane]-o[ev.Lane], uint32(1), "event %d", i)
				continue
			}
			released[ev.Clock] = slices.Clone(ref[ev.Lane])
			if ev.Tick {
				ref[ev.Lane][ev.Lane]++
			}
		case 'a':
			o, ok := released[ev.Clock]
			require.True(t, ok, "event %d: lane %d acquires a clock nobody released", i, ev.Lane)
			for l, c := range o {
				ref[ev.Lane][l] = max(ref[ev.Lane][l], c)
			}
		case 'q':
			require.LessOrEqual(t, ev.At, ref[ev.Of][ev.Of], "event %d: an epoch of lane %d from its future", i, ev.Of)
			want := ev.At <= ref[ev.Lane][ev.Of]
			require.Equal(t, want, ev.Yes, "event %d: lane %d asks whether (lane %d, clock %d) happened before it: reference %v", i, ev.Lane, ev.Of, ev.At, want)
			if ev.Of != ev.Lane {
				cross++
			}
		}
	}
	return cross
}

// TestPropCarryAnswersLikeFullClocks: on generated programs, every
// happens-before query of a run whose clocks keep only the entries
// carryLanes says they need gets the answer plain vector clocks carrying
// every entry everywhere give, replayed from the run's own history of
// releases and acquires. The run's findings, counts and trace hash are
// those of the same run retiring finished tasks' snapshots (retire.go), of
// sparse clocks without the carry filter and of dense clocks.
func TestPropCarryAnswersLikeFullClocks(t *testing.T) {
	var cross, narrowed, racy, clean int
	rapid.Check(t, func(t *rapid.T) {
		p := drawCarryProg(t)
		h := &clockHistory{}
		w, on := p.run(t, carryRun{sparse: true, hist: h})
		require.NotNil(t, w.carry, "sparse clocks use the carry filter")
		cross += replayOnReference(t, h, len(w.vc))
		_, retiring := p.run(t, carryRun{sparse: true})
		_, poisoned := p.run(t, carryRun{sparse: true, poison: true})
		wo, off := p.run(t, carryRun{sparse: true, noCarry: true})
		_, dense := p.run(t, carryRun{})
		for _, r := range []*Result{retiring, poisoned, off, dense} {
			require.Equal(t, r.Findings, on.Findings)
			require.Equal(t, r.Counts, on.Counts)
			require.Equal(t, r.TraceHash, on.TraceHash)
		}
		for l := range w.vc {
			if len(w.vc[l].Entries()) < len(wo.vc[l].Entries()) {
				narrowed++
				break
			}
		}
		if on.Counts[KindRace] > 0 {
			racy++
		} else {
			clean++
		}
	})
	t.Logf("%d queries about another lane; %d programs with narrower clocks; %d racy, %d clean", cross, narrowed, racy, clean)
	// The generator must reach what the filter is about.
	require.Positive(t, cross, "no query asked about another lane")
	require.Positive(t, narrowed, "the filter never kept a clock shorter")
	require.Positive(t, racy, "no generated program raced")
	require.Positive(t, clean, "every generated program raced")
}

// between is checked against two plain searches: lanes reachable from l in
// the graph without m, intersected with lanes reaching m without l.
func TestPropBetweenMatchesNaiveSearch(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nl := rapid.IntRange(2, 9).Draw(t, "lanes")
		var edges []uint64
		for range rapid.IntRange(0, 3*nl).Draw(t, "edges") {
			a, b := rapid.IntRange(0, nl-1).Draw(t, "a"), rapid.IntRange(0, nl-1).Draw(t, "b")
			if a != b {
				edges = append(edges, uint64(a)<<32|uint64(b))
			}
		}
		g := newLaneGraph(int32(nl), edges)
		l := int32(rapid.IntRange(0, nl-1).Draw(t, "l"))
		m := int32(rapid.IntRange(0, nl-1).Draw(t, "m"))
		if l == m {
			return
		}
		reach := func(from, without int32, adj [][]int32) []bool {
			seen := make([]bool, nl)
			seen[from] = true
			for changed := true; changed; {
				changed = false
				for x := range seen {
					if !seen[x] {
						continue
					}
					for _, y := range adj[x] {
						if y != without && !seen[y] {
							seen[y], changed = true, true
						}
					}
				}
			}
			return seen
		}
		fwd, back := reach(l, m, g.out), reach(m, l, g.in)
		want := []int32{}
		for x := range int32(nl) {
			if x != l && x != m && fwd[x] && back[x] {
				want = append(want, x)
			}
		}
		budget := 1 << 20
		got := append([]int32{}, g.between(l, m, newReachScratch(int32(nl)), &budget)...)
		slices.Sort(got)
		require.Equal(t, want, got)
	})
}

// In a TP group of ranks with two streams sharing a buffer and a ring of
// FIFOs between the communication streams, every clock keeps its own
// rank's two entries: rank r's entries are read on rank r only, and no way
// between its two streams leaves the rank.
func TestCarryTPGroupKeepsOwnRank(t *testing.T) {
	const n = 8
	w := NewWorld(n, Config{LaunchCost: 1000, EventCost: 200}, sim.NewEngine(sim.Timed, nil))
	for r := range n {
		x := w.Alloc(r, "x", 64, 1)
		y := w.Alloc(r, "y", 64, 1)
		w.Init(x, func(int) uint64 { return uint64(r + 1) })
		send := w.NewFifo(fmt.Sprintf("%d→%d", r, (r+1)%n), r, (r+1)%n, 2)
		ops := []HostOp{
			{Kind: Launch, Stream: 0, Kernel: &KernelSpec{Name: "compute", Instrs: []Instr{{Op: OpCompute, Dst: x, N: 1, Srcs: []Src{{Buf: x, Coef: 2}}, Dur: 100}}}},
			{Kind: Record, Stream: 0, Event: 0},
			{Kind: Wait, Stream: 1, Event: 0},
			{Kind: Launch, Stream: 1, Kernel: &KernelSpec{Name: "ring", Instrs: []Instr{
				{Op: OpSend, Fifo: send, Peer: (r + 1) % n, N: 1, Srcs: []Src{{Buf: x, Coef: 1}}, Dur: 100},
			}}},
			{Kind: Record, Stream: 1, Event: 1},
			{Kind: Wait, Stream: 0, Event: 1},
			{Kind: Launch, Stream: 0, Kernel: &KernelSpec{Name: "after", Instrs: []Instr{{Op: OpCompute, Dst: y, N: 1, Srcs: []Src{{Buf: x, Coef: 1}}, Dur: 100}}}},
		}
		w.SetProgram(r, &Program{Streams: []string{"main", "comm"}, Events: []string{"ready", "done"}, Ops: ops})
	}
	// The receives: rank r's comm stream receives from r-1 into y.
	for r := range n {
		p := w.progs[r]
		p.Ops[3].Kernel.Instrs = append(p.Ops[3].Kernel.Instrs, Instr{Op: OpRecv, Fifo: w.progs[(r+n-1)%n].Ops[3].Kernel.Instrs[0].Fifo, Peer: (r + n - 1) % n, N: 1, Dst: w.bufs[2*r+1], Dur: 100})
	}
	w.sparse = true
	res, err := w.Run()
	require.NoError(t, err)
	require.Zero(t, res.Counts[KindRace], "%v", res.Findings)
	for l := range int32(2 * n) {
		require.Equal(t, []int32{l ^ 1}, w.carry.Need[l], "lane %d keeps its rank's other lane only", l)
		require.LessOrEqual(t, len(w.vc[l].Entries()), 2, "lane %d: %v", l, w.vc[l].Entries())
	}
}
