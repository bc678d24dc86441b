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
}

// History returns what w's run kept (see [History]). With retirement the
// peak follows the work in flight; with [World.KeepHistory] it is every
// task of the run.
func (w *World) History() History { return w.hist }

// hold and unhold count the snapshots tasks hold.
func (w *World) hold() {
	w.hist.Snapshots++
	w.hist.PeakSnapshots = max(w.hist.PeakSnapshots, w.hist.Snapshots)
}

func (w *World) unhold(t *task) {
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
	j.done.join(d.done)
}

// retireDone runs when t has just completed with its snapshot in t.done:
// it hands the snapshot to the replay joins waiting for t, and drops it
// when no other task will acquire it.
func (w *World) retireDone(t *task) {
	w.hold()
	if w.keepHistory {
		return
	}
	for _, id := range t.dependents {
		if d := w.tasks[id]; w.isJoin(d) {
			w.accumulate(d, t)
		}
	}
	if t.users == 0 {
		w.unhold(t)
	}
}
