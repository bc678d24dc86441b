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
// data movement (copies, reductions, sends) assembled it from. The
// provenance is a node of its world's table ([Sources.Terms] and
// [Sources.Format] read it), so a value holds no pointer: a 512-rank ring's
// megabytes of values and provenance are nothing the garbage collector has
// to scan, and storing one needs no write barrier.
type Value struct {
	N uint64
	P ProvRef // 0 for uninitialised memory
}

// ProvRef names a node of a world's provenance table; 0 is none.
type ProvRef uint32

// Prov is an immutable provenance node: a source (a leaf: no operands, x is
// its SourceID), a sum of two nodes (a and b), a scaled node (a alone, x is
// the factor), or a sum of a list of nodes (a is 0, b the list's length, x
// where it is in the table's lists: provTable.list; a 0 in it is no term).
// A leaf's coefficient is always 1 (sources enter scaled through a scale
// node). Building one is O(1) (values are summed on every hop of a ring);
// [Sources.Terms] flattens it for reports, so only the sum a node stands
// for counts, never its shape: a coarse ring's n-rank sum is one list
// node, where the fine run's hops make a chain of n−1 sums.
//
// 16 bytes and no pointers: a ring makes one per hop, so its size is a
// run's memory.
type Prov struct {
	a, b ProvRef
	x    int64
}

// provShift sizes the table's chunks: 1<<provShift nodes (64 KB) each. A
// world allocates its nodes a chunk at a time (one allocation per node was
// a large part of a run's allocations).
const provShift = 12

// provTable is a world's provenance nodes: ref r is node r-1, in chunk
// (r-1)>>provShift. A template's copy shares the template's chunks (its
// initial values' provenance, never written again) and appends its own.
type provTable struct {
	chunks [][]Prov
	lists  []provList // list nodes' operands, one per coarse call
}

// provList holds list nodes' operands: node k's are ops[k], ops[k+stride],
// … (a coarse call writes them rank by rank, each rank's run contiguous).
type provList struct {
	ops    []ProvRef
	stride int
}

// list calls f with list node p's operands.
func (t *provTable) list(p *Prov, f func(ProvRef)) {
	l := &t.lists[p.x>>32]
	for i, o := 0, int(uint32(p.x)); i < int(p.b); i, o = i+1, o+l.stride {
		f(l.ops[o])
	}
}

func (t *provTable) node(r ProvRef) *Prov {
	i := uint32(r) - 1
	return &t.chunks[i>>provShift][i&(1<<provShift-1)]
}

// newProv adds node p to w's table and returns its ref. Nodes are
// immutable while their world lives, so a value kept after its run (an
// outcome explained later) stays valid until the world is released
// (arena.go).
func (w *World) newProv(p Prov) ProvRef {
	if len(w.provs) == 0 {
		c := w.mem.provs.GetUnzeroed(1 << provShift) // a node is written before its ref is handed out
		w.provTab.chunks = append(w.provTab.chunks, c)
		w.provs, w.provNext = c, ProvRef(len(w.provTab.chunks)-1)<<provShift+1
	}
	w.provs[0] = p
	w.provs = w.provs[1:]
	r := w.provNext
	w.provNext++
	return r
}

// leaf returns a new source node for src.
func (w *World) leaf(src SourceID) ProvRef { return w.newProv(Prov{x: int64(src)}) }

// add returns a+b with both provenances.
func (w *World) add(a, b Value) Value {
	switch {
	case a.P == 0:
		return Value{N: addMod(a.N, b.N), P: b.P}
	case b.P == 0:
		return Value{N: addMod(a.N, b.N), P: a.P}
	}
	return Value{N: addMod(a.N, b.N), P: w.newProv(Prov{a: a.P, b: b.P})}
}

// Terms flattens v's provenance into terms sorted by source, with equal
// sources combined and zero coefficients dropped.
func (s *Sources) Terms(v Value) []Term {
	if v.P == 0 {
		return nil
	}
	if out, ok := s.provs.fastTerms(v.P); ok {
		return out
	}
	return s.provs.memoTerms(v.P)
}

// memoTerms is Terms by a memoised walk: for a DAG too large to walk once
// per use of each node.
func (t *provTable) memoTerms(root ProvRef) []Term {
	memo := map[ProvRef]map[SourceID]int64{}
	var walk func(r ProvRef) map[SourceID]int64
	walk = func(r ProvRef) map[SourceID]int64 {
		if m, ok := memo[r]; ok {
			return m
		}
		m := map[SourceID]int64{}
		switch p := t.node(r); {
		case p.a == 0 && p.b != 0:
			t.list(p, func(x ProvRef) {
				if x != 0 {
					for k, c := range walk(x) {
						m[k] += c
					}
				}
			})
		case p.a == 0:
			m[SourceID(p.x)]++
		case p.b != 0:
			for k, c := range walk(p.a) {
				m[k] += c
			}
			for k, c := range walk(p.b) {
				m[k] += c
			}
		default:
			for k, c := range walk(p.a) {
				m[k] += c * p.x
			}
		}
		memo[r] = m
		return m
	}
	m := walk(root)
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
func (t *provTable) fastTerms(root ProvRef) ([]Term, bool) {
	type frame struct {
		r ProvRef
		k int64
	}
	stack := []frame{{root, 1}}
	var out []Term
	for steps := 0; len(stack) > 0; steps++ {
		if steps > 4096 {
			return nil, false
		}
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch p := t.node(f.r); {
		case p.a == 0 && p.b != 0:
			t.list(p, func(x ProvRef) {
				if x != 0 {
					stack = append(stack, frame{x, f.k})
				}
			})
		case p.a == 0:
			src := SourceID(p.x)
			i := sort.Search(len(out), func(i int) bool { return out[i].Src >= src })
			if i < len(out) && out[i].Src == src {
				out[i].Coef += f.k
				continue
			}
			out = append(out, Term{})
			copy(out[i+1:], out[i:])
			out[i] = Term{Src: src, Coef: f.k}
		case p.b != 0:
			stack = append(stack, frame{p.b, f.k}, frame{p.a, f.k})
		default:
			stack = append(stack, frame{p.a, f.k * p.x})
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

// Sources names the world's value sources for provenance. A source is one
// chunk of one buffer: its id packs (buffer, chunk), and its name
// ("r3:L0.sh_y[1]") is made only when a report asks.
type Sources struct {
	bufs  *[]*Buffer
	provs *provTable
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
	terms := s.Terms(v)
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
