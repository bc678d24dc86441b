package ranks

import "fmt"

// ActorID is a stable identity of an actor (a host thread or a task) across
// runs of the same program under different schedules. Task ids inside a World
// follow host issue order, which differs between schedules; an ActorID is
// (rank, replay, lowered node) instead, so an exhaustive explorer can say "the
// same step" in two executions.
type ActorID uint64

const (
	actorHost ActorID = 1 << 62
	actorTask ActorID = 2 << 62
)

// HostActor is the ActorID of rank's host thread.
func HostActor(rank int) ActorID { return actorHost | ActorID(rank) }

// TaskActor is the ActorID of the task of lowered node (-1: the join task of a
// graph replay) of replay on rank.
func TaskActor(rank, replay, node int) ActorID {
	return actorTask | ActorID(rank)<<40 | ActorID(replay)<<24 | ActorID(uint32(node+1)&0xffffff)
}

// String renders the actor ("r1/host", "r0/replay1/node7", "r0/replay0/join").
func (a ActorID) String() string {
	r := int(a>>40) & 0x3fffff
	if a&actorHost != 0 && a&actorTask == 0 {
		return fmt.Sprintf("r%d/host", int(a&0xffffffff))
	}
	replay := int(a>>24) & 0xffff
	node := int(a&0xffffff) - 1
	if node < 0 {
		return fmt.Sprintf("r%d/replay%d/join", r, replay)
	}
	return fmt.Sprintf("r%d/replay%d/node%d", r, replay, node)
}

// StepKind is what an actor's next step does.
type StepKind uint8

const (
	// StepIssue: a host thread issues its next op (eager) or graph replay.
	StepIssue StepKind = iota
	// StepInstr: a task executes one device micro-op.
	StepInstr
	// StepComplete: a task completes (after its last micro-op, or at once
	// for a record, a wait or a join).
	StepComplete
	// StepStart: a kernel becomes resident, taking a contended pool
	// (untimed runs; residency.go). Its first micro-op is its next step.
	StepStart
)

// Step describes the next step of a pending actor without taking it: what an
// explorer needs to decide which steps are dependent. It is a pure read of the
// world's state.
type Step struct {
	Actor ActorID
	Rank  int
	Kind  StepKind
	// Block: the step would find its signal slot or FIFO not ready and spin:
	// the actor leaves the queue until another step wakes it, and nothing
	// else changes.
	Block bool
	// Instr is the micro-op (StepInstr).
	Instr *Instr
	// Deps are the tasks this task waited for (tasks only).
	Deps []ActorID
	// Issues are the tasks a StepIssue creates.
	Issues []ActorID
	// Takes are the pools a kernel's first step draws from to become
	// resident (residency.go); Returns, the pools its completion gives back.
	Takes, Returns []PoolUse
	// Queries are the record tasks of deferred frees whose completion a
	// malloc at this issue reads (StepIssue; dynalloc.go): whether each is
	// done decides whether its block is handed out again.
	Queries []ActorID
	// FreeEvent: this completion is of such a record task (StepComplete).
	FreeEvent bool
	// Conns are the stepped connections whose step counters this
	// completion writes back (StepComplete; stepconn.go).
	Conns []*Fifo
}

// ActorOf returns the stable identity of the engine actor a (an Item's
// Actor) in the world's current state.
func (w *World) ActorOf(a int32) ActorID {
	if int(a) < w.N {
		return HostActor(int(a))
	}
	return w.taskActor(w.tasks[int(a)-w.N])
}

func (w *World) taskActor(t *task) ActorID { return TaskActor(t.rank, int(t.replay), int(t.node)) }

// actorOfTask is taskActor(w.task(id)) without the stand-in w.task makes
// for a retired task (a join's step lists every node of its replay: an
// explorer asked for thousands of stand-ins a trace).
func (w *World) actorOfTask(id int32) ActorID {
	if t := w.tasks[id]; t != nil {
		return w.taskActor(t)
	}
	in := w.identOf(id)
	node := -1
	if in.node >= 0 {
		node = w.plan.nodes[in.rank][in.node].op
	}
	return TaskActor(int(in.rank), int(in.replay), node)
}

// NextStep describes what running engine actor a next would do. The
// step's lists and micro-op are the world's scratch: valid until the next
// call (an explorer reads them at once).
func (w *World) NextStep(a int32) Step {
	acts := w.stepActs[:0]
	defer func() { w.stepActs = acts[:0] }()
	if int(a) < w.N {
		r := int(a)
		h := &w.hosts[r]
		st := Step{Actor: HostActor(r), Rank: r, Kind: StepIssue}
		if w.cfg.Mode == Eager {
			// After a host sync the host issues only once the sync's task
			// completed: that completion enables this step (hostsync.go).
			if h.next > 0 && w.progs[r].Ops[h.nodes[h.next-1].op].Kind == Sync {
				if id := h.base[h.next-1]; id >= 0 {
					acts = append(acts, w.actorOfTask(id))
					st.Deps = acts[0:1:1]
				}
			}
			if h.next < len(h.nodes) {
				k := len(acts)
				acts = append(acts, TaskActor(r, 0, h.nodes[h.next].op))
				st.Issues = acts[k:]
				if w.mallocs(w.progs[r].Ops[h.nodes[h.next].op].Mem) {
					k = len(acts)
					w.pendingEvents(r, func(id int32) { acts = append(acts, w.actorOfTask(id)) })
					st.Queries = acts[k:]
				}
			}
			return st
		}
		if h.next < w.cfg.Replays {
			for _, n := range h.nodes {
				acts = append(acts, TaskActor(r, h.next, n.op))
			}
			acts = append(acts, TaskActor(r, h.next, -1))
			st.Issues = acts
		}
		return st
	}
	t := w.tasks[int(a)-w.N]
	st := Step{Actor: w.taskActor(t), Rank: t.rank, Kind: StepComplete, FreeEvent: t.op != nil && t.op.FreeEvent}
	for _, d := range t.deps {
		acts = append(acts, w.actorOfTask(d))
	}
	st.Deps = acts
	if t.state == pending {
		st.Takes = w.poolUses(t, true)
		st.Block = !w.fits(t)
		if w.startsAlone(t) {
			st.Kind = StepStart
			return st
		}
	}
	if t.op == nil || t.op.Kind != Launch || t.pc >= t.op.Kernel.Len() {
		st.Returns = w.poolUses(t, false)
		st.Conns = w.connsOf(t, w.stepConns[:0])
		w.stepConns = st.Conns
		return st
	}
	var scratch *Instr
	if t.op.Kernel.Gen != nil {
		scratch = &w.stepInstr // not the task's own scratch: a Step outlives a micro-op
	}
	if t.pc == 0 && t.op.Kernel.StepConns {
		st.Conns = w.loadsOf(t, w.stepConns[:0])
		w.stepConns = st.Conns
	}
	in := t.op.Kernel.At(t.pc, scratch)
	if scratch != nil && in != scratch {
		// the generator's own micro-op: copy it into the world's scratch,
		// sources too (own, without allocating)
		srcs := append(scratch.Srcs[:0], in.Srcs...)
		*scratch = *in
		scratch.Srcs = srcs
		in = scratch
	}
	if in.Ix != nil {
		in = w.shifted(t, in) // the regions its kernel's slot index moves
	}
	st.Kind, st.Instr = StepInstr, in
	if st.Block {
		return st // waiting for residency: it would not reach the micro-op
	}
	switch in.Op {
	case OpPut:
		st.Block = w.padOf(in.Pad).Slots[in.Slot].val != 0
	case OpWait:
		st.Block = w.padOf(in.Pad).Slots[in.Slot].val == 0
	case OpSend:
		st.Block = w.anyBlocks(t, w.fifoOf(in.Fifo), true)
	case OpRecv:
		st.Block = w.anyBlocks(t, w.fifoOf(in.Fifo), false)
	case OpRecvSend:
		st.Block = w.anyBlocks(t, w.fifoOf(in.Fifo), false) || w.anyBlocks(t, w.fifoOf(in.Fwd), true)
	case OpFlagWait:
		st.Block = !w.flagHolds(in)
	}
	return st
}

// WouldBlock reports what NextStep(a).Block would, without building the
// step: an explorer asks it of every ready actor at every decision.
func (w *World) WouldBlock(a int32) bool {
	if int(a) < w.N {
		return false
	}
	t := w.tasks[int(a)-w.N]
	if t.state == pending && (!w.fits(t) || w.startsAlone(t)) {
		return !w.fits(t)
	}
	if t.op == nil || t.op.Kind != Launch || t.pc >= t.op.Kernel.Len() {
		return false
	}
	in := w.shifted(t, t.op.Kernel.At(t.pc, &w.probe))
	switch in.Op {
	case OpPut:
		return w.padOf(in.Pad).Slots[in.Slot].val != 0
	case OpWait:
		return w.padOf(in.Pad).Slots[in.Slot].val == 0
	case OpSend:
		return w.anyBlocks(t, w.fifoOf(in.Fifo), true)
	case OpRecv:
		return w.anyBlocks(t, w.fifoOf(in.Fifo), false)
	case OpRecvSend:
		return w.anyBlocks(t, w.fifoOf(in.Fifo), false) || w.anyBlocks(t, w.fifoOf(in.Fwd), true)
	case OpFlagWait:
		return !w.flagHolds(in)
	}
	return false
}

// BufferID is a buffer's index in allocation order: a stable name for it
// within one world, for footprints.
func (b *Buffer) BufferID() int { return int(b.id) }

// Aliases calls f with each chunk of another tensor (by BufferID) whose
// memory overlaps chunk c of b: tensors from a caching [Allocator] that
// reuse freed memory. A write through one is a write to the other
// (exec.go writeAliases), so a footprint must name both: without them DPOR
// took a read of a freed tensor and a write of the tensor reusing its
// memory for independent steps and never reversed them (the use after
// free of validation/traces/a_eager.json, whose recorded schedule is
// clean, went unfound).
func (b *Buffer) Aliases(c int, f func(id, chunk int)) {
	if b.Block == nil || b.Block.ov == nil {
		return
	}
	for _, r := range b.Block.ov[c] {
		f(int(r.buf), int(r.chunk))
	}
}

// Blocked lists, in task order, the engine actors of the tasks spinning on a
// signal slot or a FIFO. After a run that hung, they are the steps that never
// got to execute.
func (w *World) Blocked() []int32 {
	var out []int32
	for _, t := range w.tasks {
		if t == nil {
			continue // retired or not made yet: neither blocked nor held (retire.go)
		}
		if t.state == blocked || (t.state == pending && t.heldBy > 0) {
			out = append(out, int32(w.N)+t.id)
		}
	}
	return out
}
