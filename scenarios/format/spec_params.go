package format

import (
	"fmt"
	"slices"
	"strings"

	"github.com/collsim/collsim/scenarios/knobs"
)

// File-declared knobs. A scenario file may declare knobs of its own:
//
//	params:
//	  - {name: fix, values: [none, record-stream, join], default: none}
//
// A param is a knob like any other for that file: ops take it in when:, a
// repeat count may be one, variants set it, and `simctl run --set fix=join`
// flips it. Its value lives in Config.Params.

// ParamSpec is one file-declared knob.
type ParamSpec struct {
	Name    string
	Values  []string
	Default string
	// Sizes gives each value an integer, for expressions that name the
	// param (a dtype's bytes per element; spec_expr.go).
	Sizes map[string]int64
	pos   posMap
}

// MaxParams bounds a file's params.
const MaxParams = 32

// param returns the declaration of name, or nil.
func (s *Spec) param(name string) *ParamSpec {
	for i := range s.Params {
		if s.Params[i].Name == name {
			return &s.Params[i]
		}
	}
	return nil
}

// CheckParams reports a param value the file does not allow under cfg.
func (s *Spec) CheckParams(cfg Config) error {
	for _, p := range s.Params {
		v, _ := cfg.Param(p.Name)
		if !slices.Contains(p.Values, v) {
			return fmt.Errorf("%w: %s=%q: want one of %s", ErrBadKnob, p.Name, v, strings.Join(p.Values, ", "))
		}
	}
	return nil
}

// param reads one declared knob. Its name must not be a knob; its values
// are names; the default is one of them.
func (d *decoder) param(o *obj) ParamSpec {
	p := ParamSpec{pos: posMap{}}
	o.record(p.pos)
	o.require("name", "values", "default")
	p.Name = o.name("name")
	if p.Name != "" && knobs.Known(p.Name) || slices.Contains([]string{"hardware", "ranks"}, p.Name) {
		d.add(o.pos("name"), "param %q is a knob already; give it another name (or set the knob under knobs:)", p.Name)
		p.Name = ""
	}
	p.Values = o.names("values", 64)
	if o.has("values") && len(p.Values) == 0 {
		d.add(o.pos("values"), "param values: expected at least one value")
	}
	if v := o.get("default"); v != nil {
		if txt, ok := d.scalarText(v, "param default"); ok {
			p.Default = txt
			if len(p.Values) > 0 && !slices.Contains(p.Values, txt) {
				d.add(posOf(v), "param default: %q; expected one of its values: %s", txt, strings.Join(p.Values, ", "))
			}
		}
	}
	if v := o.get("sizes"); v != nil && len(p.Values) > 0 {
		so := d.mapping(v, "param sizes", p.Values...)
		p.Sizes = map[string]int64{}
		for _, k := range so.order {
			p.Sizes[k] = so.int(k, 0, MaxTensorBytes)
		}
		for _, val := range p.Values {
			if !so.has(val) {
				d.add(posOf(v), "param sizes: no size for value %q; expected one for each of %s", val, strings.Join(p.Values, ", "))
				break
			}
		}
	}
	return p
}

// paramsBase is the Params encoding of every param at its default.
func paramsBase(ps []ParamSpec) string {
	var parts []string
	for _, p := range ps {
		if p.Name != "" {
			parts = append(parts, p.Name+"="+p.Default)
		}
	}
	return strings.Join(parts, ",")
}

// param0 returns the declared param name, or nil.
func (d *decoder) param0(name string) *ParamSpec {
	for i := range d.params {
		if d.params[i].Name == name {
			return &d.params[i]
		}
	}
	return nil
}
