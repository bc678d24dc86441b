package check

import (
	"fmt"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// Model is the unsharded model a scenario shards: linear ops over tensors,
// as one device runs them. A scenario that names its model
// ([References.Model]) is checked against it besides the serialized
// program: every rank's output tensor must equal the model's tensor of the
// same name, so a shared output counted once per rank, a partial never
// reduced or a tensor reduced twice is corruption even when the program
// agrees with itself.
//
// The sharded program must name its op outputs after the model's tensors,
// and compute linear ops with per-rank shard weights whose sum over the
// ranks is the model's weight (a row-parallel split).
type Model struct {
	Inputs  []ModelInput
	Ops     []ModelOp
	Outputs []string // tensors compared on every rank
	Chunks  int
}

// ModelInput is an input tensor and its value per chunk (the same on every
// rank of the sharded program).
type ModelInput struct {
	Name string
	Init func(chunk int) uint64
}

// ModelOp is one op of a [Model]: Kind "linear" (Output = Weight·Σ Inputs,
// a new value) or "add" (Output = Σ Inputs).
type ModelOp struct {
	Name   string
	Kind   string
	Inputs []string
	Output string
	Weight int64
}

// Producer returns the op writing tensor, or "".
func (m *Model) Producer(tensor string) string {
	for _, op := range m.Ops {
		if op.Output == tensor {
			return op.Name
		}
	}
	return ""
}

// Run runs the model on one device (a one-rank world, one stream, eager)
// and returns the world and its tensors by name.
func (m *Model) Run() (*ranks.World, map[string]*ranks.Buffer, error) {
	if m.Chunks < 1 {
		return nil, nil, fmt.Errorf("unsharded model: %d chunks: want at least 1", m.Chunks)
	}
	w := ranks.NewWorld(1, ranks.Config{Mode: ranks.Eager, LaunchCost: 1, EventCost: 1}, sim.NewEngine(sim.Timed, nil))
	ts := map[string]*ranks.Buffer{}
	for _, in := range m.Inputs {
		b := w.Alloc(0, in.Name, int64(m.Chunks), m.Chunks)
		w.Init(b, in.Init)
		ts[in.Name] = b
	}
	p := &ranks.Program{Streams: []string{"device"}}
	for _, op := range m.Ops {
		if _, dup := ts[op.Output]; dup {
			return nil, nil, fmt.Errorf("unsharded model: op %q writes %q, which already exists", op.Name, op.Output)
		}
		var srcs []*ranks.Buffer
		for _, in := range op.Inputs {
			b, ok := ts[in]
			if !ok {
				return nil, nil, fmt.Errorf("unsharded model: op %q reads %q before it is produced", op.Name, in)
			}
			srcs = append(srcs, b)
		}
		out := w.Alloc(0, op.Output, int64(m.Chunks), m.Chunks)
		ts[op.Output] = out
		switch op.Kind {
		case "linear":
			p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Kernel: modelKernel(op.Name, "gemm", out, op.Weight, true, srcs)})
		case "add":
			p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Kernel: modelKernel(op.Name, "add", out, 1, false, srcs)})
		default:
			return nil, nil, fmt.Errorf("unsharded model: op %q: unknown kind %q (want linear or add)", op.Name, op.Kind)
		}
	}
	for _, o := range m.Outputs {
		if _, ok := ts[o]; !ok {
			return nil, nil, fmt.Errorf("unsharded model: output %q is never produced", o)
		}
	}
	w.SetProgram(0, p)
	res, err := w.Run()
	if err != nil {
		return nil, nil, err
	}
	if res.Hung {
		return nil, nil, fmt.Errorf("unsharded model hangs")
	}
	return w, ts, nil
}

// modelKernel is one model op as a kernel of duration 1: dst = coef·Σ srcs,
// a fresh value (a linear op, a computation) or one that keeps the
// provenance of its terms (an add, so a report can say which contributions
// a value holds).
func modelKernel(name, kind string, dst *ranks.Buffer, coef int64, fresh bool, srcs []*ranks.Buffer) *ranks.KernelSpec {
	ss := make([]ranks.Src, len(srcs))
	for i, s := range srcs {
		ss[i] = ranks.Src{Buf: s, Coef: coef}
	}
	return &ranks.KernelSpec{Name: name, Kind: kind, Instrs: []ranks.Instr{{Op: ranks.OpCompute, Phase: kind, Dst: dst, N: dst.Chunks(), Srcs: ss, Fresh: fresh, Dur: 1}}}
}
