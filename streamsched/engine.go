package streamsched

import (
	"fmt"
	"slices"
	"strings"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
)

// The TensorRT engine-build model (Torch-TensorRT with TensorRT 11 native
// multi-device collectives, the IDistCollectiveLayer added by
// torch_tensorrt/dynamo/conversion/impl/nccl_ops.py add_dist_collective).
// Torch-TensorRT partitions the graph into TensorRT engines (submodules
// _run_on_acc_N) and PyTorch segments (_run_on_gpu_N); the TensorRT builder
// then may hand an engine to Myelin, which fuses shuffle and pointwise
// layers, and a collective between them, into one ForeignNode. Two failures
// follow from the builder's rules, as reported in the seed
// (shared/seeds/torch-tensorrt-distcollective-fused-foreignnode.txt):
//
//   - a collective inside a ForeignNode has no Myelin implementation
//     (toMyelinCommKind, myelinDistCollectiveLayer.cpp:49), so the build
//     fails: "Could not find any implementation for node {ForeignNode[…]}";
//   - an engine that holds a collective and GEMMs does not get the
//     signal/wait multi-stream layers and is not marked multi-device
//     (mIsMdEngine == false), so IExecutionContext::setCommunicator is
//     rejected and the collective does nothing at run time.
//
// The workaround forces a fusion boundary: the collective ops are listed in
// torch_executed_ops, run in PyTorch (NCCL through c10d) between engines, at
// the cost of more submodule calls.

// Op kinds of the engine model, besides GEMM, Add and AllReduce.
const (
	// Shuffle is a layout op (reshape, unsqueeze, permute): out = in.
	Shuffle OpKind = "shuffle"
	// Pointwise is an elementwise op (activation, norm): a new value.
	Pointwise OpKind = "pointwise"
	// AllToAll is all_to_all_single over the op's communicator (Ulysses).
	AllToAll OpKind = "alltoall"
	// TorchOp is an op TensorRT cannot convert (top-k routing, expert
	// combine): it always runs in PyTorch and splits engines.
	TorchOp OpKind = "torch"
)

// IsCollective reports whether k is a collective op kind.
func IsCollective(k OpKind) bool {
	return k == AllReduce || k == AllToAll
}

// EngineOptions are the Torch-TensorRT compile settings and the builder
// behaviour the model follows.
type EngineOptions struct {
	// TorchExecuted are op kinds forced to run in PyTorch
	// (torch_executed_ops). Listing the collectives is the workaround.
	TorchExecuted []OpKind
	// MyelinMinOps is the engine size (ops) from which the builder hands an
	// engine to Myelin, which fuses shuffle/pointwise runs around a
	// collective into a ForeignNode (0: never). The seed sees the fusion on
	// a real 48-layer transformer and not on small graphs; the threshold
	// stands for "large".
	MyelinMinOps int
	// MyelinComm is hypothetical fix (a) of the seed: Myelin maps the
	// collective kind inside a ForeignNode.
	MyelinComm bool
	// PromoteAll is a hypothetical builder that marks every engine holding
	// a collective multi-device, GEMMs or not.
	PromoteAll bool
	// Standalone puts each collective in an engine of its own.
	Standalone bool
}

// ForeignNode is a run of ops Myelin fused into one node.
type ForeignNode struct {
	Name string
	Ops  []int
}

// Engine is one TensorRT engine: a contiguous run of ops.
type Engine struct {
	Name        string
	Ops         []int
	Foreign     []ForeignNode
	GEMMs       int
	Collectives []int
	// MultiDevice: the builder emitted the multi-device scaffolding, so a
	// communicator can be bound (mIsMdEngine).
	MultiDevice bool
}

// Segment is one submodule call: an engine, or one PyTorch op.
type Segment struct {
	Engine *Engine // nil for a PyTorch op
	Op     int     // the PyTorch op (when Engine is nil)
	Name   string
}

// Partition is a graph split into submodules, with what the builder found.
type Partition struct {
	Segments []Segment
	Engines  []*Engine
	// BuildErrors are build-error findings, one per engine that failed.
	BuildErrors []ranks.Finding
}

func (o EngineOptions) torch(k OpKind) bool {
	return k == TorchOp || slices.Contains(o.TorchExecuted, k)
}

// PartitionEngines splits g like Torch-TensorRT's partitioner (maximal runs
// of convertible ops become engines) and builds each engine like the
// TensorRT builder described above.
func PartitionEngines(g *Graph, o EngineOptions) (*Partition, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	p := &Partition{}
	var cur *Engine
	acc, gpu := 0, 0
	flush := func() {
		if cur != nil {
			p.Engines = append(p.Engines, cur)
			p.Segments = append(p.Segments, Segment{Engine: cur, Op: -1, Name: cur.Name})
			cur = nil
		}
	}
	for i, op := range g.Ops {
		if o.torch(op.Kind) {
			flush()
			p.Segments = append(p.Segments, Segment{Op: i, Name: fmt.Sprintf("_run_on_gpu_%d(%s)", gpu, op.Name)})
			gpu++
			continue
		}
		if o.Standalone && IsCollective(op.Kind) {
			flush()
		}
		if cur == nil {
			cur = &Engine{Name: fmt.Sprintf("_run_on_acc_%d", acc)}
			acc++
		}
		cur.Ops = append(cur.Ops, i)
		if o.Standalone && IsCollective(op.Kind) {
			flush()
		}
	}
	flush()
	for _, e := range p.Engines {
		buildEngine(g, e, o)
		if f, ok := buildError(g, e, o); ok {
			p.BuildErrors = append(p.BuildErrors, f)
		}
	}
	return p, nil
}

func fusable(k OpKind) bool { return k == Shuffle || k == Pointwise || k == Add }

// buildEngine finds the ForeignNodes Myelin forms and decides whether the
// engine is multi-device.
func buildEngine(g *Graph, e *Engine, o EngineOptions) {
	for _, i := range e.Ops {
		switch k := g.Ops[i].Kind; {
		case k == GEMM || k == MoE:
			e.GEMMs++
		case IsCollective(k):
			e.Collectives = append(e.Collectives, i)
		}
	}
	// The builder emits the signal/wait multi-stream layers, and so marks
	// the engine multi-device, only for collective engines without GEMMs
	// (seed: _run_on_acc_385, comm_allreduce + signal×2 + wait×2, no GEMM →
	// mIsMdEngine=true; _run_on_acc_9, comm_allreduce + gemm×4 → false).
	e.MultiDevice = len(e.Collectives) > 0 && (e.GEMMs == 0 || o.PromoteAll)
	if o.MyelinMinOps <= 0 || len(e.Ops) < o.MyelinMinOps {
		return
	}
	// Myelin: maximal runs of shuffle/pointwise/collective ops that hold a
	// collective and at least one shuffle/pointwise op become one node.
	flushRun := func(run []int) {
		coll, other := 0, 0
		for _, i := range run {
			if IsCollective(g.Ops[i].Kind) {
				coll++
			} else {
				other++
			}
		}
		if coll == 0 || other == 0 {
			return
		}
		first, last := g.Ops[run[0]], g.Ops[run[len(run)-1]]
		name := fmt.Sprintf("{ForeignNode[[%s]-[%s]...[%s]-[%s]]}", strings.ToUpper(string(first.Kind)), first.Name, strings.ToUpper(string(last.Kind)), last.Name)
		e.Foreign = append(e.Foreign, ForeignNode{Name: name, Ops: append([]int(nil), run...)})
	}
	var run []int
	for _, i := range e.Ops {
		k := g.Ops[i].Kind
		if fusable(k) || IsCollective(k) {
			run = append(run, i)
			continue
		}
		flushRun(run)
		run = nil
	}
	flushRun(run)
}

// buildError is the first ForeignNode holding a collective that Myelin
// cannot map: TensorRT stops the build there.
func buildError(g *Graph, e *Engine, o EngineOptions) (ranks.Finding, bool) {
	if o.MyelinComm || len(e.Foreign) == 0 {
		return ranks.Finding{}, false
	}
	fn := e.Foreign[0]
	var colls, names []string
	for _, i := range fn.Ops {
		names = append(names, g.Ops[i].Name)
		if IsCollective(g.Ops[i].Kind) {
			colls = append(colls, g.Ops[i].Name)
		}
	}
	return ranks.Finding{
		Kind: ranks.KindBuildError,
		Message: fmt.Sprintf("engine %s: Could not find any implementation for node %s: Myelin fused the collective %s with %d shuffle/pointwise ops (%s) and toMyelinCommKind does not support it (CollectiveOperation not supported for collective)",
			e.Name, fn.Name, strings.Join(colls, ", "), len(fn.Ops)-len(colls), strings.Join(names, " → ")),
		Ops:      names,
		Resource: fn.Name,
	}, true
}

// EngineLowerConfig is what LowerEngines needs besides the graph.
type EngineLowerConfig struct {
	HW     ranks.Profile
	Chunks int
	// Init gives graph input values; Weight per-(op, rank) weights (nil:
	// DefaultWeight).
	Init   func(tensor string, rank, chunk int) uint64
	Weight func(op string, rank int) int64
	// Comm returns rank's communicator for an op's communicator name.
	Comm func(name string, rank int) (*collectives.Comm, error)
	// Strategy is how collectives run (TensorRT's native collectives and
	// c10d both use NCCL).
	Strategy collectives.Strategy
}

// EngineRun is a graph lowered onto a world by submodule calls.
type EngineRun struct {
	Tensors []map[string]*ranks.Buffer
	// Rejected lists, per engine, the ranks where binding the communicator
	// was rejected.
	Rejected map[string][]int
}

// LowerEngines allocates every tensor of g on every rank and sets each
// rank's program: one launch per submodule call on one stream, an engine's
// layers running back to back inside its call. With p nil every op is its
// own PyTorch call (eager PyTorch: the reference). A rank binds the
// communicator of each engine that holds a collective
// (IExecutionContext::setCommunicator); on an engine that is not
// multi-device the binding is rejected and the engine's collective layers
// have no communicator: they do nothing.
func LowerEngines(w *ranks.World, g *Graph, p *Partition, cfg EngineLowerConfig) (*EngineRun, error) {
	weight := cfg.Weight
	if weight == nil {
		weight = DefaultWeight
	}
	run := &EngineRun{Rejected: map[string][]int{}, Tensors: allocTensors(w, g, cfg.Chunks, cfg.Init).maps()}
	segs := []Segment(nil)
	if p == nil {
		for i, op := range g.Ops {
			segs = append(segs, Segment{Op: i, Name: op.Name})
		}
	} else {
		segs = p.Segments
	}
	for r := 0; r < w.N; r++ {
		prog := &ranks.Program{Streams: []string{"main"}}
		for _, s := range segs {
			if s.Engine == nil {
				k, err := opKernel(g, s.Op, r, run.Tensors[r], cfg, weight)
				if err != nil {
					return nil, err
				}
				k.Name = s.Name
				prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Launch, Kernel: k})
				continue
			}
			e := s.Engine
			bound := len(e.Collectives) == 0 || e.MultiDevice
			if !bound {
				run.Rejected[e.Name] = append(run.Rejected[e.Name], r)
			}
			k := &ranks.KernelSpec{Name: e.Name, Kind: "trt-engine"}
			var colls []string
			for _, i := range e.Ops {
				op := g.Ops[i]
				if IsCollective(op.Kind) {
					colls = append(colls, op.Name)
					c, err := cfg.Comm(op.Comm, r)
					if err != nil {
						return nil, err
					}
					k.GroupSize = max(k.GroupSize, c.Size())
					if !bound {
						continue // no communicator: the layer does nothing
					}
				}
				ok, err := opKernel(g, i, r, run.Tensors[r], cfg, weight)
				if err != nil {
					return nil, err
				}
				k.Instrs = append(k.Instrs, ok.Expand()...)
				if k.OrderKey == "" {
					k.OrderKey, k.Exclusive = ok.OrderKey, ok.Exclusive
				}
			}
			if len(colls) > 0 {
				list := colls
				if len(list) > 3 {
					list = append(list[:3:3], fmt.Sprintf("… %d in all", len(colls)))
				}
				k.Coll = fmt.Sprintf("%s(%s)", e.Name, strings.Join(list, ", "))
			}
			prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Launch, Kernel: k})
		}
		w.SetProgram(r, prog)
	}
	return run, nil
}

// opKernel is one op as a kernel (or as layers inside an engine).
func opKernel(g *Graph, i, r int, ts map[string]*ranks.Buffer, cfg EngineLowerConfig, weight func(string, int) int64) (*ranks.KernelSpec, error) {
	op := g.Ops[i]
	out := ts[op.Output]
	hw := cfg.HW
	srcs := make([]ranks.Src, len(op.Inputs))
	for j, in := range op.Inputs {
		srcs[j] = ranks.Src{Buf: ts[in], Coef: 1}
	}
	compute := func(phase string, fresh bool, dur int64) *ranks.KernelSpec {
		return &ranks.KernelSpec{Name: op.Name, Kind: string(op.Kind), Instrs: []ranks.Instr{{
			Op: ranks.OpCompute, Phase: phase, Dst: out, N: out.Chunks(), Srcs: srcs, Fresh: fresh, Dur: hw.KStart + ranks.Bytes(dur, hw.HBM)}}}
	}
	switch op.Kind {
	case GEMM, MoE:
		srcs[0].Coef = weight(op.Name, r)
		k := compute(string(op.Kind), true, 0)
		k.Instrs[0].Dur = hw.GEMMTime(op.M, op.K, op.N)
		if op.Kind == MoE {
			return moeKernel(nil, &op, out, srcs, hw.MoEDecode(op.M, op.K, op.N, max(op.Experts, 1))), nil
		}
		return k, nil
	case Shuffle:
		return compute("shuffle", false, 2*out.Bytes), nil
	case Pointwise, TorchOp:
		srcs[0].Coef = weight(op.Name, r)
		return compute(string(op.Kind), true, 2*out.Bytes), nil
	case Add:
		return compute("add", true, 3*out.Bytes), nil
	case AllReduce, AllToAll:
		c, err := cfg.Comm(op.Comm, r)
		if err != nil {
			return nil, err
		}
		cop := collectives.AllReduce
		if op.Kind == AllToAll {
			cop = collectives.AllToAll
		}
		return c.Collective(r, collectives.Call{Name: op.Name, Op: cop, Strategy: cfg.Strategy, In: ts[op.Inputs[0]], Out: out})
	}
	return nil, fmt.Errorf("op %q: unknown kind %q", op.Name, op.Kind)
}
