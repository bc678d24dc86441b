package ranks

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/collsim/collsim/ranks/findings"
)

// A FIFO is a queue: any sequence of pushes and pops returns the messages in
// push order, whether or not the sends respect Cap (the ring grows if not).
func TestFifoIsAQueue(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := &Fifo{Cap: rapid.IntRange(0, 4).Draw(t, "cap")}
		var model []int32
		next := int32(0)
		for _, push := range rapid.SliceOf(rapid.Bool()).Draw(t, "ops") {
			if push || len(model) == 0 {
				f.push(msg{by: next})
				model = append(model, next)
				next++
			} else {
				m := f.pop()
				if m.by != model[0] {
					t.Fatalf("pop = %d, want %d", m.by, model[0])
				}
				model = model[1:]
			}
			if f.inFlight() != len(model) {
				t.Fatalf("in flight = %d, want %d", f.inFlight(), len(model))
			}
		}
	})
}

// The world's race key sets are sets: any sequence of adds reports "new" exactly when a map
// would, across its growth, for both of its key types.
func TestKeySetIsASet(t *testing.T) {
	t.Run("race pairs", func(t *testing.T) {
		checkKeySet(t, func(t *rapid.T) raceKey {
			return raceKey{buf: rapid.Int32Range(0, 20).Draw(t, "buf"), a: rapid.Int32Range(0, 40).Draw(t, "a"),
				b: rapid.Int32Range(0, 40).Draw(t, "b"), kinds: uint16(rapid.IntRange(1, 4).Draw(t, "kinds"))}
		})
	})
	t.Run("race dedupe keys", func(t *testing.T) {
		checkKeySet(t, func(t *rapid.T) raceDedupeKey {
			return raceDedupeKey{res: rapid.Int32Range(1, 20).Draw(t, "res"), a: rapid.Int32Range(1, 40).Draw(t, "a"),
				b: rapid.Int32Range(1, 40).Draw(t, "b"), kinds: uint16(rapid.IntRange(1, 4).Draw(t, "kinds")), same: rapid.Bool().Draw(t, "same")}
		})
	})
}

func checkKeySet[K findings.SetKey](t *testing.T, draw func(*rapid.T) K) {
	rapid.Check(t, func(t *rapid.T) {
		var s findings.KeySet[K]
		model := map[K]bool{}
		for _, k := range rapid.SliceOf(rapid.Custom(draw)).Draw(t, "keys") {
			if got, want := s.Add(k, k.Hash()), !model[k]; got != want {
				t.Fatalf("add(%v) = %v, want %v", k, got, want)
			}
			model[k] = true
		}
		if s.Len() != len(model) {
			t.Fatalf("n = %d, want %d", s.Len(), len(model))
		}
	})
}
