package findings

// KeySet is a set of small comparable keys, for de-duplicating findings on
// a hot path: open addressing with linear probing, the zero key marking an
// empty slot (no real key is zero). A racy schedule adds a few hundred race
// pairs and de-duplication keys; a map hashed each key through the
// runtime's generic path at several times the cost.
type KeySet[K SetKey] struct {
	slots []K
	n     int
	// Alloc, when set, is where grown tables come from (zeroed); nil: the
	// heap.
	Alloc func(n int) []K
}

// SetKey is a key of a KeySet: never zero when real, with its own hash.
type SetKey interface {
	comparable
	Hash() uint32
}

// Add inserts k, whose hash is h (k.Hash(), which the caller may have
// computed already), and reports whether it was new.
func (s *KeySet[K]) Add(k K, h uint32) bool {
	if 4*(s.n+1) > 3*len(s.slots) {
		s.grow()
	}
	var zero K
	mask := uint32(len(s.slots) - 1)
	for i := (h ^ h>>15) & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case k:
			return false
		case zero:
			s.slots[i] = k
			s.n++
			return true
		}
	}
}

// Len is the number of keys in s.
func (s *KeySet[K]) Len() int { return s.n }

func (s *KeySet[K]) grow() {
	old := s.slots
	n := max(256, 2*len(old))
	if s.Alloc != nil {
		s.slots = s.Alloc(n)
	} else {
		s.slots = make([]K, n)
	}
	s.n = 0
	var zero K
	for _, k := range old {
		if k != zero {
			s.Add(k, k.Hash())
		}
	}
}
