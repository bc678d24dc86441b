package format

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios/knobs"
	"github.com/collsim/collsim/sim"
)

// Sizes and times as functions of the knobs. A tensor's bytes and a
// kernel's time may be an expression instead of a number:
//
//	tensors:
//	  - {name: x_norm, bytes: tokens*hidden*2}
//	  - {name: rt_out, bytes: tokens*hidden*routed_dtype}   # bf16 → 2, fp32 → 4
//	ops:
//	  - {kernel: sh_up, reads: [x_norm], writes: [sh_h], time: gemm(tokens, hidden, 4*hidden)}
//	  - {kernel: merge, reads: [a, b], writes: [out], time: mem(3*tokens*hidden*2)}
//
// An expression is integers, + - * / (integer division) and parentheses
// over names: a knob with an integer value (tokens, hidden, layers, tp, …)
// or a file-declared param, whose value is its sizes: entry when it has one
// (width: {narrow: 2, wide: 4}) and else must be an integer. A knob or
// param whose value is a dtype (bf16, fp32, …) stands for its element size
// in bytes (routed_dtype: fp32 → 4). Two
// functions give times in nanoseconds from the hardware profile:
// gemm(m, k, n) is ranks.Profile.GEMMTime (a bf16 m×k×n GEMM), mem(bytes)
// is a memory-bound kernel moving bytes (the kernel start cost plus bytes
// over HBM bandwidth: what a kernel without time: gets from the bytes it
// reads and writes). elt(elements, bytes) is the same time for a kernel
// whose grid covers elements (its SM use follows them, where mem assumes a
// quarter of its bytes). gemm and elt take an optional last argument, a time
// in ns that replaces the cost model's: gemm(m, k, n, 4000) is a kernel with a
// GEMM's SM use and launch that lasts 4 µs. moe(m, k, n, experts) is the routed experts at
// decode as TensorRT-LLM runs them (ranks.Profile.MoEDecode: the router's
// top-k, the expansion, two grouped GEMMs, the finalize): a kernel whose
// time is one moe() call runs those parts one after another, each with the
// SMs it was measured to hold (MoECall).

// Expr is a parsed expression and its text as written.
type Expr struct {
	Src  string
	root *exprNode
}

type exprNode struct {
	op   byte // 'n' number, 'v' name, 'f' call, or + - * /
	n    int64
	name string
	args []*exprNode
}

// exprFuncs are the functions an expression may call, by arity; gemm and
// elt take an optional last argument, a duration in ns that replaces the
// cost model's (the kernel keeps the SM use and launch of its kind).
var exprFuncs = map[string]int{"gemm": 3, "mem": 1, "elt": 2, "moe": 4}

// exprTimed are the functions that take that optional duration.
var exprTimed = map[string]bool{"gemm": true, "elt": true}

// maxExprLen bounds an expression's text.
const maxExprLen = 256

// exprParser is a recursive-descent parser over one expression's text.
type exprParser struct {
	s   string
	i   int
	err error
}

// ParseExpr parses an expression. An error says where (a 0-based byte
// offset into s) and what was expected.
func ParseExpr(s string) (*Expr, int, error) {
	if len(s) > maxExprLen {
		return nil, 0, fmt.Errorf("expression of %d characters; at most %d", len(s), maxExprLen)
	}
	p := &exprParser{s: s}
	n := p.sum(0)
	p.space()
	if p.err == nil && p.i < len(p.s) {
		p.fail("unexpected %q", p.s[p.i:p.i+1])
	}
	if p.err != nil {
		return nil, p.i, p.err
	}
	return &Expr{Src: s, root: n}, 0, nil
}

func (p *exprParser) fail(format string, a ...any) {
	if p.err == nil {
		p.err = fmt.Errorf(format, a...)
	}
}

func (p *exprParser) space() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

// maxExprDepth bounds nesting, so no input recurses deeply.
const maxExprDepth = 16

func (p *exprParser) sum(depth int) *exprNode {
	l := p.product(depth)
	for p.err == nil {
		p.space()
		if p.i >= len(p.s) || (p.s[p.i] != '+' && p.s[p.i] != '-') {
			return l
		}
		op := p.s[p.i]
		p.i++
		l = &exprNode{op: op, args: []*exprNode{l, p.product(depth)}}
	}
	return l
}

func (p *exprParser) product(depth int) *exprNode {
	l := p.atom(depth)
	for p.err == nil {
		p.space()
		if p.i >= len(p.s) || (p.s[p.i] != '*' && p.s[p.i] != '/') {
			return l
		}
		op := p.s[p.i]
		p.i++
		l = &exprNode{op: op, args: []*exprNode{l, p.atom(depth)}}
	}
	return l
}

func isNameByte(c byte, first bool) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
}

func (p *exprParser) atom(depth int) *exprNode {
	p.space()
	if depth > maxExprDepth {
		p.fail("nested more than %d deep", maxExprDepth)
		return nil
	}
	if p.i >= len(p.s) {
		p.fail("expected a number, a knob or ( at the end")
		return nil
	}
	c := p.s[p.i]
	switch {
	case c == '(':
		p.i++
		n := p.sum(depth + 1)
		p.space()
		if p.err == nil && (p.i >= len(p.s) || p.s[p.i] != ')') {
			p.fail("expected )")
		}
		if p.err == nil {
			p.i++
		}
		return n
	case c >= '0' && c <= '9':
		j := p.i
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		v, err := strconv.ParseInt(p.s[j:p.i], 10, 64)
		if err != nil || v > MaxTensorBytes {
			p.i = j
			p.fail("number %s is too large", p.s[j:])
		}
		return &exprNode{op: 'n', n: v}
	case isNameByte(c, true):
		j := p.i
		for p.i < len(p.s) && isNameByte(p.s[p.i], false) {
			p.i++
		}
		name := p.s[j:p.i]
		p.space()
		if p.i < len(p.s) && p.s[p.i] == '(' {
			arity, ok := exprFuncs[name]
			if !ok {
				p.i = j
				p.fail("unknown function %q; expected gemm(m, k, n), mem(bytes), elt(elements, bytes) or moe(m, k, n, experts)", name)
				return nil
			}
			p.i++
			n := &exprNode{op: 'f', name: name}
			for p.err == nil {
				n.args = append(n.args, p.sum(depth+1))
				p.space()
				if p.err != nil || p.i >= len(p.s) {
					p.fail("expected ) after the arguments of %s", name)
					break
				}
				if p.s[p.i] == ')' {
					p.i++
					break
				}
				if p.s[p.i] != ',' {
					p.fail("expected , or ) in the arguments of %s", name)
					break
				}
				p.i++
			}
			if p.err == nil && len(n.args) != arity && !(exprTimed[name] && len(n.args) == arity+1) {
				if exprTimed[name] {
					p.fail("%s takes %d arguments (or %d, the last a time in ns), got %d", name, arity, arity+1, len(n.args))
				} else {
					p.fail("%s takes %d arguments, got %d", name, arity, len(n.args))
				}
			}
			return n
		}
		return &exprNode{op: 'v', name: name}
	}
	p.fail("unexpected %q; expected a number, a knob or (", string(c))
	return nil
}

// names lists the names an expression reads, in order.
func (e *Expr) names() []string {
	var out []string
	var walk func(n *exprNode)
	walk = func(n *exprNode) {
		if n == nil {
			return
		}
		if n.op == 'v' {
			out = append(out, n.name)
		}
		for _, a := range n.args {
			walk(a)
		}
	}
	if e != nil {
		walk(e.root)
	}
	return out
}

// calls reports whether e calls function fn.
func (e *Expr) calls(fn string) bool {
	var walk func(n *exprNode) bool
	walk = func(n *exprNode) bool {
		if n == nil {
			return false
		}
		if n.op == 'f' && n.name == fn {
			return true
		}
		for _, a := range n.args {
			if walk(a) {
				return true
			}
		}
		return false
	}
	return e != nil && walk(e.root)
}

// exprEnv is what an expression reads: the knobs, the file's params (for
// their sizes) and, for times, the hardware profile.
type exprEnv struct {
	cfg    *Config
	params []ParamSpec
	hw     *ranks.Profile
}

// errExprRange is a value outside what a size or time may be.
var errExprRange = fmt.Errorf("out of range")

// Eval evaluates e; the result is in [0, MaxTensorBytes] (sizes) — a value
// that leaves it, a division by zero or a name without an integer value is
// an error.
func (e *Expr) eval(env exprEnv) (int64, error) {
	v, err := e.root.eval(env)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", e.Src, err)
	}
	return v, nil
}

func (n *exprNode) eval(env exprEnv) (int64, error) {
	switch n.op {
	case 'n':
		return n.n, nil
	case 'v':
		return nameValue(env, n.name)
	case 'f':
		var a [4]int64
		for i, x := range n.args {
			v, err := x.eval(env)
			if err != nil {
				return 0, err
			}
			a[i] = v
		}
		if env.hw == nil {
			return 0, fmt.Errorf("%s() is a time and needs the hardware profile; use it in a kernel's time", n.name)
		}
		var t int64
		switch {
		case exprTimed[n.name] && len(n.args) == exprFuncs[n.name]+1:
			t = a[len(n.args)-1] // the given time, in place of the cost model's
		case n.name == "gemm":
			// Its products in floating point first: m·k·n and the
			// operands' bytes overflow int64 long before a time does
			// not fit (gemm(2^40, 2^40, 2^40) came out as 19.5 µs).
			m, k, nn := float64(a[0]), float64(a[1]), float64(a[2])
			if 2*m*k*nn/env.hw.FLOPs*1e9 > MaxTensorBytes || 2*(m*k+k*nn+m*nn) > 1<<62 {
				return 0, fmt.Errorf("%w: gemm(%d, %d, %d) takes longer than %d ns", errExprRange, a[0], a[1], a[2], int64(MaxTensorBytes))
			}
			t = int64(env.hw.GEMMTime(a[0], a[1], a[2]))
		case n.name == "moe":
			// bounded as gemm is: the parts are GEMMs of these sizes
			m, k, nn, e := float64(a[0]), float64(a[1]), float64(a[2]), float64(max(a[3], 1))
			if 2*m*k*nn*e/env.hw.FLOPs*1e9 > MaxTensorBytes || 2*(m*k+k*nn+m*nn)*e > 1<<62 {
				return 0, fmt.Errorf("%w: moe(%d, %d, %d, %d) takes longer than %d ns", errExprRange, a[0], a[1], a[2], a[3], int64(MaxTensorBytes))
			}
			for _, p := range moeParts(env.hw, a) {
				t += int64(p.Dur)
			}
		case n.name == "elt":
			t = int64(env.hw.KStart + ranks.Bytes(a[1], env.hw.HBM))
		default:
			t = int64(env.hw.KStart + ranks.Bytes(a[0], env.hw.HBM))
		}
		if t < 0 || t > MaxTensorBytes {
			return 0, errExprRange
		}
		return t, nil
	}
	l, err := n.args[0].eval(env)
	if err != nil {
		return 0, err
	}
	r, err := n.args[1].eval(env)
	if err != nil {
		return 0, err
	}
	var v float64
	switch n.op {
	case '+':
		v = float64(l) + float64(r)
	case '-':
		v = float64(l) - float64(r)
	case '*':
		v = float64(l) * float64(r)
	case '/':
		if r == 0 {
			return 0, fmt.Errorf("division by zero")
		}
		return l / r, nil
	}
	if v < 0 || v > MaxTensorBytes || math.IsNaN(v) {
		return 0, fmt.Errorf("%w: %.0f is not in [0, %d]", errExprRange, v, int64(MaxTensorBytes))
	}
	return int64(v), nil
}

// nameValue is the integer a name stands for under env.
func nameValue(env exprEnv, name string) (int64, error) {
	for _, p := range env.params {
		if p.Name != name {
			continue
		}
		v, _ := env.cfg.Param(name)
		if p.Sizes != nil {
			if sz, ok := p.Sizes[v]; ok {
				return sz, nil
			}
			return 0, fmt.Errorf("param %s=%s has no size", name, v)
		}
		if sz, ok := dtypeBytes[v]; ok {
			return sz, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("param %s=%s is neither an integer nor a dtype (give the param sizes)", name, v)
		}
		return n, nil
	}
	txt := knobs.Get(env.cfg, name)
	if sz, ok := dtypeBytes[txt]; ok {
		return sz, nil
	}
	n, err := strconv.ParseInt(txt, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("knob %s=%q is neither an integer nor a dtype", name, txt)
	}
	return n, nil
}

// dtypeBytes is the size of one element of each dtype a knob or param may
// name: in an expression the name stands for it (routed_dtype: fp32 → 4).
var dtypeBytes = map[string]int64{"fp8": 1, "int8": 1, "bf16": 2, "fp16": 2, "fp32": 4, "int32": 4, "fp64": 8, "int64": 8}

// clipExpr is an expression as an error quotes it: one longer than any
// expression may be shows its start (a 350 KB expression was echoed whole).
func clipExpr(s string) string {
	if len(s) <= maxExprLen {
		return s
	}
	cut := 48
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// exprAt parses the expression string n holds, reporting a syntax error
// at its column and a name that is neither a knob nor one of the file's
// params.
func (d *decoder) exprAt(n ast.Node, txt, what string) *Expr {
	e, off, err := ParseExpr(txt)
	at := posOf(n)
	if err != nil {
		at.Col += off
		if q := n.GetToken(); q != nil && (q.Type == token.DoubleQuoteType || q.Type == token.SingleQuoteType) {
			at.Col++ // past the opening quote
		}
		d.add(at, "%s: %q: %v; expected an integer or an expression over knobs such as tokens*hidden*2", what, clipExpr(txt), err)
		return nil
	}
	for _, name := range e.names() {
		if !knobs.Known(name) && d.param0(name) == nil {
			d.add(at, "%s: %q names %q, which is neither a knob nor a param of this file", what, txt, name)
			return nil
		}
	}
	return e
}

// sizeOrExpr reads an integer in [lo, hi] or an expression string.
func (d *decoder) sizeOrExpr(n ast.Node, what string, lo, hi int64) (int64, *Expr) {
	v, ok := d.value(n)
	if !ok {
		return 0, nil
	}
	if s, isStr := v.(*ast.StringNode); isStr {
		return 0, d.exprAt(v, s.Value, what)
	}
	x, _ := d.int(v, what, lo, hi)
	return x, nil
}

// timeOrExpr reads a time: an integer of nanoseconds, a string with a unit
// (5us), or an expression (gemm(tokens, hidden, hidden)).
func (d *decoder) timeOrExpr(n ast.Node, what string) (int64, *Expr) {
	v, ok := d.value(n)
	if !ok {
		return 0, nil
	}
	if s, isStr := v.(*ast.StringNode); isStr {
		// An expression has an operator or a call, or is one knob's name;
		// anything else is read as a time with a unit.
		if _, err := parseDuration(s.Value); err != nil && (strings.ContainsAny(s.Value, "+-*/(") || knobs.Known(s.Value) || d.param0(s.Value) != nil) {
			return 0, d.exprAt(v, s.Value, what)
		}
	}
	return d.duration(v, what), nil
}

// OpTime is op's time under cfg: its expression's value, its fixed time,
// or def when it gives none.
func (s *Spec) OpTime(op *OpSpec, cfg Config, hw ranks.Profile, def sim.Time) (sim.Time, error) {
	switch {
	case op.TimeExpr != nil:
		v, err := op.TimeExpr.eval(exprEnv{cfg: &cfg, params: s.Params, hw: &hw})
		if err != nil {
			return 0, fmt.Errorf("%w: %s %q time: %w", ErrBadKnob, op.Kind, op.Name, err)
		}
		return sim.Time(v), nil
	case op.TimeNs > 0:
		return sim.Time(op.TimeNs), nil
	}
	return def, nil
}

// Sized returns s with every tensor's bytes evaluated under cfg: s itself
// when no tensor has an expression, else a copy.
func (s *Spec) Sized(cfg Config) (*Spec, error) {
	has := false
	for _, t := range s.Tensors {
		has = has || t.BytesExpr != nil
	}
	if !has {
		return s, nil
	}
	c := *s
	c.Tensors = slices.Clone(s.Tensors)
	for i := range c.Tensors {
		t := &c.Tensors[i]
		if t.BytesExpr == nil {
			continue
		}
		v, err := t.BytesExpr.eval(exprEnv{cfg: &cfg, params: s.Params})
		if err == nil && v < 1 {
			err = fmt.Errorf("%d bytes; expected at least 1", v)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: tensor %q bytes: %w", ErrBadKnob, t.Name, err)
		}
		t.Bytes = v
	}
	return &c, nil
}

// validateExprs evaluates every size and time expression under cfg and
// reports the ones that fail at their line; false when one did.
func (s *Spec) validateExprs(cfg Config, report func(Pos, string)) bool {
	ok := true
	env := exprEnv{cfg: &cfg, params: s.Params}
	for _, t := range s.Tensors {
		if t.BytesExpr == nil {
			continue
		}
		v, err := t.BytesExpr.eval(env)
		if err == nil && (v < 1 || v > MaxTensorBytes) {
			err = fmt.Errorf("%d bytes; expected 1 to %d", v, int64(MaxTensorBytes))
		}
		if err != nil {
			report(t.pos.at("bytes"), fmt.Sprintf("tensor %q bytes: %v", t.Name, err))
			ok = false
		}
	}
	hw, err := cfg.Profile()
	if err != nil {
		return ok
	}
	env.hw = &hw
	for _, p := range s.AllPrograms() {
		for _, op := range p.Flat() {
			if op.TimeExpr == nil {
				continue
			}
			if _, err := op.TimeExpr.eval(env); err != nil {
				report(op.pos.at("time"), fmt.Sprintf("%s %q time: %v", op.Kind, op.Name, err))
				ok = false
			}
		}
	}
	return ok
}

// moeParts is ranks.Profile.MoEDecode of moe()'s arguments.
func moeParts(hw *ranks.Profile, a [4]int64) []ranks.MoEPart {
	return hw.MoEDecode(a[0], a[1], a[2], max(a[3], 1))
}

// MoECall returns the parts of the routed-experts kernel op's time names
// when its time is one moe() call under cfg, and false otherwise.
func (s *Spec) MoECall(op *OpSpec, cfg Config, hw ranks.Profile) ([]ranks.MoEPart, bool) {
	e := op.TimeExpr
	if e == nil || e.root.op != 'f' || e.root.name != "moe" {
		return nil, false
	}
	var a [4]int64
	env := exprEnv{cfg: &cfg, params: s.Params, hw: &hw}
	if _, err := e.eval(env); err != nil {
		return nil, false // out of range: OpTime says so
	}
	for i, x := range e.root.args {
		v, err := x.eval(env)
		if err != nil {
			return nil, false
		}
		a[i] = v
	}
	return moeParts(&hw, a), true
}

// KernelKind is a program kernel's kind: "moe" when its time is one moe()
// call, "gemm" when its time is a GEMM's or it says launch: gemm (either
// launch then costs what the profile measured for a GEMM launch,
// ranks.Config.GEMMLaunchCost), else "kernel".
func (op *OpSpec) KernelKind() string {
	if op.TimeExpr != nil && op.TimeExpr.root.op == 'f' && op.TimeExpr.root.name == "moe" {
		return "moe"
	}
	if op.Launch == "gemm" || op.TimeExpr.calls("gemm") {
		return "gemm"
	}
	return "kernel"
}
