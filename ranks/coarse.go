package ranks

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/collsim/collsim/mutant"
	"github.com/collsim/collsim/sim"
)

// Coarse collective steps.
//
// A ring all-reduce is 2n−1 micro-ops per rank, one event each: at 512
// ranks half a million events, each paying for its FIFO message, its
// happens-before bookkeeping and its trace. When nothing but the ring
// itself can touch the ring's memory and connections, nothing can
// interleave with those steps: their values, the times at which each
// rank's kernel finishes and the happens-before edges the ring leaves
// behind are a function of when each rank's kernel started. The world
// then runs the call as one computation (a tight loop over its values)
// once every rank's kernel has started, and completes each rank's kernel
// at the time its last micro-op would have ended.
//
// Two forms run coarse: the ring all-reduce's generator (CoarseRing), in
// closed form (ringSums, ringEnds), and any collective stored as micro-op
// lists of delays, computes and FIFO transfers (NCCL's ring all-gather,
// reduce-scatter and list all-reduce, its tree all-reduce, all-to-all), as
// a loop over those micro-ops without the engine ("Calls of micro-op
// lists" below, with the conditions that form adds).
//
// The decision is made from the program before the run (coarsePlan), and
// it is conservative: a call is coarse only when
//
//   - every lane that runs it shares no memory with any other lane
//     (sharedLanes: its buffers, FIFO ends and signal pads are touched by
//     that lane alone), so no race check could fire on its accesses and
//     none of its accesses could be seen by another stream;
//   - every rank of the call launches it exactly once, on such a lane, and
//     the FIFOs it uses are used only by coarse calls, in the same order on
//     their sending and their receiving lane (so the k-th call on one end
//     meets the k-th call on the other: no mismatch, no leftover message);
//   - its tensors have no caching-allocator aliases, its ring has more
//     than one rank and FIFOs of at least two slots, and its micro-ops
//     carry no load that would share their GPU with other kernels
//     (share.go: their ends would move with the co-runners');
//   - the schedule is the nominal one on a timed engine (no jitter drawn per
//     micro-op, no explorer choosing among micro-ops), and Config.FineSteps
//     is off;
//   - clocks are dense, or no lane of the world shares memory: with sparse
//     clocks each acquire keeps only the entries its lane carries
//     (carry.go), hop by hop, which one join per rank does not follow.
//
// Everything else runs micro-op by micro-op, exactly as before. A call
// whose ranks do not all start (a hang) is resumed micro-op by micro-op
// when nothing else is left to run, so the hang is reported exactly as the
// fine run reports it.
//
// What differs from the fine run where a call is coarse: the trace hash
// and the engine's step count (fewer events), and in a timeline the order
// of the spans that end at one instant and of the FIFO flows received at
// one instant — nothing else: the outputs, findings, verdicts, times,
// spans and phases are the same (collectives/coarse_test.go checks this on generated
// programs, with FineSteps as the oracle). A timeline does not change
// the decision, so a run and its re-run with a timeline (simctl show,
// report capture) have the same trace hash.

// CoarseRing is a generator whose kernel is one rank's part of NCCL's ring
// all-reduce in the shape [RingShape] describes: the world may run the
// whole ring as one computation (see the comment above).
type CoarseRing interface {
	InstrGen
	Ring() RingShape
}

// RingShape is one rank's ring all-reduce as its micro-ops do it (NCCL's
// runRing, src/device/all_reduce.h): micro-op 0 sends input segment Pos to
// the next rank (StartDur); micro-ops 1…n−1 receive segment Pos−pc, add
// this rank's input and forward it, the last of them also storing the
// complete segment in Out; micro-ops n…2n−3 receive a complete segment,
// store and forward it; micro-op 2n−2 receives the last one (each
// StepDur). Segment s is chunks [SegLo[s], SegLo[s+1]) of In and Out.
type RingShape struct {
	Pos, N            int
	In, Out           *Buffer
	Send, Recv        *Fifo // to position Pos+1, from position Pos−1
	SegLo             []int
	StartDur, StepDur sim.Time
}

// Task coarse states (task.coarse).
const (
	coarseNo     uint8 = iota // runs micro-op by micro-op
	coarseCand                // will park at its first micro-op
	coarseParked              // waiting for the rest of its ring
	coarseDone                // its ring ran; it completes at its end time
)

// coarseGroup is one call instance's ring while its ranks arrive.
type coarseGroup struct {
	inst    Instance
	tasks   []int32 // by ring position; -1 until arrived
	start   []sim.Time
	arrived int
	done    bool         // ran, or resumed micro-op by micro-op
	ran     bool         // ran coarse
	steps   [][]sim.Time // resumed: when the fine run ran each step (ringSteps)
	// A call of micro-op lists (below): its tasks by arrival,
	// and, resumed, when the fine run sent each receiving step's message.
	list bool
	from [][]sim.Time
}

// coarsePlan returns which launches of w's run may run coarse (per rank
// and op; nil: none): the plan's static decision (coarseStatic), when the
// schedule is one the coarse step reproduces.
func (w *World) coarsePlan() [][]bool {
	if w.cfg.FineSteps || !w.nominal || w.eng.Mode() != sim.Timed || w.noFilter || w.rlog != nil {
		return nil
	}
	if w.carry != nil && w.anyShared {
		// Each acquire keeps only the entries its lane carries (carry.go):
		// which entries reach a rank then depends on every lane on the
		// way, hop by hop, which the coarse step's one join per rank does
		// not follow. (Without shared lanes no release carries anything.)
		return nil
	}
	if !w.plan.coarseSet {
		// A world's own plan (a template's copies share one made with it).
		w.plan.coarse, w.plan.coarseSet = coarseStatic(w.progs, w.laneBase, w.shared), true
	}
	if s := w.cfg.Share; s != nil {
		// A micro-op with a load shares its GPU with the kernels beside it
		// (share.go): its end moves with theirs, which the coarse step's
		// times do not follow.
		for r, ops := range w.plan.coarse {
			for i, ok := range ops {
				if !ok {
					continue
				}
				k := w.progs[r].Ops[i].Kernel
				if k.Gen == nil {
					for j := range k.Instrs {
						if s.Derive(k.Kind, k.Instrs[j].Dur) != (Load{}) {
							return nil
						}
					}
					continue
				}
				rs := k.Gen.(CoarseRing).Ring()
				if s.Derive(k.Kind, rs.StartDur) != (Load{}) || s.Derive(k.Kind, rs.StepDur) != (Load{}) {
					return nil
				}
			}
		}
	}
	return w.plan.coarse
}

// coarseStatic decides from the programs alone, before any run, which
// launches may run coarse: per rank and op, or nil when none may. shared
// is sharedLanes' answer for the programs' lanes. The decision holds for
// every copy of a template (the same programs over copied memory).
func coarseStatic(progs []*Program, laneBase []int32, shared []bool) [][]bool {
	type opRef struct{ r, op int }
	type call struct {
		name string
		sig  string
		ok   bool
		list bool // micro-op lists (below), not CoarseRing generators
		ops  []opRef
	}
	type fifoUse struct {
		send, recv []int // call indexes, in program order on each end
		calls      []int // every call using the FIFO
	}
	var calls []call
	callIx := map[string]int{}
	fifoIx := make(map[*Fifo]int, 2*len(progs))
	var fifos []fifoUse
	var refs []*Fifo
	var v opView // k is not kept past its op
	for r, p := range progs {
		if p == nil {
			continue
		}
		for i, op := range p.Ops {
			if op.Kind != Launch || op.Kernel == nil || op.Stream < 0 || op.Stream >= len(p.Streams) {
				continue
			}
			k := v.kernel(p, i) // a folded rank's is neither a CoarseRing nor a list: never coarse
			name := k.Coll
			if name == "" {
				name = "\x00" + k.Name // not a call: never coarse, but it may use a FIFO
			}
			ci, seen := callIx[name]
			if !seen {
				ci = len(calls)
				callIx[name] = ci
				calls = append(calls, call{name: name, sig: k.Sig, ok: name[0] != 0, list: k.Gen == nil})
			}
			c := &calls[ci]
			c.ops = append(c.ops, opRef{r, i})
			cr, isRing := k.Gen.(CoarseRing)
			isList := k.Gen == nil && listOK(k, r)
			lane := laneBase[r] + int32(op.Stream)
			if !(isRing || isList) || c.list != isList || k.Sig != c.sig || k.Loads != nil || (shared[lane] && !mutant.On(mutant.CoarseWhereShared)) {
				c.ok = false
			}
			refs = refs[:0]
			if isRing {
				s := cr.Ring()
				if s.N < 2 || s.Send == nil || s.Recv == nil || s.Send.Cap < 2 || s.Recv.Cap < 2 ||
					aliased(s.In) || aliased(s.Out) || len(s.SegLo) != s.N+1 ||
					s.In == nil || s.Out == nil || len(s.In.Vals) < s.SegLo[s.N] || len(s.Out.Vals) < s.SegLo[s.N] ||
					s.Send.Src != r || s.Recv.Dst != r {
					c.ok = false
				}
				refs = append(refs, k.Gen.Refs().Fifos...)
			} else if k.Gen != nil {
				refs = append(refs, k.Gen.Refs().Fifos...)
			} else {
				for j := range k.Instrs {
					in := &k.Instrs[j]
					switch in.Op {
					case OpSend, OpRecv:
						refs = append(refs, in.Fifo)
					case OpRecvSend:
						refs = append(refs, in.Fifo, in.Fwd)
					}
				}
			}
			for j, f := range refs {
				if f == nil || slices.Contains(refs[:j], f) {
					continue
				}
				if f.Stepped {
					c.ok = false // its counters are read and written at kernel start and end (stepconn.go)
				}
				fi, ok := fifoIx[f]
				if !ok {
					fi = len(fifos)
					fifoIx[f] = fi
					fifos = append(fifos, fifoUse{})
				}
				u := &fifos[fi]
				u.calls = append(u.calls, ci)
				if f.Src == r {
					u.send = append(u.send, ci)
				}
				if f.Dst == r {
					u.recv = append(u.recv, ci)
				}
			}
		}
	}
	// A call is coarse only with all its ranks, each once, in ring order.
	for ci := range calls {
		c := &calls[ci]
		if !c.ok {
			continue
		}
		if c.list {
			c.ok = listCallOK(progs, func(yield func(r, op int) bool) {
				for _, o := range c.ops {
					if !yield(o.r, o.op) {
						return
					}
				}
			})
			continue
		}
		n := -1
		var pos []bool
		for _, o := range c.ops {
			s := progs[o.r].Ops[o.op].Kernel.Gen.(CoarseRing).Ring()
			if n < 0 {
				n, pos = s.N, make([]bool, s.N)
			}
			if s.N != n || s.Pos < 0 || s.Pos >= n || pos[s.Pos] {
				c.ok = false
				break
			}
			pos[s.Pos] = true
		}
		c.ok = c.ok && len(c.ops) == n
	}
	// FIFOs used on both ends by the same calls in the same order, and
	// only by coarse calls; a call using any other FIFO is fine, which
	// may make more FIFOs fail: repeat until nothing changes.
	// Both forms on one FIFO are not coarse either: a list call's times
	// follow the pops of the FIFO's earlier messages (below),
	// which a ring run coarse does not note.
	for changed := true; changed; {
		changed = false
		for _, u := range fifos {
			ok := slices.Equal(u.send, u.recv)
			for _, ci := range u.calls {
				ok = ok && calls[ci].ok && calls[ci].list == calls[u.calls[0]].list
			}
			if ok {
				continue
			}
			for _, ci := range u.calls {
				if calls[ci].ok {
					calls[ci].ok, changed = false, true
				}
			}
		}
	}
	var out [][]bool
	for _, c := range calls {
		if !c.ok {
			continue
		}
		if out == nil {
			out = make([][]bool, len(progs))
		}
		for _, o := range c.ops {
			if out[o.r] == nil {
				out[o.r] = make([]bool, len(progs[o.r].Ops))
			}
			out[o.r][o.op] = true
		}
	}
	return out
}

// aliased reports whether b's memory overlaps another tensor's (a caching
// allocator handed it out again): its writes reach that tensor's chunks in
// the order the micro-ops make them, which the coarse loop does not keep.
func aliased(b *Buffer) bool {
	return b != nil && b.Block != nil && (b.Block.dyn != nil || b.Block.ov != nil)
}

// coarseArrive parks t, a coarse candidate at its first micro-op, until
// every rank of its ring has started; the last one to arrive runs the
// ring.
func (w *World) coarseArrive(t *task, now sim.Time) {
	if t.op.Kernel.Gen == nil {
		w.coarseArriveList(t, now)
		return
	}
	s := t.op.Kernel.Gen.(CoarseRing).Ring()
	g := w.coarseGroups[t.inst]
	if g == nil {
		g = &coarseGroup{inst: t.inst, tasks: make([]int32, s.N), start: make([]sim.Time, s.N)}
		for i := range g.tasks {
			g.tasks[i] = -1
		}
		if w.coarseGroups == nil {
			w.coarseGroups = map[Instance]*coarseGroup{}
		}
		w.coarseGroups[t.inst] = g
		w.coarseOrder = append(w.coarseOrder, g)
	}
	if g.tasks[s.Pos] >= 0 {
		panic(fmt.Sprintf("ranks: coarse ring %s: position %d arrived twice", w.callName(t.inst), s.Pos))
	}
	g.tasks[s.Pos], g.start[s.Pos] = t.id, now
	g.arrived++
	t.coarse, t.state = coarseParked, blocked
	if g.arrived == len(g.tasks) {
		w.coarseRun(g)
	}
}

// coarseUnpark resumes, micro-op by micro-op, every task parked in a ring
// some rank never started (the run is about to end in a hang). Nothing but
// those tasks could see their micro-ops, so running them now blocks them
// exactly where the fine run did. It reports whether it resumed any.
func (w *World) coarseUnpark() bool {
	any := false
	for _, g := range w.coarseOrder {
		if g.done {
			continue
		}
		g.done = true
		if !w.resuming {
			w.resuming, w.dryAt = true, w.eng.Now()
		}
		if g.list {
			any = w.coarseUnparkList(g) || any
			continue
		}
		// When the fine run ran each step: the positions that never
		// started never do. Each started task ends blocked on the step
		// after its last, tried when that one ended: the fine run's last
		// event, if it is the latest.
		start := make([]sim.Time, len(g.tasks))
		var s RingShape
		for p, id := range g.tasks {
			start[p] = never
			if id >= 0 {
				start[p] = g.start[p]
				s = w.tasks[id].op.Kernel.Gen.(CoarseRing).Ring()
			}
		}
		g.steps = ringSteps(start, s.StartDur, s.StepDur, w.fifoOf(s.Send).Cap)
		for p, id := range g.tasks {
			if id < 0 {
				continue
			}
			row := g.steps[p]
			k := 0
			for k+1 < len(row) && row[k+1] < never {
				k++
			}
			d := s.StepDur
			if k == 0 {
				d = s.StartDur
			}
			w.dryAt = max(w.dryAt, row[k]+d)
			t := w.tasks[id]
			t.coarse, t.state = coarseNo, running
			w.eng.Schedule(w.eng.Now(), w.key(t), int32(w.N)+t.id)
			any = true
		}
	}
	return any
}

// now is the simulated time for a finding: the engine's, except after
// coarse rings were resumed at the end of a hung run, when it is the time
// the fine run's last event had.
func (w *World) now() sim.Time {
	if w.resuming && w.eng.Len() == 0 {
		return w.dryAt
	}
	return w.eng.Now()
}

// CoarseCalls is how many collective calls (one per graph replay) the run
// executed as one coarse computation rather than micro-op by micro-op
// (ran), and how many it held back for that but resumed micro-op by
// micro-op because one of their ranks never started them (resumed: the
// run hangs). Either changes the trace hash and the step count, and
// nothing else.
func (w *World) CoarseCalls() (ran, resumed int) {
	return w.coarseRan, len(w.coarseOrder) - w.coarseRan
}

// coarseRun runs ring g, whose ranks have all started, as one
// computation: the values every rank's output ends with, the FIFO state and
// happens-before clocks the micro-ops leave, and each rank's end time.
func (w *World) coarseRun(g *coarseGroup) {
	g.done, g.ran = true, true
	w.coarseRan++
	n := len(g.tasks)
	ts := make([]*task, n)
	shapes := make([]RingShape, n)
	for p, id := range g.tasks {
		ts[p] = w.tasks[id]
		s := ts[p].op.Kernel.Gen.(CoarseRing).Ring()
		s.In, s.Out = w.bufOf(s.In), w.bufOf(s.Out)
		s.Send, s.Recv = w.fifoOf(s.Send), w.fifoOf(s.Recv)
		shapes[p] = s
	}
	for p, s := range shapes {
		q := shapes[(p+1)%n]
		if s.Send != q.Recv || s.Send.n != 0 || len(s.SegLo) != len(shapes[0].SegLo) || s.Send.Cap != shapes[0].Send.Cap {
			panic(fmt.Sprintf("ranks: coarse ring %s: position %d does not connect to %d as planned", w.callName(g.inst), p, (p+1)%n))
		}
	}
	// Values: segment s starts as input segment s of position s and
	// gathers every other position's in ring order (the reduce-scatter's
	// recvReduceSend chain, so each sum has the fine run's provenance);
	// every position's output then holds it.
	seg := shapes[0].SegLo
	ins := make([][]Value, n)
	for p, s := range shapes {
		ins[p] = s.In.Vals
	}
	sums := w.ringSums(ins, seg)
	for p, s := range shapes {
		w.coarseStore(ts[p], s.Out, sums)
	}
	// Connections: each carried 2n−2 messages, all received.
	K := 2*n - 2
	for p, s := range shapes {
		f, recv := s.Send, ts[(p+1)%n]
		f.nSent += K
		f.nRecvd += K
		if len(f.q) > 0 {
			f.head = (f.head + K) % len(f.q)
		}
		f.send = epoch{lane: ts[p].lane, clock: w.vc[ts[p].lane].Get(ts[p].lane), task: ts[p].id}
		f.recv = epoch{lane: recv.lane, clock: w.vc[recv.lane].Get(recv.lane), task: recv.id}
	}
	// Happens-before: every rank's start reaches every other rank through
	// the ring's messages, so each lane ends with its own clock joined
	// with every other lane's release at its start.
	w.coarseJoin(ts)
	s0 := shapes[0]
	ends := ringEnds(g.start, s0.StartDur, s0.StepDur, s0.Send.Cap)
	if w.cfg.Timeline {
		w.coarseTimeline(ts, shapes, ringSteps(g.start, s0.StartDur, s0.StepDur, s0.Send.Cap))
	}
	w.eng.Mix3(0xC0A25E, uint64(g.inst.Call), uint64(g.inst.Replay))
	for p, t := range ts {
		t.talked = true
		w.dirty[t.lane] = true
		t.coarse, t.state = coarseDone, running
		t.gen, t.genLen = t.op.Kernel.Gen, int32(t.op.Kernel.Gen.Len())
		t.pc = int(t.genLen)
		w.eng.Mix2(uint64(t.id), uint64(ends[p]))
		w.eng.Schedule(ends[p], w.key(t), int32(w.N)+t.id)
	}
}

// coarseTimeline records what the fine run's timeline hooks record for
// ring ts whose step k of position p runs at T[p][k]: each kernel's phases
// and a flow for every message received, in the order received (by time,
// then task).
func (w *World) coarseTimeline(ts []*task, shapes []RingShape, T [][]sim.Time) {
	n := len(ts)
	var scratch Instr
	for p, t := range ts {
		// The fine run notes a micro-op's phase when the task first
		// tries it: when its previous micro-op ends, whether or not it
		// then waits for a message or for room.
		g, at := t.op.Kernel.Gen, T[p][0]
		for k := range T[p] {
			in := g.At(k, &scratch)
			w.notePhaseSlow(t, in, at)
			at = T[p][k] + in.Dur
		}
	}
	type recv struct {
		at   sim.Time
		p, k int
	}
	var rs []recv
	for p := range ts {
		for k := 1; k < len(T[p]); k++ {
			rs = append(rs, recv{T[p][k], p, k})
		}
	}
	slices.SortFunc(rs, func(x, y recv) int {
		if c := cmp.Compare(x.at, y.at); c != 0 {
			return c
		}
		if c := cmp.Compare(ts[x.p].id, ts[y.p].id); c != 0 {
			return c
		}
		return cmp.Compare(x.k, y.k)
	})
	for _, r := range rs {
		from := (r.p - 1 + n) % n
		w.tl.flows = append(w.tl.flows, Flow{Kind: FlowFifo, Label: shapes[r.p].Recv.Name,
			From: FlowEnd{w.ref(ts[from].id), T[from][r.k-1]},
			To:   FlowEnd{w.ref(ts[r.p].id), r.at}})
	}
}

// coarseFixFlows gives the flows of rings resumed at the end of a hung run
// (coarseUnpark) the times their messages had in the fine run: their
// micro-ops ran late, when nothing else was left, but each would have run
// as soon as its own ring let it (ringSteps, with the ranks that never
// started it never starting).
func (w *World) coarseFixFlows() {
	if len(w.tl.resumed) == 0 {
		return
	}
	pos := map[int32]int{}
	group := map[int32]*coarseGroup{}
	for _, g := range w.coarseOrder {
		for p, id := range g.tasks {
			if !g.ran && id >= 0 {
				pos[id], group[id] = p, g
			}
		}
	}
	for _, r := range w.tl.resumed {
		g := group[r.task]
		T, p, n := g.steps, pos[r.task], len(g.tasks)
		f := &w.tl.flows[r.flow]
		if g.list {
			f.From.At, f.To.At = g.from[p][r.pc], T[p][r.pc]
			continue
		}
		f.From.At, f.To.At = T[(p-1+n)%n][r.pc-1], T[p][r.pc]
	}
}

// ringSums returns the ring's complete segments: chunk c of segment s is
// ins[s][c] + ins[s+1][c] + … + ins[s−1][c] (positions mod n), the sum the
// reduce-scatter's messages make, with the same provenance terms (a sum
// is the same whatever its order, and provenance is its terms: Prov).
// Ranks are taken in order, each adding its whole input, so every pass
// reads one input and the sums front to back.
func (w *World) ringSums(ins [][]Value, seg []int) []Value {
	n := len(ins)
	C := seg[n]
	sums := make([]Value, C)
	if C == 0 {
		return sums
	}
	// Chunk c's sum is one list node of the n inputs' provenance (a 0
	// where an input has none), written rank by rank like the values: a
	// quarter of the bytes of the n−1 sum nodes a chain would make.
	ops := w.mem.provLists.GetUnzeroed(C * n)
	li := int64(len(w.provTab.lists))
	w.provTab.lists = append(w.provTab.lists, provList{ops: ops, stride: C})
	last := make([]ProvRef, C) // the one operand with provenance, or 0
	cnt := make([]int32, C)    // operands with provenance
	for r, row := range ins {
		row = row[:C]
		for c := range sums {
			x := row[c]
			sums[c].N = addMod(sums[c].N, x.N)
			ops[r*C+c] = x.P
			if x.P != 0 {
				last[c] = x.P
				cnt[c]++
			}
		}
	}
	for c := range sums {
		switch cnt[c] {
		case 0:
		case 1:
			sums[c].P = last[c] // as a chain's sums with no provenance pass it on
		default:
			sums[c].P = w.newProv(Prov{b: ProvRef(n), x: li<<32 | int64(c)})
		}
	}
	return sums
}

// ringSumsNaive is ringSums segment by segment, each chain in one go:
// the readable twin the tests compare it with.
func (w *World) ringSumsNaive(ins [][]Value, seg []int) []Value {
	n := len(ins)
	sums := make([]Value, seg[n])
	for s := range n {
		for c := seg[s]; c < seg[s+1]; c++ {
			var v Value
			for m := range n {
				v = w.add(v, ins[(s+m)%n][c])
			}
			sums[c] = v
		}
	}
	return sums
}

// coarseStore writes vals into b's first chunks as t, as the fine run's
// writes of a private buffer do (b is private: its lane is unshared).
func (w *World) coarseStore(t *task, b *Buffer, vals []Value) {
	if b.lastW == nil {
		b.lastW = w.int32s(len(b.Vals))[:len(b.Vals)]
	}
	copy(b.Vals, vals)
	id := 1 + t.id
	lw := b.lastW[:len(vals)]
	for i := range lw {
		lw[i] = id
	}
}

// ringEnds returns when each position's ring kernel completes, given when
// each started (its first micro-op), the first micro-op's duration a, every
// other's b, and FIFOs of cap slots. It is ringEndsNaive's recurrence
// solved as longest paths: step k of position i runs at
//
//	T(i,k) = max(T(i,k−1)+d(k−1), T(i−1,k−1), T(i+1,k−cap+1) for cap ≤ k ≤ K−1)
//
// (its own previous step, the message it receives, and room in the FIFO it
// forwards into), so T(i,K) is the longest path to (i,K) from any
// (j,0) with weight S_j. A path from j moves Δ = i−j (mod n) positions
// forward (one step each, weight 0), or n−Δ backward (cap−1 steps each,
// weight 0), every other step its own (weight b, a for step 0). Mixed
// paths are never longer; backward paths too long to fit are never longer
// than the forward path from the same start. So
//
//	E_i = b + (K−1)·b + max(S_i + a, max(a,b) + max_{Δ≥1} (S_{i−Δ} − Δ·b),
//	                          a + max_{c≥1} (S_{i+c} − (cap−1)·c·b))
//
// and both inner maxima are sweeps around the ring: O(n) in all.
func ringEnds(start []sim.Time, a, b sim.Time, cap int) []sim.Time {
	n := len(start)
	K := sim.Time(2*n - 2)
	const none = sim.Time(math.MinInt64 / 4)
	fwd := make([]sim.Time, n)
	x := none
	for pass := range 2 {
		for i := range n {
			x = max(x, start[(i-1+n)%n]) - b
			if pass == 1 {
				fwd[i] = x
			}
		}
	}
	back := sim.Time(cap-1) * b
	ends := make([]sim.Time, n)
	y := none
	for pass := range 2 {
		for i := n - 1; i >= 0; i-- {
			y = max(y, start[(i+1)%n]) - back
			if pass == 1 {
				ends[i] = y
			}
		}
	}
	for i := range n {
		e := max(start[i]+a, fwd[i]+max(a, b), ends[i]+a)
		ends[i] = e + K*b
	}
	return ends
}

// ringEndsNaive is ringEnds by its recurrence, step by step: the readable
// twin the tests compare it with.
func ringEndsNaive(start []sim.Time, a, b sim.Time, cap int) []sim.Time {
	T := ringSteps(start, a, b, cap)
	ends := make([]sim.Time, len(start))
	for i, row := range T {
		ends[i] = row[len(row)-1] + b
	}
	return ends
}

// never is the start of a ring position that never starts (ringSteps): a
// step at or after it never runs.
const never = sim.Time(math.MaxInt64 / 4)

// ringSteps is when each step k of each position i runs (T[i][k]), by
// the recurrence ringEnds solves; a position that never starts has start
// never, and every step that waits on it runs at never or later.
func ringSteps(start []sim.Time, a, b sim.Time, cap int) [][]sim.Time {
	n := len(start)
	K := 2*n - 2
	T := make([][]sim.Time, n)
	for i := range T {
		T[i] = make([]sim.Time, K+1)
		T[i][0] = start[i]
	}
	for k := 1; k <= K; k++ {
		d := b
		if k == 1 {
			d = a
		}
		for i := range n {
			t := max(T[i][k-1]+d, T[(i-1+n)%n][k-1])
			if k >= cap && k <= K-1 {
				t = max(t, T[(i+1)%n][k-cap+1])
			}
			T[i][k] = min(t, never)
		}
	}
	return T
}

// Calls of micro-op lists.
//
// NCCL's other ring collectives (collectives/family.go: all-gather,
// reduce-scatter, the list form of all-reduce) and the tree and all-to-all
// kernels beside them are stored lists of delays, local computes and FIFO
// sends and receives, not generators with a closed form. Such a call runs
// coarse by running its lists' micro-ops in a tight loop, each exactly as
// the engine would (World.exec: the same values, provenance, FIFO state
// and happens-before edges), with none of the engine's events: listSim
// says when each micro-op runs, by the rule the engine follows — a
// micro-op runs when the one before it has ended, its message has been
// sent and its FIFO has room, which is when the receive of the message
// Cap before it ran — and in an order in which each of those has already
// happened. Beyond the conditions above (coarseStatic), a list call is
// coarse only when
//
//   - its kernels are delays, computes on unaliased buffers, and sends and
//     receives on their rank's own FIFO ends (listOK), one per rank of its
//     group;
//   - run from empty FIFOs it completes and leaves them empty, and no rank
//     can complete before every other rank has started (listCallOK): a
//     rank held for the others could otherwise have finished, and what it
//     does next been seen, in the fine run. A broadcast's root fails this
//     (it only sends), so a broadcast is never coarse;
//   - every call on its FIFOs is a list call: the times of a call's first
//     sends follow the receives of the FIFO's earlier messages
//     (World.coarsePops), which only a list call notes.

// listOK reports whether k, launched on rank r, is a kernel of micro-op
// lists a coarse call may run: delays, computes and FIFO ends of r's own,
// on buffers no caching allocator handed out twice.
func listOK(k *KernelSpec, r int) bool {
	if k.Gen != nil || len(k.Instrs) == 0 || k.GroupSize < 2 {
		return false
	}
	for i := range k.Instrs {
		in := &k.Instrs[i]
		for _, s := range in.Srcs {
			if s.Buf == nil || aliased(s.Buf) {
				return false
			}
		}
		switch in.Op {
		case OpDelay:
		case OpCompute:
			if in.Dst == nil || aliased(in.Dst) {
				return false
			}
		case OpSend:
			if in.Fifo == nil || in.Fifo.Src != r || in.Fifo.Cap < 1 {
				return false
			}
		case OpRecv:
			if in.Fifo == nil || in.Fifo.Dst != r || in.Dst == nil || aliased(in.Dst) {
				return false
			}
		case OpRecvSend:
			if in.Fifo == nil || in.Fwd == nil || in.Fifo == in.Fwd || in.Fifo.Dst != r || in.Fwd.Src != r || in.Fwd.Cap < 1 || aliased(in.Dst) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// listCallOK reports whether the launches ops yields (rank and op index in
// progs), all of one call, may run coarse: one per rank of its group,
// and, run from empty FIFOs, every one completes, the FIFOs end empty, and
// every rank's end follows every rank's start.
func listCallOK(progs []*Program, ops func(yield func(r, op int) bool)) bool {
	var lists [][]Instr
	seen := map[int]bool{}
	n := -1
	for r, op := range ops {
		k := progs[r].kernel(op)
		if seen[r] || (n >= 0 && k.GroupSize != n) {
			return false
		}
		seen[r], n = true, k.GroupSize
		lists = append(lists, k.Instrs)
	}
	if len(lists) != n {
		return false
	}
	start := make([]sim.Time, n)
	res := listSim(lists, start, func(f *Fifo) *Fifo { return f }, nil, true, nil)
	return res.done && res.drained && (res.allKnown || mutant.On(mutant.CoarseEarlyFinisher))
}

// listResult is what listSim found.
type listResult struct {
	// end is when each position completed or, stuck, tried the micro-op
	// it never ran: the last event the fine run has of it.
	end      []sim.Time
	done     bool // every micro-op ran
	drained  bool // every FIFO ended empty
	allKnown bool // (with known) every position's end follows every position's start
	// (with keep) when each micro-op ran (never: it did not), and when
	// each receiving micro-op's message was sent
	at, from [][]sim.Time
	fifos    map[*Fifo]*listFifo
}

// listFifo is one FIFO in listSim: when each of the call's messages was
// sent and received, and (with known) which starts each followed.
type listFifo struct {
	cap            int
	nSent, nPopped int
	// when message k was sent and received, in slot k mod cap: a message
	// is received before the one cap after it is sent, and that one
	// before it is received, so no slot is written while it is still
	// needed (nor are those below)
	sentAt, poppedAt []sim.Time
	prev             []sim.Time // when the FIFO's earlier messages were received (the last up to cap)
	// (with known) which starts the send and the receive of message k
	// followed, in slot k mod cap: a send waits for the receive cap
	// messages before it, so no slot is written while it is still needed
	sentK, poppedK [][]uint64
	// (for coarseRunList) message k's payload and sender, in slot k mod cap
	msgs   [][]Value
	by     []int32
	recvBy int32 // the last receiver
	fifo   *Fifo // the world's
}

// lastPops returns when the FIFO's last messages were received, up to
// cap of them, oldest first: the ones before the call (prev) and its own.
func (lf *listFifo) lastPops() []sim.Time {
	out := make([]sim.Time, 0, lf.cap)
	if k := lf.cap - lf.nPopped; k > 0 {
		out = append(out, lf.prev[max(0, len(lf.prev)-k):]...)
	}
	for j := max(0, lf.nPopped-lf.cap); j < lf.nPopped; j++ {
		out = append(out, lf.poppedAt[j%lf.cap])
	}
	return out
}

// listStep is one micro-op as listSim runs it: position p's micro-op pc,
// tried when the one before it ended and run at; it receives message rk
// of recv and sends message sk of send (nil: it does not).
type listStep struct {
	p, pc      int
	tried, at  sim.Time
	recv, send *listFifo
	rk, sk     int
}

// listSim runs the micro-op lists of one call, one per position, started
// at start (never: the position never starts), as the engine would, and
// calls run (when not nil) for each micro-op in an order in which its
// message has been sent and its FIFO has room: the order World.exec may
// run them in. key resolves a FIFO to the one it stands for; pops gives
// when the FIFO's earlier messages were received (nil: none). With known
// it also follows which positions' starts each position's micro-ops come
// after (through messages and FIFO room); with keep it keeps every
// micro-op's time.
func listSim(lists [][]Instr, start []sim.Time, key func(*Fifo) *Fifo, pops func(*Fifo) []sim.Time, known bool,
	run func(*listStep), keep ...bool) listResult {
	n := len(lists)
	res := listResult{end: make([]sim.Time, n), fifos: map[*Fifo]*listFifo{}}
	words := (n + 63) / 64
	var kn [][]uint64
	if known {
		kn = make([][]uint64, n)
		for p := range kn {
			kn[p] = make([]uint64, words)
			kn[p][p/64] |= 1 << (p % 64)
		}
	}
	if len(keep) > 0 && keep[0] {
		res.at, res.from = make([][]sim.Time, n), make([][]sim.Time, n)
		for p, l := range lists {
			res.at[p], res.from[p] = make([]sim.Time, len(l)), make([]sim.Time, len(l))
			for i := range l {
				res.at[p][i], res.from[p][i] = never, never
			}
		}
	}
	// The FIFOs by the pointer a micro-op names, each position's last two
	// at hand (a ring step uses one to send and one to receive).
	named := map[*Fifo]*listFifo{}
	type cached struct {
		f  *Fifo
		lf *listFifo
	}
	near := make([][2]cached, n)
	fifo := func(p int, f *Fifo) *listFifo {
		c := &near[p]
		if c[0].f == f {
			return c[0].lf
		}
		if c[1].f == f {
			c[0], c[1] = c[1], c[0]
			return c[0].lf
		}
		lf := named[f]
		if lf == nil {
			k := key(f)
			if lf = res.fifos[k]; lf == nil {
				lf = &listFifo{cap: k.Cap, fifo: k, sentAt: make([]sim.Time, k.Cap), poppedAt: make([]sim.Time, k.Cap)}
				if pops != nil {
					lf.prev = pops(k)
				}
				if known {
					lf.sentK, lf.poppedK = make([][]uint64, k.Cap), make([][]uint64, k.Cap)
					for i := range k.Cap {
						lf.sentK[i], lf.poppedK[i] = make([]uint64, words), make([]uint64, words)
					}
				}
				res.fifos[k] = lf
			}
			named[f] = lf
		}
		c[1], c[0] = c[0], cached{f, lf}
		return lf
	}
	or := func(dst, src []uint64) {
		for i := range dst {
			dst[i] |= src[i]
		}
	}
	pc := make([]int, n)
	ready := slices.Clone(start)
	var st listStep
	for progress := true; progress; {
		progress = false
		for p, l := range lists {
			if start[p] >= never {
				continue
			}
		steps:
			for pc[p] < len(l) {
				in := &l[pc[p]]
				at := ready[p]
				var rf, sf *listFifo
				switch in.Op {
				case OpSend:
					sf = fifo(p, in.Fifo)
				case OpRecv:
					rf = fifo(p, in.Fifo)
				case OpRecvSend:
					rf, sf = fifo(p, in.Fifo), fifo(p, in.Fwd)
				}
				if rf != nil {
					k := rf.nPopped
					if k == rf.nSent {
						break steps // no message yet
					}
					at = max(at, rf.sentAt[k%rf.cap])
				}
				if sf != nil {
					// Room: the message cap before this one was received.
					j := sf.nSent - sf.cap
					switch {
					case j >= sf.nPopped:
						break steps
					case j >= 0:
						at = max(at, sf.poppedAt[j%sf.cap])
					case len(sf.prev)+j >= 0:
						at = max(at, sf.prev[len(sf.prev)+j])
					}
				}
				st = listStep{p: p, pc: pc[p], tried: ready[p], at: at, recv: rf, send: sf}
				if rf != nil {
					k := rf.nPopped
					st.rk = k
					if res.from != nil {
						res.from[p][pc[p]] = rf.sentAt[k%rf.cap]
					}
					rf.poppedAt[k%rf.cap] = at
					rf.nPopped++
					if known {
						or(kn[p], rf.sentK[k%rf.cap])
						copy(rf.poppedK[k%rf.cap], kn[p])
					}
				}
				if sf != nil {
					k := sf.nSent
					st.sk = k
					if known && k >= sf.cap {
						or(kn[p], sf.poppedK[k%sf.cap])
					}
					sf.sentAt[k%sf.cap] = at
					sf.nSent++
					if known {
						copy(sf.sentK[k%sf.cap], kn[p])
					}
				}
				if res.at != nil {
					res.at[p][pc[p]] = at
				}
				if run != nil {
					run(&st)
				}
				ready[p] = at + in.Dur
				pc[p]++
				progress = true
			}
		}
	}
	res.done, res.drained, res.allKnown = true, true, known
	for p, l := range lists {
		res.end[p] = ready[p]
		res.done = res.done && pc[p] == len(l)
		if known {
			for q := range n {
				res.allKnown = res.allKnown && kn[p][q/64]&(1<<(q%64)) != 0
			}
		}
	}
	for _, lf := range res.fifos {
		res.drained = res.drained && lf.nSent == lf.nPopped
	}
	return res
}

// coarseArriveList parks t, a coarse candidate of a list call at its first
// micro-op, until every rank of its group has started; the last one to
// arrive runs the call.
func (w *World) coarseArriveList(t *task, now sim.Time) {
	n := t.op.Kernel.GroupSize
	g := w.coarseGroups[t.inst]
	if g == nil {
		g = &coarseGroup{inst: t.inst, list: true, tasks: make([]int32, 0, n), start: make([]sim.Time, 0, n)}
		if w.coarseGroups == nil {
			w.coarseGroups = map[Instance]*coarseGroup{}
		}
		w.coarseGroups[t.inst] = g
		w.coarseOrder = append(w.coarseOrder, g)
	}
	g.tasks, g.start = append(g.tasks, t.id), append(g.start, now)
	g.arrived++
	t.coarse, t.state = coarseParked, blocked
	if g.arrived == n {
		w.coarseRunList(g)
	}
}

// coarseLists returns g's tasks ordered by rank, their lists, and when
// each started.
func (w *World) coarseLists(g *coarseGroup) ([]*task, [][]Instr, []sim.Time) {
	ix := make([]int, len(g.tasks))
	for i := range ix {
		ix[i] = i
	}
	slices.SortFunc(ix, func(a, b int) int { return cmp.Compare(w.tasks[g.tasks[a]].rank, w.tasks[g.tasks[b]].rank) })
	ts := make([]*task, len(ix))
	lists := make([][]Instr, len(ix))
	start := make([]sim.Time, len(ix))
	for p, i := range ix {
		ts[p] = w.tasks[g.tasks[i]]
		lists[p], start[p] = ts[p].op.Kernel.Instrs, g.start[i]
	}
	return ts, lists, start
}

// coarseRunList runs list call g, whose ranks have all started, as one
// loop over its micro-ops in an order listSim finds, at the times it
// gives them: each moves and sums values as World.exec does (the same
// values and provenance, the buffers' last writers), with none of the
// engine's events, FIFO messages, race checks on private buffers or
// per-message happens-before joins. Then the FIFOs and clocks are left as
// the fine run leaves them, and each rank's kernel completes when its last
// micro-op ends.
func (w *World) coarseRunList(g *coarseGroup) {
	g.done, g.ran = true, true
	w.coarseRan++
	ts, lists, start := w.coarseLists(g)
	w.eng.Mix3(0xC0A25E, uint64(g.inst.Call), uint64(g.inst.Replay))
	flows := len(w.tl.flows)
	res := listSim(lists, start, w.fifoOf, func(f *Fifo) []sim.Time { return w.coarsePops[f] }, false,
		func(st *listStep) { w.coarseStep(ts[st.p], &lists[st.p][st.pc], st) })
	if !res.done || !res.drained {
		panic(fmt.Sprintf("ranks: coarse call %s did not complete as planned", w.callName(g.inst)))
	}
	// The fine run lists flows as they are received: by time.
	slices.SortStableFunc(w.tl.flows[flows:], func(a, b Flow) int { return cmp.Compare(a.To.At, b.To.At) })
	// Connections: every message sent was received; each end's last
	// access is its last task's.
	if w.coarsePops == nil {
		w.coarsePops = map[*Fifo][]sim.Time{}
	}
	for f, lf := range res.fifos {
		if f.n != 0 {
			panic(fmt.Sprintf("ranks: coarse call %s: FIFO %s is not empty at its start", w.callName(g.inst), f.Name))
		}
		k := lf.nSent
		if k == 0 {
			continue
		}
		f.nSent += k
		f.nRecvd += k
		if len(f.q) > 0 {
			f.head = (f.head + k) % len(f.q)
		}
		s, r := w.tasks[lf.by[(k-1)%lf.cap]], w.tasks[lf.recvBy]
		f.send = epoch{lane: s.lane, clock: w.vc[s.lane].Get(s.lane), task: s.id}
		f.recv = epoch{lane: r.lane, clock: w.vc[r.lane].Get(r.lane), task: r.id}
		w.coarsePops[f] = lf.lastPops()
	}
	// Happens-before: every rank's end follows every rank's start
	// (listCallOK), so each lane ends with its own clock joined with
	// every other lane's release at its start, as in coarseRun.
	w.coarseJoin(ts)
	for p, t := range ts {
		t.talked = true
		w.dirty[t.lane] = true
		t.coarse, t.state = coarseDone, running
		t.pc = len(lists[p])
		w.eng.Mix2(uint64(t.id), uint64(res.end[p]))
		w.eng.Schedule(res.end[p], w.key(t), int32(w.N)+t.id)
	}
}

// coarseStep is micro-op in of t as listSim runs it (st): its values as
// World.exec computes them, its message kept in its FIFO's slot.
func (w *World) coarseStep(t *task, in *Instr, st *listStep) {
	w.epOK = false // a buffer that is not private is checked as exec checks it
	if w.cfg.Timeline {
		w.notePhaseSlow(t, in, st.tried)
	}
	var got []Value // the message received
	if rf := st.recv; rf != nil {
		got = rf.msgs[st.rk%rf.cap]
		rf.recvBy = t.id
		if w.cfg.Timeline {
			w.tl.flows = append(w.tl.flows, Flow{Kind: FlowFifo, Label: rf.fifo.Name,
				From: FlowEnd{w.ref(rf.by[st.rk%rf.cap]), rf.sentAt[st.rk%rf.cap]},
				To:   FlowEnd{w.ref(t.id), st.at}})
		}
	}
	var put []Value // the message sent
	if sf := st.send; sf != nil {
		if sf.msgs == nil {
			sf.msgs, sf.by = make([][]Value, sf.cap), make([]int32, sf.cap)
		}
		i := st.sk % sf.cap
		put = slices.Grow(sf.msgs[i][:0], in.N)[:in.N]
		sf.msgs[i], sf.by[i] = put, t.id
	}
	switch in.Op {
	case OpCompute:
		for i := 0; i < in.N; i++ {
			var v Value
			for _, s := range in.Srcs {
				x := w.coarseRead(t, s.Buf, s.Lo+i)
				if in.Fresh {
					if s.Coef != 1 {
						x.N = scaleN(x.N, s.Coef)
					}
					v.N = addMod(v.N, x.N)
					continue
				}
				if s.Coef != 1 {
					x = w.scale(x, s.Coef)
				}
				v = w.add(v, x)
			}
			if in.Fresh {
				v.P = w.leaf(w.srcOf(in.Dst, in.DstLo+i))
			}
			w.coarseWrite(t, in.Dst, in.DstLo+i, v)
		}
	case OpSend:
		for i := range in.N {
			var v Value
			for _, s := range in.Srcs {
				v = w.add(v, w.coarseRead(t, s.Buf, s.Lo+i))
			}
			put[i] = v
		}
	case OpRecv, OpRecvSend:
		for i := 0; i < in.N; i++ {
			var v Value
			if i < len(got) {
				v = got[i]
			}
			for _, s := range in.Srcs {
				v = w.add(v, w.coarseRead(t, s.Buf, s.Lo+i))
			}
			if in.Dst != nil {
				w.coarseWrite(t, in.Dst, in.DstLo+i, v)
			}
			if put != nil {
				put[i] = v
			}
		}
	}
}

// coarseRead and coarseWrite are World.read and World.write for a coarse
// step: a private buffer's chunk is read and written as those do, without
// their trace (the run's hash differs anyway); any other goes through them.
func (w *World) coarseRead(t *task, b *Buffer, c int) Value {
	if b = w.bufOf(b); !b.private {
		return w.read(t, b, c)
	}
	return b.Vals[c]
}

func (w *World) coarseWrite(t *task, b *Buffer, c int, v Value) {
	if b = w.bufOf(b); !b.private || aliased(b) {
		w.write(t, b, c, v)
		return
	}
	if b.lastW == nil {
		b.lastW = w.int32s(len(b.Vals))[:len(b.Vals)]
	}
	b.lastW[c] = 1 + t.id
	b.Vals[c] = v
	if b.polled {
		w.storeWakes(b)
	}
}

// coarseUnparkList resumes list call g, some rank of which never started
// it: its started tasks run micro-op by micro-op from now, and the times
// the fine run would have given them (listSim with the others never
// starting) fix the findings' time and the flows (coarseFixFlows).
func (w *World) coarseUnparkList(g *coarseGroup) bool {
	ts, lists, start := w.coarseLists(g)
	res := listSim(lists, start, w.fifoOf, func(f *Fifo) []sim.Time { return w.coarsePops[f] }, false, nil, true)
	g.steps, g.from = res.at, res.from
	for p, t := range ts {
		g.tasks[p] = t.id // by position, as coarseFixFlows reads them
		w.dryAt = max(w.dryAt, res.end[p])
		t.coarse, t.state = coarseNo, running
		w.eng.Schedule(w.eng.Now(), w.key(t), int32(w.N)+t.id)
	}
	return len(ts) > 0
}

// coarseJoin gives every lane of ts its own clock joined with every other
// lane's release at the call's start: what a coarse call's messages would
// have carried, when every rank's end follows every rank's start.
func (w *World) coarseJoin(ts []*task) {
	if !w.anyShared {
		return
	}
	var u *VC
	for _, t := range ts {
		r := w.snapshot(t.lane)
		if u == nil {
			u = r.Clone()
		} else {
			u.Join(r)
		}
	}
	for _, t := range ts {
		w.acquireVC(t.lane, u)
	}
}

// coarseState is the state of coarse collective steps.
type coarseState struct {
	coarseOp     [][]bool // per rank and op: the launch may run coarse (nil: none)
	coarseGroups map[Instance]*coarseGroup
	coarseOrder  []*coarseGroup // in creation order
	coarseRan    int            // calls run coarse
	resuming     bool           // coarse rings are being resumed micro-op by micro-op
	dryAt        sim.Time       // then: when the fine run would have ended (coarse.go)
	// per FIFO: when its last messages were received by calls run coarse
	// as micro-op lists (coarse.go)
	coarsePops map[*Fifo][]sim.Time
}
