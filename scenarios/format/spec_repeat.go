package format

import (
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"github.com/collsim/collsim/scenarios/knobs"
)

// Repeated ops. A program's ops may hold a block
//
//	- repeat: {count: layers, as: l}
//	  ops:
//	    - {kernel: "norm${l}", reads: [x], writes: [y]}
//
// that stands for its ops count times in a row, with ${l} in op names and
// ids replaced by 0, 1, …. count is an integer or a knob with an integer
// value (layers, or any), so a variant can change it. Tensors, streams and
// events are not substituted: a block reuses them, and an allocator-managed
// tensor may be allocated again once freed. Blocks do not nest.

// RepeatSpec is a repeated block of ops.
type RepeatSpec struct {
	Count     int    // when CountKnob is empty
	CountKnob string // a knob whose value is the count
	As        string // the variable substituted as ${As}
	Ops       []OpSpec
}

// OpRepeat is the kind of an op that is a repeated block.
const OpRepeat OpKind = "repeat"

// MaxRepeat bounds a block's count.
const MaxRepeat = 1024

// count is the block's count under cfg (0 when the knob has no integer
// value).
func (r *RepeatSpec) count(cfg Config) int {
	if r.CountKnob == "" {
		return r.Count
	}
	n, err := strconv.Atoi(knobs.Get(&cfg, r.CountKnob))
	if err != nil || n < 0 {
		return 0
	}
	return min(n, MaxRepeat)
}

// expand returns the block's ops under cfg, substituted.
func (r *RepeatSpec) expand(cfg Config) []OpSpec {
	var out []OpSpec
	for i := range r.count(cfg) {
		v := strconv.Itoa(i)
		for _, op := range r.Ops {
			if !op.holds(cfg) {
				continue
			}
			op.Name = strings.ReplaceAll(op.Name, "${"+r.As+"}", v)
			op.ID = strings.ReplaceAll(op.ID, "${"+r.As+"}", v)
			out = append(out, op)
		}
	}
	return out
}

// ExpandedLen is how many ops p runs under cfg, without expanding.
func (p *ProgramSpec) ExpandedLen(cfg Config) int {
	n := 0
	for i := range p.Ops {
		op := &p.Ops[i]
		if !op.holds(cfg) {
			continue
		}
		if op.Repeat == nil {
			n += opIssues(p, op, cfg)
			continue
		}
		k := 0
		for j := range op.Repeat.Ops {
			if op.Repeat.Ops[j].holds(cfg) {
				k += opIssues(p, &op.Repeat.Ops[j], cfg)
			}
		}
		n += k * op.Repeat.count(cfg)
	}
	return n
}

// Flat lists every op of p as written: a repeated block, then its ops
// (unexpanded), in file order.
func (p *ProgramSpec) Flat() []OpSpec {
	out := make([]OpSpec, 0, len(p.Ops))
	for _, op := range p.Ops {
		out = append(out, op)
		if op.Repeat != nil {
			out = append(out, op.Repeat.Ops...)
		}
		if op.Capture != nil {
			out = append(out, op.Capture.Ops...)
		}
	}
	return out
}

// repeat reads a repeated block: the repeat mapping and its ops.
func (d *decoder) repeat(o *obj, op *OpSpec) {
	r := &RepeatSpec{}
	ro := d.mapping(o.get("repeat"), "repeat", "count", "as")
	ro.require("count", "as")
	if v := ro.get("count"); v != nil {
		if txt, ok := d.scalarText(v, "repeat count"); ok {
			if _, err := strconv.Atoi(txt); err == nil {
				r.Count = int(ro.int("count", 0, MaxRepeat))
			} else if knobs.Known(txt) || d.param0(txt) != nil {
				r.CountKnob = txt
			} else {
				d.add(posOf(v), "repeat count: %q; expected an integer in [0, %d] or a knob with an integer value (layers, …)", txt, MaxRepeat)
			}
		}
	}
	r.As = ro.name("as")
	if v := o.get("ops"); v != nil {
		items := d.seq(v, "repeat ops", false)
		if len(items) > MaxOps {
			d.add(posOf(v), "repeat ops: %d; at most %d", len(items), MaxOps)
			items = nil
		}
		for _, it := range items {
			if m, ok := it.(*ast.MappingNode); ok && hasKey(m, "repeat") {
				d.add(posOf(it), "repeat blocks do not nest; write the inner block's ops out")
				continue
			}
			r.Ops = append(r.Ops, d.op(it))
		}
	} else {
		d.add(o.at, "repeat: missing required key \"ops\"")
	}
	op.Kind, op.Repeat = OpRepeat, r
}

func hasKey(m *ast.MappingNode, key string) bool {
	for _, kv := range m.Values {
		if kv.Key != nil && kv.Key.GetToken() != nil && kv.Key.GetToken().Value == key {
			return true
		}
	}
	return false
}
