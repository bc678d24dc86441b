package check_test

import (
	"testing"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/explore"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// BenchmarkTP8RandomSchedule measures one seeded random schedule of
// tp8-shared-expert with one layer, as `simctl bench`'s
// tp8-1layer-schedules-per-s row runs it (one program, a reference, the
// explorer's collector target, each schedule released for the next), for
// the buggy and the fixed variant.
func BenchmarkTP8RandomSchedule(b *testing.B) {
	for _, variant := range []string{"buggy", "fixed"} {
		b.Run(variant, func(b *testing.B) {
			sc, _ := scenarios.Lookup("tp8-shared-expert")
			v, _ := sc.Variant(variant)
			cfg, err := sc.VariantConfig(v, []string{"layers=1"})
			if err != nil {
				b.Fatal(err)
			}
			prog := sc.Program(cfg, nil)
			ref, err := check.NewReference(prog)
			if err != nil {
				b.Fatal(err)
			}
			defer explore.TuneGC(explore.DefaultGCPercent)()
			seed := uint64(0)
			for b.Loop() {
				seed++
				o, err := check.RunSchedule(prog, ref, sim.Timed, sim.NewRandom(seed, check.RandomPerMille))
				if err != nil {
					b.Fatal(err)
				}
				o.Release()
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "schedules/s")
		})
	}
}
