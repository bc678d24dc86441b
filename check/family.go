package check

import (
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"sort"
	"strings"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// extraRefs are the references a program may declare besides the
// serialized program (see [References]): the unsharded model run on one
// device, the eager path its graph path must match, other variants'
// reference runs, and explicit values.
type extraRefs struct {
	model   *Model
	modelW  *ranks.World
	modelTs map[string]*ranks.Buffer

	eager *Built

	variants []namedRecord
	expected []Expected
}

// namedRecord is another variant's reference run, recorded (refrecord.go).
type namedRecord struct {
	name string
	rec  *refRecord
}

// runRef builds and runs one reference world of p (what says which, in
// errors); it must finish.
func runRef(p Program, opt BuildOptions, what string) (*Built, error) {
	b, err := p.Build(opt, sim.NewEngine(sim.Timed, nil))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	res, err := b.World.Run()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if res.Hung {
		releaseBuilt(b)
		h := res.Findings[len(res.Findings)-1]
		return nil, &errRefHang{fmt.Sprintf("%s hangs: %s", what, h.Message), h}
	}
	return b, nil
}

// newExtraRefs builds the references p declares (nil when none). A
// reference run that hangs (the eager path, another variant's) is left
// out, and said in a ReferenceHang finding of hangs.
func newExtraRefs(p Program) (x *extraRefs, hangs []ranks.Finding, err error) {
	x, hangs, err = newExtraRefsHung(p)
	if x != nil && x.model == nil && x.eager == nil && len(x.variants) == 0 && len(x.expected) == 0 {
		x = nil
	}
	return x, hangs, err
}

// errRefHang is a reference run that hangs.
type errRefHang struct {
	msg  string
	hang ranks.Finding
}

func (e *errRefHang) Error() string { return e.msg }

func newExtraRefsHung(p Program) (*extraRefs, []ranks.Finding, error) {
	var hangs []ranks.Finding
	hung := func(err error, resource string) bool {
		var h *errRefHang
		if errors.As(err, &h) {
			hangs = append(hangs, refHangFinding(h.hang, resource, h.msg+"; outputs are not compared with it"))
			return true
		}
		return false
	}
	refs, err := p.References()
	if err != nil || refs == nil {
		return nil, nil, err
	}
	x := &extraRefs{expected: refs.Expected}
	if m := refs.Model; m != nil {
		x.model = m
		x.modelW, x.modelTs, err = m.Run()
		if err != nil {
			return nil, nil, err
		}
	}
	if refs.Eager != nil {
		if x.eager, err = runRef(refs.Eager, BuildOptions{}, "the eager path (references: eager)"); err != nil && !hung(err, "the eager path") {
			return nil, nil, err
		}
	}
	for _, v := range refs.Variants {
		// The other variant's intended outputs: its own program,
		// serialized, as the program's own reference is; recorded, its
		// world released.
		b, err := runRef(v.Program, BuildOptions{Reference: true}, fmt.Sprintf("the serialized program of variant %q (references: variant)", v.Name))
		if err != nil {
			if hung(err, "the reference of variant "+v.Name) {
				continue
			}
			return nil, nil, err
		}
		x.variants = append(x.variants, namedRecord{v.Name, newRefRecord(b, v.Program, -1, true)})
		releaseBuilt(b)
	}
	return x, hangs, nil
}

// findings compares b with every reference. A finding whose message is
// costly to write (the provenance of its values) has it made by its
// entry of details when [Outcome.Explain] asks (a recorded reference's
// provenance read from the run rw rebuilds); nil entries are complete.
func (x *extraRefs) findings(b *Built, rw *refWorlds) (out []ranks.Finding, details []func() string) {
	if x == nil {
		return nil, nil
	}
	if x.model != nil {
		out = append(out, x.compareModel(b)...)
	}
	if x.eager != nil {
		out = append(out, compareGraphEager(b, x.eager)...)
	}
	details = make([]func() string, len(out))
	for _, v := range x.variants {
		fs, ds := compareByName(b, v.rec, v.name, rw)
		out, details = append(out, fs...), append(details, ds...)
	}
	fs, ds := checkExpected(b, x.expected)
	out, details = append(out, fs...), append(details, ds...)
	return out, details
}

// compareModel compares every rank's outputs with the unsharded model's and
// attributes a difference to the ops whose contributions differ.
func (x *extraRefs) compareModel(b *Built) []ranks.Finding {
	var out []ranks.Finding
	vals := sourceValues(b.World)
	mvals := sourceValues(x.modelW)
	for r, cmp := range b.Compare {
		for _, name := range x.model.Outputs {
			var got *ranks.Buffer
			for _, t := range cmp {
				if t.Name == name {
					got = t
				}
			}
			want := x.modelTs[name]
			if got == nil {
				out = append(out, ranks.Finding{Kind: ranks.KindCorruption, Ranks: []int{r}, Ops: []string{name}, Resource: fmt.Sprintf("rank %d tensor %q", r, name),
					Message: fmt.Sprintf("rank %d has no tensor %q to compare with the unsharded model's", r, name)})
				continue
			}
			for c := range min(len(got.Vals), len(want.Vals)) {
				g, e := got.Vals[c], want.Vals[c]
				if g.N == e.N {
					continue
				}
				why := attribute(x.model, b.World, vals, g, x.modelW, mvals, e, len(b.Compare))
				out = append(out, ranks.Finding{
					Kind:     ranks.KindCorruption,
					Message:  fmt.Sprintf("rank %d tensor %s[%d] differs from the unsharded model run on one device: expected %d, observed %d; %s", r, name, c, e.N, g.N, why),
					Ranks:    []int{r},
					Ops:      []string{name},
					Resource: fmt.Sprintf("rank %d tensor %q", r, name),
				})
				break
			}
			if len(out) > 0 && out[len(out)-1].Ranks[0] == r {
				break // later outputs inherit the difference
			}
		}
	}
	return out
}

// sourceValues maps each source name ("r3:L0.sh_y[1]") to the value its
// buffer holds.
func sourceValues(w *ranks.World) map[string]uint64 {
	m := map[string]uint64{}
	for _, b := range w.Buffers() {
		for c, v := range b.Vals {
			m[fmt.Sprintf("r%d:%s[%d]", b.Rank, b.Name, c)] = v.N
		}
	}
	return m
}

// splitSource parses "r3:L0.sh_y[1]" into rank 3 and tensor "L0.sh_y".
func splitSource(s string) (rank int, tensor string, ok bool) {
	i := strings.IndexByte(s, ':')
	j := strings.LastIndexByte(s, '[')
	if i < 2 || s[0] != 'r' || j < i {
		return 0, "", false
	}
	if _, err := fmt.Sscanf(s[1:i], "%d", &rank); err != nil {
		return 0, "", false
	}
	return rank, s[i+1 : j], true
}

type contrib struct {
	val    uint64
	ranks  []int
	terms  []string
	scaled bool // some term has a coefficient other than 1
}

// contributions sums, per producing op, the terms of v.
func contributions(m *Model, w *ranks.World, vals map[string]uint64, v ranks.Value) map[string]*contrib {
	out := map[string]*contrib{}
	for _, t := range w.Srcs.Terms(v) {
		name := w.Srcs.Name(t.Src)
		r, tensor, ok := splitSource(name)
		if !ok {
			continue
		}
		op := m.Producer(tensor)
		if op == "" {
			op = tensor
		}
		c := out[op]
		if c == nil {
			c = &contrib{}
			out[op] = c
		}
		c.val = addMod(c.val, mulMod(vals[name], coefMod(t.Coef)))
		c.ranks = append(c.ranks, r)
		if t.Coef != 1 {
			name = fmt.Sprintf("%d·%s", t.Coef, name)
			c.scaled = true
		}
		c.terms = append(c.terms, name)
	}
	return out
}

// attribute explains a difference op by op: which op's contribution is
// counted k times, or comes from only some ranks' partials.
func attribute(m *Model, w *ranks.World, vals map[string]uint64, got ranks.Value, mw *ranks.World, mvals map[string]uint64, want ranks.Value, worldSize int) string {
	g := contributions(m, w, vals, got)
	e := contributions(m, mw, mvals, want)
	var parts []string
	for _, op := range keysOfBoth(g, e) {
		gc, ec := g[op], e[op]
		switch {
		case gc == nil:
			parts = append(parts, fmt.Sprintf("op %s's contribution is missing", op))
		case ec == nil:
			parts = append(parts, fmt.Sprintf("op %s contributes though the model has no such term (%s)", op, strings.Join(gc.terms, " + ")))
		case gc.val == ec.val:
		default:
			rs := uniq(gc.ranks)
			switch k := ratio(gc.val, ec.val); {
			case k > 1 && k <= 1<<16:
				how := ""
				if !gc.scaled && len(gc.terms) == int(k) && len(rs) == worldSize {
					how = ": one full copy per rank, summed"
				}
				parts = append(parts, fmt.Sprintf("op %s's contribution is counted %d times (%s%s)", op, k, strings.Join(gc.terms, " + "), how))
			case len(rs) < worldSize:
				parts = append(parts, fmt.Sprintf("op %s contributes %s, only ranks %v of %d, where the model has its whole output: a partial never reduced", op, strings.Join(gc.terms, " + "), rs, worldSize))
			default:
				parts = append(parts, fmt.Sprintf("op %s contributes %d (%s) where the model has %d", op, gc.val, strings.Join(gc.terms, " + "), ec.val))
			}
		}
	}
	if len(parts) == 0 {
		return "no single op explains it"
	}
	return strings.Join(parts, "; ")
}

func uniq(a []int) []int {
	sort.Ints(a)
	var out []int
	for i, x := range a {
		if i == 0 || x != a[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// Arithmetic modulo ranks.Modulus, for attributing values.

func addMod(a, b uint64) uint64 {
	s := a + b
	if s >= ranks.Modulus {
		s -= ranks.Modulus
	}
	return s
}

func mulMod(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	_, rem := bits.Div64(hi, lo, ranks.Modulus)
	return rem
}

func coefMod(c int64) uint64 {
	if c >= 0 {
		return uint64(c) % ranks.Modulus
	}
	return ranks.Modulus - uint64(-c)%ranks.Modulus
}

func powMod(a, e uint64) uint64 {
	r := uint64(1)
	for ; e > 0; e >>= 1 {
		if e&1 == 1 {
			r = mulMod(r, a)
		}
		a = mulMod(a, a)
	}
	return r
}

// ratio returns k with got = k·want (mod the modulus), or 0 when want is 0.
func ratio(got, want uint64) uint64 {
	if want == 0 {
		return 0
	}
	return mulMod(got, powMod(want, ranks.Modulus-2))
}

// compareGraphEager compares the graph path's outputs with the eager
// path's and names the ops the two programs issue a different number of
// times.
func compareGraphEager(got, eager *Built) []ranks.Finding {
	var out []ranks.Finding
	for r := range got.Compare {
		if r >= len(eager.Compare) {
			break
		}
		for i, b := range got.Compare[r] {
			if i >= len(eager.Compare[r]) {
				break
			}
			eb := eager.Compare[r][i]
			for c := range min(len(b.Vals), len(eb.Vals)) {
				if b.Vals[c].N == eb.Vals[c].N {
					continue
				}
				diff := opCountDiff(got.World, eager.World, r)
				out = append(out, ranks.Finding{
					Kind: ranks.KindCorruption,
					Message: fmt.Sprintf("graph path differs from eager path on rank %d tensor %s[%d]: eager %d = %s; graph %d = %s; %s",
						r, b.Name, c, eb.Vals[c].N, eager.World.Srcs.Format(eb.Vals[c]), b.Vals[c].N, got.World.Srcs.Format(b.Vals[c]), diff),
					Ranks:    []int{r},
					Ops:      []string{b.Name},
					Resource: fmt.Sprintf("rank %d tensor %q", r, b.Name),
				})
				break
			}
		}
	}
	return out
}

// opCountDiff lists the kernels rank r's graph issues a different number of
// times per step than its eager path. The graph is captured once and
// replayed, each replay a step; the eager path issues the program once per
// step when the replays carry state, and once in all when they are
// independent steps (each on inputs of its own).
func opCountDiff(g, e *ranks.World, r int) string {
	gc, ec := g.KernelCounts(r), e.KernelCounts(r)
	passes := max(g.Replays(), 1)
	if e.IndependentReplays() {
		passes = 1
	}
	var parts []string
	for _, n := range keysOfBoth(gc, ec) {
		if gc[n]*passes != ec[n] {
			parts = append(parts, fmt.Sprintf("op %s is captured %d× in the graph but runs %d× per eager step", n, gc[n], ec[n]/passes))
		}
	}
	if len(parts) == 0 {
		return "every op is captured as often as it runs eagerly: the difference is in the values the graph froze at capture"
	}
	return strings.Join(parts, "; ")
}

// keysOfBoth is the sorted union of a's and b's keys.
func keysOfBoth[V any](a, b map[string]V) []string {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
