package findings_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/collsim/collsim/ranks/findings"
)

type pair struct{ a, b int32 }

// Hash is deliberately poor (many collisions), to exercise probing.
func (p pair) Hash() uint32 { return uint32(p.a) & 7 }

// A KeySet is a set: any sequence of adds reports "new" exactly when a map
// would, across its growth, with colliding hashes and a table allocator.
func TestKeySetIsASet(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var s findings.KeySet[pair]
		if rapid.Bool().Draw(t, "alloc") {
			s.Alloc = func(n int) []pair { return make([]pair, n) }
		}
		model := map[pair]bool{}
		keys := rapid.SliceOf(rapid.Custom(func(t *rapid.T) pair {
			return pair{rapid.Int32Range(1, 600).Draw(t, "a"), rapid.Int32Range(0, 3).Draw(t, "b")}
		})).Draw(t, "keys")
		for _, k := range keys {
			if got, want := s.Add(k, k.Hash()), !model[k]; got != want {
				t.Fatalf("Add(%v) = %v, want %v", k, got, want)
			}
			model[k] = true
		}
		if s.Len() != len(model) {
			t.Fatalf("Len = %d, want %d", s.Len(), len(model))
		}
	})
}
