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
// The decision is made from the program before the run (coarsePlan), and
// it is conservative: a call is coarse only when
//
//   - every lane that runs it shares no memory with any other lane
//     (sharedLanes: its buffers, FIFO ends and signal pads are touched by
//     that lane alone), so no race check could fire on its accesses and
//     none of its accesses could be seen by another stream;
//   - every rank of the ring launches it exactly once, on such a lane, and
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
}

// coarsePlan returns which launches of w's run may run coarse (per rank
// and op; nil: none): the plan's static decision (coarseStatic), when the
// schedule is one the coarse step reproduces.
func (w *World) coarsePlan() [][]bool {
	if w.cfg.FineSteps || !w.nominal || w.eng.Mode() != sim.Timed || w.noFilter {
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
				rs := k.Gen.(CoarseRing).Ring()
				if s.derive(k.Kind, rs.StartDur) != (Load{}) || s.derive(k.Kind, rs.StepDur) != (Load{}) {
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
	for r, p := range progs {
		if p == nil {
			continue
		}
		for i, op := range p.Ops {
			if op.Kind != Launch || op.Kernel == nil || op.Stream < 0 || op.Stream >= len(p.Streams) {
				continue
			}
			k := p.kernel(i) // a folded rank's is no CoarseRing: never coarse
			name := k.Coll
			if name == "" {
				name = "\x00" + k.Name // not a call: never coarse, but it may use a FIFO
			}
			ci, seen := callIx[name]
			if !seen {
				ci = len(calls)
				callIx[name] = ci
				calls = append(calls, call{name: name, sig: k.Sig, ok: name[0] != 0})
			}
			c := &calls[ci]
			c.ops = append(c.ops, opRef{r, i})
			cr, isRing := k.Gen.(CoarseRing)
			lane := laneBase[r] + int32(op.Stream)
			if !isRing || k.Sig != c.sig || k.Loads != nil || (shared[lane] && !mutant.On(mutant.CoarseWhereShared)) {
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
	for changed := true; changed; {
		changed = false
		for _, u := range fifos {
			ok := slices.Equal(u.send, u.recv)
			for _, ci := range u.calls {
				ok = ok && calls[ci].ok
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
func aliased(b *Buffer) bool { return b != nil && b.Block != nil && b.Block.ov != nil }

// coarseArrive parks t, a coarse candidate at its first micro-op, until
// every rank of its ring has started; the last one to arrive runs the
// ring.
func (w *World) coarseArrive(t *task, now sim.Time) {
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
		f.send = epoch{lane: ts[p].lane, clock: w.vc[ts[p].lane].get(ts[p].lane), task: ts[p].id}
		f.recv = epoch{lane: recv.lane, clock: w.vc[recv.lane].get(recv.lane), task: recv.id}
	}
	// Happens-before: every rank's start reaches every other rank through
	// the ring's messages, so each lane ends with its own clock joined
	// with every other lane's release at its start.
	if w.anyShared {
		var u *VC
		for _, t := range ts {
			r := w.snapshot(t.lane)
			if u == nil {
				u = r.clone()
			} else {
				u.join(r)
			}
		}
		for _, t := range ts {
			w.acquireVC(t.lane, u)
		}
	}
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
		f.From.At, f.To.At = T[(p-1+n)%n][r.pc-1], T[p][r.pc]
	}
}

// ringSums returns the ring's complete segments: chunk c of segment s is
// ins[s][c] + ins[s+1][c] + … + ins[s−1][c] (positions mod n), summed in
// that order as the reduce-scatter's messages sum it, so each sum has the
// fine run's provenance. Ranks are taken in order, each adding its input
// to the segments whose chain it continues: first positions s…n−1 of
// every segment s, then the wrapped part 0…s−1, so every pass reads one
// input and the sums front to back.
func (w *World) ringSums(ins [][]Value, seg []int) []Value {
	n := len(ins)
	sums := make([]Value, seg[n])
	for r := range n {
		w.addInto(sums[:seg[r+1]], ins[r][:seg[r+1]]) // segments s <= r: their chain from s reaches r
	}
	for r := range n - 1 {
		w.addInto(sums[seg[r+1]:], ins[r][seg[r+1]:seg[n]]) // segments s > r: the chain wraps to r
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

// addInto sets acc[i] to add(acc[i], xs[i]) for every i, with the
// provenance nodes written into a run of the table rather than made one
// call each.
func (w *World) addInto(acc, xs []Value) {
	xs = xs[:len(acc)]
	provs, next := w.provs, w.provNext
	k := 0 // nodes written into provs
	for i := range acc {
		a, x := acc[i], xs[i]
		v := Value{N: addMod(a.N, x.N), P: a.P | x.P} // one of them when the other is 0
		if a.P != 0 && x.P != 0 {
			if k == len(provs) {
				w.provs, w.provNext = provs[k:], next
				v.P = w.newProv(Prov{a: a.P, b: x.P})
				provs, next, k = w.provs, w.provNext, 0
			} else {
				provs[k] = Prov{a: a.P, b: x.P}
				v.P = next
				next++
				k++
			}
		}
		acc[i] = v
	}
	w.provs, w.provNext = provs[k:], next
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
