package ranks

import (
	"github.com/collsim/collsim/sim"
)

// Concurrent kernels share their GPU. A kernel's duration (Instr.Dur) is
// its time alone; when kernels of several streams of one GPU run at once,
// each progresses at a rate of its own, set by what it asks of the two
// resources they share, recomputed whenever one of them starts or ends:
//
//   - SMs. A kernel's Load.SMs is how many SMs its grid fills alone (its
//     blocks, over the blocks one SM holds). cuBLAS's decode GEMMs run one
//     block per SM (each block takes 164–225 KiB of shared memory and
//     384×168 registers, every register of the SM), so a GEMM's blocks and
//     another kernel's never share an SM. The hardware's block scheduler
//     hands out the blocks of the kernel that became ready first before
//     those of a later one (the earlier kernel keeps its SMs, a later one
//     gets what is left): SMs go to running kernels in the order they
//     started, each taking min(its SMs, what is free), and a kernel with a
//     of the S SMs it wants runs its waves a/S as fast.
//   - HBM bandwidth. A kernel alone moves Load.Bytes in its duration; when
//     the running kernels' rates would move more bytes per second than the
//     GPU's achieved bandwidth (Share.HBM), every rate is scaled down by the
//     same factor, so the bytes moved per second equal it (a memory system
//     shared in proportion to demand).
//
// Measured on one H200 (validation/kernel_shapes.py: every decode kernel's
// grid, block, registers and shared memory from the profiler;
// validation/concurrency.py: pairs of kernels on two streams, in loops and
// one launch each), ranks/gpu/hw.go has the numbers and docs/fidelity.md what
// the model gets right and wrong. Which kernel started first is decided by
// the engine's order (time, then tie-break key), so the rates are a pure
// function of the schedule. Only the timed engine applies it: the untimed
// explorers order steps themselves and time decides nothing there.
//
// What it leaves out: a kernel's tail (its last wave retiring block by
// block hands SMs to a later kernel before the kernel ends), blocks of
// small elementwise kernels sharing an SM with each other, L2, and
// collectives (their kernels hold their SMs through residency.go, and take
// no share here).

// gpuShare is one GPU's running loaded micro-ops, in the order they
// started.
type gpuShare struct{ runs []shareRun }

// rateOne is a full rate: rates are fixed point, rateOne = ×1.
const rateShift = 20
const rateOne = 1 << rateShift

// shareRun is one running micro-op of a loaded kernel.
type shareRun struct {
	task int32
	sms  int
	bpus int64    // bytes per µs at full speed
	rem  int64    // work left: ns of its time alone, << rateShift
	rate int64    // progress per ns, rateOne = alone
	at   sim.Time // when rem was last brought up to date
	item sim.Item // its pending step, when sched
	due  sim.Time
	sch  bool
}

// Rates fills rate for runs (in the order they started) on a GPU of sms
// SMs and hbm bytes per µs: SMs handed out in that order, then every rate
// scaled down alike if the bytes they move would exceed hbm. Exposed for
// tests through ShareRates.
func rates(runs []shareRun, sms int, keep int64, hbm int64) {
	// Every kernel keeps keep‰ of the SMs it wants (scaled down alike when
	// those shares alone exceed the GPU); the rest go in start order.
	capa := int64(sms) << rateShift // SMs, fixed point
	var kept int64
	for i := range runs {
		// a grid larger than the GPU runs in waves alone too: it wants
		// the whole GPU, no more
		runs[i].sms = min(runs[i].sms, sms)
		kept += int64(runs[i].sms) * keep << rateShift / 1000
	}
	scale := int64(rateOne)
	if kept > capa {
		scale = capa * rateOne / kept
	}
	free := capa
	for i := range runs {
		r := &runs[i]
		g := int64(r.sms) * keep << rateShift / 1000 * scale >> rateShift
		r.rate = g // SMs held, fixed point, for now
		free -= g
	}
	var demand int64
	for i := range runs {
		r := &runs[i]
		if r.sms <= 0 {
			r.rate = rateOne
		} else {
			want := int64(r.sms)<<rateShift - r.rate
			a := max(0, min(want, free))
			free -= a
			r.rate = (r.rate + a) / int64(r.sms)
		}
		// A kernel alone runs at its own speed: what it moves alone counts
		// as at most the whole bandwidth.
		demand += r.rate * min(r.bpus, max(hbm, 0)) >> rateShift
	}
	if hbm > 0 && demand > hbm {
		for i := range runs {
			if r := &runs[i]; r.rate > 0 {
				r.rate = max(1, r.rate*hbm/demand)
			}
		}
	}
}

// ShareRates returns the progress rates (×1 = 1,000,000) of kernels that
// run at once on a GPU of sms SMs and hbm bytes/s, each keeping keep‰ of
// the SMs it wants, in the order they started, each given by its load and
// its duration alone.
func ShareRates(sms int, keep int64, hbm float64, loads []Load, alone []sim.Time) []int64 {
	runs := make([]shareRun, len(loads))
	for i, l := range loads {
		runs[i] = shareRun{sms: l.SMs, bpus: bytesPerUs(l.Bytes, alone[i])}
	}
	rates(runs, sms, keep, int64(hbm/1e6))
	out := make([]int64, len(runs))
	for i, r := range runs {
		out[i] = r.rate * 1_000_000 >> rateShift
	}
	return out
}

func bytesPerUs(bytes int64, d sim.Time) int64 {
	if d <= 0 {
		return 0
	}
	return bytes * 1000 / int64(d)
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
	w.shareAdvance(g.runs, now)
	g.runs = append(g.runs, shareRun{task: t.id, sms: l.SMs, bpus: bytesPerUs(l.Bytes, nominal), rem: int64(max(d, 1)) << rateShift, at: now})
	t.sharing = true
	w.shareResched(g.runs, now)
}

// shareEnd removes t's finished micro-op from its GPU and lets the others
// speed up.
func (w *World) shareEnd(t *task) {
	g := &w.gpus[t.rank]
	now := w.eng.Now()
	t.sharing = false
	for i := range g.runs {
		if g.runs[i].task == t.id {
			g.runs = append(g.runs[:i], g.runs[i+1:]...)
			break
		}
	}
	w.shareAdvance(g.runs, now)
	w.shareResched(g.runs, now)
}

func (w *World) shareAdvance(runs []shareRun, now sim.Time) {
	for i := range runs {
		r := &runs[i]
		r.rem = max(0, r.rem-int64(now-r.at)*r.rate)
		r.at = now
	}
}

func (w *World) shareResched(runs []shareRun, now sim.Time) {
	rates(runs, w.cfg.Share.SMs, w.cfg.Share.Keep, int64(w.cfg.Share.HBM/1e6))
	for i := range runs {
		r := &runs[i]
		due := sim.Time(-1)
		if r.rate > 0 {
			due = now + sim.Time((r.rem+r.rate-1)/r.rate)
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
