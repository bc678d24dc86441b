package perf

import (
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// RingWorld builds n ranks doing one NCCL ring all-reduce of bytes with
// chunks value chunks per rank (values and race detection on).
func RingWorld(n int, bytes int64, chunks int) (*ranks.World, error) {
	return ringWorld(n, bytes, chunks, noSide, false)
}

// side is what ringWorld's second stream does with the ring's input.
type side uint8

const (
	noSide     side = iota // no second stream
	sideReads              // it reads the input into a buffer of its own
	sideWrites             // it writes the input (a race: for tests)
)

// ringWorld is RingWorld; with sideReads, every rank also launches a kernel
// on a second stream that reads the ring's input buffer into a buffer of its
// own. The input is then touched by two lanes, so every access the ring
// makes to it goes through the race check (reads against reads: no race),
// and the ring runs micro-op by micro-op. fine forces that path anyway
// (ranks.Config.FineSteps).
func ringWorld(n int, bytes int64, chunks int, sd side, fine bool) (*ranks.World, error) {
	hw := ranks.Profiles["h100"]
	w := ranks.NewWorld(n, ranks.Config{Mode: ranks.Eager, LaunchCost: hw.Launch, EventCost: hw.EventOp, FineSteps: fine}, sim.NewEngine(sim.Timed, nil))
	group := make([]int, n)
	for i := range group {
		group[i] = i
	}
	comm := collectives.NewComm(w, "world", group, collectives.SharedWorkspace, hw, chunks)
	for r := range n {
		in := w.Alloc(r, "in", bytes, chunks)
		w.Init(in, func(c int) uint64 { return uint64(r*chunks + c) })
		out := w.Alloc(r, "out", bytes, chunks)
		k, err := comm.AllReduce(r, "ar", collectives.NCCL, in, out)
		if err != nil {
			return nil, err
		}
		p := &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{{Kind: ranks.Launch, Kernel: k}}}
		if sd != noSide {
			own := w.Alloc(r, "side", bytes, chunks)
			in := ranks.Instr{Op: ranks.OpCompute, Dst: own, N: chunks, Srcs: []ranks.Src{{Buf: in, Coef: 1}}}
			if sd == sideWrites {
				in.Dst, in.Srcs[0].Buf = in.Srcs[0].Buf, own
			}
			p.Streams = append(p.Streams, "side")
			p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: 1, Kernel: &ranks.KernelSpec{Name: "side", Instrs: []ranks.Instr{in}}})
		}
		w.SetProgram(r, p)
	}
	return w, nil
}

// ringMeasure is what the ring rows report, median CPU milliseconds of:
// building the 512-rank world; copying it for a schedule
// (ranks.Template.Instantiate, into the memory of the previous schedule's
// world, as exploration runs every schedule) and running the copy (coarse
// where ranks/coarse.go finds it sound); running a freshly built world
// (its memory touched for the first time); running a copy with every
// micro-op an event (FineSteps); and the bare ring's event loop. Also the
// bandwidth bound, measured by a copy right after each run (bws), each
// run's time against its own copy's bound (vsBound), and how many calls
// ran coarse.
type ringMeasure struct {
	n, runs                             int
	build, copy, run, fresh, fine, bare []float64 // sorted
	bws, vsBound                        []float64 // sorted
	touched                             int64     // bytes a ring of this shape touches
	bw                                  float64   // copy bandwidth, bytes/s: the median
	coarse                              int
}

func median(xs []float64) float64 { return xs[len(xs)/2] }

// ringMeasured memoizes measureRing per side and size for one process, so
// that ring512-ms and ring512-vs-bandwidth quote one measurement.
var ringMeasured = map[[2]int]*ringMeasure{}

// ringTemplate builds the ring world and makes it a template, timing the
// build.
func ringTemplate(n int, sd side, fine bool) (*ranks.Template, time.Duration, error) {
	t0 := cpuTime()
	w, err := ringWorld(n, 1<<20, n, sd, fine)
	if err != nil {
		return nil, 0, err
	}
	d := cpuTime() - t0
	tm, err := ranks.NewTemplate(w)
	return tm, d, err
}

// timedRun runs w alone (its garbage-to-be and the caller's collected
// first), returning the CPU time of the run.
func timedRun(w *ranks.World) (time.Duration, error) {
	runtime.GC()
	t0 := cpuTime()
	_, err := w.Run()
	return cpuTime() - t0, err
}

// measureRing runs the 512-rank ring (32 with Quick) ringRuns times after
// a warm-up (the first run of a process also pays for growing the heap),
// each way alternating with the others and with the bare ring, and takes
// medians of CPU times (getrusage user+sys): ratios from one run.
func measureRing(o Options, sd side) (*ringMeasure, error) {
	n, runs := 512, ringRuns
	if o.Quick {
		n, runs = 32, 1
	}
	key := [2]int{int(sd), n}
	if m := ringMeasured[key]; m != nil {
		return m, nil
	}
	m := &ringMeasure{n: n, runs: runs}
	tm, _, err := ringTemplate(n, sd, false)
	if err != nil {
		return nil, err
	}
	var tf *ranks.Template
	if sd == noSide { // with a second stream the ring is fine anyway
		if tf, _, err = ringTemplate(n, sd, true); err != nil {
			return nil, err
		}
	}
	m.touched = int64(3*n*n) * 8 // inputs and outputs, and one 8-byte message per hop (2n(n−1) ≈ 2n² hops: read once, written once)
	bw := newCopyBench()
	for i := -1; i < runs; i++ {
		// A copy of the built world, run in the memory of the last one.
		runtime.GC()
		t0 := cpuTime()
		w := tm.Instantiate(sim.NewEngine(sim.Timed, nil))
		cp := cpuTime() - t0
		run, err := timedRun(w)
		if err != nil {
			return nil, err
		}
		m.coarse, _ = w.CoarseCalls()
		w.Release()
		// The bound, timed right after the run: a busy machine slows both,
		// and the pair's ratio cancels it.
		b := bw.once()
		// A freshly built world: its build, and its run.
		t0 = cpuTime()
		wn, err := ringWorld(n, 1<<20, n, sd, false)
		if err != nil {
			return nil, err
		}
		build := cpuTime() - t0
		fresh, err := timedRun(wn)
		if err != nil {
			return nil, err
		}
		// The fine path of the same ring: the coarse step's "before".
		var fine time.Duration
		if tf != nil {
			wf := tf.Instantiate(sim.NewEngine(sim.Timed, nil))
			if fine, err = timedRun(wf); err != nil {
				return nil, err
			}
			wf.Release()
		}
		br := newBareRing(n)
		runtime.GC()
		t4 := cpuTime()
		out := br.run()
		bare := cpuTime() - t4
		if err := checkBareRing(out); err != nil {
			return nil, err
		}
		if i >= 0 {
			m.bws = append(m.bws, b)
			m.vsBound = append(m.vsBound, ms(run)/(float64(m.touched)/b*1000))
			m.build = append(m.build, ms(build))
			m.copy = append(m.copy, ms(cp))
			m.run = append(m.run, ms(run))
			m.fresh = append(m.fresh, ms(fresh))
			m.fine = append(m.fine, ms(fine))
			m.bare = append(m.bare, ms(bare))
		}
	}
	for _, xs := range [][]float64{m.build, m.copy, m.run, m.fresh, m.fine, m.bare, m.bws, m.vsBound} {
		slices.Sort(xs)
	}
	m.bw = median(m.bws)
	ringMeasured[key] = m
	return m, nil
}

// bound is the memory-bandwidth bound in milliseconds: the bytes a ring of
// this shape touches at the copy bandwidth measured now.
func (m *ringMeasure) bound() float64 { return float64(m.touched) / m.bw * 1000 }

// ring512 is a 512-rank NCCL ring all-reduce of 1 MiB, one value chunk per
// ring segment, with values and race detection on: the CPU time of running
// one schedule of it (nothing else touches its memory, so it runs as one
// coarse step), on a copy of the built world in the previous schedule's
// memory, as exploration runs schedules. Its baseline is BareRing's event
// loop of the same shape over the same queue. Copying (or building) the
// world and allocating the bare ring's arrays are not counted; the note
// gives them, a freshly built world's run, the fine path's run, and where
// the bandwidth bound is.
func ring512(o Options) (Row, error) {
	m, err := measureRing(o, noSide)
	if err != nil {
		return Row{}, err
	}
	run, bare, fine := median(m.run), median(m.bare), median(m.fine)
	return Row{Name: "ring512-ms", Value: run, Unit: "cpu-ms", Baseline: ptr(bare), Ratio: ptr(run / bare),
		Note: fmt.Sprintf("median CPU time of %d runs of a copy of the built world after a warm-up (%.2f–%.2f ms), its %d call coarse; baseline: BareRing's event loop, the same ring in plain Go over sim.Engine, alternating with it (%.2f–%.2f ms); "+
			"the same ring with every micro-op an event (FineSteps, the path before coarse steps): %.2f ms, %.1f× the bare ring, %.0f× this; not counted: copying the world %.2f ms, building it %.2f ms; a freshly built world's run (its memory touched for the first time): %.2f ms; the memory-bandwidth bound: ring512-vs-bandwidth",
			m.runs, m.run[0], m.run[len(m.run)-1], m.coarse, m.bare[0], m.bare[len(m.bare)-1], fine, fine/bare, fine/run, median(m.copy), median(m.build), median(m.fresh))}, nil
}

// ring512Bandwidth is ring512's run against the machine's memory-bandwidth
// bound for the bytes a ring of its shape touches: each run against a
// 64 MiB copy timed right after it (CPU time), the median of those ratios.
func ring512Bandwidth(o Options) (Row, error) {
	m, err := measureRing(o, noSide)
	if err != nil {
		return Row{}, err
	}
	run, bound := median(m.run), m.bound()
	best := float64(m.touched) / m.bws[len(m.bws)-1] * 1000 // the fastest copy's bound
	return Row{Name: "ring512-vs-bandwidth", Value: run, Unit: "cpu-ms", Baseline: ptr(bound), Ratio: ptr(median(m.vsBound)),
		Note: fmt.Sprintf("ring512-ms's runs against the memory-bandwidth bound for the %d KiB a ring of this shape touches, each against a 64 MiB copy timed right after it: the median of %d ratios (%.1f–%.1f×); the median bound %.3f ms (%.1f GB/s), the fastest copy's %.3f ms (%.1f GB/s: %.1f× the median run); a freshly built world's run: %.1f×; with copying the world: %.1f×; the fine path: %.0f×",
			m.touched>>10, len(m.vsBound), m.vsBound[0], m.vsBound[len(m.vsBound)-1], bound, m.bw/1e9, best, m.bws[len(m.bws)-1]/1e9, run/best,
			median(m.fresh)/bound, (run+median(m.copy))/bound, median(m.fine)/bound)}, nil
}

// ring512Shared is ring512 with a second stream per rank reading the
// ring's input, so the race check runs on every access the ring makes to
// it (ringWorld's sideReads) and the ring runs micro-op by micro-op.
func ring512Shared(o Options) (Row, error) {
	m, err := measureRing(o, sideReads)
	if err != nil {
		return Row{}, err
	}
	run, bare := median(m.run), median(m.bare)
	return Row{Name: "ring512-shared-ms", Value: run, Unit: "cpu-ms", Baseline: ptr(bare), Ratio: ptr(run / bare),
		Note: fmt.Sprintf("median CPU time of %d runs of a copy of the built world after a warm-up (%.1f–%.1f ms), %d calls coarse (a second stream reads the input: every access is race checked); baseline: BareRing's event loop (%.2f–%.2f ms); a freshly built world's run: %.1f ms; %.0f× the memory-bandwidth bound",
			m.runs, m.run[0], m.run[len(m.run)-1], m.coarse, m.bare[0], m.bare[len(m.bare)-1], median(m.fresh), run/m.bound())}, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// copyBench times copies of a 64 MiB buffer (far larger than the caches:
// the machine's memory bandwidth).
type copyBench struct{ a, b []byte }

func newCopyBench() *copyBench {
	c := &copyBench{a: make([]byte, 64<<20), b: make([]byte, 64<<20)}
	for i := range c.a {
		c.a[i] = byte(i)
	}
	copy(c.b, c.a) // both touched before the first timing
	return c
}

// once is bytes per second of one copy (CPU time).
func (c *copyBench) once() float64 {
	t0 := cpuTime()
	copy(c.b, c.a)
	return float64(len(c.a)) / max((cpuTime()-t0).Seconds(), 1e-6)
}

// ringRuns is how many timed runs the ring rows take the median of.
const ringRuns = 11
