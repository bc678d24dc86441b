package explore

import (
	"testing"
)

// BenchmarkStrategies measures one schedule (build, run, judge, and for dpor
// the race analysis) per iteration on tp8-shared-expert with one layer.
func BenchmarkStrategies(b *testing.B) {
	for _, variant := range []string{"buggy", "fixed"} {
		for _, name := range Names {
			b.Run(variant+"/"+name, func(b *testing.B) {
				t, err := NewTarget("tp8-shared-expert", variant, []string{"layers=1"})
				if err != nil {
					b.Fatal(err)
				}
				s, err := New(name, t, 1)
				if err != nil {
					b.Fatal(err)
				}
				i := 0
				for b.Loop() {
					ch, _, ok := s.Begin(i)
					if !ok { // dpor complete: start over
						s, _ = New(name, t, 1)
						i = 0
						ch, _, _ = s.Begin(i)
					}
					sc, err := t.Run(s.Mode(), ch)
					if err != nil {
						b.Fatal(err)
					}
					if err := s.End(i, sc); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}

// BenchmarkExplore measures explorations of tp8-shared-expert with one
// layer as simctl explore runs them (Explore, one worker, the explorer's
// collector target, each schedule released for the next): 1000 random
// schedules of each variant, and a fresh DPOR search of 150 traces of the
// buggy one.
func BenchmarkExplore(b *testing.B) {
	for _, c := range []struct {
		variant, strategy string
		budget            int
	}{{"fixed", "random", 1000}, {"buggy", "random", 1000}, {"buggy", "dpor", 150}} {
		b.Run(c.variant+"/"+c.strategy, func(b *testing.B) {
			t, err := NewTarget("tp8-shared-expert", c.variant, []string{"layers=1"})
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				s, err := New(c.strategy, t, 1)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Explore(t, s, 1, Options{Budget: c.budget, Workers: 1, GCPercent: DefaultGCPercent}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*c.budget)/b.Elapsed().Seconds(), "schedules/s")
		})
	}
}
