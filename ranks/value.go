package ranks

import (
	"fmt"
	"math/bits"
	"sort"
	"strings"
)

// Modulus is the prime 2^61-1. Values are exact integers modulo Modulus, so
// "agrees with the reference" is equality, never a tolerance, and long layer
// stacks cannot overflow.
const Modulus uint64 = 1<<61 - 1

func addMod(a, b uint64) uint64 {
	s := a + b
	if s >= Modulus {
		s -= Modulus
	}
	return s
}

func mulMod(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	// 2^64 = 8 (mod 2^61-1): fold the high part.
	r := (lo & Modulus) + (lo >> 61) + (hi << 3)
	for r >= Modulus {
		r -= Modulus
	}
	return r
}

// SourceID names one value chunk that was produced by a computation (not by
// moving or summing data): "rank 3's L0.shared_down, chunk 1".
type SourceID int32

// Term is one contribution to a value: Coef times a source.
type Term struct {
	Src  SourceID
	Coef int64
}

// Value is an exact value chunk with its provenance: the sum of terms that data
// movement (copies, reductions, sends) assembled it from. A computed chunk has
// a single term naming itself.
type Value struct {
	N    uint64
	Prov []Term // sorted by Src; nil for the zero value / uninitialised memory
}

// Add returns a+b with merged provenance.
func Add(a, b Value) Value {
	return Value{N: addMod(a.N, b.N), Prov: mergeTerms(a.Prov, b.Prov)}
}

func mergeTerms(a, b []Term) []Term {
	if len(a) == 0 {
		return b
	}
	if len(b) == 0 {
		return a
	}
	out := make([]Term, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i].Src < b[j].Src:
			out = append(out, a[i])
			i++
		case a[i].Src > b[j].Src:
			out = append(out, b[j])
			j++
		default:
			if c := a[i].Coef + b[j].Coef; c != 0 {
				out = append(out, Term{a[i].Src, c})
			}
			i++
			j++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

// SameProv reports whether two values were assembled from the same terms.
func SameProv(a, b Value) bool {
	if len(a.Prov) != len(b.Prov) {
		return false
	}
	for i := range a.Prov {
		if a.Prov[i] != b.Prov[i] {
			return false
		}
	}
	return true
}

// Sources is the world's table of value sources, for naming provenance.
type Sources struct {
	names []string
	index map[string]SourceID
}

// ID interns name.
func (s *Sources) ID(name string) SourceID {
	if s.index == nil {
		s.index = map[string]SourceID{}
	}
	if id, ok := s.index[name]; ok {
		return id
	}
	id := SourceID(len(s.names))
	s.names = append(s.names, name)
	s.index[name] = id
	return id
}

// Name returns the name of id.
func (s *Sources) Name(id SourceID) string {
	if int(id) < len(s.names) {
		return s.names[id]
	}
	return fmt.Sprintf("src%d", id)
}

// Format renders v's provenance ("r0:L0.sh_y[1] + r1:L0.sh_y[1]").
func (s *Sources) Format(v Value) string {
	if len(v.Prov) == 0 {
		return "(uninitialised)"
	}
	parts := make([]string, len(v.Prov))
	for i, t := range v.Prov {
		parts[i] = s.Name(t.Src)
		if t.Coef != 1 {
			parts[i] = fmt.Sprintf("%d·%s", t.Coef, parts[i])
		}
	}
	// Name order, not intern order: the same value prints the same way in
	// every run.
	sort.Slice(parts, func(i, j int) bool { return termKey(parts[i]) < termKey(parts[j]) })
	return strings.Join(parts, " + ")
}

// termKey sorts "r10:x" after "r9:x" and ignores a coefficient prefix.
func termKey(s string) string {
	if i := strings.IndexByte(s, 0xb7); i >= 0 && strings.HasPrefix(s[i-1:], "·") {
		s = s[i+1:]
	}
	if i := strings.IndexByte(s, ':'); i > 1 && s[0] == 'r' {
		return fmt.Sprintf("%s|r%06s", s[i+1:], s[1:i])
	}
	return s
}
