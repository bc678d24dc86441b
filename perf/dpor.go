package perf

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/collsim/collsim/explore"
)

// dporTarget is what the dpor-trace-vs-random row explores: the probe's
// buggy variant, whose exhaustive search runs thousands of traces.
var dporTarget = [3]string{"tp8-shared-expert", "buggy", "layers=1"}

// dporVsRandom measures one DPOR trace against one random schedule of the
// same target, both in one goroutine in this run: time and bytes allocated
// per trace/schedule (CPU time). Value is µs per DPOR trace, Baseline µs per random
// schedule, Ratio their quotient; the note gives the allocation per trace.
func dporVsRandom(o Options) (Row, error) {
	sets := []string(nil)
	if dporTarget[2] != "" {
		sets = []string{dporTarget[2]}
	}
	tg, err := explore.NewTarget(dporTarget[0], dporTarget[1], sets)
	if err != nil {
		return Row{}, err
	}
	n, pairs := 150, 7
	if o.Quick {
		n, pairs = 50, 3
	}
	defer explore.TuneGC(explore.DefaultGCPercent)()
	measure := func(strategy string) (perTrace time.Duration, bytes uint64, runs int, err error) {
		s, err := explore.New(strategy, tg, 1)
		if err != nil {
			return 0, 0, 0, err
		}
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		// CPU time (getrusage), as the other rows: a busy machine
		// inflates it far less than wall time; wall time where it is not
		// available.
		t0, c0 := time.Now(), cpuTime()
		sum, err := explore.Explore(tg, s, 1, explore.Options{Budget: n, Workers: 1})
		if err != nil {
			return 0, 0, 0, err
		}
		el := cpuTime() - c0
		if c0 == 0 {
			el = time.Since(t0)
		}
		runtime.ReadMemStats(&m1)
		k := max(sum.Schedules, 1)
		return el / time.Duration(k), (m1.TotalAlloc - m0.TotalAlloc) / uint64(k), k, nil
	}
	// Alternating pairs, each a fresh search of n traces against n random
	// schedules; the row is the pair with the median ratio, so a
	// neighbour's burst skews one pair, not one side of the ratio.
	type pair struct {
		d, r   time.Duration
		db, rb uint64
		nd, nr int
	}
	ps := make([]pair, 0, pairs)
	for range pairs {
		d, db, k, err := measure("dpor")
		if err != nil {
			return Row{}, err
		}
		r, rb, kr, err := measure("random")
		if err != nil {
			return Row{}, err
		}
		ps = append(ps, pair{d, r, db, rb, k, kr})
	}
	ratio := func(p pair) float64 { return float64(p.d) / float64(p.r) }
	slices.SortFunc(ps, func(a, b pair) int { return cmp.Compare(ratio(a), ratio(b)) })
	m := ps[len(ps)/2]
	bd, br, bDB, bRB, nd, nr := m.d, m.r, m.db, m.rb, m.nd, m.nr
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	return Row{Name: "dpor-trace-vs-random", Value: us(bd), Unit: "µs/trace", Baseline: ptr(us(br)), Ratio: ptr(us(bd) / us(br)),
		Note: fmt.Sprintf("%s %s: %d DPOR traces (%.1f kB allocated each) against %d random schedules (%.1f kB each), one goroutine, CPU time; the median of %d alternating pairs (ratios %.2f–%.2f)", dporTarget[0], dporTarget[1], nd, float64(bDB)/1024, nr, float64(bRB)/1024, pairs, ratio(ps[0]), ratio(ps[len(ps)-1]))}, nil
}
