package format

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/collsim/collsim/scenarios/forms"
	"github.com/collsim/collsim/scenarios/knobs"
)

// ParseSpec reads a scenario file: YAML syntax, then structure — known keys
// only, the right type for each value, required fields, limits. It does not
// check references between parts (undefined streams, tensors, …): that is
// [Spec.Validate]. file is only used to name positions in errors.
//
// Every error is an [*Error] or an [ErrorList] naming file:line:column, and
// wraps [ErrInvalid]. No input panics.
func ParseSpec(file string, data []byte) (*Spec, error) {
	e := &errs{file: file}
	if len(data) > MaxFileBytes {
		e.add(Pos{1, 1}, "file is %d bytes; at most %d are accepted", len(data), MaxFileBytes)
		return nil, e.err()
	}
	if p, msg, ok := scanLimits(data); !ok { // yamlscan.go: linear, before the parser
		e.add(p, "%s", msg)
		return nil, e.err()
	}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		var ye yaml.Error
		p := Pos{1, 1}
		msg := err.Error()
		if errors.As(err, &ye) {
			msg = ye.GetMessage()
			if tk := ye.GetToken(); tk != nil && tk.Position != nil {
				p = Pos{tk.Position.Line, tk.Position.Column}
			}
		}
		e.add(p, "YAML syntax: %s", msg)
		return nil, e.err()
	}
	var body ast.Node
	for i, doc := range f.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		if _, ok := doc.Body.(*ast.CommentGroupNode); ok {
			continue
		}
		if body != nil {
			e.add(posOf(doc.Body), "a scenario file holds one YAML document; this is document %d", i+1)
			return nil, e.err()
		}
		body = doc.Body
	}
	if body == nil {
		e.add(Pos{1, 1}, "empty file: expected a mapping with at least name, ranks and variants")
		return nil, e.err()
	}
	d := &decoder{errs: e}
	if !d.collectAnchors(body) {
		return nil, e.err()
	}
	s := d.spec(body)
	s.File = file
	if err := e.err(); err != nil {
		return nil, err
	}
	return s, nil
}

// LoadSpec parses and validates a scenario file.
func LoadSpec(file string, data []byte) (*Spec, error) {
	s, err := ParseSpec(file, data)
	if err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

type decoder struct {
	*errs
	// params are the file's declared knobs, read before anything that may
	// name one.
	params []ParamSpec
	// aliases maps each alias (*name) to the value of the anchor (&name)
	// defined last before it (collectAnchors): a name defined again later
	// cannot make an alias stand for a value that holds it.
	aliases map[*ast.AliasNode]ast.Node
}

// MaxExpandedNodes bounds a file's YAML nodes with every alias expanded:
// aliases of anchors that hold aliases grow exponentially ("billion
// laughs"), and the limit keeps a small file from exhausting memory.
const MaxExpandedNodes = 1 << 18

// collectAnchors records body's anchors, in document order, and checks
// that every alias names an anchor defined before it and that the file,
// aliases expanded, stays under MaxExpandedNodes nodes.
func (d *decoder) collectAnchors(body ast.Node) bool {
	d.aliases = map[*ast.AliasNode]ast.Node{}
	anchors := map[string]ast.Node{}
	sizes := map[string]int{}
	ok := true
	var size func(n ast.Node) int
	size = func(n ast.Node) int {
		switch x := n.(type) {
		case nil:
			return 0
		case *ast.MappingNode:
			t := 1
			for _, v := range x.Values {
				t += size(v)
			}
			return t
		case *ast.MappingValueNode:
			return 1 + size(x.Key) + size(x.Value)
		case *ast.SequenceNode:
			t := 1
			for _, v := range x.Values {
				t += size(v)
			}
			return t
		case *ast.TagNode:
			return 1 + size(x.Value)
		case *ast.AnchorNode:
			t := size(x.Value)
			name := x.Name.String()
			anchors[name], sizes[name] = x.Value, t
			return 1 + t
		case *ast.AliasNode:
			name := x.Value.String()
			t, def := sizes[name]
			if !def {
				d.add(posOf(n), "YAML alias *%s names no anchor defined before it; define &%s first", name, name)
				ok = false
				return 1
			}
			d.aliases[x] = anchors[name]
			return 1 + t
		}
		return 1
	}
	if total := size(body); total > MaxExpandedNodes {
		d.add(posOf(body), "the file holds %d YAML values with its aliases expanded; at most %d are accepted (an alias of an anchor that holds aliases multiplies them)", total, MaxExpandedNodes)
		return false
	}
	return ok
}

func posOf(n ast.Node) Pos {
	if n == nil {
		return Pos{}
	}
	if m, ok := n.(*ast.MappingNode); ok && len(m.Values) > 0 {
		return posOf(m.Values[0].Key)
	}
	if mv, ok := n.(*ast.MappingValueNode); ok {
		return posOf(mv.Key)
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return Pos{}
	}
	return Pos{tk.Position.Line, tk.Position.Column}
}

// typeName names the YAML type of a node for "got …" messages.
func typeName(n ast.Node) string {
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode, *ast.LiteralNode:
		return "a string"
	case *ast.IntegerNode:
		return "an integer"
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	case *ast.BoolNode:
		return "a boolean"
	case *ast.NullNode, nil:
		return "nothing"
	}
	return "a " + strings.ToLower(n.Type().String())
}

// value strips comments, stands an anchor for its value and an alias for
// its anchor's, and rejects the YAML features the format does not use
// (tags, merge keys).
func (d *decoder) value(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.TagNode:
		d.add(posOf(n), "YAML tags (%s) are not supported; write the plain value", x.Start.Value)
		return nil, false
	case *ast.AnchorNode:
		return d.value(x.Value)
	case *ast.AliasNode:
		v, ok := d.aliases[x]
		if !ok {
			return nil, false // reported by collectAnchors
		}
		return d.value(v)
	case *ast.MergeKeyNode:
		d.add(posOf(n), "YAML merge keys (<<) are not supported")
		return nil, false
	}
	return n, true
}

// obj is a mapping being read: each key may be taken once; unknown keys are
// reported by done.
type obj struct {
	d     *decoder
	what  string
	at    Pos
	keys  []string
	vals  map[string]ast.Node
	kpos  map[string]Pos
	order []string
	pm    posMap // where record put positions; names adds list entries
}

// mapping reads n as a mapping with the allowed keys.
func (d *decoder) mapping(n ast.Node, what string, allowed ...string) *obj {
	o := &obj{d: d, what: what, at: posOf(n), keys: allowed, vals: map[string]ast.Node{}, kpos: map[string]Pos{}}
	n, ok := d.value(n)
	if !ok {
		return o
	}
	var pairs []*ast.MappingValueNode
	switch x := n.(type) {
	case *ast.MappingNode:
		pairs = x.Values
	case *ast.MappingValueNode:
		pairs = []*ast.MappingValueNode{x}
	default:
		d.add(posOf(n), "%s: expected a mapping with keys %s, got %s", what, strings.Join(allowed, ", "), typeName(n))
		return o
	}
	for _, kv := range pairs {
		kn, ok := d.value(kv.Key)
		if !ok {
			continue
		}
		var key string
		switch k := kn.(type) {
		case *ast.StringNode:
			key = k.Value
		default:
			if kn != nil && kn.GetToken() != nil {
				key = kn.GetToken().Value
			}
		}
		kp := posOf(kv.Key)
		known := false
		for _, a := range allowed {
			if a == key {
				known = true
			}
		}
		if !known {
			hint := ""
			if near := nearest(key, allowed); near != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", near)
			}
			d.add(kp, "unknown key %q in %s%s; expected one of: %s", key, what, hint, strings.Join(allowed, ", "))
			continue
		}
		if _, dup := o.vals[key]; dup {
			d.add(kp, "key %q given twice in %s", key, what)
			continue
		}
		o.vals[key] = kv.Value
		o.kpos[key] = kp
		o.order = append(o.order, key)
	}
	return o
}

func (o *obj) has(key string) bool { _, ok := o.vals[key]; return ok }

// get returns the value of key, or nil.
func (o *obj) get(key string) ast.Node { return o.vals[key] }

func (o *obj) require(keys ...string) bool {
	ok := true
	for _, k := range keys {
		if !o.has(k) {
			o.d.add(o.at, "%s: missing required key %q", o.what, k)
			ok = false
		}
	}
	return ok
}

// record writes the position of every key's value into pm.
func (o *obj) record(pm posMap) {
	o.pm = pm
	pm[""] = o.at
	for k, v := range o.vals {
		p := posOf(v)
		if p.Line == 0 {
			p = o.kpos[k]
		}
		pm[k] = p
	}
}

func (o *obj) str(key string) string {
	n := o.get(key)
	if n == nil {
		return ""
	}
	s, _ := o.d.str(n, o.what+" "+key)
	return s
}

func (d *decoder) str(n ast.Node, what string) (string, bool) {
	n, ok := d.value(n)
	if !ok {
		return "", false
	}
	switch x := n.(type) {
	case *ast.StringNode:
		return x.Value, true
	case *ast.LiteralNode:
		return x.Value.Value, true
	}
	d.add(posOf(n), "%s: expected a string, got %s", what, typeName(n))
	return "", false
}

// name reads an identifier-like name: non-empty, no spaces, bounded length.
func (d *decoder) name(n ast.Node, what string) string {
	s, ok := d.str(n, what)
	if !ok {
		return ""
	}
	if err := knobs.CheckName(s); err != nil {
		d.add(posOf(n), "%s: %v", what, err)
		return ""
	}
	return s
}

func (o *obj) name(key string) string {
	n := o.get(key)
	if n == nil {
		return ""
	}
	return o.d.name(n, o.what+" "+key)
}

// int reads an integer in [lo, hi].
func (d *decoder) int(n ast.Node, what string, lo, hi int64) (int64, bool) {
	n, ok := d.value(n)
	if !ok {
		return 0, false
	}
	x, isInt := n.(*ast.IntegerNode)
	if !isInt {
		d.add(posOf(n), "%s: expected an integer in [%d, %d], got %s", what, lo, hi, typeName(n))
		return 0, false
	}
	var v int64
	switch y := x.Value.(type) {
	case int64:
		v = y
	case uint64:
		if y > math.MaxInt64 {
			d.add(posOf(n), "%s: %d is too large; expected an integer in [%d, %d]", what, y, lo, hi)
			return 0, false
		}
		v = int64(y)
	default:
		d.add(posOf(n), "%s: expected an integer in [%d, %d]", what, lo, hi)
		return 0, false
	}
	if v < lo || v > hi {
		d.add(posOf(n), "%s: %d is out of range; expected an integer in [%d, %d]", what, v, lo, hi)
		return 0, false
	}
	return v, true
}

func (o *obj) int(key string, lo, hi int64) int64 {
	n := o.get(key)
	if n == nil {
		return 0
	}
	v, _ := o.d.int(n, o.what+" "+key, lo, hi)
	return v
}

func (o *obj) bool(key string) bool {
	n := o.get(key)
	if n == nil {
		return false
	}
	n, ok := o.d.value(n)
	if !ok {
		return false
	}
	b, isBool := n.(*ast.BoolNode)
	if !isBool {
		o.d.add(posOf(n), "%s %s: expected true or false, got %s", o.what, key, typeName(n))
		return false
	}
	return b.Value
}

// seq reads a list; a single scalar is accepted as a list of one when
// scalarOK.
func (d *decoder) seq(n ast.Node, what string, scalarOK bool) []ast.Node {
	n, ok := d.value(n)
	if !ok {
		return nil
	}
	switch x := n.(type) {
	case *ast.SequenceNode:
		return x.Values
	case *ast.NullNode:
		return nil
	case *ast.StringNode, *ast.IntegerNode:
		if scalarOK {
			return []ast.Node{n}
		}
	}
	d.add(posOf(n), "%s: expected a list, got %s", what, typeName(n))
	return nil
}

func (o *obj) names(key string, max int) []string {
	n := o.get(key)
	if n == nil {
		return nil
	}
	items := o.d.seq(n, o.what+" "+key, true)
	if len(items) > max {
		o.d.add(posOf(n), "%s %s: %d entries; at most %d", o.what, key, len(items), max)
		items = items[:max]
	}
	var out []string
	for _, it := range items {
		if s := o.d.name(it, o.what+" "+key); s != "" {
			if o.pm != nil {
				o.pm[item(key, len(out))] = posOf(it)
			}
			out = append(out, s)
		}
	}
	return out
}

func (o *obj) values(key string, n ast.Node) []uint64 {
	items := o.d.seq(n, o.what+" "+key, true)
	if len(items) > MaxChunks {
		o.d.add(posOf(n), "%s %s: %d values; at most %d (one per chunk)", o.what, key, len(items), MaxChunks)
		return nil
	}
	var out []uint64
	for _, it := range items {
		v, ok := o.d.int(it, o.what+" "+key, 0, math.MaxInt64)
		if ok {
			out = append(out, uint64(v))
		}
	}
	return out
}

// rankSet reads "all", a rank, or a list of ranks.
func (d *decoder) rankSet(n ast.Node, what string) (RankSet, bool) {
	n, ok := d.value(n)
	if !ok {
		return RankSet{}, false
	}
	if s, isStr := n.(*ast.StringNode); isStr {
		if s.Value == "all" {
			return RankSet{All: true}, true
		}
		d.add(posOf(n), "%s: expected all, a rank number or a list of ranks, got %q", what, s.Value)
		return RankSet{}, false
	}
	items := d.seq(n, what, true)
	if len(items) == 0 {
		d.add(posOf(n), "%s: expected all, a rank number or a non-empty list of ranks", what)
		return RankSet{}, false
	}
	if len(items) > MaxRanks {
		d.add(posOf(n), "%s: %d ranks; at most %d", what, len(items), MaxRanks)
		return RankSet{}, false
	}
	var rs RankSet
	seen := map[int64]bool{}
	for _, it := range items {
		v, ok := d.int(it, what, 0, MaxRanks-1)
		if !ok {
			return RankSet{}, false
		}
		if seen[v] {
			d.add(posOf(it), "%s: rank %d listed twice", what, v)
			return RankSet{}, false
		}
		seen[v] = true
		rs.Ranks = append(rs.Ranks, int(v))
	}
	return rs, true
}

// scalarText returns the text of a scalar (string, integer, number, bool),
// for knob values.
func (d *decoder) scalarText(n ast.Node, what string) (string, bool) {
	n, ok := d.value(n)
	if !ok {
		return "", false
	}
	switch x := n.(type) {
	case *ast.StringNode:
		return x.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode:
		return x.GetToken().Value, true
	}
	d.add(posOf(n), "%s: expected a single value, got %s", what, typeName(n))
	return "", false
}

// duration reads a time: an integer number of nanoseconds or a string with
// a unit (ns, us, µs, ms, s).
func (d *decoder) duration(n ast.Node, what string) int64 {
	n, ok := d.value(n)
	if !ok {
		return 0
	}
	const maxNs = int64(3600) * 1e9
	switch x := n.(type) {
	case *ast.IntegerNode:
		v, _ := d.int(x, what+" (nanoseconds)", 0, maxNs)
		return v
	case *ast.StringNode:
		v, err := parseDuration(x.Value)
		if err == nil && (v < 0 || v > maxNs) {
			err = fmt.Errorf("out of range [0, 1h]")
		}
		if err != nil {
			d.add(posOf(n), "%s: %q: %v; expected a time such as 5us, 1.5ms or 800ns", what, x.Value, err)
			return 0
		}
		return v
	}
	d.add(posOf(n), "%s: expected a time such as 5us, 1.5ms or 800ns, got %s", what, typeName(n))
	return 0
}

// parseDuration parses "12", "800ns", "5us", "5µs", "1.5ms", "2s" into
// nanoseconds.
func parseDuration(s string) (int64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		ns     float64
	}{{"ns", 1}, {"us", 1e3}, {"µs", 1e3}, {"ms", 1e6}, {"s", 1e9}}
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.ns
			break
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, errors.New("not a number with a unit")
	}
	v := f * mult
	if v > math.MaxInt64/2 || v < 0 {
		return -1, nil
	}
	return int64(math.Round(v)), nil
}

// top-level keys in the order the documentation and the exporter use.
var topKeys = []string{"name", "description", "hardware", "ranks", "mode", "replays", "chunks", "knobs",
	"params", "references", "steps", "host_scalars", "communicators", "symmetric", "tensors", "graph", "programs", "variants", "compare"}

// knobs that have their own top-level key.
var topKnob = map[string]string{"hardware": "arch", "ranks": "tp", "mode": "mode", "replays": "replays", "chunks": "chunks"}

// knobAlias maps the top-level spelling to the knob key in `set:`.
func knobAlias(k string) string {
	if a, ok := topKnob[k]; ok {
		return a
	}
	return k
}

// DefaultConfig is the base of every scenario file before its own keys: the
// values of knobs a file leaves out.
func DefaultConfig() Config {
	return Config{
		TP: 2, Arch: "b200", Mode: "eager", Phase: "decode", Strategy: "auto", Workspace: "shared",
		Placement: "single", Order: "shared-first", Shared: "trailing", Layers: 1, Replays: 1,
		Tokens: 8, Hidden: 8192, Chunks: 4, Seed: 1, Budget: 50,
	}
}

func (d *decoder) spec(n ast.Node) *Spec {
	s := &Spec{Base: DefaultConfig(), pos: posMap{}}
	o := d.mapping(n, "scenario", topKeys...)
	o.record(s.pos)
	o.require("name", "ranks", "variants")
	s.Name = o.name("name")
	s.Description = strings.TrimRight(o.str("description"), "\n")
	for _, top := range []string{"hardware", "ranks", "mode", "replays", "chunks"} {
		v := o.get(top)
		if v == nil {
			continue
		}
		if top == "ranks" {
			if r, ok := d.int(v, "ranks", 1, MaxRanks); ok {
				s.Base.TP = int(r)
			}
			continue
		}
		txt, ok := d.scalarText(v, top)
		if !ok {
			continue
		}
		if err := s.Base.Set(topKnob[top], txt); err != nil {
			d.add(posOf(v), "%s: %s", top, knobMsg(err))
			continue
		}
		s.written = append(s.written, topKnob[top])
	}
	if s.Base.Replays > MaxReplays {
		d.add(s.pos.at("replays"), "replays: at most %d", MaxReplays)
	}
	if s.Base.Chunks > MaxChunks {
		d.add(s.pos.at("chunks"), "chunks: at most %d", MaxChunks)
	}
	if v := o.get("knobs"); v != nil {
		ko := d.mapping(v, "knobs", knobs.Keys()...)
		for _, k := range ko.order {
			if top, ok := topKeyOf(k); ok {
				d.add(ko.kpos[k], "knob %q has its own top-level key: write `%s:` instead", k, top)
				continue
			}
			txt, ok := d.scalarText(ko.get(k), "knobs "+k)
			if !ok {
				continue
			}
			if err := s.Base.Set(k, txt); err != nil {
				d.add(posOf(ko.get(k)), "knobs %s: %s", k, knobMsg(err))
				continue
			}
			s.written = append(s.written, k)
			s.pos["knobs."+k] = ko.kpos[k]
		}
	}
	if v := o.get("params"); v != nil {
		for _, it := range d.seqAtMost(v, "params", MaxParams, "") {
			p := d.param(d.mapping(it, "param", "name", "values", "default", "sizes"))
			if p.Name != "" && d.param0(p.Name) != nil {
				d.add(p.pos.at("name"), "param %q declared twice", p.Name)
				continue
			}
			s.Params = append(s.Params, p)
			d.params = append(d.params, p)
		}
		s.Base.Params = paramsBase(s.Params)
	}
	if v := o.get("communicators"); v != nil {
		items := d.seqAtMost(v, "communicators", MaxCommsPerFile, "")
		for _, it := range items {
			s.Comms = append(s.Comms, d.comm(it))
		}
	}
	if v := o.get("references"); v != nil {
		d.references(v, s) // spec_refs.go
	}
	d.hostTop(o, s)
	if v := o.get("symmetric"); v != nil {
		for _, it := range d.seqAtMost(v, "symmetric", MaxCommsPerFile, "") {
			s.Symm = append(s.Symm, d.symm(d.mapping(it, "symmetric allocation", "name", "ranks", "chunks", "pad", "registration")))
		}
	}
	if v := o.get("tensors"); v != nil {
		items := d.seqAtMost(v, "tensors", MaxTensors, "")
		for _, it := range items {
			s.Tensors = append(s.Tensors, d.tensor(it))
		}
	}
	if v := o.get("graph"); v != nil {
		s.Graph = d.graph(v)
	}
	if v := o.get("programs"); v != nil {
		items := d.seqAtMost(v, "programs", MaxRanks, " (one per rank)")
		for _, it := range items {
			s.Programs = append(s.Programs, d.program(it))
		}
	}
	if v := o.get("variants"); v != nil {
		items := d.seqAtMost(v, "variants", MaxVariants, "")
		for _, it := range items {
			v, pm, patch := d.variant(it)
			s.Variants = append(s.Variants, v)
			s.varPos = append(s.varPos, pm)
			s.patches = append(s.patches, patch)
		}
		if len(items) == 0 && len(d.list) == 0 {
			d.add(posOf(v), "variants: expected at least one variant")
		}
	}
	if v := o.get("compare"); v != nil {
		for _, it := range d.seq(v, "compare", false) {
			c := d.mapping(it, "comparison", "variant", "against", "label")
			c.require("variant", "against")
			cmp := Comparison{Variant: c.str("variant"), Against: c.str("against"), Label: strings.TrimRight(c.str("label"), "\n")}
			for _, key := range []string{"variant", "against"} {
				name := cmp.Variant
				if key == "against" {
					name = cmp.Against
				}
				found := false
				for _, vr := range s.Variants {
					found = found || vr.Name == name
				}
				if name != "" && !found {
					d.add(c.pos(key), "comparison %s: no variant named %q", key, name)
				}
			}
			s.Compare = append(s.Compare, cmp)
		}
	}
	return s
}

// seqAtMost reads the sequence under key, reporting (and dropping) one longer
// than limit; note says what the limit counts, if anything.
func (d *decoder) seqAtMost(v ast.Node, key string, limit int, note string) []ast.Node {
	items := d.seq(v, key, false)
	if len(items) > limit {
		d.add(posOf(v), "%s: %d; at most %d%s", key, len(items), limit, note)
		return nil
	}
	return items
}

func topKeyOf(knob string) (string, bool) {
	for _, top := range []string{"hardware", "ranks", "mode", "replays", "chunks"} {
		if topKnob[top] == knob {
			return top, true
		}
	}
	return "", false
}

// knobMsg strips the "bad knob: " prefix of a knob error.
func knobMsg(err error) string {
	return strings.TrimPrefix(err.Error(), ErrBadKnob.Error()+": ")
}

func (d *decoder) comm(n ast.Node) CommSpec {
	c := CommSpec{pos: posMap{}}
	o := d.mapping(n, "communicator", "name", "ranks", "workspace")
	o.record(c.pos)
	o.require("name", "ranks")
	c.Name = o.name("name")
	if v := o.get("ranks"); v != nil {
		c.Ranks, _ = d.rankSet(v, "communicator ranks")
	}
	if v := o.get("workspace"); v != nil {
		ws := o.str("workspace")
		if ws != "" && ws != "shared" && ws != "per-call" {
			d.add(posOf(v), "communicator workspace: %q; expected shared or per-call", ws)
		} else {
			c.Workspace = ws
		}
	}
	return c
}

func (d *decoder) tensor(n ast.Node) TensorSpec {
	t := TensorSpec{pos: posMap{}}
	o := d.mapping(n, "tensor", "name", "bytes", "chunks", "init", "init_per_rank", "output", "per_replay")
	o.record(t.pos)
	o.require("name", "bytes")
	t.Name = o.name("name")
	if v := o.get("bytes"); v != nil {
		t.Bytes, t.BytesExpr = d.sizeOrExpr(v, "tensor bytes", 1, MaxTensorBytes)
	}
	d.perReplay(o, &t)
	t.Chunks = int(o.int("chunks", 1, MaxTensorChunks))
	if v := o.get("init"); v != nil {
		t.Init = o.values("init", v)
	}
	if v := o.get("init_per_rank"); v != nil {
		rows := d.seq(v, "tensor init_per_rank", false)
		if len(rows) > MaxRanks {
			d.add(posOf(v), "tensor init_per_rank: %d rows; at most %d (one per rank)", len(rows), MaxRanks)
			rows = nil
		}
		for _, row := range rows {
			t.InitPerRank = append(t.InitPerRank, o.values("init_per_rank", row))
		}
	}
	t.Output = o.bool("output")
	return t
}

func (d *decoder) graph(n ast.Node) *GraphSpec {
	g := &GraphSpec{pos: posMap{}}
	o := d.mapping(n, "graph", "builder", "ops")
	o.record(g.pos)
	if o.has("builder") == o.has("ops") {
		d.add(o.at, "graph: expected exactly one of builder (%s) or ops", forms.NameList())
	}
	if v := o.get("builder"); v != nil {
		g.Builder = o.str("builder")
		if _, ok := forms.Lookup(g.Builder); !ok {
			d.add(posOf(v), "graph builder: %q; expected one of %s", g.Builder, forms.NameList())
		}
	}
	if v := o.get("ops"); v != nil {
		items := d.seq(v, "graph ops", false)
		if len(items) > MaxOps {
			d.add(posOf(v), "graph ops: %d; at most %d", len(items), MaxOps)
			items = nil
		}
		for _, it := range items {
			g.Ops = append(g.Ops, d.graphOp(it))
		}
	}
	return g
}

func (d *decoder) graphOp(n ast.Node) GraphOpSpec {
	op := GraphOpSpec{pos: posMap{}}
	o := d.mapping(n, "graph op", "name", "kind", "inputs", "output", "m", "k", "n", "experts", "comm", "weight", "time")
	o.record(op.pos)
	o.require("name", "kind", "inputs", "output")
	op.Name = o.name("name")
	op.Kind = o.str("kind")
	switch op.Kind {
	case "gemm", "moe", "add", "allreduce", "":
	default:
		d.add(o.pos("kind"), "graph op kind: %q; expected gemm, moe, add or allreduce", op.Kind)
	}
	op.Inputs = o.names("inputs", 16)
	op.Output = o.name("output")
	const maxDim = 1 << 24
	op.M, op.K, op.N = o.int("m", 0, maxDim), o.int("k", 0, maxDim), o.int("n", 0, maxDim)
	op.Experts = o.int("experts", 0, 1024)
	op.Comm = o.name("comm")
	op.Weight = o.int("weight", 1, 1<<30)
	if op.Weight != 0 && op.Kind != "gemm" && op.Kind != "moe" {
		d.add(o.pos("weight"), "graph op %q of kind %s has a weight; expected weight only on gemm or moe ops", op.Name, op.Kind)
	}
	if v := o.get("time"); v != nil {
		op.TimeNs = d.duration(v, "graph op time")
		if op.Kind == "allreduce" {
			d.add(o.pos("time"), "graph op %q of kind allreduce has a time; expected time only on gemm, moe or add ops (a collective's time is its algorithm's)", op.Name)
		}
	}
	return op
}

func (o *obj) pos(key string) Pos {
	if v := o.get(key); v != nil {
		return posOf(v)
	}
	return o.at
}

func (d *decoder) program(n ast.Node) ProgramSpec {
	p := ProgramSpec{pos: posMap{}}
	o := d.mapping(n, "program", "ranks", "streams", "events", "ops")
	o.record(p.pos)
	o.require("ranks", "ops")
	if v := o.get("ranks"); v != nil {
		p.Ranks, _ = d.rankSet(v, "program ranks")
	}
	p.Streams = o.names("streams", MaxStreams)
	if !o.has("streams") {
		p.Streams = []string{"main"}
	}
	p.Events = o.names("events", MaxEvents)
	if v := o.get("ops"); v != nil {
		items := d.seq(v, "program ops", false)
		if len(items) > MaxOps {
			d.add(posOf(v), "program ops: %d; at most %d", len(items), MaxOps)
			items = nil
		}
		for _, it := range items {
			p.Ops = append(p.Ops, d.op(it))
		}
	}
	return p
}

var opKeys = []string{"id", "when", "repeat", "ops", "kernel", "allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "send", "recv", "record", "wait", "sync",
	"alloc", "free", "record_stream", "empty_cache", "put", "await", "reset", "register", "flag", "at", "n", "value", "from", "until", "against",
	"stream", "reads", "writes", "time", "weight", "spin", "symmetric", "offset", "comm", "in", "out", "strategy", "blocks", "root", "peer", "host"}

// opStrategies are the strategy values an op may name: auto and every
// concrete strategy of collectives.Strategies.
var opStrategies = []string{"auto", "nccl", "nccl-tree", "multimem", "p2p-oneshot", "multimem-twoshot", "p2p-twoshot"}

// opAllowed lists the keys each op kind takes.
var opAllowed = map[OpKind][]string{
	OpKernel:        {"kernel", "stream", "reads", "writes", "time", "weight", "blocks", "spin"},
	OpAllReduce:     {"allreduce", "stream", "comm", "in", "out", "strategy", "blocks", "symmetric", "offset"},
	OpAllGather:     {"allgather", "stream", "comm", "in", "out", "strategy", "blocks"},
	OpReduceScatter: {"reducescatter", "stream", "comm", "in", "out", "strategy", "blocks"},
	OpAllToAll:      {"alltoall", "stream", "comm", "in", "out", "strategy", "blocks"},
	OpBroadcast:     {"broadcast", "stream", "comm", "in", "out", "strategy", "blocks", "root"},
	OpSend:          {"send", "stream", "comm", "in", "peer"},
	OpRecv:          {"recv", "stream", "comm", "out", "peer"},
	OpRecord:        {"record", "stream"},
	OpWait:          {"wait", "stream"},
	OpSync:          {"sync"},
	OpAlloc:         {"alloc", "stream"},
	OpFree:          {"free"},
	OpRecordStream:  {"record_stream", "stream"},
	OpEmptyCache:    {"empty_cache"},
}

func opKindList() string {
	parts := make([]string, len(opKinds))
	for i, k := range opKinds {
		parts[i] = string(k)
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
}

func (d *decoder) op(n ast.Node) OpSpec {
	op := OpSpec{pos: posMap{}}
	o := d.mapping(n, "op", opKeys...)
	o.record(op.pos)
	if o.has("capture") {
		d.captureBlock(o, &op)
		return op
	}
	if o.has("repeat") {
		for _, k := range o.order {
			if k != "repeat" && k != "ops" && k != "when" {
				d.add(o.kpos[k], "key %q does not apply to a repeat block; expected repeat, ops, when", k)
			}
		}
		d.repeat(o, &op)
		if v := o.get("when"); v != nil {
			op.When = d.when(v)
		}
		return op
	}
	if o.has("ops") {
		d.add(o.kpos["ops"], "key \"ops\" applies to a repeat or capture block only")
	}
	var kinds []string
	for _, k := range opKinds {
		if o.has(string(k)) {
			kinds = append(kinds, string(k))
			op.Kind = k
			op.Name = o.name(string(k))
			op.pos["name"] = op.pos[string(k)]
		}
	}
	if len(kinds) != 1 {
		if len(kinds) == 0 && len(o.vals) == 0 && len(d.list) > 0 {
			return op
		}
		d.add(o.at, "op: expected exactly one of %s, got %d (%s)", opKindList(), len(kinds), strings.Join(kinds, ", "))
		op.Kind = ""
		return op
	}
	// Every op the host issues may carry the host gap before it (HostNs);
	// the allocator ops issue nothing.
	allowed := append(slices.Clip(opAllowed[op.Kind]), "id", "when")
	if a, ok := flagOpAllowed[op.Kind]; ok {
		allowed = append(slices.Clip(a), "id", "when")
	}
	if !op.Kind.memory() && op.Kind != OpRegister && op.Kind != OpAdvance {
		allowed = append(allowed, "host")
	}
	for _, k := range o.order {
		ok := false
		for _, a := range allowed {
			ok = ok || a == k
		}
		if !ok {
			d.add(o.kpos[k], "key %q does not apply to %s %s op; expected one of: %s", k, article(string(op.Kind)), op.Kind, strings.Join(allowed, ", "))
		}
	}
	op.Stream = o.name("stream")
	op.ID = o.name("id")
	if v := o.get("when"); v != nil {
		op.When = d.when(v)
	}
	if v := o.get("host"); v != nil {
		op.HostNs = d.duration(v, "host gap")
	}
	d.hostOp(o, &op)
	d.fillOp(o, &op)
	switch {
	case op.Kind == OpKernel:
		o.require("writes")
		op.Reads = o.names("reads", 16)
		op.Writes = o.names("writes", 16)
		if v := o.get("time"); v != nil {
			op.TimeNs, op.TimeExpr = d.timeOrExpr(v, "kernel time")
		}
		if v := o.get("weight"); v != nil {
			if sq, isSeq := v.(*ast.SequenceNode); isSeq {
				// one weight per rank, rank r the r-th
				for _, it := range d.seqAtMost(sq, "kernel weight", MaxRanks, " (one per rank)") {
					if x, ok := d.int(it, "kernel weight", 1, 1<<30); ok {
						op.Weights = append(op.Weights, x)
					}
				}
				if len(sq.Values) == 0 {
					d.add(posOf(v), "kernel weight: an empty list; expected one weight per rank")
				}
			} else if sn, isStr := v.(*ast.StringNode); isStr {
				if sn.Value == "whole" {
					op.Whole = true
				} else {
					d.add(posOf(v), "kernel weight: %q; expected an integer in [1, %d], a list of them (one per rank), or whole (the sum of every rank's shard)", sn.Value, 1<<30)
				}
			} else {
				op.Weight = o.int("weight", 1, 1<<30)
			}
		}
		op.Sum = o.bool("sum")
		if op.Sum && o.has("weight") {
			d.add(o.kpos["weight"], "kernel %q: a sum kernel adds its reads with no weight; remove weight or sum", op.Name)
		}
		op.Blocks = int(o.int("blocks", 1, MaxKernelBlocks))
		op.Spin = o.bool("spin")
	case op.Kind.Collective():
		o.require("comm", "in", "out")
		op.Comm = o.name("comm")
		op.In = o.name("in")
		op.Out = o.name("out")
		if v := o.get("strategy"); v != nil {
			op.Strategy = o.str("strategy")
			if op.Strategy != "" && !slices.Contains(opStrategies, op.Strategy) {
				d.add(posOf(v), "%s strategy: %q; expected %s", op.Kind, op.Strategy, strings.Join(opStrategies, ", "))
				op.Strategy = ""
			}
		}
		op.Blocks = int(o.int("blocks", 1, MaxBlocks))
		op.Root = int(o.int("root", 0, MaxRanks-1))
		op.Symmetric = o.name("symmetric")
		op.Offset = int(o.int("offset", 0, MaxTensorChunks))
		if o.has("offset") && !o.has("symmetric") {
			d.add(o.kpos["offset"], "offset is a region of a symmetric allocation; give symmetric:")
		}
		if o.has("symmetric") && o.has("strategy") {
			d.add(o.kpos["strategy"], "an allreduce on a symmetric allocation is PyTorch's one-shot kernel; remove strategy")
		}
	case op.Kind.flag() || op.Kind == OpRegister:
		d.flagOp(o, &op)
	case op.Kind == OpRecordStream:
		o.require("stream")
	case op.Kind == OpSend || op.Kind == OpRecv:
		key := "in"
		if op.Kind == OpRecv {
			key = "out"
		}
		o.require("comm", key, "peer")
		op.Comm = o.name("comm")
		op.In = o.name("in")
		op.Out = o.name("out")
		if v := o.get("peer"); v != nil {
			if txt, ok := d.scalarText(v, string(op.Kind)+" peer"); ok {
				if err := checkPeer(txt); err != nil {
					d.add(posOf(v), "%s peer: %v", op.Kind, err)
				} else {
					op.Peer = txt
				}
			}
		}
	}
	return op
}

// article is "an" before a vowel, else "a".
func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

// when reads an op's conditions: a mapping of knob keys to values, each a
// value the knob accepts.
func (d *decoder) when(n ast.Node) []Cond {
	keys := knobs.Keys()
	for _, p := range d.params {
		keys = append(keys, p.Name)
	}
	o := d.mapping(n, "op when", keys...)
	var out []Cond
	for _, k := range o.order {
		txt, ok := d.scalarText(o.get(k), "when "+k)
		if !ok {
			continue
		}
		if p := d.param0(k); p != nil {
			if !slices.Contains(p.Values, txt) {
				d.add(posOf(o.get(k)), "when %s: %q; expected one of the param's values: %s", k, txt, strings.Join(p.Values, ", "))
				continue
			}
			out = append(out, Cond{Key: k, Value: txt})
			continue
		}
		probe := DefaultConfig()
		if err := probe.Set(k, txt); err != nil {
			d.add(posOf(o.get(k)), "when %s: %s", k, knobMsg(err))
			continue
		}
		out = append(out, Cond{Key: k, Value: txt})
	}
	if len(out) == 0 && len(o.order) == 0 {
		d.add(o.at, "op when: expected at least one knob: value")
	}
	return out
}

// checkPeer accepts next, prev or a communicator index.
func checkPeer(s string) error {
	if s == "next" || s == "prev" {
		return nil
	}
	if v, err := strconv.Atoi(s); err == nil && v >= 0 && v < MaxRanks {
		return nil
	}
	return fmt.Errorf("%q; expected next, prev or an index into the communicator's ranks (0..%d)", s, MaxRanks-1)
}

// verdicts a variant may expect.
var verdictNames = []string{"ok", "race", "mismatch", "corruption", "dropped", "hang", "invalid-access", "build-error"}

func (d *decoder) variant(n ast.Node) (Variant, posMap, []PatchSpec) {
	var v Variant
	var patch []PatchSpec
	pm := posMap{}
	o := d.mapping(n, "variant", "name", "expect", "doc", "set", "patch")
	o.record(pm)
	o.require("name")
	v.Name = o.name("name")
	v.Doc = strings.TrimRight(o.str("doc"), "\n")
	if x := o.get("expect"); x != nil {
		v.Expect = o.str("expect")
		for _, alt := range strings.Split(v.Expect, "|") {
			alt = strings.TrimSpace(alt)
			ok := false
			for _, vn := range verdictNames {
				ok = ok || vn == alt
			}
			if !ok {
				d.add(posOf(x), "variant expect: %q; expected one of %s, or alternatives joined by | (race|corruption)", alt, strings.Join(verdictNames, ", "))
				break
			}
		}
	}
	if x := o.get("set"); x != nil {
		allowed := append(knobs.Keys(), "hardware", "ranks")
		for _, p := range d.params {
			allowed = append(allowed, p.Name)
		}
		so := d.mapping(x, "variant set", allowed...)
		for _, k := range so.order {
			txt, ok := d.scalarText(so.get(k), "set "+k)
			if !ok {
				continue
			}
			key := knobAlias(k)
			if key == "patch" {
				d.add(so.kpos[k], "variant set: patch is made by a variant's own patch: list; write the steps there")
				continue
			}
			if p := d.param0(key); p != nil {
				if !slices.Contains(p.Values, txt) {
					d.add(posOf(so.get(k)), "variant set %s: %q; expected one of the param's values: %s", k, txt, strings.Join(p.Values, ", "))
					continue
				}
				v.Sets = append(v.Sets, key+"="+txt)
				pm["set."+key] = so.kpos[k]
				continue
			}
			probe := DefaultConfig()
			if err := probe.Set(key, txt); err != nil {
				d.add(posOf(so.get(k)), "variant set %s: %s", k, knobMsg(err))
				continue
			}
			v.Sets = append(v.Sets, key+"="+txt)
			pm["set."+key] = so.kpos[k]
		}
	}
	if x := o.get("patch"); x != nil {
		items := d.seqAtMost(x, "variant patch", MaxOps, "")
		for _, it := range items {
			patch = append(patch, d.patch(it))
		}
		if len(items) > 0 && v.Name != "" {
			v.Sets = append(v.Sets, "patch="+v.Name)
			pm["set.patch"] = posOf(x)
		}
	}
	return v, pm, patch
}

// nearest returns the allowed key closest to key by edit distance, when it
// is close enough to be a likely typo.
func nearest(key string, allowed []string) string {
	best, bestD := "", 3
	for _, a := range allowed {
		if d := editDistance(key, a); d < bestD {
			best, bestD = a, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between short strings.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Nearest returns the word of allowed closest to key when it is close
// enough to be a misspelling of it (edit distance under 3), else "".
func Nearest(key string, allowed []string) string { return nearest(key, allowed) }
