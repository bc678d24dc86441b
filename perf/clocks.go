package perf

import (
	"fmt"
	"slices"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// clocksVsFull is one layer of tp8-shared-expert (fixed) at tp=256 (32
// when Quick), one nominal schedule, with the carry filter (each clock
// keeps the entries on a way to a lane that checks them: ranks/carry.go)
// against full clocks (every shared lane's entry everywhere,
// World.FullClocks), alternating in three pairs; the row is the median of
// each. The two must give the same verdict, findings and trace hash.
func clocksVsFull(o Options) (Row, error) {
	tp, pairs := 256, 3
	if o.Quick {
		tp, pairs = 32, 1
	}
	sc, ok := scenarios.Lookup("tp8-shared-expert")
	if !ok {
		return Row{}, fmt.Errorf("tp8-shared-expert not registered")
	}
	v, _ := sc.Variant("fixed")
	cfg, err := sc.VariantConfig(v, []string{fmt.Sprintf("tp=%d", tp), "layers=1"})
	if err != nil {
		return Row{}, err
	}
	p := sc.Program(cfg, nil)
	run := func(full bool) (float64, *check.Outcome, error) {
		t0 := cpuTime()
		b, err := p.Build(check.BuildOptions{}, sim.NewEngine(sim.Timed, sim.Nominal{}))
		if err != nil {
			return 0, nil, err
		}
		if full {
			b.World.FullClocks()
		}
		out, err := check.RunBuilt(b, nil)
		return (cpuTime() - t0).Seconds(), out, err
	}
	var carry, full []float64
	var hash string
	for range pairs {
		c, a, err := run(false)
		if err != nil {
			return Row{}, err
		}
		f, b, err := run(true)
		if err != nil {
			return Row{}, err
		}
		if a.Verdict != b.Verdict || a.Result.TraceHash != b.Result.TraceHash || len(a.Result.Findings) != len(b.Result.Findings) {
			return Row{}, fmt.Errorf("carry filter and full clocks disagree: %s %s %d vs %s %s %d", a.Verdict, a.Result.TraceHash, len(a.Result.Findings), b.Verdict, b.Result.TraceHash, len(b.Result.Findings))
		}
		carry, full, hash = append(carry, c), append(full, f), a.Result.TraceHash
	}
	slices.Sort(carry)
	slices.Sort(full)
	c, f := carry[len(carry)/2], full[len(full)/2]
	return Row{Name: "clocks-vs-full-s", Value: c, Unit: "cpu-s", Baseline: ptr(f), Ratio: ptr(c / f),
		Note: fmt.Sprintf("tp8-shared-expert fixed, tp=%d, one layer, one nominal schedule, built and run; median CPU time of %d, alternating with the baseline: the same run with full clocks (World.FullClocks: every shared lane's entry everywhere); same verdict, findings and trace hash %s", tp, pairs, hash)}, nil
}
