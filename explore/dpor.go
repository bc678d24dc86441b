package explore

import (
	"fmt"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// DPOR explores every ordering of dependent steps of a target, once per
// equivalence class of interleavings up to the reduction's redundancy, by
// stateless re-execution (each schedule is a fresh build and run).
//
// Steps: every item the engine runs in Untimed mode is a step of an actor
// with a stable identity ([ranks.ActorID]): a host issue, one device
// micro-op, or a task completion. A step that would spin (a signal not yet
// set, a FIFO full or empty) changes nothing but a waiter list, so it is taken
// at once, off the record; an actor is enabled when its next step would not
// spin.
//
// Dependence (the footprint of a step, see accesses): two steps conflict when
// they touch the same resource and one writes it: a buffer chunk; a signal
// slot (every put and wait on one (pad, slot) conflicts, different slots
// commute); a FIFO's tail (sends), head (receives), message k (send k, then
// receive k) and free slot k (receive k, then send k+cap); and the edges that
// enable a task (its issue by the host, its dependencies' completions).
// Conflicts of the last kinds are causal (the later step could not have been
// enabled before the earlier one), so they are never reversed: each access
// carries a class and only same-class conflicts are races.
//
// Algorithm: after each execution, happens-before is built with vector clocks
// over steps, every race e ≲ e' (a conflicting pair with no happens-before
// path through a third step) is found, and, as in source-DPOR (Abdulla et al.
// 2014, Algorithm 1, lines 5–8), unless an initial of notdep(e).e' is already
// in the backtrack set of the state before e, one is added. The next
// execution replays the longest prefix that still has an unexplored backtrack
// entry and takes it; the search is complete when none is left.
type DPOR struct {
	nodes    []*dnode
	prefix   []ranks.ActorID
	complete bool
	cur      *dporRun
	// Races counts the reversible races seen, over all executions.
	Races int
}

type dnode struct {
	enabled   []ranks.ActorID // in queue order
	backtrack map[ranks.ActorID]bool
	done      map[ranks.ActorID]bool
	taken     ranks.ActorID
}

// Name implements [Strategy].
func (*DPOR) Name() string { return "dpor" }

// Mode implements [Strategy].
func (*DPOR) Mode() sim.Mode { return sim.Untimed }

// Complete implements [Strategy].
func (d *DPOR) Complete() bool { return d.complete }

// Begin implements [Strategy].
func (d *DPOR) Begin(i int) (sim.Chooser, uint64, bool) {
	if d.complete {
		return nil, 0, false
	}
	if i > 0 {
		k, next := -1, ranks.ActorID(0)
		for j := len(d.nodes) - 1; j >= 0 && k < 0; j-- {
			n := d.nodes[j]
			for _, a := range n.enabled {
				if n.backtrack[a] && !n.done[a] {
					k, next = j, a
					break
				}
			}
		}
		if k < 0 {
			d.complete = true
			return nil, 0, false
		}
		d.nodes = d.nodes[:k+1]
		n := d.nodes[k]
		n.done[next] = true
		n.taken = next
		d.prefix = d.prefix[:0]
		for _, n := range d.nodes {
			d.prefix = append(d.prefix, n.taken)
		}
	}
	d.cur = &dporRun{prefix: d.prefix, res: map[resKey]int32{}, ids: map[any]uint64{}, sent: map[*ranks.Fifo]int{}, recvd: map[*ranks.Fifo]int{}, local: map[ranks.ActorID]int{}}
	return d.cur, 0, true
}

// End implements [Strategy]: it analyses the execution's races and extends
// the backtrack sets.
func (d *DPOR) End(_ int, _ *Schedule) error {
	r := d.cur
	d.cur = nil
	if r == nil {
		return fmt.Errorf("dpor: End without Begin")
	}
	if r.err != nil {
		return r.err
	}
	// Nodes for the new part of the path.
	for i := len(d.nodes); i < len(r.steps); i++ {
		st := &r.steps[i]
		d.nodes = append(d.nodes, &dnode{enabled: st.enabled, taken: st.actor,
			backtrack: map[ranks.ActorID]bool{st.actor: true}, done: map[ranks.ActorID]bool{st.actor: true}})
	}
	if len(d.nodes) > len(r.steps) {
		return fmt.Errorf("dpor: execution has %d steps, shorter than its replayed prefix (%d)", len(r.steps), len(d.nodes))
	}
	// Steps that never ran (spinning when the run ended, a hang) still race
	// with what ran: append them as pseudo-steps, after Flanagan and
	// Godefroid's use of next(s, p) for disabled processes.
	for _, a := range r.w.Blocked() {
		st := r.w.NextStep(a)
		r.local[st.Actor]++
		r.steps = append(r.steps, dstep{actor: st.Actor, acc: r.accesses(&st, r.local[st.Actor] == 1), local: r.local[st.Actor], pseudo: true})
	}
	d.analyse(r.steps)
	return nil
}

// dstep is one visible step of an execution.
type dstep struct {
	actor   ranks.ActorID
	enabled []ranks.ActorID
	acc     []access
	a       int // dense actor index
	local   int // 1-based index among the actor's steps
	clock   []int32
	pseudo  bool // never ran: the actor was still spinning at the end
}

type access struct {
	res   int32
	write bool
	class uint8
}

// Access classes: conflicts are reversible races only within a class.
const (
	classMem uint8 = iota
	classPut
	classWait
	classSend
	classRecv
	classProduce // issue / completion: enables the consumer
	classConsume
)

type resKey struct {
	kind uint8
	a, b uint64
}

const (
	resChunk uint8 = iota
	resSlot
	resFifoTail
	resFifoHead
	resFifoMsg
	resFifoFree
	resIssued
	resDone
)

// dporRun is the chooser of one execution.
type dporRun struct {
	w       *ranks.World
	prefix  []ranks.ActorID
	steps   []dstep
	pending []ranks.ActorID // enabled set at the last ChooseItem
	have    bool
	err     error

	res   map[resKey]int32
	ids   map[any]uint64 // pads, FIFOs → small ids
	sent  map[*ranks.Fifo]int
	recvd map[*ranks.Fifo]int
	local map[ranks.ActorID]int
}

// Attach implements [Attacher].
func (r *dporRun) Attach(w *ranks.World) {
	r.w = w
	w.Engine().SetObserver(r.observe)
}

func (r *dporRun) Choose(sim.Decision, int) int { return 0 }

func (r *dporRun) ChooseItem(items []sim.Item) int {
	r.have = false
	enabled := make([]ranks.ActorID, 0, len(items))
	for k, it := range items {
		st := r.w.NextStep(it.Actor)
		if st.Block {
			return k // spins: take it off the record
		}
		enabled = append(enabled, st.Actor)
	}
	r.pending, r.have = enabled, true
	i := len(r.steps)
	if i < len(r.prefix) {
		for k, a := range enabled {
			if a == r.prefix[i] {
				return k
			}
		}
		if r.err == nil {
			r.err = fmt.Errorf("dpor: replay diverged at step %d: %s is not enabled", i, r.prefix[i])
		}
	}
	return 0
}

func (r *dporRun) observe(it sim.Item, chosen bool) {
	st := r.w.NextStep(it.Actor)
	if st.Block {
		return
	}
	enabled := []ranks.ActorID{st.Actor}
	if chosen && r.have {
		enabled = r.pending
	}
	r.have = false
	i := len(r.steps)
	if i < len(r.prefix) && r.prefix[i] != st.Actor && r.err == nil {
		r.err = fmt.Errorf("dpor: replay diverged at step %d: ran %s, want %s", i, st.Actor, r.prefix[i])
	}
	r.local[st.Actor]++
	r.steps = append(r.steps, dstep{actor: st.Actor, enabled: enabled, acc: r.accesses(&st, r.local[st.Actor] == 1), local: r.local[st.Actor]})
}

func (r *dporRun) id(p any) uint64 {
	v, ok := r.ids[p]
	if !ok {
		v = uint64(len(r.ids))
		r.ids[p] = v
	}
	return v
}

func (r *dporRun) add(out []access, k resKey, write bool, class uint8) []access {
	id, ok := r.res[k]
	if !ok {
		id = int32(len(r.res))
		r.res[k] = id
	}
	return append(out, access{res: id, write: write, class: class})
}

// accesses is the footprint of step st (first: the actor's first visible
// step, which consumes its issue and its dependencies' completions).
func (r *dporRun) accesses(st *ranks.Step, first bool) []access {
	var out []access
	if first && st.Kind != ranks.StepIssue {
		out = r.add(out, resKey{kind: resIssued, a: uint64(st.Actor)}, false, classConsume)
		for _, d := range st.Deps {
			out = r.add(out, resKey{kind: resDone, a: uint64(d)}, false, classConsume)
		}
	}
	switch st.Kind {
	case ranks.StepIssue:
		for _, a := range st.Issues {
			out = r.add(out, resKey{kind: resIssued, a: uint64(a)}, true, classProduce)
		}
	case ranks.StepComplete:
		out = r.add(out, resKey{kind: resDone, a: uint64(st.Actor)}, true, classProduce)
	case ranks.StepInstr:
		in := st.Instr
		chunk := func(b *ranks.Buffer, c int) resKey {
			return resKey{kind: resChunk, a: uint64(b.BufferID()), b: uint64(c)}
		}
		for _, s := range in.Srcs {
			for i := 0; i < in.N; i++ {
				out = r.add(out, chunk(s.Buf, s.Lo+i), false, classMem)
			}
		}
		if in.Dst != nil && (in.Op == ranks.OpCompute || in.Op == ranks.OpRecv) {
			for i := 0; i < in.N; i++ {
				out = r.add(out, chunk(in.Dst, in.DstLo+i), true, classMem)
			}
		}
		switch in.Op {
		case ranks.OpPut:
			out = r.add(out, resKey{kind: resSlot, a: r.id(in.Pad), b: uint64(in.Slot)}, true, classPut)
		case ranks.OpWait:
			out = r.add(out, resKey{kind: resSlot, a: r.id(in.Pad), b: uint64(in.Slot)}, true, classWait)
		case ranks.OpSend:
			f := in.Fifo
			k := r.sent[f]
			r.sent[f]++
			out = r.add(out, resKey{kind: resFifoTail, a: r.id(f)}, true, classSend)
			out = r.add(out, resKey{kind: resFifoMsg, a: r.id(f), b: uint64(k)}, true, classSend)
			if k >= f.Cap {
				out = r.add(out, resKey{kind: resFifoFree, a: r.id(f), b: uint64(k - f.Cap)}, false, classSend)
			}
		case ranks.OpRecv:
			f := in.Fifo
			k := r.recvd[f]
			r.recvd[f]++
			out = r.add(out, resKey{kind: resFifoHead, a: r.id(f)}, true, classRecv)
			out = r.add(out, resKey{kind: resFifoMsg, a: r.id(f), b: uint64(k)}, false, classRecv)
			out = r.add(out, resKey{kind: resFifoFree, a: r.id(f), b: uint64(k)}, true, classRecv)
		}
	}
	return out
}

// analyse builds happens-before over steps and adds backtrack points for
// every race.
func (d *DPOR) analyse(steps []dstep) {
	dense := map[ranks.ActorID]int{}
	for i := range steps {
		a, ok := dense[steps[i].actor]
		if !ok {
			a = len(dense)
			dense[steps[i].actor] = a
		}
		steps[i].a = a
	}
	na := len(dense)
	type rstate struct {
		lastW int
		reads []int
	}
	rs := map[int32]*rstate{}
	lastOf := make([]int, na)
	for i := range lastOf {
		lastOf[i] = -1
	}
	hb := func(i, k int) bool { return int(steps[k].clock[steps[i].a]) >= steps[i].local } // i → k (or i == k)
	type pred struct {
		i          int
		conflict   bool
		reversible bool
	}
	var preds []pred
	addPred := func(i int, conflict, reversible bool) {
		for p := range preds {
			if preds[p].i == i {
				preds[p].conflict = preds[p].conflict || conflict
				preds[p].reversible = preds[p].reversible && reversible
				return
			}
		}
		preds = append(preds, pred{i, conflict, reversible})
	}
	for j := range steps {
		sj := &steps[j]
		preds = preds[:0]
		if p := lastOf[sj.a]; p >= 0 {
			addPred(p, false, false)
		}
		for _, ac := range sj.acc {
			st := rs[ac.res]
			if st == nil {
				st = &rstate{lastW: -1}
				rs[ac.res] = st
			}
			if st.lastW >= 0 {
				w := st.lastW
				addPred(w, true, classOf(steps[w], ac.res) == ac.class)
			}
			if ac.write {
				for _, rd := range st.reads {
					addPred(rd, true, classOf(steps[rd], ac.res) == ac.class)
				}
			}
		}
		clock := make([]int32, na)
		for _, p := range preds {
			for a, v := range steps[p.i].clock {
				if v > clock[a] {
					clock[a] = v
				}
			}
		}
		clock[sj.a] = int32(sj.local)
		sj.clock = clock
		// Races: conflicting direct predecessors of another actor not
		// ordered before j through any other predecessor.
		for _, p := range preds {
			if !p.conflict || !p.reversible || steps[p.i].a == sj.a || steps[p.i].pseudo {
				continue
			}
			race := true
			for _, q := range preds {
				if q.i != p.i && hb(p.i, q.i) {
					race = false
					break
				}
			}
			if race {
				d.Races++
				d.reverse(steps, p.i, j)
			}
		}
		// Update resource states.
		for _, ac := range sj.acc {
			st := rs[ac.res]
			if ac.write {
				st.lastW = j
				st.reads = st.reads[:0]
			} else if len(st.reads) == 0 || st.reads[len(st.reads)-1] != j {
				st.reads = append(st.reads, j)
			}
		}
		lastOf[sj.a] = j
	}
}

func classOf(s dstep, res int32) uint8 {
	for _, a := range s.acc {
		if a.res == res {
			return a.class
		}
	}
	return 255
}

// reverse handles race (e, e'): unless an initial of v = notdep(e).e' is in
// backtrack(pre(e)), add one (e's actor preferred); if none is enabled there
// (a dependence the footprint missed), add every enabled actor.
func (d *DPOR) reverse(steps []dstep, e, e2 int) {
	n := d.nodes[e]
	hb := func(i, k int) bool { return int(steps[k].clock[steps[i].a]) >= steps[i].local }
	firstLocal := map[int]int{} // dense actor → local index of its first step in v
	var seen []int
	var initials []ranks.ActorID
	consider := func(k int) bool {
		sk := &steps[k]
		if _, dup := firstLocal[sk.a]; dup {
			return false
		}
		initial := true
		for _, a := range seen {
			if int(sk.clock[a]) >= firstLocal[a] {
				initial = false
				break
			}
		}
		firstLocal[sk.a] = sk.local
		seen = append(seen, sk.a)
		if initial {
			initials = append(initials, sk.actor)
			return n.backtrack[sk.actor]
		}
		return false
	}
	for k := e + 1; k < e2; k++ {
		if hb(e, k) {
			continue
		}
		if consider(k) {
			return
		}
	}
	if consider(e2) {
		return
	}
	pick := ranks.ActorID(0)
	found := false
	// Prefer e2's actor when it is an initial, else the first enabled initial.
	for _, a := range initials {
		if a == steps[e2].actor && contains(n.enabled, a) {
			pick, found = a, true
		}
	}
	for _, a := range initials {
		if !found && contains(n.enabled, a) {
			pick, found = a, true
		}
	}
	if found {
		n.backtrack[pick] = true
		return
	}
	for _, a := range n.enabled {
		n.backtrack[a] = true
	}
}

func contains(s []ranks.ActorID, a ranks.ActorID) bool {
	for _, x := range s {
		if x == a {
			return true
		}
	}
	return false
}
