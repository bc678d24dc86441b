package gpu

import "github.com/collsim/collsim/sim"

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
// one launch each), hw.go has the numbers and docs/fidelity.md what
// the model gets right and wrong. Which kernel started first is decided by
// the engine's order (time, then tie-break key), so the rates are a pure
// function of the schedule. Only the timed engine applies it: the untimed
// explorers order steps themselves and time decides nothing there.
//
// What it leaves out: a kernel's tail (its last wave retiring block by
// block hands SMs to a later kernel before the kernel ends), blocks of
// small elementwise kernels sharing an SM with each other, L2, and
// collectives (their kernels hold their SMs through the pools,
// ranks/residency.go, and take no share).

// Package ranks runs the model (ranks/share.go): it keeps each GPU's
// running micro-ops as [Run]s in the order they started, brings their
// progress up to date and calls [Rates] whenever one starts or ends.

// RateShift is the fixed point of a rate: RateOne (1 << RateShift) is ×1,
// a kernel's speed alone.
const (
	RateShift = 20
	RateOne   = 1 << RateShift
)

// Run is one running micro-op of a loaded kernel as the model sees it.
type Run struct {
	SMs  int   // the SMs its grid fills alone (Rates caps it at the GPU's)
	BPUs int64 // bytes per µs at full speed ([BytesPerUs])
	Rate int64 // progress per ns, RateOne = alone (set by Rates)
}

// Rates fills Rate for runs (in the order they started) on a GPU of sms
// SMs and hbm bytes per µs, each keeping keep‰ of the SMs it wants: SMs
// handed out in that order, then every rate scaled down alike if the bytes
// they move would exceed hbm.
func Rates(runs []Run, sms int, keep int64, hbm int64) {
	// Every kernel keeps keep‰ of the SMs it wants (scaled down alike when
	// those shares alone exceed the GPU); the rest go in start order.
	capa := int64(sms) << RateShift // SMs, fixed point
	var kept int64
	for i := range runs {
		// a grid larger than the GPU runs in waves alone too: it wants
		// the whole GPU, no more
		runs[i].SMs = min(runs[i].SMs, sms)
		kept += int64(runs[i].SMs) * keep << RateShift / 1000
	}
	scale := int64(RateOne)
	if kept > capa {
		scale = capa * RateOne / kept
	}
	free := capa
	for i := range runs {
		r := &runs[i]
		g := int64(r.SMs) * keep << RateShift / 1000 * scale >> RateShift
		r.Rate = g // SMs held, fixed point, for now
		free -= g
	}
	var demand int64
	for i := range runs {
		r := &runs[i]
		if r.SMs <= 0 {
			r.Rate = RateOne
		} else {
			want := int64(r.SMs)<<RateShift - r.Rate
			a := max(0, min(want, free))
			free -= a
			r.Rate = (r.Rate + a) / int64(r.SMs)
		}
		// A kernel alone runs at its own speed: what it moves alone counts
		// as at most the whole bandwidth.
		demand += r.Rate * min(r.BPUs, max(hbm, 0)) >> RateShift
	}
	if hbm > 0 && demand > hbm {
		for i := range runs {
			if r := &runs[i]; r.Rate > 0 {
				r.Rate = max(1, r.Rate*hbm/demand)
			}
		}
	}
}

// ShareRates returns the progress rates (×1 = 1,000,000) of kernels that
// run at once on a GPU of sms SMs and hbm bytes/s, each keeping keep‰ of
// the SMs it wants, in the order they started, each given by its load and
// its duration alone.
func ShareRates(sms int, keep int64, hbm float64, loads []Load, alone []sim.Time) []int64 {
	runs := make([]Run, len(loads))
	for i, l := range loads {
		runs[i] = Run{SMs: l.SMs, BPUs: BytesPerUs(l.Bytes, alone[i])}
	}
	Rates(runs, sms, keep, int64(hbm/1e6))
	out := make([]int64, len(runs))
	for i, r := range runs {
		out[i] = r.Rate * 1_000_000 >> RateShift
	}
	return out
}

// BytesPerUs is the rate, in bytes per µs, of moving bytes in d.
func BytesPerUs(bytes int64, d sim.Time) int64 {
	if d <= 0 {
		return 0
	}
	return bytes * 1000 / int64(d)
}
