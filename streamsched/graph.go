package streamsched

import (
	"fmt"

	"github.com/collsim/collsim/sim"
)

// OpKind is what an op computes.
type OpKind string

const (
	GEMM      OpKind = "gemm"      // out = w·in (a linear map with a per-rank weight)
	MoE       OpKind = "moe"       // routed experts: out = w·x + logits
	Add       OpKind = "add"       // out = a + b (merge)
	AllReduce OpKind = "allreduce" // out = Σ over the communicator of in
)

// Op is one node of the op graph.
type Op struct {
	Name   string
	Kind   OpKind
	Inputs []string // tensor names
	Output string
	Layer  int
	// GEMM shape (M×K·K×N) for the cost model; for MoE, the per-expert shape
	// and Experts the number of active experts per token group.
	M, K, N int64
	Experts int64
	Comm    string // AllReduce: communicator name
	// Time, when set, replaces the cost model's duration (GEMM roofline,
	// the measured MoE kernels, an add's bytes): the op is one kernel of
	// that length.
	Time sim.Time
}

// Tensor is a graph edge.
type Tensor struct {
	Name   string
	Bytes  int64
	Input  bool // graph input (placeholder)
	Output bool
}

// Graph is an op graph in node (program) order.
type Graph struct {
	Ops     []Op
	Tensors []Tensor
}

// Tensor returns the tensor named name.
func (g *Graph) Tensor(name string) (Tensor, bool) {
	for _, t := range g.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return Tensor{}, false
}

// producer returns the index of the op producing tensor name, or -1 for a
// graph input.
func (g *Graph) producer(name string) int {
	for i, op := range g.Ops {
		if op.Output == name {
			return i
		}
	}
	return -1
}

// Validate checks that every input is produced earlier or is a graph input.
func (g *Graph) Validate() error {
	have := map[string]bool{}
	for _, t := range g.Tensors {
		if t.Input {
			have[t.Name] = true
		}
	}
	for _, op := range g.Ops {
		for _, in := range op.Inputs {
			if !have[in] {
				return fmt.Errorf("op %q reads tensor %q before it is produced", op.Name, in)
			}
		}
		if _, ok := g.Tensor(op.Output); !ok {
			return fmt.Errorf("op %q writes undeclared tensor %q", op.Name, op.Output)
		}
		have[op.Output] = true
	}
	return nil
}

// deps returns, for each op, the ops producing its inputs.
func (g *Graph) deps() [][]int {
	out := make([][]int, len(g.Ops))
	for i, op := range g.Ops {
		for _, in := range op.Inputs {
			if p := g.producer(in); p >= 0 {
				out[i] = append(out[i], p)
			}
		}
	}
	return out
}

// ancestors returns the set of ops op i (transitively) depends on.
func ancestors(deps [][]int, i int) []bool {
	seen := make([]bool, len(deps))
	stack := append([]int(nil), deps[i]...)
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[x] {
			continue
		}
		seen[x] = true
		stack = append(stack, deps[x]...)
	}
	return seen
}

// MoEOptions shape one MoE layer.
type MoEOptions struct {
	Tokens, Hidden int64
	SharedInter    int64 // shared-expert intermediate size (whole, before TP)
	ExpertInter    int64 // routed-expert intermediate size
	Experts        int64 // experts in total
	TopK           int64
	TP             int64
	Shared         SharedKind
	RoutedFirst    bool // routed MoE issued before the shared branch (DeepSeek/GLM4 order)
	Comm           string
}

// SharedKind is the shape of the shared-expert branch.
type SharedKind string

const (
	NoShared        SharedKind = "none"     // no shared expert (Mixtral)
	SharedPlain     SharedKind = "plain"    // up → down, no collective
	SharedTrailing  SharedKind = "trailing" // up → down → all-reduce (Nemotron Ultra V3 at TP≥2)
	SharedMidBranch SharedKind = "mid"      // up → all-reduce → down
)

// BuildMoE returns a graph of layers MoE layers. Layer l reads x (l = 0) or
// the previous layer's output and writes L{l}.out. Each layer: router GEMM;
// shared expert; routed experts; routed all-reduce; merge.
func BuildMoE(layers int, o MoEOptions) *Graph {
	g := &Graph{}
	act := o.Tokens * o.Hidden * 2
	g.Tensors = append(g.Tensors, Tensor{Name: "x", Bytes: act, Input: true})
	in := "x"
	tp := max(o.TP, 1)
	for l := range layers {
		p := fmt.Sprintf("L%d.", l)
		t := func(name string, bytes int64) string {
			g.Tensors = append(g.Tensors, Tensor{Name: p + name, Bytes: bytes})
			return p + name
		}
		logits := t("logits", o.Tokens*o.Experts*2)
		gate := Op{Name: p + "gate", Kind: GEMM, Inputs: []string{in}, Output: logits, Layer: l, M: o.Tokens, K: o.Hidden, N: o.Experts}
		var shared []Op
		sharedOut := ""
		if o.Shared != NoShared {
			h := t("sh_h", o.Tokens*o.SharedInter/tp*2)
			up := Op{Name: p + "sh_up", Kind: GEMM, Inputs: []string{in}, Output: h, Layer: l, M: o.Tokens, K: o.Hidden, N: o.SharedInter / tp}
			downIn := h
			shared = append(shared, up)
			if o.Shared == SharedMidBranch {
				hr := t("sh_h_ar", o.Tokens*o.SharedInter/tp*2)
				shared = append(shared, Op{Name: p + "shared_mid_ar", Kind: AllReduce, Inputs: []string{h}, Output: hr, Layer: l, Comm: o.Comm})
				downIn = hr
			}
			y := t("sh_y", act)
			shared = append(shared, Op{Name: p + "sh_down", Kind: GEMM, Inputs: []string{downIn}, Output: y, Layer: l, M: o.Tokens, K: o.SharedInter / tp, N: o.Hidden})
			sharedOut = y
			if o.Shared == SharedTrailing {
				so := t("sh_out", act)
				shared = append(shared, Op{Name: p + "shared_ar", Kind: AllReduce, Inputs: []string{y}, Output: so, Layer: l, Comm: o.Comm})
				sharedOut = so
			}
		}
		rty := t("rt_y", act)
		moe := Op{Name: p + "moe", Kind: MoE, Inputs: []string{in, logits}, Output: rty, Layer: l, M: o.Tokens, K: o.Hidden, N: o.ExpertInter / tp, Experts: o.TopK}
		rto := t("rt_out", act)
		rar := Op{Name: p + "routed_ar", Kind: AllReduce, Inputs: []string{rty}, Output: rto, Layer: l, Comm: o.Comm}
		g.Ops = append(g.Ops, gate)
		if o.RoutedFirst {
			g.Ops = append(g.Ops, moe, rar)
			g.Ops = append(g.Ops, shared...)
		} else {
			g.Ops = append(g.Ops, shared...)
			g.Ops = append(g.Ops, moe, rar)
		}
		if sharedOut == "" {
			// No shared expert: the routed all-reduce is the layer output.
			g.Tensors[len(g.Tensors)-1].Output = true
			in = rto
			continue
		}
		out := t("out", act)
		g.Tensors[len(g.Tensors)-1].Output = true
		g.Ops = append(g.Ops, Op{Name: p + "merge", Kind: Add, Inputs: []string{sharedOut, rto}, Output: out, Layer: l})
		in = out
	}
	return g
}
