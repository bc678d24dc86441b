package sim

import (
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"
)

// TestRandomDrawsAsMathRand checks Random's own bounded draw against
// math/rand/v2's Rand.IntN over the same PCG: the same values in the same
// order, so a seed's schedule is the one it always was. The bounds include
// powers of two (the mask path) and bounds near 2⁶³, where the reject loop
// runs often.
func TestRandomDrawsAsMathRand(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seed := rapid.Uint64().Draw(t, "seed")
		ns := rapid.SliceOfN(rapid.OneOf(
			rapid.IntRange(1, 1100),
			rapid.Custom(func(t *rapid.T) int { return 1 << rapid.IntRange(0, 62).Draw(t, "shift") }),
			rapid.IntRange(1<<62, 1<<63-1),
		), 1, 200).Draw(t, "ns")
		r := NewRandom(seed, 1000)
		want := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		for i, n := range ns {
			if got, w := r.intN(n), want.IntN(n); got != w {
				t.Fatalf("draw %d of IntN(%d): got %d, math/rand gives %d", i, n, got, w)
			}
		}
	})
}

// BenchmarkRandomChoose measures one jitter decision of a random schedule
// (a 1-in-N deviation test, and the option when it deviates).
func BenchmarkRandomChoose(b *testing.B) {
	r := NewRandom(1, 100)
	s := 0
	for b.Loop() {
		s += r.Choose(DecJitter, 5)
	}
	_ = s
}
