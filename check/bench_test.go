package check_test

import (
	"testing"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// BenchmarkTP8Schedule measures one explored schedule of tp8-shared-expert
// (build + run + race detection + comparison with the reference), for 1 and
// 61 layers.
func BenchmarkTP8Schedule(b *testing.B) {
	for _, layers := range []string{"1", "61"} {
		b.Run("layers="+layers, func(b *testing.B) {
			sc, _ := scenarios.Lookup("tp8-shared-expert")
			v, _ := sc.Variant("buggy")
			cfg, err := sc.VariantConfig(v, []string{"layers=" + layers})
			if err != nil {
				b.Fatal(err)
			}
			ref, err := check.NewReference(sc.Program(cfg, nil))
			if err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				i++
				o, err := check.RunSchedule(sc.Program(cfg, nil), ref, sim.Timed, sim.NewRandom(uint64(i), check.RandomPerMille))
				if err != nil {
					b.Fatal(err)
				}
				o.Release()
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "schedules/s")
		})
	}
}
