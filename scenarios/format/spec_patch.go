package format

import (
	"fmt"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// Variants as patches. A variant of a programs file may change the programs
// themselves, not only knobs: add, remove, replace or move ops (named by
// their id, or their name when they have no id) and change a program's
// ranks. The patch is applied to the file's programs in order; the result
// is validated like the file's own programs and built when the variant
// runs. The variant carries it as the knob patch=<variant> (Config.Patch),
// so a schedule, a witness or `simctl run --set patch=NAME` names it.
//
// A step may also resize a tensor ({resize: T, bytes: N}): the variant
// allocates T with N bytes (a variant of a program written from a graph at
// another tp or token count holds other shapes; simctl show --lowered).

// PatchSpec is one step of a variant's patch.
type PatchSpec struct {
	// Verb is add, remove, replace, move, ranks or resize.
	Verb string
	// Bytes is a resized tensor's new size (verb resize; Ref names it).
	Bytes int64
	// Ref is the op removed, replaced or moved (its id or name).
	Ref string
	// Anchor places an added or moved op after (After) or before it; empty
	// appends to the end of Program.
	Anchor string
	After  bool
	// Op is the op added, or the replacement.
	Op *OpSpec
	// Program restricts the step to one program (index in file order);
	// -1: every program that holds the op it names.
	Program int
	// Ranks is the new rank list of Program (verb ranks).
	Ranks RankSet
	pos   posMap
}

// opRef is what a patch calls op: its id, or its name.
func opRef(op *OpSpec) string {
	if op.ID != "" {
		return op.ID
	}
	return op.Name
}

var patchKeys = []string{"add", "remove", "replace", "with", "move", "after", "before", "program", "ranks", "resize", "bytes"}

// patch reads one step of a variant's patch.
func (d *decoder) patch(n ast.Node) PatchSpec {
	p := PatchSpec{Program: -1, pos: posMap{}}
	o := d.mapping(n, "patch", patchKeys...)
	o.record(p.pos)
	var verbs []string
	for _, v := range []string{"add", "remove", "replace", "move"} {
		if o.has(v) {
			verbs = append(verbs, v)
		}
	}
	if o.has("program") {
		p.Program = int(o.int("program", 0, MaxRanks-1))
	}
	switch {
	case len(verbs) == 0 && o.has("resize"):
		p.Verb = "resize"
		p.Ref = o.name("resize")
		o.require("bytes")
		p.Bytes = o.int("bytes", 1, MaxTensorBytes)
		for _, k := range []string{"with", "after", "before", "program", "ranks"} {
			if o.has(k) {
				d.add(o.kpos[k], "patch: %s does not go with resize (a tensor exists on every rank)", k)
			}
		}
		return p
	case o.has("bytes"):
		d.add(o.kpos["bytes"], "patch: bytes goes with resize alone")
		return p
	case len(verbs) == 0 && o.has("ranks"):
		p.Verb = "ranks"
		if !o.has("program") {
			d.add(o.at, "patch: ranks changes one program's ranks; give program: (its index in file order, from 0)")
		}
		p.Ranks, _ = d.rankSet(o.get("ranks"), "patch ranks")
		for _, k := range []string{"with", "after", "before"} {
			if o.has(k) {
				d.add(o.kpos[k], "patch: %s does not go with ranks", k)
			}
		}
		return p
	case len(verbs) != 1:
		d.add(o.at, "patch: expected exactly one of add, remove, replace, move (or program with ranks, or resize with bytes), got %d (%s)", len(verbs), strings.Join(verbs, ", "))
		return p
	}
	p.Verb = verbs[0]
	if o.has("ranks") {
		d.add(o.kpos["ranks"], "patch: ranks goes with program alone, not with %s", p.Verb)
	}
	if o.has("with") != (p.Verb == "replace") {
		if p.Verb == "replace" {
			d.add(o.at, "patch: replace needs with: (the new op)")
		} else {
			d.add(o.kpos["with"], "patch: with goes with replace only")
		}
	}
	if o.has("after") && o.has("before") {
		d.add(o.kpos["before"], "patch: give after or before, not both")
	}
	anchored := o.has("after") || o.has("before")
	switch p.Verb {
	case "remove", "replace":
		if anchored {
			k := "after"
			if o.has("before") {
				k = "before"
			}
			d.add(o.kpos[k], "patch: %s takes no %s (the op keeps its place)", p.Verb, k)
		}
	case "move":
		if !anchored {
			d.add(o.at, "patch: move needs after: or before: (the op it goes next to)")
		}
	case "add":
		if !anchored && !o.has("program") {
			d.add(o.at, "patch: add needs after:, before:, or program: (to append to that program)")
		}
	}
	switch p.Verb {
	case "add":
		op := d.op(o.get("add"))
		p.Op = &op
	case "replace":
		p.Ref = o.name("replace")
		if w := o.get("with"); w != nil {
			op := d.op(w)
			p.Op = &op
		}
	default:
		p.Ref = o.name(p.Verb)
	}
	if o.has("after") {
		p.Anchor, p.After = o.name("after"), true
	} else if o.has("before") {
		p.Anchor = o.name("before")
	}
	return p
}

// applyPatch applies steps to a copy of progs, reporting each step that
// names no op, or an op that is ambiguous, at its line. A step reaches the
// ops of a capture block as well as the program's own: each op lives in a
// list (the program's, or a capture block's), and a step removes,
// replaces or inserts in the list where its op is.
func applyPatch(progs []ProgramSpec, steps []PatchSpec, report func(Pos, string)) []ProgramSpec {
	out := make([]ProgramSpec, len(progs))
	for i, p := range progs {
		out[i] = p
		out[i].Ops = slices.Clone(p.Ops)
		for j := range out[i].Ops {
			if c := out[i].Ops[j].Capture; c != nil {
				cc := *c // a copy: the file's own block stays as written
				cc.Ops = slices.Clone(c.Ops)
				out[i].Ops[j].Capture = &cc
			}
		}
	}
	// loc is where an op is: index i of list ops (i < 0: nowhere); top:
	// ops is the program's own list, not a capture block's.
	type loc struct {
		ops *[]OpSpec
		i   int
		top bool
	}
	// fits reports whether op may go into l's list: a capture block holds
	// plain ops (no repeat, capture, replay, fill or empty_cache), as the
	// file's own blocks do.
	fits := func(st *PatchSpec, l loc, op *OpSpec, field string) bool {
		if l.top || (op.Repeat == nil && op.Capture == nil && op.Kind != OpReplay && op.Kind != OpFill && op.Kind != OpEmptyCache) {
			return true
		}
		report(st.pos.at(field), fmt.Sprintf("patch: a %s cannot go into a capture block: a capture block holds plain ops", op.Kind))
		return false
	}
	// find returns, per candidate program, where the op ref names is, or
	// false after reporting a problem.
	find := func(st *PatchSpec, ref, field string) ([]loc, bool) {
		at := make([]loc, len(out))
		found := false
		for pi := range out {
			at[pi].i = -1
			if st.Program >= 0 && pi != st.Program {
				continue
			}
			lists := []*[]OpSpec{&out[pi].Ops}
			for j := range out[pi].Ops {
				if c := out[pi].Ops[j].Capture; c != nil {
					lists = append(lists, &c.Ops)
				}
			}
			for li, ops := range lists {
				for oi := range *ops {
					if opRef(&(*ops)[oi]) != ref {
						continue
					}
					if at[pi].i >= 0 {
						report(st.pos.at(field), fmt.Sprintf("patch: %q names more than one op of the program at line %d; give the one you mean an id", ref, out[pi].pos.at("").Line))
						return nil, false
					}
					at[pi] = loc{ops, oi, li == 0}
					found = true
				}
			}
		}
		if !found {
			where := "any program"
			if st.Program >= 0 {
				where = fmt.Sprintf("program %d", st.Program)
			}
			report(st.pos.at(field), fmt.Sprintf("patch: no op named %q in %s (an op is named by its id, or by its name when it has none)", ref, where))
			return nil, false
		}
		return at, true
	}
	for i := range steps {
		st := &steps[i]
		if st.Program >= len(out) {
			report(st.pos.at("program"), fmt.Sprintf("patch: program %d; the file has %d programs (0..%d)", st.Program, len(out), len(out)-1))
			continue
		}
		switch st.Verb {
		case "ranks":
			out[st.Program].Ranks = st.Ranks
		case "remove", "replace":
			at, ok := find(st, st.Ref, st.Verb)
			if !ok {
				continue
			}
			for _, l := range at {
				switch {
				case l.i < 0:
				case st.Verb == "remove":
					*l.ops = slices.Delete(*l.ops, l.i, l.i+1)
				case st.Op != nil && fits(st, l, st.Op, "with"):
					op := *st.Op
					if op.ID == "" {
						// the replacement stands where the op stood: a later
						// step (or another variant's) still names it by its id
						op.ID = (*l.ops)[l.i].ID
					}
					(*l.ops)[l.i] = op
				}
			}
		case "move":
			from, ok := find(st, st.Ref, "move")
			if !ok || st.Anchor == "" {
				continue
			}
			moved := make([]*OpSpec, len(out))
			for pi, l := range from {
				if l.i >= 0 {
					op := (*l.ops)[l.i]
					moved[pi] = &op
					*l.ops = slices.Delete(*l.ops, l.i, l.i+1)
				}
			}
			at, ok := find(st, st.Anchor, anchorKey(st))
			if !ok {
				continue
			}
			for pi, op := range moved {
				if op == nil {
					continue
				}
				if at[pi].i < 0 {
					report(st.pos.at(anchorKey(st)), fmt.Sprintf("patch: %q is not in the program at line %d, where %q is", st.Anchor, out[pi].pos.at("").Line, st.Ref))
					continue
				}
				l := at[pi]
				if !fits(st, l, op, "move") {
					continue
				}
				*l.ops = slices.Insert(*l.ops, l.i+btoi(st.After), *op)
			}
		case "add":
			if st.Op == nil {
				continue
			}
			if st.Anchor == "" {
				if st.Program >= 0 {
					out[st.Program].Ops = append(out[st.Program].Ops, *st.Op)
				}
				continue
			}
			at, ok := find(st, st.Anchor, anchorKey(st))
			if !ok {
				continue
			}
			for _, l := range at {
				if l.i >= 0 && fits(st, l, st.Op, "add") {
					*l.ops = slices.Insert(*l.ops, l.i+btoi(st.After), *st.Op)
				}
			}
		}
	}
	return out
}

func anchorKey(st *PatchSpec) string {
	if st.After {
		return "after"
	}
	return "before"
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// patchAll applies every variant's patch and keeps the results, reporting
// problems through report.
func (s *Spec) patchAll(report func(Pos, string)) {
	s.patched = map[string][]ProgramSpec{}
	for i, v := range s.Variants {
		if i < len(s.patches) && len(s.patches[i]) > 0 {
			s.patched[v.Name] = applyPatch(s.Programs, s.patches[i], report)
		}
	}
}

// Resized returns s with the tensors a configuration's patch resizes at
// their new sizes: s itself when it resizes none, else a copy.
func (s *Spec) Resized(cfg Config) *Spec {
	if cfg.Patch == "" {
		return s
	}
	var steps []PatchSpec
	for i, v := range s.Variants {
		if v.Name == cfg.Patch && i < len(s.patches) {
			steps = s.patches[i]
		}
	}
	var c *Spec
	for _, st := range steps {
		if st.Verb != "resize" {
			continue
		}
		if c == nil {
			cc := *s
			cc.Tensors = slices.Clone(s.Tensors)
			c = &cc
		}
		for i := range c.Tensors {
			if c.Tensors[i].Name == st.Ref {
				c.Tensors[i].Bytes, c.Tensors[i].BytesExpr = st.Bytes, nil
			}
		}
	}
	if c == nil {
		return s
	}
	return c
}

// validateResizes reports a resize step that names no tensor.
func (s *Spec) validateResizes(e *errs) {
	for _, steps := range s.patches {
		for _, st := range steps {
			if st.Verb == "resize" && st.Ref != "" && s.Tensor(st.Ref) == nil {
				e.add(st.pos.at("resize"), "patch: resize %q: no tensor of that name", st.Ref)
			}
		}
	}
}

// SetPatches gives the variants the patches steps (steps[i] variant i's),
// as a file's patch: keys would; a variant with steps should set
// patch=NAME. For a Spec made in code (simctl show --lowered).
func (s *Spec) SetPatches(steps [][]PatchSpec) {
	s.patches = steps
	s.patched = nil
}

// ProgramsFor is the programs a configuration runs: the file's, or a
// variant's patched ones.
func (s *Spec) ProgramsFor(cfg Config) ([]ProgramSpec, error) {
	if cfg.Patch == "" {
		return s.Programs, nil
	}
	if s.patched == nil {
		s.patchAll(func(Pos, string) {})
	}
	p, ok := s.patched[cfg.Patch]
	if !ok {
		return nil, fmt.Errorf("%w: patch=%q: no variant of %q has that name and a patch", ErrBadKnob, cfg.Patch, s.Name)
	}
	return p, nil
}

// AllPrograms is the file's programs and every variant's patched ones, for
// what holds over all of them (knobs read, tensors allocated, workspace
// sizes).
func (s *Spec) AllPrograms() []ProgramSpec {
	out := slices.Clone(s.Programs)
	if s.patched == nil && len(s.patches) > 0 {
		s.patchAll(func(Pos, string) {})
	}
	for _, v := range s.Variants {
		out = append(out, s.patched[v.Name]...)
	}
	return out
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
