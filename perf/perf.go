package perf

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/google/btree"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/explore"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// Row is one measurement.
type Row struct {
	Name     string   `json:"name"`
	Value    float64  `json:"value"`
	Unit     string   `json:"unit"`
	Baseline *float64 `json:"baseline"`
	Ratio    *float64 `json:"ratio"`
	// Points are a sweep's measurements, one per value of its knob.
	Points []Point `json:"points,omitempty"`
	Note   string  `json:"-"`
}

// Point is one run of a sweep: the knob's value, the run's CPU seconds and
// the process's peak RSS during it (reset before it where the kernel
// allows).
type Point struct {
	X       int     `json:"x"`
	Seconds float64 `json:"cpu_s"`
	PeakMiB float64 `json:"peak_mib"`
}

func ptr(f float64) *float64 { return &f }

// Options size the measurements.
type Options struct {
	Quick bool // small sizes, for tests and smoke runs
	// Large adds the rows that take minutes (tp1024-1layer-*,
	// scale-4096x61-*) and stretches the TP sweep to 1024.
	Large bool
	// Rows, when non-empty, selects rows by name.
	Rows []string
}

// Bench is one named measurement.
type Bench struct {
	Name string
	Run  func(o Options) (Row, error)
}

// Benches are all measurements, in print order.
var Benches = []Bench{
	{"engine-vs-btree", engineVsBTree},
	{"tp8-1layer-schedules-per-s", tp8Schedules},
	{"ring512-ms", ring512},
	{"ring512-vs-bandwidth", ring512Bandwidth},
	{"ring512-shared-ms", ring512Shared},
	{"scale-1024x61-s", scale1024},
	{"clocks-vs-full-s", clocksVsFull},
	{"tp-sweep-exponent", tpSweep},
	{"layers-sweep-exponent", layersSweep},
	{"tp1024-1layer-s", tp1024},
	{"scale-4096x61-s", scale4096},
	{"workers2-speedup", workers2},
	{"dpor-trace-vs-random", dporVsRandom},
}

// Run runs the selected benches in order.
func Run(o Options) ([]Row, error) {
	var rows []Row
	want := map[string]bool{}
	for _, r := range o.Rows {
		want[r] = true
	}
	for _, b := range Benches {
		peakName := peakRow(b.Name)
		if len(want) > 0 && !want[b.Name] && !(peakName != "" && want[peakName]) {
			continue
		}
		if len(want) == 0 && !o.Large && largeRows[b.Name] {
			continue
		}
		// Each row starts from a collected heap: the scale row leaves
		// gigabytes behind that would otherwise tax the next one.
		runtime.GC()
		debug.FreeOSMemory()
		r, err := b.Run(o)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.Name, err)
		}
		rows = append(rows, r)
		if peakName != "" {
			rows = append(rows, lastPeak)
		}
	}
	return rows, nil
}

// largeRows take minutes of CPU: they run only with Options.Large or when
// named in Options.Rows.
var largeRows = map[string]bool{"tp1024-1layer-s": true, "scale-4096x61-s": true}

// peakRow is the name of the peak-RSS row that follows a timed row
// ("scale-1024x61-s" → "scale-1024x61-peak-mib"), or "".
func peakRow(name string) string {
	switch name {
	case "scale-1024x61-s", "tp1024-1layer-s", "scale-4096x61-s":
		return strings.TrimSuffix(name, "-s") + "-peak-mib"
	}
	return ""
}

func less(a, b sim.Item) bool {
	if a.At != b.At {
		return a.At < b.At
	}
	if a.Key != b.Key {
		return a.Key < b.Key
	}
	return a.Seq < b.Seq
}

// engineVsBTree pushes and pops the same event stream through the engine and
// through a bare google/btree; the ratio is engine rate / btree rate.
func engineVsBTree(o Options) (Row, error) {
	n, rounds := 4096, 400
	if o.Quick {
		rounds = 20
	}
	stream := func(i int) (sim.Time, uint64) { return sim.Time((i * 7919) % 1000), uint64(i % 13) }
	t0 := time.Now()
	e := sim.NewEngine(sim.Timed, nil)
	for range rounds {
		base := e.Now()
		for i := range n {
			at, k := stream(i)
			e.Schedule(base+at, k, int32(i))
		}
		for {
			if _, ok := e.Next(); !ok {
				break
			}
		}
	}
	eng := float64(n*rounds) / time.Since(t0).Seconds()
	t0 = time.Now()
	q := btree.NewG[sim.Item](32, less)
	var now sim.Time
	var seq uint64
	for range rounds {
		base := now
		for i := range n {
			at, k := stream(i)
			seq++
			q.ReplaceOrInsert(sim.Item{At: base + at, Key: k, Seq: seq, Actor: int32(i)})
		}
		for q.Len() > 0 {
			it, _ := q.DeleteMin()
			now = it.At
		}
	}
	bt := float64(n*rounds) / time.Since(t0).Seconds()
	return Row{Name: "engine-vs-btree", Value: eng, Unit: "events/s", Baseline: ptr(bt), Ratio: ptr(eng / bt)}, nil
}

// tp8Schedules runs seeded random schedules of tp8-shared-expert (buggy,
// 1 layer) with race detection and reference comparison on one goroutine.
func tp8Schedules(o Options) (Row, error) {
	sc, ok := scenarios.Lookup("tp8-shared-expert")
	if !ok {
		return Row{}, fmt.Errorf("tp8-shared-expert not registered")
	}
	v, _ := sc.Variant("buggy")
	cfg, err := sc.VariantConfig(v, []string{"layers=1"})
	if err != nil {
		return Row{}, err
	}
	prog := sc.Program(cfg, nil)
	ref, err := check.NewReference(prog)
	if err != nil {
		return Row{}, err
	}
	n, runs := 200, 5
	if o.Quick {
		n, runs = 20, 1
	}
	defer explore.TuneGC(explore.DefaultGCPercent)() // as simctl explores
	rates := make([]float64, 0, runs)
	for r := range runs {
		t0 := time.Now()
		for i := range n {
			seed := uint64(r*n + i)
			out, err := check.RunSchedule(prog, ref, sim.Timed, sim.NewRandom(seed, check.RandomPerMille))
			if err != nil {
				return Row{}, err
			}
			out.Release() // as an explorer does: its memory serves the next schedule
		}
		rates = append(rates, float64(n)/time.Since(t0).Seconds())
	}
	slices.Sort(rates)
	return Row{Name: "tp8-1layer-schedules-per-s", Value: rates[len(rates)/2], Unit: "schedules/s",
		Note: fmt.Sprintf("the median of %d runs of %d schedules in one goroutine (%.0f–%.0f/s)", runs, n, rates[0], rates[len(rates)-1])}, nil
}

// lastPeak is the peak-RSS row of the last timed row that has one.
var lastPeak Row

// scaleRow runs tp8-shared-expert fixed with sets, one nominal schedule with
// race detection, and measures its CPU time and the process's peak RSS
// (reset first where the kernel allows, so the peak is this row's).
func scaleRow(name string, sets []string) (Row, error) {
	sc, ok := scenarios.Lookup("tp8-shared-expert")
	if !ok {
		return Row{}, fmt.Errorf("tp8-shared-expert not registered")
	}
	v, _ := sc.Variant("fixed")
	cfg, err := sc.VariantConfig(v, sets)
	over := ""
	if errors.Is(err, scenarios.ErrBudget) {
		// The resource estimate (scenarios.Estimate) bounds `simctl
		// run` (the reference's run, then the nominal one) with a
		// margin; on a machine whose --max-memory is under it the row,
		// which is opt-in, still measures what one nominal schedule
		// really takes.
		e := sc.Estimate(cfg)
		saved := scenarios.MemoryBudget
		scenarios.MemoryBudget = math.MaxInt64
		cfg, err = sc.VariantConfig(v, sets)
		scenarios.MemoryBudget = saved
		over = fmt.Sprintf("; the resource estimate (%s) is over --max-memory and was set aside for this row", scenarios.FormatBytes(e.Bytes))
	}
	if err != nil {
		return Row{}, err
	}
	// The collector's target simctl run would pick for cfg (gc.go), so
	// the row's peak is the one a user's run reaches.
	pct := sc.Estimate(cfg).GCPercent
	defer collectAt(pct)()
	runtime.GC()
	debug.FreeOSMemory()
	reset := resetPeak()
	before := peakRSS()
	t0, w0 := cpuTime(), time.Now()
	_, err = check.RunSchedule(sc.Program(cfg, nil), nil, sim.Timed, sim.Nominal{})
	secs, wall := (cpuTime() - t0).Seconds(), time.Since(w0).Seconds()
	if err != nil {
		return Row{}, err
	}
	p := peakRSS()
	note := "process peak RSS (getrusage), reset before the row; " + gcNote(pct)
	if !reset {
		note = fmt.Sprintf("process peak RSS (getrusage) since the start: could not be reset, so an earlier row's peak may show (%.0f MiB before this row)", float64(before)/(1<<20))
	}
	lastPeak = Row{Name: peakRow(name), Value: float64(p) / (1 << 20), Unit: "MiB", Note: note}
	return Row{Name: name, Value: secs, Unit: "cpu-s",
		Note: fmt.Sprintf("%s, one nominal schedule with race detection; CPU time (user+sys, all threads); %.1f s wall%s", strings.Join(sets, " "), wall, over)}, nil
}

// scale1024 is TP=8 × DP=128, 61 layers, 2 replays.
func scale1024(o Options) (Row, error) {
	if o.Quick {
		return scaleRow("scale-1024x61-s", []string{"dp=2", "layers=2", "replays=2"})
	}
	return scaleRow("scale-1024x61-s", []string{"dp=128", "layers=61", "replays=2"})
}

// scale4096 is TP=8 × DP=512, 61 layers, 2 replays (opt-in: Large).
func scale4096(o Options) (Row, error) {
	if o.Quick {
		return scaleRow("scale-4096x61-s", []string{"dp=4", "layers=2", "replays=2"})
	}
	return scaleRow("scale-4096x61-s", []string{"dp=512", "layers=61", "replays=2"})
}

// tp1024 is one TP group of 1024 ranks, one layer (opt-in: Large).
func tp1024(o Options) (Row, error) {
	if o.Quick {
		return scaleRow("tp1024-1layer-s", []string{"tp=32", "layers=1"})
	}
	return scaleRow("tp1024-1layer-s", []string{"tp=1024", "layers=1"})
}

// sweep runs tp8-shared-expert fixed at each value of knob (others fixed
// by sets) and fits log CPU time against log value by least squares: the
// exponent is the slope. The note lists every point.
func sweep(name, knob string, values []int, sets []string) (Row, error) {
	sc, ok := scenarios.Lookup("tp8-shared-expert")
	if !ok {
		return Row{}, fmt.Errorf("tp8-shared-expert not registered")
	}
	v, _ := sc.Variant("fixed")
	defer collectAtDefault()()
	var xs, ys []float64
	var pts []string
	var points []Point
	for _, x := range values {
		cfg, err := sc.VariantConfig(v, append(slices.Clone(sets), fmt.Sprintf("%s=%d", knob, x)))
		if err != nil {
			return Row{}, err
		}
		runtime.GC()
		debug.FreeOSMemory()
		resetPeak()
		t0 := cpuTime()
		if _, err := check.RunSchedule(sc.Program(cfg, nil), nil, sim.Timed, sim.Nominal{}); err != nil {
			return Row{}, err
		}
		s := max((cpuTime() - t0).Seconds(), 1e-4)
		mib := float64(peakRSS()) / (1 << 20)
		xs, ys = append(xs, math.Log(float64(x))), append(ys, math.Log(s))
		pts = append(pts, fmt.Sprintf("%s=%d %.3gs %.0fMiB", knob, x, s, mib))
		points = append(points, Point{X: x, Seconds: s, PeakMiB: mib})
	}
	slope := fitSlope(xs, ys)
	last := "" // the small sizes flatten a fit over the whole range: say how steep its top is
	if k := len(xs); k >= 2 {
		last = fmt.Sprintf("; between the last two points the slope is %.2f", fitSlope(xs[k-2:], ys[k-2:]))
	}
	if knob == "layers" && len(points) >= 2 {
		// Memory that a finished layer leaves behind shows as RSS per
		// layer: the linear least-squares slope of peak MiB against layers.
		var lx, my []float64
		for _, p := range points {
			lx, my = append(lx, float64(p.X)), append(my, p.PeakMiB)
		}
		last += fmt.Sprintf("; peak RSS grows by %.2f MiB per layer (least squares)", fitSlope(lx, my))
	}
	return Row{Name: name, Value: slope, Unit: "exponent", Points: points,
		Note: fmt.Sprintf("slope of log CPU time (getrusage user+sys) against log %s, least squares over one nominal schedule each (%s): %s%s", knob, strings.Join(sets, " "), strings.Join(pts, ", "), last)}, nil
}

// fitSlope is the least-squares slope of ys against xs.
func fitSlope(xs, ys []float64) float64 {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// tpSweep is one layer of one TP group at tp = 8, 16, …: up to 256 by
// default, 1024 with Large, 32 when Quick. Steps grow as tp².
func tpSweep(o Options) (Row, error) {
	top := 256
	switch {
	case o.Quick:
		top = 32
	case o.Large:
		top = 1024
	}
	var tps []int
	for tp := 8; tp <= top; tp *= 2 {
		tps = append(tps, tp)
	}
	return sweep("tp-sweep-exponent", "tp", tps, []string{"layers=1"})
}

// layersSweep is TP=8 × DP=16 at 4, 8, 16, 32 layers (1, 2, 4 when
// Quick). Steps grow linearly with layers.
func layersSweep(o Options) (Row, error) {
	ls := []int{4, 8, 16, 32}
	if o.Quick {
		ls = []int{1, 2, 4}
	}
	return sweep("layers-sweep-exponent", "layers", ls, []string{"dp=16", "replays=2"})
}

// workers2 explores the same random schedules of tp8-shared-expert (fixed,
// 1 layer) with one worker and with two; the ratio is the speed-up. The two
// summaries must be identical.
//
// One and two workers alternate in seven pairs (1, 2, 1, 2, …), and the
// row is the pair with the median ratio: on a shared machine a neighbour's
// burst then skews one pair, not one side of the ratio.
func workers2(o Options) (Row, error) {
	n, pairs := 2000, 7 // about 0.7 s with one worker: long enough to drown start-up and a neighbour's sub-second bursts
	if o.Quick {
		n, pairs = 16, 1
	}
	// Wall time gives the speed-up; CPU time (both workers together) says
	// what two workers cost over one for the same schedules, which a busy
	// machine inflates far less: where the two cores are shared, the
	// wall-time speed-up stays near 1 whatever the code does, and the CPU
	// ratio is what the code can be held to (2 / ratio is the speed-up two
	// idle cores would give).
	run := func(workers int) (float64, float64, *explore.Summary, error) {
		t, err := explore.NewTarget("tp8-shared-expert", "fixed", []string{"layers=1"})
		if err != nil {
			return 0, 0, nil, err
		}
		s, err := explore.New("random", t, t.Config.Seed)
		if err != nil {
			return 0, 0, nil, err
		}
		t0, c0 := time.Now(), cpuTime()
		sum, err := explore.Explore(t, s, t.Config.Seed, explore.Options{Budget: n, Workers: workers, GCPercent: explore.DefaultGCPercent})
		return time.Since(t0).Seconds(), (cpuTime() - c0).Seconds(), sum, err
	}
	type pair struct{ one, two, cpu1, cpu2 float64 }
	var ps []pair
	for range pairs {
		one, cpu1, a, err := run(1)
		if err != nil {
			return Row{}, err
		}
		two, cpu2, b, err := run(2)
		if err != nil {
			return Row{}, err
		}
		if a.Schedules != b.Schedules || a.Verdict != b.Verdict || len(a.Outcomes) != len(b.Outcomes) {
			return Row{}, fmt.Errorf("workers 1 and 2 disagree: %d/%s/%d vs %d/%s/%d", a.Schedules, a.Verdict, len(a.Outcomes), b.Schedules, b.Verdict, len(b.Outcomes))
		}
		ps = append(ps, pair{float64(n) / one, float64(n) / two, cpu1, cpu2})
	}
	slices.SortFunc(ps, func(a, b pair) int { return cmp.Compare(a.two/a.one, b.two/b.one) })
	m := ps[len(ps)/2]
	cpu := ""
	if m.cpu1 > 0 && m.cpu2 > 0 {
		cpu = fmt.Sprintf("; CPU time of two workers over one for the same schedules %.2f (two idle cores would give %.2f×)", m.cpu2/m.cpu1, 2*m.cpu1/m.cpu2)
	}
	return Row{Name: "workers2-speedup", Value: m.two, Unit: "schedules/s", Baseline: ptr(m.one), Ratio: ptr(m.two / m.one),
		Note: fmt.Sprintf("the median of %d alternating pairs of %d schedules (ratios %.2f–%.2f), wall time%s", pairs, n, ps[0].two/ps[0].one, ps[len(ps)-1].two/ps[len(ps)-1].one, cpu)}, nil
}

// File is a chart the bench draws: its file name and its SVG.
type File struct {
	Name string
	Data []byte
}

// Plots draws the sweeps among rows: tp-sweep.svg (CPU time against tp,
// with tp² for reference), layers-sweep.svg (CPU time against layers, with
// linear for reference) and layers-peak.svg (peak RSS against layers, with
// flat for reference). A sweep that did not run gives no file.
func Plots(rows []Row) []File {
	var out []File
	for _, r := range rows {
		if len(r.Points) == 0 {
			continue
		}
		var x, secs, mib []float64
		for _, p := range r.Points {
			x, secs, mib = append(x, float64(p.X)), append(secs, p.Seconds), append(mib, p.PeakMiB)
		}
		switch r.Name {
		case "tp-sweep-exponent":
			out = append(out, File{"tp-sweep.svg", SVG(Plot{Title: "One layer of one TP group: CPU time against tp", XLabel: "tp (ranks in the group)", YLabel: "CPU seconds",
				X: x, Y: secs, RefSlope: 2, RefLabel: "slope 2: linear in the work (tp² steps)"})})
		case "layers-sweep-exponent":
			out = append(out, File{"layers-sweep.svg", SVG(Plot{Title: "TP=8 × DP=16, 2 replays: CPU time against layers", XLabel: "layers", YLabel: "CPU seconds",
				X: x, Y: secs, RefSlope: 1, RefLabel: "slope 1: linear in the work"})},
				File{"layers-peak.svg", SVG(Plot{Title: "TP=8 × DP=16, 2 replays: peak RSS against layers", XLabel: "layers", YLabel: "peak RSS (MiB)",
					X: x, Y: mib, RefSlope: 1, RefLabel: "slope 1: every layer kept"})})
		}
	}
	return out
}

// collectAtDefault runs the collector at Go's default target (GOGC=100)
// until the returned function restores the previous one, unless GOGC is
// set in the environment. simctl starts at 400 (cmd/simctl/gc.go) and
// keeps it for runs its estimate calls small: right for thousands of small
// schedules, but at 400 the heap grows to five times what is live before
// collecting, so a peak-RSS sweep (whose size ladder starts small) would
// measure garbage not yet collected rather than what the run keeps.
func collectAtDefault() func() { return collectAt(100) }

// collectAt runs the collector at target pct until the returned function
// restores the previous one, unless GOGC is set in the environment.
func collectAt(pct int) func() {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(pct)
	return func() { debug.SetGCPercent(old) }
}

// gcNote says which collector target a memory row ran under: pct, the
// target `simctl run` picks for the row's configuration
// (scenarios.Estimate's GCPercent), unless GOGC is in the environment.
func gcNote(pct int) string {
	if g := os.Getenv("GOGC"); g != "" {
		return "GOGC=" + g + " from the environment"
	}
	return fmt.Sprintf("collector at GOGC=%d, the target simctl run picks for this configuration from its resource estimate (400 small, 100 large, 50 huge)", pct)
}
