package ranks

// Retiring what no later operation can reach.
//
// A run used to keep every finished task's clock snapshot until the world
// was dropped: at 1,024 ranks × 61 layers that was gigabytes kept for
// nothing, since a snapshot (task.done) is read only when a task that
// depends on the finished one starts (acquireDeps). The plan knows how many
// nodes depend on each node (plan.users), so each task counts the
// dependents still to start, made or still to be made (task.users); when
// the last one has acquired the snapshot, the task lets it go and the
// collector takes it back.
//
// A graph replay's join task depends on every task of its replay, so it
// would keep every snapshot of the replay alive until the replay ends.
// Instead, each dependency's snapshot is joined into the join's own
// accumulator as the dependency completes (kept in the join's done field
// until it starts), and the join acquires the accumulator when it starts.
// Joining clocks is a pointwise maximum (associative, commutative,
// idempotent), so the lane's clock after the join starts is exactly what
// acquiring each snapshot in turn gave. (In a capture the driver accepts,
// every stream joins back into the origin stream, whose last task then
// covers all of them, so these acquisitions teach the join's lane nothing
// new; they are kept so that a join means exactly what it did.)
//
// Retirement never changes a result: [World.KeepHistory] turns it off, and
// TestRetireSameResults compares verdicts, findings and trace hashes of
// both on every built-in scenario.

// KeepHistory turns retirement off for w's run: every finished task keeps
// its clock snapshot, and a replay's join acquires its dependencies' one by
// one, as before retirement existed. A debug switch: results are the same
// either way, only memory differs. Call it before Run.
func (w *World) KeepHistory() { w.keepHistory = true }

// History is what a run kept of its past: the clock snapshots finished
// tasks held (and replay joins' accumulators), now and at most at once.
type History struct {
	Snapshots, PeakSnapshots int
	// PeakTasks is the most tasks alive at once in a graph-mode run that
	// made them on demand (0 otherwise: every task lives to the end).
	PeakTasks int
	// FoldedOps is how many folded ranks' task ops were allocated: a
	// retired task's is reused, so at most PeakTasks.
	FoldedOps int
}

// History returns what w's run kept (see [History]). With retirement the
// peak follows the work in flight; with [World.KeepHistory] it is every
// task of the run.
func (w *World) History() History {
	h := w.hist
	h.PeakTasks = w.lz.peak
	h.FoldedOps = w.lz.opsMade
	return h
}

// hold and unhold count the snapshots tasks hold.
func (w *World) hold() {
	w.hist.Snapshots++
	w.hist.PeakSnapshots = max(w.hist.PeakSnapshots, w.hist.Snapshots)
}

func (w *World) unhold(t *task) {
	w.snapPool.Disown(t.done, w.keepHistory)
	t.done = nil
	w.hist.Snapshots--
}

// isJoin reports whether t is a graph replay's join task.
func (w *World) isJoin(t *task) bool { return t.node < 0 && t.op == nil }

// acquireDeps joins the snapshots of t's finished dependencies into t's
// lane's clock as t starts, and retires the snapshots t was the last to
// need.
func (w *World) acquireDeps(t *task) {
	if w.keepHistory || !w.isJoin(t) {
		for _, d := range t.deps {
			dt := w.tasks[d]
			// A dependency on the lane's own earlier task (stream order)
			// hands back a snapshot of this very clock, which has only
			// grown since: joining it changes nothing.
			if dt.lane != t.lane {
				w.acquireVC(t.lane, dt.done)
			}
			if !w.keepHistory {
				if dt.users--; dt.users == 0 {
					w.unhold(dt)
					w.retireTask(dt)
				}
			}
		}
		return
	}
	// A join: its dependencies' snapshots were accumulated as they
	// completed (accumulate); nil when none is on another lane.
	if t.done != nil {
		w.acquireVC(t.lane, t.done)
		w.unhold(t)
	}
}

// accumulate joins finished task d's snapshot into join task j's
// accumulator (j.done until j starts), when d is on another lane.
func (w *World) accumulate(j, d *task) {
	if d.lane == j.lane {
		return
	}
	if j.done == nil {
		if n := len(w.vc); n <= denseLanes && !w.sparse {
			j.done = w.denseVC(n)
		} else {
			j.done = &VC{}
		}
		w.hold()
	}
	j.done.Join(d.done)
}

// retireDone runs when t has just completed with its snapshot in t.done:
// it hands the snapshot to the replay joins waiting for t, and drops it
// when no other task will acquire it.
func (w *World) retireDone(t *task) {
	w.hold()
	if w.keepHistory {
		return
	}
	if w.lz.on {
		if !w.isJoin(t) {
			w.accumulate(w.tasks[w.firstOf(t)+int32(len(w.plan.nodes[t.rank]))], t) // t's replay's join
		}
	} else {
		for _, id := range t.dependents {
			if d := w.tasks[id]; w.isJoin(d) {
				w.accumulate(d, t)
			}
		}
	}
	if t.users == 0 {
		w.unhold(t)
	}
}

// Tasks made when they are ready, and retired when they are finished.
//
// A graph launch used to make every task of the replay at once: at 1,024
// ranks × 61 layers × 2 replays, 1.5 M tasks of 256 bytes, all alive from
// the first microsecond to the end. In graph mode a launch now only
// reserves the replay's task ids (in node order, as before) and counts each
// node's unfinished dependencies; a task is made when its count reaches
// zero (it is then scheduled exactly as before), and a finished task whose
// snapshot nobody will acquire any more (users 0) is retired: its struct
// goes to a free list for the next task made. What reports need of a
// retired task (rank, stream, op, replay, call) comes back from its id
// (task): the launch's first id, the node and the plan name it.
//
// The engine's keys and the order of every Schedule call are those of the
// eager making: a completing task tells its dependents in the order they
// were added before (plan.rdeps in node order, then the replay's join), so
// trace hashes are unchanged (TestRetireSameResults). A timeline (which
// draws every task after the run) and KeepHistory make every task at
// launch, as before.

// lazyTasks is the bookkeeping of graph-mode tasks made on demand.
type lazyTasks struct {
	on bool
	// per task id: the unfinished dependencies of a task not made yet,
	// and whether it was retired
	waiting []int32
	retired []bool
	// per task id: a retired launch's (op, stream) name id and rank, what
	// a race check asks of the other side of most pairs (taskNameIDOf);
	// name 0: not kept
	who []retiredWho
	// per launch of a replay, in launch order: its first task id (they
	// grow) and its slot (rank × replays + replay); a task's rank, node
	// and replay follow from its launch (identOf), so nothing per task
	// says them
	launchFirst, launchSlot []int32
	// per rank × replay: the first task id of the launch, and the join the
	// replay's first nodes wait for (-1: none)
	first, prev []int32
	free        []*task     // retired structs, for the next task made
	freeOps     []*foldedOp // retired tasks' folded ops, for the next folded task
	opsMade     int         // folded ops allocated (History.FoldedOps)
	made, peak  int         // tasks alive (made, not retired), and the most at once
}

type taskIdent struct{ rank, node, replay int32 }

// retiredWho is a retired task's name id and rank (lazyTasks.who).
type retiredWho struct{ name, rank int32 }

// identOf returns the rank, node (-1: the replay's join) and replay of task
// id of a lazy launch.
func (w *World) identOf(id int32) taskIdent {
	lz := &w.lz
	lo, hi := 0, len(lz.launchFirst)-1
	for lo < hi { // the last launch that starts at or before id
		mid := int(uint(lo+hi+1) >> 1)
		if lz.launchFirst[mid] <= id {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	slot := lz.launchSlot[lo]
	r, replay := slot/int32(w.cfg.Replays), slot%int32(w.cfg.Replays)
	node := id - lz.launchFirst[lo]
	if int(node) == len(w.plan.nodes[r]) {
		node = -1
	}
	return taskIdent{r, node, replay}
}

// launchLazy is stepHost's graph launch of rank r's replay with tasks
// made on demand.
func (w *World) launchLazy(r int, replay int32) {
	h := &w.hosts[r]
	lz := &w.lz
	first := int32(len(w.tasks))
	slot := r*w.cfg.Replays + int(replay)
	lz.first[slot], lz.prev[slot] = first, h.prevJoin
	lz.launchFirst, lz.launchSlot = append(lz.launchFirst, first), append(lz.launchSlot, int32(slot))
	var prevJoin *task
	if h.prevJoin >= 0 {
		prevJoin = w.tasks[h.prevJoin] // alive: its users (this replay's first nodes) have not started
	}
	for _, n := range h.nodes {
		id := int32(len(w.tasks))
		wait := int32(len(n.deps))
		if len(n.deps) == 0 && prevJoin != nil && prevJoin.state != done {
			wait++
			prevJoin.dependents = w.appendI32(prevJoin.dependents, id)
		}
		w.tasks = append(w.tasks, nil)
		lz.waiting = append(lz.waiting, wait)
		lz.retired = append(lz.retired, false)
		lz.who = append(lz.who, retiredWho{})
	}
	join := w.allocTask(task{id: int32(len(w.tasks)), rank: r, stream: 0, lane: w.laneBase[r], replay: replay, node: -1, inst: Instance{Call: -1}})
	if h.next < w.cfg.Replays {
		join.users = w.plan.roots[r]
	}
	w.tasks = append(w.tasks, join)
	lz.waiting = append(lz.waiting, 0)
	lz.retired = append(lz.retired, false)
	lz.who = append(lz.who, retiredWho{})
	w.alive()
	join.deps = w.int32s(len(h.nodes))
	for i := range h.nodes {
		join.deps = append(join.deps, first+int32(i))
	}
	join.waiting = len(h.nodes)
	h.prevJoin = join.id
	w.noteLaunch(r, replay)
	for i := range h.nodes {
		if id := first + int32(i); lz.waiting[id] == 0 {
			w.issue(w.makeIn(id, taskIdent{int32(r), int32(i), replay}))
		}
	}
	w.issue(join)
}

// alive counts a task made.
func (w *World) alive() {
	w.lz.made++
	w.lz.peak = max(w.lz.peak, w.lz.made)
}

// make makes task id of a lazy launch, as newTask would have at launch.
func (w *World) make(id int32) *task { return w.makeIn(id, w.identOf(id)) }

// makeIn is make for a caller that knows id's rank, node and replay (in,
// what identOf would find).
func (w *World) makeIn(id int32, in taskIdent) *task {
	lz := &w.lz
	r := int(in.rank)
	n := w.plan.nodes[r][in.node]
	p := w.progs[r]
	op := &p.Ops[n.op]
	if p.fold != nil && op.Kernel != nil {
		// A launch of a folded rank: its own renamed op (a host op is
		// the proto's as it is).
		var fo *foldedOp
		if k := len(lz.freeOps); k > 0 {
			fo = lz.freeOps[k-1]
			lz.freeOps = lz.freeOps[:k-1]
		} else {
			fo = new(foldedOp)
			lz.opsMade++
		}
		op = p.taskOpIn(n.op, fo)
	}
	slot := r*w.cfg.Replays + int(in.replay)
	first := lz.first[slot]
	tv := task{id: id, rank: r, stream: n.stream, lane: w.laneBase[r] + int32(n.stream), op: op, replay: in.replay, node: int32(n.op),
		inst: Instance{Call: w.plan.opCall[r][n.op], Replay: in.replay}, users: w.plan.users[r][in.node], waiting: int(lz.waiting[id]), issued: true}
	if op.Kernel != nil {
		tv.sig = op.Kernel.Sig
	}
	var t *task
	if k := len(lz.free); k > 0 {
		t = lz.free[k-1]
		lz.free = lz.free[:k-1]
		*t = tv
	} else {
		t = w.allocTask(tv)
	}
	w.alive()
	t.deps = w.int32s(len(n.deps))
	for _, d := range n.deps {
		t.deps = append(t.deps, first+d)
	}
	if len(n.deps) == 0 && lz.prev[slot] >= 0 {
		t.deps = w.appendI32(t.deps, lz.prev[slot])
	}
	w.tasks[id] = t
	return t
}

// firstOf is the first task id of the replay live task t (not a join) is
// in: its node is t.id less that, and its replay's join is that plus the
// rank's node count. It is identOf's answer read off t, which make filled
// in from it, without identOf's search over the launches (twice per task
// finished, it was a twentieth of a random tp8 schedule).
func (w *World) firstOf(t *task) int32 {
	return w.lz.first[t.rank*w.cfg.Replays+int(t.replay)]
}

// completeLazy tells finished task t's dependents, in the order eager
// making added them: the replay's nodes that depend on t's node, then the
// replay's join (for a join: the next replay's first nodes). It then
// retires t if nobody will acquire its snapshot.
func (w *World) completeLazy(t *task) {
	if w.isJoin(t) {
		for _, id := range t.dependents {
			w.depDone(id)
		}
	} else {
		first := w.firstOf(t)
		for _, k := range w.plan.rdeps[t.rank][t.id-first] {
			w.depDoneIn(first+k, taskIdent{int32(t.rank), k, t.replay})
		}
		w.depDone(first + int32(len(w.plan.nodes[t.rank]))) // t's replay's join
	}
	if t.users == 0 {
		w.retireTask(t)
	}
}

// depDone counts one finished dependency of task id, making and
// scheduling it when it was the last.
func (w *World) depDone(id int32) { w.depDoneIn(id, taskIdent{rank: -1}) }

// depDoneIn is depDone with id's rank, node and replay in in when the
// caller knows them (rank -1: it does not, identOf finds them).
func (w *World) depDoneIn(id int32, in taskIdent) {
	if d := w.tasks[id]; d != nil {
		d.waiting--
		if d.waiting == 0 && d.issued {
			w.eng.Schedule(w.readyAt(d), w.key(d), int32(w.N)+d.id)
		}
		return
	}
	if w.lz.waiting[id]--; w.lz.waiting[id] == 0 {
		if in.rank < 0 {
			in = w.identOf(id)
		}
		d := w.makeIn(id, in)
		w.eng.Schedule(w.readyAt(d), w.key(d), int32(w.N)+d.id)
	}
}

// retireTask retires finished task t (lazy graph mode): its struct goes to
// the free list; task(t.id) answers for it from now on.
func (w *World) retireTask(t *task) {
	if !w.lz.on || t.state != done {
		return
	}
	w.tasks[t.id] = nil
	w.lz.retired[t.id] = true
	if t.node >= 0 {
		// taskNameIDOf's answer from the plan, which names launches
		// (nothing is interned here: names keep their order)
		if nid := w.plan.opName[t.rank][t.node]; nid != 0 {
			w.lz.who[t.id] = retiredWho{name: nid, rank: int32(t.rank)}
		}
	}
	w.lz.made--
	w.freeI32(t.deps)
	w.freeI32(t.dependents)
	if t.op != nil && t.op.fo != nil {
		// A folded rank's op, made for t alone: the next folded task's.
		w.lz.freeOps = append(w.lz.freeOps, t.op.fo)
	}
	*t = task{}
	w.lz.free = append(w.lz.free, t)
}

// makeAll makes every task not made yet (after a run that hung: the hang
// analysis reads them all).
func (w *World) makeAll() {
	if !w.lz.on {
		return
	}
	for id, t := range w.tasks {
		if t == nil && !w.lz.retired[id] {
			w.make(int32(id))
		}
	}
}

// task returns task id: the live one, or for a retired task a copy of
// what reports read of it (rank, stream, lane, op, replay, call, sig), done.
// Do not keep it or write to it.
func (w *World) task(id int32) *task {
	if t := w.tasks[id]; t != nil {
		return t
	}
	in := w.identOf(id)
	r := int(in.rank)
	g := &task{id: id, rank: r, lane: w.laneBase[r], replay: in.replay, node: -1, state: done, inst: Instance{Call: -1}}
	if in.node >= 0 {
		n := w.plan.nodes[r][in.node]
		op := w.progs[r].taskOp(n.op)
		g.stream, g.lane, g.op, g.node = n.stream, w.laneBase[r]+int32(n.stream), op, int32(n.op)
		g.inst = Instance{Call: w.plan.opCall[r][n.op], Replay: in.replay}
		if op.Kernel != nil {
			g.sig = op.Kernel.Sig
		}
	}
	return g
}
