package ranks

import "github.com/collsim/collsim/sim"

// Span is one task's execution on a rank's stream: what ran, when, and the
// phases of its micro-program. Spans are recorded in completion order, which
// is deterministic.
type Span struct {
	Rank   int
	Stream string
	Name   string // kernel name, or "record(e)" / "wait(e)"
	Kind   string // kernel kind ("gemm", "allreduce/multimem"), "record", "wait", "replay"
	Replay int
	Coll   string // collective instance name, if any
	Start  sim.Time
	End    sim.Time
	Phases []Phase
}

// Phase is a contiguous stretch of a kernel's micro-program with one label
// ("copy-in", "barrier-entry", "ld_reduce").
type Phase struct {
	Name       string
	Start, End sim.Time
}

// Spans returns every completed task's span, in completion order.
func (w *World) Spans() []Span { return w.spans }

func (w *World) recordSpan(t *task) {
	if !w.cfg.Timeline {
		return
	}
	s := Span{Rank: t.rank, Replay: int(t.replay), Start: t.start, End: t.end, Phases: t.phases}
	switch {
	case t.op == nil:
		s.Name, s.Kind, s.Stream = "replay", "replay", w.progs[t.rank].Streams[0]
	case t.op.Kind == Launch:
		s.Name, s.Kind, s.Coll = t.op.Kernel.Name, t.op.Kernel.Kind, t.op.Kernel.Coll
		s.Stream = w.progs[t.rank].Streams[t.stream]
	default:
		s.Name, s.Kind = w.taskName(t.id), t.op.Kind.String()
		s.Stream = w.progs[t.rank].Streams[t.stream]
	}
	if len(s.Phases) > 0 {
		s.Phases[len(s.Phases)-1].End = t.end
	}
	w.spans = append(w.spans, s)
}

// notePhase records that t starts micro-op in at time now.
func (w *World) notePhase(t *task, in *Instr, now sim.Time) {
	if w.cfg.Timeline {
		w.notePhaseSlow(t, in, now)
	}
}

func (w *World) notePhaseSlow(t *task, in *Instr, now sim.Time) {
	name := in.Phase
	if name == "" {
		name = in.Op.String()
	}
	if n := len(t.phases); n > 0 && t.phases[n-1].Name == name {
		return
	}
	if n := len(t.phases); n > 0 {
		t.phases[n-1].End = now
	}
	t.phases = append(t.phases, Phase{Name: name, Start: now})
}

// runRecord is what a run did: its start and end, whether it ran, its
// spans, the task history and the timeline hooks (flows.go).
type runRecord struct {
	start, end sim.Time
	ran        bool
	spans      []Span
	tl         flowLog // timeline hooks (flows.go)
	hist       History
}
