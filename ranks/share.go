package ranks

import (
	"github.com/collsim/collsim/ranks/gpu"
	"github.com/collsim/collsim/sim"
)

// Concurrent kernels share their GPU: each progresses at a rate of its
// own, set by what it asks of the GPU's SMs and bandwidth (the model and
// its measurements: ranks/gpu/rates.go). This file runs it: each GPU's
// running micro-ops in the order they started, their progress brought up
// to date and their rates recomputed ([gpu.Rates]) whenever one starts or
// ends, and each one's end scheduled again when it moved. Which kernel
// started first is decided by the engine's order (time, then tie-break
// key), so the rates are a pure function of the schedule. Only the timed
// engine applies it: the untimed explorers order steps themselves and time
// decides nothing there.

// gpuShare is one GPU's running loaded micro-ops, in the order they
// started: what the model sees of each (runs) and, at the same index, its
// task and progress (state).
type gpuShare struct {
	runs  []gpu.Run
	state []shareRun
}

// shareRun is one running micro-op's task and progress.
type shareRun struct {
	task int32
	rem  int64    // work left: ns of its time alone, << gpu.RateShift
	at   sim.Time // when rem was last brought up to date
	item sim.Item // its pending step, when sch
	due  sim.Time
	sch  bool
}

// loadOf is the load of t's micro-op in (nominal duration in.Dur), and
// whether it takes a share at all.
func (w *World) loadOf(t *task, in *Instr) (Load, bool) {
	s := w.cfg.Share
	if s == nil || !w.timed || in.Dur <= 0 || t.op == nil || t.op.Kind != Launch {
		return Load{}, false
	}
	k := t.op.Kernel
	var l Load
	switch {
	case k.Loads != nil && t.pc < len(k.Loads):
		l = k.Loads[t.pc]
	case k.Loads == nil:
		l = s.Derive(k.Kind, in.Dur)
	}
	return l, l.SMs > 0 || l.Bytes > 0
}

// shareStart starts t's micro-op of load l and duration d (jittered) on its
// GPU: every running micro-op's progress is brought up to now, rates are
// recomputed, and the ones whose end moved are scheduled again.
func (w *World) shareStart(t *task, l Load, d, nominal sim.Time) {
	g := &w.gpus[t.rank]
	now := w.eng.Now()
	w.shareAdvance(g, now)
	g.runs = append(g.runs, gpu.Run{SMs: l.SMs, BPUs: gpu.BytesPerUs(l.Bytes, nominal)})
	g.state = append(g.state, shareRun{task: t.id, rem: int64(max(d, 1)) << gpu.RateShift, at: now})
	t.sharing = true
	w.shareResched(g, now)
}

// shareEnd removes t's finished micro-op from its GPU and lets the others
// speed up.
func (w *World) shareEnd(t *task) {
	g := &w.gpus[t.rank]
	now := w.eng.Now()
	t.sharing = false
	for i := range g.state {
		if g.state[i].task == t.id {
			g.runs = append(g.runs[:i], g.runs[i+1:]...)
			g.state = append(g.state[:i], g.state[i+1:]...)
			break
		}
	}
	w.shareAdvance(g, now)
	w.shareResched(g, now)
}

// shareAdvance brings g's micro-ops' progress up to now at their rates.
func (w *World) shareAdvance(g *gpuShare, now sim.Time) {
	for i := range g.state {
		r := &g.state[i]
		r.rem = max(0, r.rem-int64(now-r.at)*g.runs[i].Rate)
		r.at = now
	}
}

// shareResched recomputes g's rates and schedules again each micro-op
// whose end moved.
func (w *World) shareResched(g *gpuShare, now sim.Time) {
	gpu.Rates(g.runs, w.cfg.Share.SMs, w.cfg.Share.Keep, int64(w.cfg.Share.HBM/1e6))
	for i := range g.state {
		r, rate := &g.state[i], g.runs[i].Rate
		due := sim.Time(-1)
		if rate > 0 {
			due = now + sim.Time((r.rem+rate-1)/rate)
		}
		if r.sch && due == r.due {
			continue
		}
		if r.sch {
			w.eng.Cancel(r.item)
			r.sch = false
		}
		if due >= 0 {
			t := w.tasks[r.task]
			r.item, r.due, r.sch = w.eng.ScheduleItem(due, w.key(t), int32(w.N)+t.id), due, true
		}
	}
}

// gpuShares is the GPU resource model's state: SM residency and the
// exclusive pools (residency.go), and the micro-ops sharing each GPU's
// bandwidth and SMs.
type gpuShares struct {
	res   *residency // SM and Exclusive pools (residency.go)
	gpus  []gpuShare // per rank: the micro-ops sharing its GPU (share.go)
	timed bool       // the engine orders steps by time (share.go applies)
}
