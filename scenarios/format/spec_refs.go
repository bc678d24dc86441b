package format

import (
	"fmt"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// References a scenario file lists besides the serialized program (each
// rank's own ops in program order on one stream, which every run is
// compared with). `references:` is a list; each entry is one of
//
//   - eager: in graph mode, the eager path's outputs (the graph must
//     compute what eager execution computes);
//   - variant: NAME: another variant's outputs — that variant is built
//     with the same --set overrides, its program serialized and run, and
//     every compared tensor of the run must equal the tensor of the same
//     name and rank there (a fixed order against a swapped one);
//   - unsharded: the model the program shards, run on one device: linear
//     and add ops over the file's tensors, whose outputs every rank must
//     hold (a shared expert counted once per rank, a partial never
//     reduced);
//   - expected: explicit values of a tensor on some ranks.
//
// check compares; this file reads and validates them, and package
// scenarios (refs.go) hands them over as [check.References].

// RefSpec is one reference of a file other than eager: exactly one of
// Variant, Model and Expected is set.
type RefSpec struct {
	Variant  string
	Model    *ModelSpec
	Expected []ExpectSpec
	pos      posMap
}

// ModelSpec is the unsharded model a file's program shards.
type ModelSpec struct {
	Ops     []ModelOpSpec
	Outputs []string
	pos     posMap
}

// ModelOpSpec is one op of the unsharded model: Kind "linear" (Writes =
// Weight·Σ Reads, a new value) or "add" (Writes = Σ Reads). A linear's
// Weight 0 is the whole weight of a row-parallel split of it: the sum over
// the world's ranks of the per-rank weight a program kernel of the same
// name gets when the file gives it none ([Spec.KernelWeight]).
type ModelOpSpec struct {
	Kind   string
	Name   string
	Reads  []string
	Writes string
	Weight int64
	pos    posMap
}

// ExpectSpec is explicit expected values: tensor Tensor holds Values (one
// per chunk) on the ranks Ranks at the end of the run.
type ExpectSpec struct {
	Tensor string
	Ranks  RankSet
	Values []uint64
	pos    posMap
}

func init() {
	// A sum kernel (OpSpec.Sum): an elementwise add that keeps provenance.
	opKeys = append(opKeys, "sum")
	opAllowed[OpKernel] = append(opAllowed[OpKernel], "sum")
}

// refKinds are the keys of a mapping entry of references:.
var refKinds = []string{"variant", "unsharded", "expected"}

// references reads the references: list into s.
func (d *decoder) references(v ast.Node, s *Spec) {
	for _, it := range d.seqAtMost(v, "references", 8, "") {
		if n, ok := d.value(it); ok {
			if _, isStr := n.(*ast.StringNode); isStr {
				name, _ := d.str(n, "references")
				switch {
				case name != "eager":
					d.add(posOf(n), "references: %q; expected eager (in graph mode, also compare with the eager path's outputs), or a mapping with one of %s", name, strings.Join(refKinds, ", "))
				case slices.Contains(s.References, name):
					d.add(posOf(n), "references: %q listed twice", name)
				default:
					s.References = append(s.References, name)
					s.pos["references.eager"] = posOf(n)
				}
				continue
			}
		}
		r := RefSpec{pos: posMap{}}
		o := d.mapping(it, "reference", refKinds...)
		o.record(r.pos)
		if len(o.order) != 1 {
			if len(o.vals) > 1 {
				d.add(o.at, "reference: expected exactly one of %s, got %d (%s)", strings.Join(refKinds, ", "), len(o.order), strings.Join(o.order, ", "))
			} else if len(o.vals) == 0 && len(d.list) == 0 {
				d.add(o.at, "reference: expected eager, or one of %s", strings.Join(refKinds, ", "))
			}
			continue
		}
		switch o.order[0] {
		case "variant":
			r.Variant = o.name("variant")
			for _, x := range s.Refs {
				if x.Variant != "" && x.Variant == r.Variant {
					d.add(o.kpos["variant"], "references: variant %q listed twice", r.Variant)
				}
			}
		case "unsharded":
			if slices.ContainsFunc(s.Refs, func(x RefSpec) bool { return x.Model != nil }) {
				d.add(o.kpos["unsharded"], "references: one unsharded model per file")
			}
			r.Model = d.model(o.get("unsharded"))
		case "expected":
			for _, e := range d.seqAtMost(o.get("expected"), "references expected", MaxTensors, "") {
				r.Expected = append(r.Expected, d.expect(e))
			}
		}
		s.Refs = append(s.Refs, r)
	}
}

func (d *decoder) model(n ast.Node) *ModelSpec {
	m := &ModelSpec{pos: posMap{}}
	o := d.mapping(n, "unsharded model", "ops", "outputs")
	o.record(m.pos)
	o.require("ops", "outputs")
	if v := o.get("ops"); v != nil {
		for _, it := range d.seqAtMost(v, "unsharded ops", MaxOps, "") {
			op := ModelOpSpec{pos: posMap{}}
			oo := d.mapping(it, "unsharded op", "linear", "add", "reads", "writes", "weight")
			oo.record(op.pos)
			for _, k := range []string{"linear", "add"} {
				if oo.has(k) {
					if op.Kind != "" {
						d.add(oo.kpos[k], "unsharded op: give linear or add, not both")
						continue
					}
					op.Kind, op.Name = k, oo.name(k)
					op.pos["name"] = op.pos[k]
				}
			}
			if op.Kind == "" && (len(oo.vals) > 0 || len(d.list) == 0) {
				d.add(oo.at, "unsharded op: expected linear: NAME (Weight·Σ reads) or add: NAME (Σ reads)")
			}
			oo.require("reads", "writes")
			op.Reads = oo.names("reads", 16)
			op.Writes = oo.name("writes")
			if oo.has("weight") {
				if op.Kind == "add" {
					d.add(oo.kpos["weight"], "unsharded op: an add has no weight; only a linear does")
				}
				op.Weight = oo.int("weight", 1, 1<<30)
			}
			m.Ops = append(m.Ops, op)
		}
	}
	m.Outputs = o.names("outputs", MaxTensors)
	return m
}

func (d *decoder) expect(n ast.Node) ExpectSpec {
	e := ExpectSpec{pos: posMap{}}
	o := d.mapping(n, "expected values", "tensor", "ranks", "values")
	o.record(e.pos)
	o.require("tensor", "ranks", "values")
	e.Tensor = o.name("tensor")
	if v := o.get("ranks"); v != nil {
		e.Ranks, _ = d.rankSet(v, "expected ranks")
	}
	if v := o.get("values"); v != nil {
		e.Values = o.values("values", v)
	}
	return e
}

// validateRefs checks that every reference names what exists: a variant of
// the file (not one that is itself compared against another: a reference
// runs on its own), tensors of the file, ranks of the world, values for
// every chunk, a model whose reads come before its writes.
func (s *Spec) validateRefs(e *errs, tensors map[string]*TensorSpec) {
	flagged := false
	for _, t := range s.Tensors {
		flagged = flagged || t.Output
	}
	compared := func(name string) bool {
		t := tensors[name]
		return t != nil && (!flagged || t.Output)
	}
	for _, r := range s.Refs {
		switch {
		case r.Variant != "":
			if !slices.ContainsFunc(s.Variants, func(v Variant) bool { return v.Name == r.Variant }) {
				names := make([]string, len(s.Variants))
				for i, v := range s.Variants {
					names[i] = v.Name
				}
				e.add(r.pos.at("variant"), "references: variant %q is not a variant of this file (variants: %s)", r.Variant, strings.Join(names, ", "))
			}
			if s.Graph != nil && s.Graph.Builder == "" && !flagged {
				e.add(r.pos.at("variant"), "references: variant compares tensors by name; mark the tensors to compare with output: true")
			}
		case r.Model != nil:
			s.validateModel(e, r.Model, tensors, compared)
		default:
			for _, x := range r.Expected {
				t := tensors[x.Tensor]
				switch {
				case x.Tensor == "":
				case t == nil:
					e.add(x.pos.at("tensor"), "expected values: undefined tensor %q", x.Tensor)
					continue
				case !compared(x.Tensor):
					e.add(x.pos.at("tensor"), "expected values: tensor %q is not compared; mark it output: true", x.Tensor)
				}
				if _, err := x.Ranks.Resolve(s.Base.TP); err != nil {
					e.add(x.pos.at("ranks"), "expected ranks: %v", err)
				}
				if t == nil {
					continue
				}
				if n := t.ChunksIn(s.Base); len(x.Values) > 0 && len(x.Values) != n {
					e.add(x.pos.at("values"), "expected values of %q: %d values; expected one per chunk (%d)", x.Tensor, len(x.Values), n)
				}
			}
		}
	}
}

func (s *Spec) validateModel(e *errs, m *ModelSpec, tensors map[string]*TensorSpec, compared func(string) bool) {
	made := map[string]bool{}
	for _, op := range m.Ops {
		for i, in := range op.Reads {
			switch {
			case made[in]:
			case tensors[in] == nil:
				e.add(op.pos.at(item("reads", i)), "unsharded op %q reads %q, which neither the file's tensors nor an earlier op of the model make", op.Name, in)
			case len(tensors[in].InitPerRank) > 0:
				e.add(op.pos.at(item("reads", i)), "unsharded op %q reads input %q, which has init_per_rank: the unsharded model's inputs are the same on every rank; give init", op.Name, in)
			}
		}
		if op.Writes == "" {
			continue
		}
		if made[op.Writes] {
			e.add(op.pos.at("writes"), "unsharded op %q writes %q, which an earlier op of the model writes", op.Name, op.Writes)
		}
		made[op.Writes] = true
	}
	for i, out := range m.Outputs {
		switch {
		case !made[out]:
			e.add(m.pos.at(item("outputs", i)), "unsharded output %q: no op of the model writes it", out)
		case !compared(out):
			e.add(m.pos.at(item("outputs", i)), "unsharded output %q: the program has no compared tensor of that name (declare it in tensors, with output: true when the file marks outputs)", out)
		}
	}
}

// marshalRefs writes the references: list.
func marshalRefs(p func(int, string, ...any), s *Spec) {
	if len(s.References) == 0 && len(s.Refs) == 0 {
		return
	}
	if len(s.Refs) == 0 {
		p(0, "references: %s", names(s.References))
		return
	}
	p(0, "references:")
	for _, r := range s.References {
		p(1, "- %s", quote(r))
	}
	for _, r := range s.Refs {
		switch {
		case r.Variant != "":
			p(1, "- variant: %s", quote(r.Variant))
		case r.Model != nil:
			p(1, "- unsharded:")
			p(3, "ops:")
			for _, op := range r.Model.Ops {
				line := fmt.Sprintf("- {%s: %s, reads: %s, writes: %s", op.Kind, quote(op.Name), names(op.Reads), quote(op.Writes))
				if op.Weight != 0 {
					line += fmt.Sprintf(", weight: %d", op.Weight)
				}
				p(4, "%s}", line)
			}
			p(3, "outputs: %s", names(r.Model.Outputs))
		default:
			p(1, "- expected:")
			for _, x := range r.Expected {
				p(3, "- {tensor: %s, ranks: %s, values: %s}", quote(x.Tensor), x.Ranks, uints(x.Values))
			}
		}
	}
}
