package explore

import (
	"fmt"

	"github.com/collsim/collsim/mutant"
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
// Every choice the engine makes, and where it is in the relation:
//   - which ready micro-op runs: the footprints above;
//   - which kernel takes free SMs or an exclusive slot (ranks/residency.go):
//     becoming resident on a contended pool is a step of its own (StepStart)
//     that writes the pool; a completion reads it (releases commute); a
//     kernel that spun waiting on the pool takes it causally (classAcquireWoken:
//     not reversible against the release that woke it). Uncontended pools
//     never make a kernel wait, so their hand-outs commute and are left out.
//     TestDPORResidencyChoice and TestDPORNaiveEveryChoice;
//   - which host op is issued next: a rank's host is one actor issuing in
//     program order; hosts of different ranks share nothing but the tasks
//     they create (resIssued). A host's issue after a host sync consumes the
//     sync's completion, the only step that enables it (TestDPORNaiveEveryChoice
//     generates syncs; TestDPORHostSyncMatchesNaive; why the edge is
//     redundant: accessesInto);
//   - which free block the caching allocator hands out: a function of the
//     host's issue order and, where a free waits for record_stream events,
//     of whether those events are done when the host reaches a malloc
//     (ranks/dynalloc.go). Without such a free the allocator runs while
//     the world is built, before any choice, and each execution runs a copy
//     of that world (TestAllocatorIsNotAScheduleChoice). With one, the
//     malloc's issue step reads each pending free's record task's
//     completion (resQuery, class mem) and the record task's completion
//     writes it, so the two race and both orders are explored
//     (TestDPORDeferredFreesMatchNaive);
//   - timing jitter and rank skew (sim.DecJitter, sim.DecSkew): untimed runs
//     take option 0; durations do not order untimed steps.
//
// Algorithm: after each execution, happens-before is built with vector clocks
// over steps, and races are found with Flanagan and Godefroid's test: a step
// e' races with an earlier conflicting step e of the same class and another
// actor unless the actor of e' already knew of e through program structure (its own
// previous step, its issue, its dependencies' completions). Candidates are the
// last writer and the reads since, plus the last step of the same sync class
// on the resource (a flag one waiter consumed may have been set again by a put
// that spun on it: another waiter could have taken the first one). Steps that
// spun are kept as pseudo-steps and race too (next(s, p) of a disabled p, and
// every actor still spinning when a run hangs). For each race, as in
// source-DPOR (Abdulla et al. 2014, Algorithm 1, lines 4–8), unless an initial
// of notdep(e).e' is already in the backtrack set of the state before e, one
// is added (every enabled actor, should none be enabled there). Sleep sets
// (Godefroid 1996; Algorithm 1, lines 9–11) skip continuations already covered
// by an explored sibling; an execution whose enabled actors are all asleep is
// cut short. The next execution replays the longest prefix that still has an
// unexplored backtrack entry and takes it; the search is complete when none is
// left. TestDPORMatchesNaiveEnumeration and TestDPORNaiveEveryChoice check
// the reached verdicts and outcomes against a naive enumeration of every
// interleaving of generated small programs; TestDPORNaiveSweep does so on
// the same 100 programs of each generator in every run, and
// TestDPORFixedMatchNaive on hand-written ones that each need one rule
// (a wait/wait race reversed, a sleeper woken by a read/write conflict):
// the DPOR mutants of package mutant fail it.
//
// Cost: an execution replays the previous one's prefix up to its branch
// point; the analysis reuses that prefix's clocks and does not look for its
// races again (they were handled when it first ran), and its scratch (clock
// slab, resource states, step lists) is kept across executions. Races
// counts each race once, when the step that completes it first runs.
type DPOR struct {
	nodes    []dnode // the last execution's path; a dead tail's slices are reused
	prefix   []ranks.ActorID
	complete bool
	cur      *dporRun
	res      map[resKey]int32 // resource → id, stable across executions
	names    map[nameKey]uint64
	// SleepBlocked counts executions cut short because every enabled
	// actor was asleep (their continuations were explored already).
	SleepBlocked int
	// Races counts the reversible races seen, over all executions.
	Races int
	// finished, when set (tests), sees the steps of every execution that
	// ran to its end (was not cut short by its sleep set), in order.
	finished func(steps []dstep)
	// analysed, when set (tests), sees every execution's steps, pseudo-steps
	// in place, after analyse gave them their clocks.
	analysed func(steps []dstep)

	// scratch of analyse, reused by every execution
	seen      []int32 // analyse's scratch: per step, the actors that appeared up to it
	denseOf   []int32 // analyse's scratch: per engine actor, 1 + its dense index (0: not seen)
	clocks    []int32
	rs        []rstate
	lastOf    []int
	preds     []pred
	stride    int     // clock row length (≥ actors seen)
	valid     int     // rows of the slab computed by the last analysis
	merged    []dstep // merged's buffer
	steps     []dstep // the previous execution's steps, for the next one's
	abuf      []ranks.ActorID
	acc       []access
	pseudo    []pseudoStep
	local     []int32             // dporRun.local's buffer
	keep      []access            // long-lived footprints of explored steps (doneAcc), in chunks
	chunks    [][]int32           // buffer id → chunk → 1 + resource id (chunkID)
	slotIDs   [][]int32           // pad name → slot → 1 + resource id (resID)
	actorIDs  [2]map[uint64]int32 // resIssued, resDone: actor → resource id
	padNames  map[*ranks.SignalPad]uint64
	fifoNames map[*ranks.Fifo]uint64
	// The last execution's choices as the engine saw them (spins
	// included) and, per step, how many of them came before its own: the
	// next execution makes the same ones up to its branch point without
	// asking the world which pending steps would spin (replayChoices).
	raw, rawAt        []int32
	spareRaw, spareAt []int32
	ev, spareEv       []bool
	evAt, spareEvAt   []int32
}

type dnode struct {
	enabled   []ranks.ActorID // in queue order
	backtrack actorSet
	done      actorSet
	taken     ranks.ActorID
	doneAcc   []actorAcc                 // footprint of each explored actor's step here
	sleep     map[ranks.ActorID][]access // asleep here when the node was created
}

// keepAcc copies a footprint out of the run's slab into long-lived chunks.
func (d *DPOR) keepAcc(a []access) []access {
	if cap(d.keep)-len(d.keep) < len(a) {
		d.keep = make([]access, 0, max(8192, len(a)))
	}
	base := len(d.keep)
	d.keep = append(d.keep, a...)
	return d.keep[base:len(d.keep):len(d.keep)]
}

// actorSet is a small set of actors (a node's backtrack or done set: a few
// of its enabled actors), kept as a list: a map per node was most of a
// trace's allocation.
type actorSet []ranks.ActorID

func (s actorSet) has(a ranks.ActorID) bool {
	for _, x := range s {
		if x == a {
			return true
		}
	}
	return false
}

func (s *actorSet) add(a ranks.ActorID) {
	if !s.has(a) {
		*s = append(*s, a)
	}
}

type actorAcc struct {
	actor ranks.ActorID
	acc   []access
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
			n := &d.nodes[j]
			for _, a := range n.enabled {
				if _, asleep := n.sleep[a]; n.backtrack.has(a) && !n.done.has(a) && !asleep {
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
		n := &d.nodes[k]
		n.done.add(next)
		n.taken = next
		d.prefix = d.prefix[:0]
		for _, n := range d.nodes {
			d.prefix = append(d.prefix, n.taken)
		}
	}
	if d.res == nil {
		d.res, d.names = map[resKey]int32{}, map[nameKey]uint64{}
	}
	fast, fastEv := 0, 0
	if i > 0 && len(d.prefix)-1 < len(d.rawAt) {
		fast, fastEv = int(d.rawAt[len(d.prefix)-1]), int(d.evAt[len(d.prefix)-1])
	}
	d.cur = &dporRun{d: d, prefix: d.prefix, fast: fast, prevRaw: d.raw, raw: d.spareRaw[:0], rawAt: d.spareAt[:0],
		fastEv: fastEv, prevEv: d.ev, ev: d.spareEv[:0], evAt: d.spareEvAt[:0], steps: d.steps[:0], abuf: d.abuf[:0], acc: d.acc[:0], pseudo: d.pseudo[:0], branch: len(d.prefix) - 1, sleep: map[ranks.ActorID][]access{},
		sent: map[*ranks.Fifo]int{}, recvd: map[*ranks.Fifo]int{}, local: d.local[:0], woken: map[ranks.ActorID]bool{}}
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
		if i < cap(d.nodes) {
			d.nodes = d.nodes[:i+1]
		} else {
			d.nodes = append(d.nodes, dnode{})
		}
		n := &d.nodes[i]
		n.enabled = append(n.enabled[:0], st.enabled...)
		if len(st.enabled) == 0 {
			n.enabled = append(n.enabled, st.actor) // the engine ran it without a choice: it alone was enabled
		}
		n.taken, n.sleep = st.actor, st.sleep
		n.backtrack = append(n.backtrack[:0], st.actor)
		n.done = append(n.done[:0], st.actor)
		n.doneAcc = n.doneAcc[:0]
	}
	for i := max(r.branch, 0); i < len(r.steps); i++ {
		n := &d.nodes[i]
		n.doneAcc = append(n.doneAcc, actorAcc{r.steps[i].actor, d.keepAcc(r.steps[i].acc)})
	}
	if len(d.nodes) > len(r.steps) {
		return fmt.Errorf("dpor: execution has %d steps, shorter than its replayed prefix (%d)", len(r.steps), len(d.nodes))
	}
	// Steps that never ran (spinning when the run ended, a hang) still race
	// with what ran: append them as pseudo-steps, after Flanagan and
	// Godefroid's use of next(s, p) for disabled processes.
	for _, a := range r.blockedActors() {
		st := r.w.NextStep(a)
		r.attempt(a, &st)
	}
	if d.finished != nil && !r.blocked {
		d.finished(r.steps)
	}
	steps := r.merged()
	d.analyse(steps, r.reusable())
	if d.analysed != nil {
		d.analysed(steps)
	}
	d.spareRaw, d.spareAt = d.raw, d.rawAt
	d.raw, d.rawAt = r.raw, r.rawAt
	d.spareEv, d.spareEvAt = d.ev, d.evAt
	d.ev, d.evAt = r.ev, r.evAt
	d.steps, d.abuf, d.acc, d.pseudo, d.local = r.steps[:0], r.abuf[:0], r.acc[:0], r.pseudo[:0], r.local[:0]
	return nil
}

// dstep is one visible step of an execution.
type dstep struct {
	actor   ranks.ActorID
	eng     int32 // the engine actor that ran it (one per ActorID in a run)
	enabled []ranks.ActorID
	acc     []access
	a       int // dense actor index
	local   int // 1-based index among the actor's steps
	clock   []int32
	pseudo  bool  // an attempt that spun (it never ran)
	fifo    bool  // a send or receive (its footprint depends on the FIFO's counters)
	accEnd  int32 // the footprint slab's length after its footprint
	sleep   map[ranks.ActorID][]access
	node    int // index of the state before it (-1 for a pseudo-step)
}

// attempt records a step that would spin as a pseudo-step: it does not
// execute, but it races with the steps that made it spin (the flag another
// waiter consumed, the FIFO slot another sender filled), as in Flanagan and
// Godefroid's check of next(s, p) for disabled processes.
func (r *dporRun) attempt(e int32, st *ranks.Step) {
	if r.blocked {
		return
	}
	if len(st.Takes) > 0 {
		r.woken[st.Actor] = true
	}
	n := *r.localOf(e)
	acc := r.accesses(st, n == 0, false)
	r.pseudo = append(r.pseudo, pseudoStep{pos: len(r.steps),
		step: dstep{actor: st.Actor, eng: e, acc: acc, local: int(n) + 1, pseudo: true, node: -1}})
}

// localOf is the count of engine actor e's steps so far in this execution
// (an engine actor, a host or a task, is one ActorID throughout a run).
func (r *dporRun) localOf(e int32) *int32 {
	if int(e) >= len(r.local) {
		r.local = append(r.local, make([]int32, int(e)+1-len(r.local))...)
	}
	return &r.local[e]
}

type pseudoStep struct {
	pos  int // number of real steps before it
	step dstep
}

// reusable is how many leading merged steps this execution shares with the
// previous one: those before its branch point (real steps and the
// attempts among them replay identically).
func (r *dporRun) reusable() int {
	if r.branch <= 0 {
		return 0
	}
	n := r.branch
	for _, p := range r.pseudo {
		if p.pos < r.branch {
			n++
		}
	}
	return n
}

// merged returns the real steps with the pseudo-steps in place.
func (r *dporRun) merged() []dstep {
	out := r.d.merged[:0]
	defer func() { r.d.merged = out[:0] }()
	k := 0
	for i := range r.steps {
		for k < len(r.pseudo) && r.pseudo[k].pos <= i {
			out = append(out, r.pseudo[k].step)
			k++
		}
		st := r.steps[i]
		st.node = i
		out = append(out, st)
	}
	for ; k < len(r.pseudo); k++ {
		out = append(out, r.pseudo[k].step)
	}
	return out
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
	classAcquire // a kernel taking a pool to become resident (ranks/residency.go)
	classProduce // issue / completion: enables the consumer
	classConsume
	classRelease // a kernel's completion giving its pool back
	classAcquireWoken
)

// reversible reports whether a conflict between an earlier access of class a
// and a later one of class b is a race that could go the other way. Same
// class: yes. A release and a later acquire: only when the acquiring kernel
// was not waiting on the pool (it did not spin on it): then it could have
// become resident before the release.
func reversible(a, b uint8) bool {
	if a == classAcquireWoken {
		a = classAcquire
	}
	switch {
	case b == classAcquireWoken:
		return a == classAcquire
	case a == classRelease && b == classAcquire:
		return true
	}
	return a == b
}

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
	resPool
	resQuery // whether a deferred free's record task is done, as a malloc asks
	resConn  // a stepped connection's counters, tail, head and slots (ranks/stepconn.go)
)

// dporRun is the chooser of one execution.
type dporRun struct {
	w       *ranks.World
	prefix  []ranks.ActorID
	steps   []dstep
	pending []ranks.ActorID // enabled set at the last ChooseItem
	have    bool
	err     error

	d *DPOR
	// Sleep sets (Godefroid 1996; source-DPOR's Sleep): from the branch
	// node on, actors whose step here is already covered by an explored
	// sibling, with their footprints; a state whose enabled actors are all
	// asleep ends the useful part of the execution (sleep-set blocked).
	branch  int
	sleep   map[ranks.ActorID][]access
	blocked bool
	sent    map[*ranks.Fifo]int
	recvd   map[*ranks.Fifo]int
	local   []int32 // per engine actor: its steps so far (localOf)
	pseudo  []pseudoStep
	// woken: actors that spun waiting for residency (their take, when it
	// comes, was enabled by a release)
	woken map[ranks.ActorID]bool
	abuf  []ranks.ActorID            // slab of enabled sets (actorBuf)
	acc   []access                   // slab of this run's footprints (accesses)
	snap  map[ranks.ActorID][]access // the sleep set as of the last snapshot (nil: stale)
	// replayChoices: the engine's choices so far (raw), the number made
	// before each step's own (rawAt), and how many of the previous
	// execution's (prevRaw) to make again unasked (fast): those before its
	// branch point, which find the world in the same states.
	raw, rawAt, prevRaw []int32
	fast                int
	// The same for the observed events (true: a spin), up to the branch
	// step's: before it, a step is the previous execution's (again).
	ev, prevEv []bool
	evAt       []int32
	fastEv     int
}

// Attach implements [Attacher].
func (r *dporRun) Attach(w *ranks.World) {
	r.w = w
	w.Engine().SetObserver(r.observe)
}

func (r *dporRun) Choose(sim.Decision, int) int { return 0 }

func (r *dporRun) ChooseItem(items []sim.Item) int {
	k := r.choose(items)
	r.raw = append(r.raw, int32(k))
	return k
}

// choose is ChooseItem's choice. Before the branch point it is the
// previous execution's (replayChoices): the same prefix of steps from the
// same initial world makes the same choices, spins included, so asking the
// world which pending steps would spin (every pending step, every choice)
// is needed only from the branch point on; the steps before it need no
// enabled set (their nodes exist).
func (r *dporRun) choose(items []sim.Item) int {
	if n := len(r.raw); n < r.fast {
		r.have = false
		return int(r.prevRaw[n])
	}
	r.have = false
	enabled := r.actorBuf(len(items))
	for k, it := range items {
		if r.w.WouldBlock(it.Actor) {
			r.unbuf(len(items))
			return k // spins: take it off the record
		}
		enabled = append(enabled, r.w.ActorOf(it.Actor))
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
		return 0
	}
	if !r.blocked {
		for k, a := range enabled {
			if _, asleep := r.sleep[a]; !asleep {
				return k
			}
		}
	}
	return 0
}

func (r *dporRun) observe(it sim.Item, chosen bool) {
	e := len(r.ev)
	if e < r.fastEv && !r.prevEv[e] && r.again(it, chosen) {
		return
	}
	st := r.w.NextStep(it.Actor)
	r.ev = append(r.ev, st.Block)
	if st.Block {
		r.attempt(it.Actor, &st)
		return
	}
	var enabled []ranks.ActorID
	if chosen && r.have {
		enabled = r.pending
	}
	r.have = false
	i := len(r.steps)
	if i < len(r.prefix) && r.prefix[i] != st.Actor && r.err == nil {
		r.err = fmt.Errorf("dpor: replay diverged at step %d: ran %s, want %s", i, st.Actor, r.prefix[i])
	}
	if r.blocked {
		return
	}
	if _, asleep := r.sleep[st.Actor]; asleep && i > r.branch {
		// Every enabled actor is asleep: this execution adds nothing new.
		r.blocked = true
		r.d.SleepBlocked++
		return
	}
	n := r.localOf(it.Actor)
	*n++
	local := int(*n)
	acc := r.accesses(&st, local == 1, true)
	var sleepHere map[ranks.ActorID][]access
	if i == r.branch {
		// Branching: the siblings explored before sleep, with their steps here.
		n := &r.d.nodes[i]
		r.snap = nil
		for q, a := range n.sleep {
			r.sleep[q] = a
		}
		for _, qa := range n.doneAcc {
			if qa.actor != st.Actor {
				r.sleep[qa.actor] = qa.acc
			}
		}
	}
	if i > r.branch && len(r.sleep) > 0 {
		// Snapshots are read-only once taken: consecutive steps share one
		// until the sleep set changes.
		if r.snap == nil {
			r.snap = make(map[ranks.ActorID][]access, len(r.sleep))
			for q, a := range r.sleep {
				r.snap[q] = a
			}
		}
		sleepHere = r.snap
	}
	if i >= r.branch && !mutant.On(mutant.DPORSleepMissedWakeup) {
		for q, a := range r.sleep {
			if !independent(a, acc) {
				delete(r.sleep, q)
				r.snap = nil
			}
		}
	}
	r.stepDone(chosen, e)
	r.steps = append(r.steps, dstep{actor: st.Actor, eng: it.Actor, enabled: enabled, acc: acc, accEnd: int32(len(r.acc)), local: local, sleep: sleepHere, fifo: st.Instr != nil && st.Instr.Fifo != nil})
}

// stepDone records, for the step observed as event e, how many engine
// choices and observed events came before its own (replayChoices).
func (r *dporRun) stepDone(chosen bool, e int) {
	before := len(r.raw)
	if chosen {
		before-- // its own choice
	}
	r.rawAt = append(r.rawAt, int32(before))
	r.evAt = append(r.evAt, int32(e))
}

// again takes the step before the branch point that event it is from the
// previous execution, which ran the same one there: the step slab still
// holds it at its index, and the footprint slab its footprint at the same
// place (both are refilled in the same order). Asking the world for the
// step (NextStep) and working out its footprint again is needed only from
// the branch point on. A step that moves a FIFO's counters is worked out
// again (its footprint depends on them); so is any that does not match.
func (r *dporRun) again(it sim.Item, chosen bool) bool {
	i := len(r.steps)
	if i >= r.branch || i >= cap(r.steps) {
		return false
	}
	st := &r.steps[: i+1 : i+1][i] // in place: a step is large
	if st.fifo || st.pseudo || r.w.ActorOf(it.Actor) != st.actor || int(*r.localOf(it.Actor))+1 != st.local || int(st.accEnd) > cap(r.acc) || st.accEnd < int32(len(r.acc)) {
		return false
	}
	r.ev = append(r.ev, false)
	r.have = false
	*r.localOf(it.Actor)++
	r.acc = r.acc[:st.accEnd]
	st.enabled, st.sleep, st.eng = nil, nil, it.Actor
	r.stepDone(chosen, len(r.ev)-1)
	r.steps = r.steps[:i+1] // the step at its index, kept as it was
	return true
}

// actorBuf returns an empty slice with room for n actors, carved from the
// run's slab (an enabled set per step: thousands of tiny slices).
func (r *dporRun) actorBuf(n int) []ranks.ActorID {
	if cap(r.abuf)-len(r.abuf) < n {
		r.abuf = make([]ranks.ActorID, 0, max(4096, 2*cap(r.abuf), 2*n))
	}
	s := r.abuf[len(r.abuf) : len(r.abuf) : len(r.abuf)+n]
	r.abuf = r.abuf[:len(r.abuf)+n]
	return s
}

// unbuf gives back the last actorBuf(n) when it was not kept.
func (r *dporRun) unbuf(n int) { r.abuf = r.abuf[:len(r.abuf)-n] }

// blockedActors are the actors still spinning at the end of a run that was
// not cut short by its sleep set.
func (r *dporRun) blockedActors() []int32 {
	if r.blocked {
		return nil
	}
	return r.w.Blocked()
}

// independent reports whether two footprints commute: no resource touched by
// both with a write.
func independent(a, b []access) bool {
	for _, x := range a {
		for _, y := range b {
			if x.res == y.res && (x.write || y.write) && (x.write && y.write || !mutant.On(mutant.DPORSleepReadWriteIndependent)) {
				return false
			}
		}
	}
	return true
}

// waitRace reports whether steps a and b both wait on one signal slot
// (what mutant.DPORWaitRacesDropped leaves unreversed).
func waitRace(a, b *dstep) bool {
	for _, x := range a.acc {
		for _, y := range b.acc {
			if x.res == y.res && x.class == classWait && y.class == classWait {
				return true
			}
		}
	}
	return false
}

// name interns a pad (name, rank) or a FIFO (name, -1): resource keys are
// stable across executions, so footprints kept in sleep sets compare.
func (r *dporRun) name(n string, rank int) uint64 {
	k := nameKey{n, rank}
	v, ok := r.d.names[k]
	if !ok {
		v = uint64(len(r.d.names))
		r.d.names[k] = v
	}
	return v
}

// chunkID is the resource id of chunk c of buffer id: a table by buffer
// and chunk (buffer ids follow allocation order, the same in every
// execution), in front of the resource map.
func (r *dporRun) chunkID(id, c int) int32 {
	d := r.d
	if id >= len(d.chunks) {
		d.chunks = append(d.chunks, make([][]int32, id+1-len(d.chunks))...)
	}
	row := d.chunks[id]
	if c >= len(row) {
		row = append(row, make([]int32, c+1-len(row))...)
		d.chunks[id] = row
	}
	if v := row[c]; v > 0 {
		return v - 1
	}
	k := resKey{kind: resChunk, a: uint64(id), b: uint64(c)}
	v, ok := d.res[k]
	if !ok {
		v = int32(len(d.res))
		d.res[k] = v
	}
	row[c] = v + 1
	return v
}

// padName and fifoName are name for a pad or a FIFO, memoised by pointer:
// the micro-ops of a template's copies name the template's own pads and
// FIFOs, the same objects in every execution, so the string is hashed once.
// (A world built afresh per execution has new objects: its names are
// looked up again, with the same result; the memo keeps the old ones alive,
// so a pointer is never reused for another pad.)
func (r *dporRun) padName(p *ranks.SignalPad) uint64 {
	if v, ok := r.d.padNames[p]; ok {
		return v
	}
	if r.d.padNames == nil {
		r.d.padNames = map[*ranks.SignalPad]uint64{}
	}
	v := r.name(p.Name, p.Rank)
	r.d.padNames[p] = v
	return v
}

func (r *dporRun) fifoName(f *ranks.Fifo) uint64 {
	if v, ok := r.d.fifoNames[f]; ok {
		return v
	}
	if r.d.fifoNames == nil {
		r.d.fifoNames = map[*ranks.Fifo]uint64{}
	}
	v := r.name(f.Name, -1)
	r.d.fifoNames[f] = v
	return v
}

// nameKey is a pad (name, rank) or a FIFO (name, -1).
type nameKey struct {
	name string
	rank int
}

func (r *dporRun) add(out []access, k resKey, write bool, class uint8) []access {
	return append(out, access{res: r.d.resID(k), write: write, class: class})
}

// resID is the id of resource k: through a table by pad and slot for a
// signal slot, a map by actor for an issue or a completion (a join's first
// step lists every node of its replay), and the resource map for the rest
// (the tables are in front of it: ids are the map's).
func (d *DPOR) resID(k resKey) int32 {
	var memo *int32
	switch k.kind {
	case resSlot:
		if k.a >= uint64(len(d.slotIDs)) {
			d.slotIDs = append(d.slotIDs, make([][]int32, k.a+1-uint64(len(d.slotIDs)))...)
		}
		row := d.slotIDs[k.a]
		if k.b >= uint64(len(row)) {
			row = append(row, make([]int32, k.b+1-uint64(len(row)))...)
			d.slotIDs[k.a] = row
		}
		memo = &row[k.b]
	case resIssued, resDone:
		m := &d.actorIDs[k.kind-resIssued]
		if *m == nil {
			*m = map[uint64]int32{}
		}
		if v, ok := (*m)[k.a]; ok {
			return v
		}
		v := d.mapID(k)
		(*m)[k.a] = v
		return v
	}
	if memo != nil && *memo > 0 {
		return *memo - 1
	}
	v := d.mapID(k)
	if memo != nil {
		*memo = v + 1
	}
	return v
}

func (d *DPOR) mapID(k resKey) int32 {
	id, ok := d.res[k]
	if !ok {
		id = int32(len(d.res))
		d.res[k] = id
	}
	return id
}

// accesses is the footprint of step st (first: the actor's first visible
// step, which consumes its issue and its dependencies' completions).
func (r *dporRun) accesses(st *ranks.Step, first, commit bool) []access {
	base := len(r.acc)
	r.acc = r.accessesInto(r.acc, st, first, commit)
	return r.acc[base:len(r.acc):len(r.acc)]
}

// accessesInto appends the footprint of st to out: the run's slab of
// footprints (what a node keeps is copied out at End).
func (r *dporRun) accessesInto(out []access, st *ranks.Step, first, commit bool) []access {
	if first && st.Kind != ranks.StepIssue {
		out = r.add(out, resKey{kind: resIssued, a: uint64(st.Actor)}, false, classConsume)
		for _, d := range st.Deps {
			out = r.add(out, resKey{kind: resDone, a: uint64(d)}, false, classConsume)
		}
	}
	// Residency: becoming resident takes a contended pool (a write: it may
	// leave another kernel short); completing gives it back (a read: two
	// releases commute, and every later take is ordered after it).
	// Uncontended pools never make a kernel wait: their hand-outs commute
	// and are left out.
	for _, p := range st.Takes {
		if p.Contended {
			cls := classAcquire
			if r.woken[st.Actor] {
				cls = classAcquireWoken
			}
			out = r.add(out, resKey{kind: resPool, a: uint64(p.Pool)}, true, cls)
		}
	}
	if st.Kind == ranks.StepComplete {
		for _, p := range st.Returns {
			if p.Contended {
				out = r.add(out, resKey{kind: resPool, a: uint64(p.Pool)}, false, classRelease)
			}
		}
	}
	switch st.Kind {
	case ranks.StepIssue:
		// A host issuing after a host sync consumes the sync's completion.
		// The edge is redundant for what DPOR reaches, and no test fails
		// without it (checked by hand: TestDPORHostSyncMatchesNaive and
		// the whole package still pass): (1) every task lowered after a
		// sync lists it among its deps (ranks/program.go, lastSync), so its
		// first step consumes the sync's completion itself and everything
		// the issued work does is ordered after the sync anyway; (2) an
		// issue step touches only resIssued and resDone, structural classes
		// that never race, so the host is never e or e' of a race; (3) the
		// host is not enabled until the sync completes, so it is never an
		// enabled initial of notdep(e).e' nor in a backtrack set before the
		// completion (reverse), and never asleep while the sync is pending
		// (a sleeping host step can only be woken by a write of resDone of
		// a sync that is already done). Without it, only the host's own
		// clock misses the sync, and only host steps (which race with
		// nothing) see that clock. It stays because it states the
		// enabling honestly and keeps (1) from being load-bearing alone.
		// (A malloc's reads of deferred frees' events, below, are data
		// and do race with the record tasks' completions, except those a
		// sync the host waited for ordered before it.)
		for _, d := range st.Deps {
			out = r.add(out, resKey{kind: resDone, a: uint64(d)}, false, classConsume)
		}
		for _, a := range st.Issues {
			out = r.add(out, resKey{kind: resIssued, a: uint64(a)}, true, classProduce)
		}
		// A malloc asks whether each pending free's events are done
		// (ranks/dynalloc.go): a read of the record task's completion as
		// data, reversible against it, not the structural edge of resDone.
		if !mutant.On(mutant.DPORFreeQueryIndependent) {
			for _, q := range st.Queries {
				out = r.add(out, resKey{kind: resQuery, a: uint64(q)}, false, classMem)
			}
		}
	case ranks.StepComplete:
		out = r.add(out, resKey{kind: resDone, a: uint64(st.Actor)}, true, classProduce)
		for _, f := range st.Conns { // the step counters written back
			out = r.add(out, resKey{kind: resConn, a: r.fifoName(f)}, true, classMem)
		}

		if st.FreeEvent {
			out = r.add(out, resKey{kind: resQuery, a: uint64(st.Actor)}, true, classMem)
		}
	case ranks.StepInstr:
		in := st.Instr
		for _, f := range st.Conns { // the step counters a kernel's first micro-op loads
			out = r.add(out, resKey{kind: resConn, a: r.fifoName(f)}, true, classMem)
		}
		// A chunk and the chunks of other tensors its memory overlaps (a
		// caching-allocator block reused after a free) are one resource.
		mem := func(b *ranks.Buffer, c int, write bool) {
			out = append(out, access{res: r.chunkID(b.BufferID(), c), write: write, class: classMem})
			// A micro-op names a template's buffer; the aliases a malloc
			// made at run time are the running world's (ranks/dynalloc.go).
			r.w.Buffer(b).Aliases(c, func(id, ch int) {
				out = append(out, access{res: r.chunkID(id, ch), write: write, class: classMem})
			})
		}
		for _, s := range in.Srcs {
			for i := 0; i < in.N; i++ {
				mem(s.Buf, s.Lo+i, false)
			}
		}
		if in.Dst != nil && (in.Op == ranks.OpCompute || in.Op == ranks.OpRecv || in.Op == ranks.OpRecvSend || in.Op == ranks.OpFlagPut) {
			for i := 0; i < in.N; i++ {
				mem(in.Dst, in.DstLo+i, true)
			}
		}
		if in.Op == ranks.OpFlagWait {
			// a satisfied flag wait reads its region (ranks/flags.go)
			for i := 0; i < in.N; i++ {
				mem(in.Dst, in.DstLo+i, false)
			}
		}
		switch in.Op {
		case ranks.OpPut:
			out = r.add(out, resKey{kind: resSlot, a: r.padName(in.Pad), b: uint64(in.Slot)}, true, classPut)
		case ranks.OpWait:
			out = r.add(out, resKey{kind: resSlot, a: r.padName(in.Pad), b: uint64(in.Slot)}, true, classWait)
		case ranks.OpSend:
			out = r.send(out, in.Fifo, commit)
		case ranks.OpRecv:
			out = r.recv(out, in.Fifo, commit)
		case ranks.OpRecvSend:
			out = r.recv(out, in.Fifo, commit)
			out = r.send(out, in.Fwd, commit)
		}
		if st.Instr.Op == ranks.OpSend || st.Instr.Op == ranks.OpRecv || st.Instr.Op == ranks.OpRecvSend {
			// A stepped connection's state is read and written by every use
			// of either end (its counters, tail, head, slots): one resource,
			// every use a write. Coarser than the queue's footprint, never
			// finer.
			for _, f := range [2]*ranks.Fifo{in.Fifo, in.Fwd} {
				if f != nil && f.Stepped {
					out = r.add(out, resKey{kind: resConn, a: r.fifoName(f)}, true, classMem)
				}
			}
		}
	}
	return out
}

// send is the footprint of a push into f: its tail, the message slot it
// fills and (once f has wrapped) the slot the receive of Cap messages ago
// freed.
func (r *dporRun) send(out []access, f *ranks.Fifo, commit bool) []access {
	k := r.sent[f]
	if commit {
		r.sent[f]++
	}
	fn := r.fifoName(f)
	out = r.add(out, resKey{kind: resFifoTail, a: fn}, true, classSend)
	out = r.add(out, resKey{kind: resFifoMsg, a: fn, b: uint64(k)}, true, classSend)
	if k >= f.Cap {
		out = r.add(out, resKey{kind: resFifoFree, a: fn, b: uint64(k - f.Cap)}, false, classSend)
	}
	return out
}

// recv is the footprint of a pop from f: its head, the message it takes and
// the slot it frees.
func (r *dporRun) recv(out []access, f *ranks.Fifo, commit bool) []access {
	k := r.recvd[f]
	if commit {
		r.recvd[f]++
	}
	fn := r.fifoName(f)
	out = r.add(out, resKey{kind: resFifoHead, a: fn}, true, classRecv)
	out = r.add(out, resKey{kind: resFifoMsg, a: fn, b: uint64(k)}, false, classRecv)
	out = r.add(out, resKey{kind: resFifoFree, a: fn, b: uint64(k)}, true, classRecv)
	return out
}

// analyse builds happens-before over steps and adds backtrack points for
// every race.
//
// The first reuse steps are those of the previous execution (the replayed
// prefix, before its branch point): their clocks are still in the slab,
// and their races were analysed then, so only their effect on the
// resources' state is replayed.
func (d *DPOR) analyse(steps []dstep, reuse int) {
	// The analysis's scratch lives with the search and is reused by every
	// execution: a trace allocates nearly nothing here.
	// Actors are numbered densely in order of first appearance, through
	// a table by engine actor (an engine actor is one ActorID throughout
	// a run) rather than a map by ActorID: a lookup per step.
	// seen[i] is how many actors appeared up to step i: every entry of
	// its clock from there on is 0 (its own actor and its predecessors'
	// appeared by then), so a copy or join of it stops there. A trace of
	// tp8 one layer joins clocks of 196 such entries on average, of 264
	// actors in rows of 330.
	na := 0
	if cap(d.seen) < len(steps) {
		d.seen = make([]int32, len(steps), len(steps)+len(steps)/4)
	}
	seen := d.seen[:len(steps)]
	for i := range steps {
		e := steps[i].eng
		if int(e) >= len(d.denseOf) {
			d.denseOf = append(d.denseOf, make([]int32, int(e)+1-len(d.denseOf))...)
		}
		if d.denseOf[e] == 0 {
			na++
			d.denseOf[e] = int32(na)
		}
		steps[i].a = int(d.denseOf[e]) - 1
		seen[i] = int32(na)
	}
	for i := range steps {
		d.denseOf[steps[i].eng] = 0 // clean for the next execution
	}
	if na > d.stride {
		d.stride, reuse = na+na/4, 0 // rows get longer: recompute every clock
	}
	reuse = min(reuse, d.valid, len(steps))
	// One clock row per step, carved from one slab.
	stride := d.stride
	if need := len(steps) * stride; cap(d.clocks) < need {
		c := make([]int32, need+need/4)
		copy(c, d.clocks[:reuse*stride])
		d.clocks = c
	}
	slab := d.clocks[:len(steps)*stride]
	clear(slab[reuse*stride:])
	d.valid = len(steps)
	if n := len(d.res); cap(d.rs) < n {
		d.rs = make([]rstate, n, n+n/4)
	}
	d.rs = d.rs[:len(d.res)]
	for i := range d.rs {
		d.rs[i] = rstate{lastW: -1, reads: d.rs[i].reads[:0]}
	}
	rs := d.rs
	if cap(d.lastOf) < na {
		d.lastOf = make([]int, na)
	}
	lastOf := d.lastOf[:na]
	for i := range lastOf {
		lastOf[i] = -1
	}
	hb := func(i, k int) bool { return int(steps[k].clock[steps[i].a]) >= steps[i].local } // i → k (or i == k)
	preds := d.preds[:0]
	defer func() { d.preds = preds[:0] }()
	addPred := func(i int, conflict, reversible, known, edge bool) {
		for p := range preds {
			if preds[p].i == i {
				preds[p].conflict = preds[p].conflict || conflict
				preds[p].reversible = preds[p].reversible && reversible
				preds[p].known = preds[p].known || known
				preds[p].hbEdge = preds[p].hbEdge || edge
				return
			}
		}
		preds = append(preds, pred{i, conflict, reversible, known, edge})
	}
	for j := range steps {
		sj := &steps[j]
		if j < reuse {
			sj.clock = slab[j*stride : (j+1)*stride : (j+1)*stride]
			goto update
		}
		preds = preds[:0]
		if p := lastOf[sj.a]; p >= 0 {
			addPred(p, false, false, true, true)
		}
		for _, ac := range sj.acc {
			st := &rs[ac.res]
			structural := ac.class == classConsume || ac.class == classProduce
			if st.lastW >= 0 {
				w := st.lastW
				addPred(w, true, reversible(classOf(steps[w], ac.res), ac.class), structural, true)
			}
			if ac.write {
				for _, rd := range st.reads {
					addPred(rd, true, reversible(classOf(steps[rd], ac.res), ac.class), structural, true)
				}
			}
			// The last step of the same sync class is a race candidate even
			// when a step of another class came between (a flag consumed by
			// one waiter and set again by a put that spun on it): another
			// waiter could have consumed the first flag.
			if cls := syncClass(ac.class); cls >= classPut && cls <= classAcquire {
				if c := st.lastCls[cls] - 1; c >= 0 && c != st.lastW {
					addPred(c, true, true, false, false)
				}
			}
		}
		{
			clock := slab[j*stride : (j+1)*stride : (j+1)*stride]
			// The actor's own previous step comes first (preds[0] when
			// there is one): a copy of its clock. A predecessor it
			// already knows of adds nothing (its clock is below), so the
			// join over it is skipped.
			own := -1
			if p := lastOf[sj.a]; p >= 0 {
				copy(clock, steps[p].clock[:seen[p]])
				own = p
			}
			for _, p := range preds {
				if !p.hbEdge || p.i == own || int(clock[steps[p.i].a]) >= steps[p.i].local {
					continue
				}
				pc := steps[p.i].clock[:seen[p.i]]
				c := clock[:len(pc)]
				for a, v := range pc {
					c[a] = max(c[a], v) // a conditional move (ranks/hb's Join)
				}
			}
			clock[sj.a] = int32(sj.local)
			sj.clock = clock
			// Races (Flanagan and Godefroid's test): a same-class conflicting
			// step of another actor that this actor did not already know of
			// through program structure (its own previous step, its issue, its
			// dependencies). Synchronisation edges into this very step do not
			// count: they are what a reordering would change.
			for _, p := range preds {
				if !p.conflict || !p.reversible || steps[p.i].a == sj.a || steps[p.i].pseudo {
					continue
				}
				race := true
				for _, q := range preds {
					if q.known && q.i != p.i && hb(p.i, q.i) {
						race = false
						break
					}
				}
				if race && mutant.On(mutant.DPORWaitRacesDropped) && waitRace(&steps[p.i], sj) {
					race = false
				}
				if race {
					d.Races++
					d.reverse(steps, p.i, j)
				}
			}
		}
	update:
		if sj.pseudo {
			continue // it did not run: nothing happens after it
		}
		// Update resource states.
		for _, ac := range sj.acc {
			st := &rs[ac.res]
			if cls := syncClass(ac.class); cls >= classPut && cls <= classAcquire {
				st.lastCls[cls] = j + 1
			}
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

// syncClass folds a woken acquire into acquires.
func syncClass(c uint8) uint8 {
	if c == classAcquireWoken {
		return classAcquire
	}
	return c
}

// pred is a step that a step of the analysis depends on or races with.
type pred struct {
	i          int
	conflict   bool
	reversible bool
	known      bool // program structure (same actor, issue, dependency)
	hbEdge     bool // a real dependence (not just a same-class candidate)
}

// rstate is the analysis's view of one resource: its last writer, the
// reads since, and the last step of each sync class on it.
type rstate struct {
	lastW   int
	reads   []int
	lastCls [classAcquire + 1]int // +1; 0: none
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
	n := &d.nodes[steps[e].node]
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
			return n.backtrack.has(sk.actor)
		}
		return false
	}
	for k := e + 1; k < e2; k++ {
		if steps[k].pseudo || hb(e, k) {
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
		n.backtrack.add(pick)
		return
	}
	for _, a := range n.enabled {
		n.backtrack.add(a)
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
