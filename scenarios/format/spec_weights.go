package format

import (
	"strconv"
	"strings"
)

// Default value weights. A kernel that gives no weight multiplies its first
// read by a weight the file derives for it: distinct on every rank (so data
// from the wrong rank shows in the values) and distinct for distinct
// kernels (so two unordered writes of one tensor give different bytes in
// either order whatever the kernels are called: a verdict never turns on a
// name; DESIGN.md, Value weights). A hash of the name cannot promise the
// second: kA and kB once computed different values where kA and k159
// computed the same, and the same program read corruption under one
// naming and race under the other.
//
// The weight comes from the kernel's place in the file instead. Every op
// that can make a kernel — in the programs, in capture and repeat blocks,
// in every variant's patch, and the unsharded model's linear ops — is a
// template, numbered in file order; a template inside a repeat block
// stands for one kernel per iteration l. Kernel name n's key is the
// smallest i + T·l over the templates i (of T) that make n, and its weight
// on rank r is 2 + key·MaxRanks + r. The key names the pair (template,
// iteration), which names the kernel: two names never share a key, nor
// (with r < MaxRanks) two kernels or two ranks a weight. The table is the
// file's, not a configuration's, so a variant that adds, drops or moves
// kernels leaves every other kernel's weight alone (a variant: reference
// compares the same kernels' values).

// weightTemplate is one op that names a kernel: its name, and the repeat
// variable substituted in it ("" outside a repeat block).
type weightTemplate struct {
	name, as string
}

// weightTable maps a kernel name to its key (see above).
type weightTable struct {
	literal   map[string]int   // a name no repeat block substitutes → its smallest template index
	templates []weightTemplate // in file order
	repeated  []int            // the templates a repeat block substitutes, by index
}

// KernelWeights returns the file's weight table, made at the first use
// (Validate and Scenario make it before any build, so builds running at
// once only read it).
func (s *Spec) KernelWeights() *weightTable {
	if s.weights == nil {
		s.weights = s.makeWeightTable()
	}
	return s.weights
}

func (s *Spec) makeWeightTable() *weightTable {
	t := &weightTable{literal: map[string]int{}}
	add := func(name, as string) {
		if as != "" && !strings.Contains(name, "${"+as+"}") {
			as = ""
		}
		if as == "" {
			if _, ok := t.literal[name]; !ok {
				t.literal[name] = len(t.templates)
			}
		} else {
			t.repeated = append(t.repeated, len(t.templates))
		}
		t.templates = append(t.templates, weightTemplate{name: name, as: as})
	}
	var walk func(ops []OpSpec, as string)
	walk = func(ops []OpSpec, as string) {
		for i := range ops {
			op := &ops[i]
			switch {
			case op.Repeat != nil:
				walk(op.Repeat.Ops, op.Repeat.As)
			case op.Capture != nil:
				walk(op.Capture.Ops, as)
			case op.Kind == OpKernel:
				add(op.Name, as)
			}
		}
	}
	if s.Graph != nil {
		for _, op := range s.Graph.Ops {
			add(op.Name, "")
		}
	}
	for _, p := range s.AllPrograms() {
		walk(p.Ops, "")
	}
	for _, r := range s.Refs {
		if r.Model != nil {
			for _, op := range r.Model.Ops {
				add(op.Name, "")
			}
		}
	}
	return t
}

// key returns name's key, and false for a name no template makes.
func (t *weightTable) key(name string) (int, bool) {
	best, ok := 0, false
	if i, lit := t.literal[name]; lit {
		best, ok = i, true
	}
	T := len(t.templates)
	for _, i := range t.repeated {
		if ok && i >= best {
			break
		}
		if l, m := t.templates[i].iteration(name); m && (!ok || i+T*l < best) {
			best, ok = i+T*l, true
		}
	}
	return best, ok
}

// iteration returns the l for which the template makes name.
func (tp weightTemplate) iteration(name string) (int, bool) {
	v := "${" + tp.as + "}"
	pre, _, _ := strings.Cut(tp.name, v)
	if !strings.HasPrefix(name, pre) {
		return 0, false
	}
	digits := name[len(pre):]
	n := 0
	for n < len(digits) && digits[n] >= '0' && digits[n] <= '9' {
		n++
	}
	if n == 0 || (n > 1 && digits[0] == '0') || n > 4 {
		return 0, false
	}
	l, _ := strconv.Atoi(digits[:n])
	if l >= MaxRepeat || strings.ReplaceAll(tp.name, v, digits[:n]) != name {
		return 0, false
	}
	return l, true
}

// KernelWeight is the weight a kernel named kernel applies to its first
// read on rank when the file gives none (see the comment above): distinct
// per rank and per kernel of the file. A name the file never gives a
// kernel gets a key past every template's.
func (s *Spec) KernelWeight(kernel string, rank int) int64 {
	t := s.KernelWeights()
	k, ok := t.key(kernel)
	if !ok {
		k = len(t.templates) * MaxRepeat
	}
	return 2 + int64(k)*MaxRanks + int64(rank)
}

// WholeWeight is the whole weight of kernel on a world of n ranks: the sum
// of the per-rank weights [Spec.KernelWeight] gives its shards (a
// row-parallel split), what a rank that holds it replicated multiplies by.
func (s *Spec) WholeWeight(kernel string, n int) int64 {
	var w int64
	for r := range n {
		w += s.KernelWeight(kernel, r)
	}
	return w
}
