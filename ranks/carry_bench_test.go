package ranks_test

import (
	"fmt"
	"testing"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// BenchmarkTPGroupClocks runs one layer of tp8-shared-expert (fixed) at
// growing TP, one nominal schedule, with the carry filter (carry.go) and
// with full clocks (World.FullClocks, every shared lane's entry
// everywhere): the same run, so the ratio is the filter's. cpu-ns/op is
// the process's CPU time (user+sys) per run.
//
//	go test -run '^$' -bench TPGroupClocks -benchtime 3x ./ranks/
func BenchmarkTPGroupClocks(b *testing.B) {
	sc, ok := scenarios.Lookup("tp8-shared-expert")
	if !ok {
		b.Fatal("tp8-shared-expert not registered")
	}
	v, _ := sc.Variant("fixed")
	for _, tp := range []int{32, 64, 128} {
		cfg, err := sc.VariantConfig(v, []string{fmt.Sprintf("tp=%d", tp), "layers=1"})
		if err != nil {
			b.Fatal(err)
		}
		p := sc.Program(cfg, nil)
		for _, full := range []bool{false, true} {
			name := "carry"
			if full {
				name = "full"
			}
			b.Run(fmt.Sprintf("tp=%d/%s", tp, name), func(b *testing.B) {
				t0 := cpuTime()
				for b.Loop() {
					built, err := p.Build(check.BuildOptions{}, sim.NewEngine(sim.Timed, sim.Nominal{}))
					if err != nil {
						b.Fatal(err)
					}
					if full {
						built.World.FullClocks()
					}
					if _, err := built.World.Run(); err != nil {
						b.Fatal(err)
					}
				}
				// The machine is shared: CPU time says more than wall time.
				b.ReportMetric(float64(cpuTime()-t0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
