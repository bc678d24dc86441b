package ranks

import (
	"fmt"

	"github.com/collsim/collsim/sim"
)

// StepWords says in words what engine actor a (an [sim.Item]'s Actor) does
// at its next step, for a person reading a schedule: "rank 1 host: issue
// launch L0.shared_ar on stream aux", "rank 0 stream aux: L0.shared_ar
// micro-op 3 of 9 (put, barrier)", "rank 2 stream main: complete
// record(ev_done)". It is a pure read of the world's state, like
// [World.NextStep], and is meant for one replayed schedule, not a hot path.
func (w *World) StepWords(a int32) string {
	if int(a) < w.N {
		r := int(a)
		h := &w.hosts[r]
		if w.cfg.Mode == Graph {
			return fmt.Sprintf("rank %d host: launch graph replay %d", r, h.next)
		}
		if h.next >= len(h.nodes) {
			return fmt.Sprintf("rank %d host: done issuing", r)
		}
		p := w.progs[r]
		n := h.nodes[h.next]
		return fmt.Sprintf("rank %d host: issue %s on stream %s", r, w.hostOpWords(p, &p.Ops[n.op]), p.Streams[n.stream])
	}
	t := w.tasks[int(a)-w.N]
	where := fmt.Sprintf("rank %d stream %s", t.rank, w.progs[t.rank].Streams[t.stream])
	if t.op == nil {
		return fmt.Sprintf("rank %d graph replay %d: join", t.rank, t.replay)
	}
	name := w.taskName(t.id)
	if t.op.Kind != Launch || t.pc >= t.op.Kernel.Len() {
		return fmt.Sprintf("%s: %s completes", where, name)
	}
	var scratch Instr
	in := t.op.Kernel.At(t.pc, &scratch)
	what := in.Op.String()
	if in.Phase != "" {
		what += ", " + in.Phase
	}
	return fmt.Sprintf("%s: %s micro-op %d of %d (%s)", where, name, t.pc+1, t.op.Kernel.Len(), what)
}

func (w *World) hostOpWords(p *Program, op *HostOp) string {
	switch op.Kind {
	case Launch:
		return "launch " + op.Kernel.Name
	case Record, Wait:
		return fmt.Sprintf("%s(%s)", op.Kind, p.Events[op.Event])
	}
	return op.Kind.String()
}

// JitterPerMille is the duration multiplier, in thousandths, of jitter
// choice i (choice 0, nominal, is 1000: ×1).
func JitterPerMille(i int) int64 {
	if i < 0 || i >= len(jitterPerMille) {
		return 1000
	}
	return jitterPerMille[i]
}

// SkewOf is the start offset of a rank's host thread for skew choice i
// (choice 0, nominal, is 0).
func SkewOf(i int) sim.Time {
	if i < 0 || i >= len(skewSteps) {
		return 0
	}
	return skewSteps[i]
}

// SetMaxFindings sets how many findings of each kind the world keeps
// (n < 1: the default, 32); [Result.Counts] counts every finding whatever
// the cap. Call it before [World.Run].
func (w *World) SetMaxFindings(n int) {
	if n < 1 {
		n = 32
	}
	w.cfg.MaxFindings = n
	w.log.Max = n
}
