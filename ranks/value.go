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
type SourceID int64

// Term is one contribution to a value: Coef times a source.
type Term struct {
	Src  SourceID
	Coef int64
}

// Value is an exact value chunk with its provenance: which computed sources
// data movement (copies, reductions, sends) assembled it from.
type Value struct {
	N uint64
	P *Prov // nil for uninitialised memory
}

// Prov is an immutable provenance expression: a source, a sum of two
// expressions, or a scaled expression. Building one is O(1) (values are
// summed on every hop of a ring); [Value.Terms] flattens it for reports.
//
// 32 bytes: a ring makes one per hop, so its size is a run's memory. A
// leaf's coefficient is always 1 (sources enter scaled through provScale).
type Prov struct {
	a, b *Prov
	x    int64 // a leaf's SourceID, or a scale's factor
	kind provKind
}

type provKind uint8

const (
	provLeaf provKind = iota
	provSum
	provScale
)

// Fresh returns the provenance of a computed chunk: the source itself.
func Fresh(src SourceID) *Prov { return &Prov{kind: provLeaf, x: int64(src)} }

// Add returns a+b with both provenances.
func Add(a, b Value) Value {
	switch {
	case a.P == nil:
		return Value{N: addMod(a.N, b.N), P: b.P}
	case b.P == nil:
		return Value{N: addMod(a.N, b.N), P: a.P}
	}
	return Value{N: addMod(a.N, b.N), P: &Prov{kind: provSum, a: a.P, b: b.P}}
}

// provSlab is how many provenance nodes a world allocates at once: a run
// makes one per reduced or copied chunk, and one allocation per node was a
// large part of its allocations. Nodes are immutable while their world
// lives, so a value kept after its run (an outcome explained later) stays
// valid until the world is released (arena.go).
const provSlab = 256

// newProv returns a new provenance node p from w's slab.
func (w *World) newProv(p Prov) *Prov {
	if len(w.provs) == 0 {
		w.provs = w.mem.provs.get(provSlab)
	}
	n := &w.provs[0]
	*n = p
	w.provs = w.provs[1:]
	return n
}

// add is [Add] with the sum's node from w's slab.
func (w *World) add(a, b Value) Value {
	switch {
	case a.P == nil:
		return Value{N: addMod(a.N, b.N), P: b.P}
	case b.P == nil:
		return Value{N: addMod(a.N, b.N), P: a.P}
	}
	return Value{N: addMod(a.N, b.N), P: w.newProv(Prov{kind: provSum, a: a.P, b: b.P})}
}

// Terms flattens v's provenance into terms sorted by source, with equal
// sources combined and zero coefficients dropped.
func (v Value) Terms() []Term {
	if v.P == nil {
		return nil
	}
	if out, ok := v.fastTerms(); ok {
		return out
	}
	memo := map[*Prov]map[SourceID]int64{}
	var walk func(p *Prov) map[SourceID]int64
	walk = func(p *Prov) map[SourceID]int64 {
		if m, ok := memo[p]; ok {
			return m
		}
		m := map[SourceID]int64{}
		switch p.kind {
		case provLeaf:
			m[SourceID(p.x)]++
		case provSum:
			for k, c := range walk(p.a) {
				m[k] += c
			}
			for k, c := range walk(p.b) {
				m[k] += c
			}
		case provScale:
			for k, c := range walk(p.a) {
				m[k] += c * p.x
			}
		}
		memo[p] = m
		return m
	}
	m := walk(v.P)
	out := make([]Term, 0, len(m))
	for k, c := range m {
		if c != 0 {
			out = append(out, Term{Src: k, Coef: c})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Src < out[j].Src })
	return out
}

// fastTerms flattens small provenance trees without maps: a walk of at most
// a few thousand nodes accumulating into a short sorted slice. Shared
// sub-expressions are walked once per use, so a large DAG falls back to the
// memoised walk.
func (v Value) fastTerms() ([]Term, bool) {
	type frame struct {
		p *Prov
		k int64
	}
	stack := []frame{{v.P, 1}}
	var out []Term
	for steps := 0; len(stack) > 0; steps++ {
		if steps > 4096 {
			return nil, false
		}
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch f.p.kind {
		case provLeaf:
			src := SourceID(f.p.x)
			i := sort.Search(len(out), func(i int) bool { return out[i].Src >= src })
			if i < len(out) && out[i].Src == src {
				out[i].Coef += f.k
				continue
			}
			out = append(out, Term{})
			copy(out[i+1:], out[i:])
			out[i] = Term{Src: src, Coef: f.k}
		case provSum:
			stack = append(stack, frame{f.p.b, f.k}, frame{f.p.a, f.k})
		case provScale:
			stack = append(stack, frame{f.p.a, f.k * f.p.x})
		}
	}
	n := 0
	for _, t := range out {
		if t.Coef != 0 {
			out[n] = t
			n++
		}
	}
	return out[:n], true
}

// SameProv reports whether two values were assembled from the same terms.
func SameProv(a, b Value) bool {
	ta, tb := a.Terms(), b.Terms()
	if len(ta) != len(tb) {
		return false
	}
	for i := range ta {
		if ta[i] != tb[i] {
			return false
		}
	}
	return true
}

// Sources names the world's value sources for provenance. A source is one
// chunk of one buffer: its id packs (buffer, chunk), and its name
// ("r3:L0.sh_y[1]") is made only when a report asks.
type Sources struct {
	bufs *[]*Buffer
}

// maxChunks bounds the chunks of one buffer (so a SourceID can pack them).
const maxChunks = 1 << 12

func sourceOf(b *Buffer, c int) SourceID { return SourceID(int(b.id)*maxChunks + c) }

// Name returns the name of id.
func (s *Sources) Name(id SourceID) string {
	bi, c := int(id)/maxChunks, int(id)%maxChunks
	if s.bufs != nil && bi < len(*s.bufs) {
		b := (*s.bufs)[bi]
		return fmt.Sprintf("r%d:%s[%d]", b.Rank, b.Name, c)
	}
	return fmt.Sprintf("src%d", id)
}

// Format renders v's provenance ("r0:L0.sh_y[1] + r1:L0.sh_y[1]").
func (s *Sources) Format(v Value) string {
	terms := v.Terms()
	if len(terms) == 0 {
		return "(uninitialised)"
	}
	parts := make([]string, len(terms))
	for i, t := range terms {
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
