package ranks

import (
	"fmt"

	"github.com/collsim/collsim/sim"
)

// Flow kinds: what carried an ordering (or a message) from one lane to
// another.
const (
	// FlowEvent is an event record and the stream wait bound to it.
	FlowEvent = "event"
	// FlowSignal is a signal put into a peer's pad and the wait that
	// consumed it.
	FlowSignal = "signal"
	// FlowFifo is an NCCL send and the receive that took the message.
	FlowFifo = "fifo"
	// FlowOrder is an implicit order between kernels on different streams
	// of one rank: NCCL's per-communicator strong stream (an OrderKey).
	FlowOrder = "order"
	// FlowSync is a host synchronisation: another stream's work → the sync
	// that waited for it, or the sync → work the host issued after it on
	// another stream.
	FlowSync = "sync"
)

// TaskRef names one task for a timeline: the rank, stream, name and graph
// replay of the span it produced, and when it started.
type TaskRef struct {
	Rank   int      `json:"rank"`
	Stream string   `json:"stream"`
	Name   string   `json:"name"`
	Replay int      `json:"replay"`
	Start  sim.Time `json:"start"`
}

// FlowEnd is one end of a [Flow]: a task and the instant of the
// producing or consuming micro-op.
type FlowEnd struct {
	TaskRef
	At sim.Time `json:"at"`
}

// Flow is an edge the timeline draws as an arrow between lanes: an event
// record → the wait bound to it, a signal put → the wait that consumed it, an
// NCCL send → its receive, an implicit NCCL order between streams, or a
// host synchronisation between streams.
// Mismatch is set when the consumer belongs to another collective instance
// than the producer, or to a call that differs from it (another kind, size
// or root at the same sequence number): the consumer took someone else's
// signal or data.
type Flow struct {
	Kind     string  `json:"kind"`
	Label    string  `json:"label"`
	From     FlowEnd `json:"from"`
	To       FlowEnd `json:"to"`
	Mismatch bool    `json:"mismatch,omitempty"`
}

// Mark ties a finding to where it was detected: the tasks involved (for a
// race, the unordered pair; for a mismatch, the consumer then the producer)
// and the simulated time of detection.
type Mark struct {
	Kind    string    `json:"kind"`
	Message string    `json:"message"`
	At      sim.Time  `json:"at"`
	Tasks   []TaskRef `json:"tasks"`
}

// Issue is one host-thread step: an eager launch, event record or wait, or
// a graph launch.
type Issue struct {
	Rank   int      `json:"rank"`
	At     sim.Time `json:"at"`
	Name   string   `json:"name"`
	Stream string   `json:"stream"`
	Replay int      `json:"replay"`
}

// flowLog is what the timeline hooks collect while a world runs. Every hook
// is a no-op unless Config.Timeline is set, so exploration pays nothing.
type flowLog struct {
	putAt   map[*sigSlot]sim.Time
	sendAt  map[*Fifo][]sim.Time
	flows   []Flow
	marks   []Mark
	pending []int32 // tasks of the finding about to be reported
	issues  []Issue
	// FIFO flows of coarse rings resumed at the end of a hung run, whose
	// times coarseFixFlows corrects (coarse.go)
	resumed []resumedFlow
}

// resumedFlow is flow index flow: task's receive at micro-op pc.
type resumedFlow struct {
	flow int
	task int32
	pc   int
}

// Flows returns the run's flows: signal and FIFO flows in the order they were
// consumed, then event and implicit-order flows in task order. It is empty
// unless the world was built with Config.Timeline.
func (w *World) Flows() []Flow {
	if !w.cfg.Timeline {
		return nil
	}
	out := append([]Flow(nil), w.tl.flows...)
	for _, t := range w.tasks {
		if t.state != done || t.op == nil {
			continue
		}
		for _, d := range t.deps {
			u := w.tasks[d]
			// Stream order is drawn by the lanes themselves: only
			// cross-stream edges are flows.
			if u.state != done || u.op == nil || u.rank != t.rank {
				continue
			}
			switch {
			case t.op.Kind == Wait && u.op.Kind == Record && u.stream != t.stream:
				out = append(out, Flow{Kind: FlowEvent, Label: w.progs[t.rank].Events[t.op.Event],
					From: FlowEnd{w.ref(u.id), u.start}, To: FlowEnd{w.ref(t.id), t.start}})
			case (t.op.Kind == Sync || u.op.Kind == Sync) && u.stream != t.stream:
				out = append(out, Flow{Kind: FlowSync, Label: "host sync",
					From: FlowEnd{w.ref(u.id), u.end}, To: FlowEnd{w.ref(t.id), t.start}})
			case t.op.Kind == Launch && u.op.Kind == Launch && u.stream != t.stream &&
				t.op.Kernel.OrderKey != "" && t.op.Kernel.OrderKey == u.op.Kernel.OrderKey:
				out = append(out, Flow{Kind: FlowOrder, Label: t.op.Kernel.OrderKey,
					From: FlowEnd{w.ref(u.id), u.end}, To: FlowEnd{w.ref(t.id), t.start}})
			}
		}
	}
	return out
}

// Marks returns where each reported finding was detected, in detection
// order (empty unless Config.Timeline).
func (w *World) Marks() []Mark { return w.tl.marks }

// Issues returns the host threads' steps in issue order (empty unless
// Config.Timeline).
func (w *World) Issues() []Issue { return w.tl.issues }

func (w *World) ref(id int32) TaskRef {
	t := w.task(id) // a retired task's stand-in too (retire.go): LastWriter names any writer
	return TaskRef{Rank: t.rank, Stream: w.streamName(id), Name: w.taskName(id), Replay: int(t.replay), Start: t.start}
}

// notePut remembers when slot s was set.
func (w *World) notePut(s *sigSlot) {
	if !w.cfg.Timeline {
		return
	}
	if w.tl.putAt == nil {
		w.tl.putAt = map[*sigSlot]sim.Time{}
	}
	w.tl.putAt[s] = w.eng.Now()
}

// noteSignal records the flow from the put that set s to t's wait.
func (w *World) noteSignal(t *task, s *sigSlot, in *Instr) {
	if !w.cfg.Timeline {
		return
	}
	w.tl.flows = append(w.tl.flows, Flow{
		Kind:     FlowSignal,
		Label:    fmt.Sprintf("pad %q rank %d slot %d", in.Pad.Name, in.Pad.Rank, in.Slot),
		From:     FlowEnd{w.ref(s.by), w.tl.putAt[s]},
		To:       FlowEnd{w.ref(t.id), w.eng.Now()},
		Mismatch: s.inst != t.inst || s.sig != t.sig,
	})
}

// noteSend remembers when the last message of f was sent.
func (w *World) noteSend(f *Fifo) {
	if w.cfg.Timeline {
		w.noteSendSlow(f)
	}
}

func (w *World) noteSendSlow(f *Fifo) {
	if w.tl.sendAt == nil {
		w.tl.sendAt = map[*Fifo][]sim.Time{}
	}
	w.tl.sendAt[f] = append(w.tl.sendAt[f], w.eng.Now())
}

// noteRecv records the flow from the send of m to t's receive.
func (w *World) noteRecv(t *task, f *Fifo, m *msg) {
	if w.cfg.Timeline {
		w.noteRecvSlow(t, f, m)
	}
}

func (w *World) noteRecvSlow(t *task, f *Fifo, m *msg) {
	q := w.tl.sendAt[f]
	var at sim.Time
	if len(q) > 0 {
		at, w.tl.sendAt[f] = q[0], q[1:]
	}
	if w.resuming {
		w.tl.resumed = append(w.tl.resumed, resumedFlow{flow: len(w.tl.flows), task: t.id, pc: t.pc})
	}
	w.tl.flows = append(w.tl.flows, Flow{
		Kind: FlowFifo, Label: f.Name,
		From:     FlowEnd{w.ref(m.by), at},
		To:       FlowEnd{w.ref(t.id), w.eng.Now()},
		Mismatch: m.inst != t.inst || m.sig != t.sig,
	})
}

// noteTasks names the tasks of the finding about to be reported.
func (w *World) noteTasks(ids ...int32) {
	if !w.cfg.Timeline {
		return
	}
	w.tl.pending = append(w.tl.pending[:0], ids...)
}

// noteFinding records where f was detected, if it will be kept.
func (w *World) noteFinding(f *Finding) {
	if !w.cfg.Timeline {
		return
	}
	ids := w.tl.pending
	w.tl.pending = w.tl.pending[:0]
	if w.log.Full(f.Kind) {
		return
	}
	m := Mark{Kind: f.Kind, Message: f.Message, At: w.now()}
	for _, id := range ids {
		m.Tasks = append(m.Tasks, w.ref(id))
	}
	w.tl.marks = append(w.tl.marks, m)
}

// noteIssue records that rank's host thread issued task t (eager mode).
func (w *World) noteIssue(t *task) {
	if !w.cfg.Timeline {
		return
	}
	w.tl.issues = append(w.tl.issues, Issue{Rank: t.rank, At: w.eng.Now(), Name: w.taskName(t.id), Stream: w.streamName(t.id)})
}

// noteLaunch records that rank's host thread launched graph replay replay.
func (w *World) noteLaunch(rank int, replay int32) {
	if !w.cfg.Timeline {
		return
	}
	w.tl.issues = append(w.tl.issues, Issue{Rank: rank, At: w.eng.Now(), Name: fmt.Sprintf("graph launch (replay %d)", replay), Stream: w.progs[rank].Streams[0], Replay: int(replay)})
}

// Streams returns rank's stream names in program order (index 0 is the
// stream the program starts on).
func (w *World) Streams(rank int) []string {
	if p := w.progs[rank]; p != nil {
		return p.Streams
	}
	return []string{"main"}
}

// LastWriter returns the task that last wrote chunk c of b, if any: for a
// corrupted output, the kernel that stored the wrong value.
func (w *World) LastWriter(b *Buffer, c int) (TaskRef, bool) {
	var e epoch
	switch {
	case b.lastW != nil:
		e = epoch{clock: 1, task: b.lastW[c] - 1}
	case b.sh != nil:
		e = b.sh[c].w
	}
	if e.none() || e.task < 0 || int(e.task) >= len(w.tasks) {
		return TaskRef{}, false
	}
	return w.ref(e.task), true
}
