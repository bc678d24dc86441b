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
