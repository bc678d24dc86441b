package streamsched

import (
	"fmt"
	"hash/fnv"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
)

// LowerConfig is what lowering needs besides the graph and its schedule.
type LowerConfig struct {
	HW ranks.Profile
	// MultiStream false turns every stream helper into a no-op, as the
	// framework's disable_multi_stream flag does on the piecewise (prefill)
	// CUDA-graph path.
	MultiStream bool
	Strategy    collectives.Strategy
	Chunks      int
	// Init gives the initial value of graph input tensor on rank at chunk.
	Init func(tensor string, rank, chunk int) uint64
	// Weight gives the integer weight of a linear op on rank; nil uses
	// DefaultWeight.
	Weight func(op string, rank int) int64
	// CommFor resolves an op's communicator name on a rank (a name can stand
	// for one group per replica, as "tp" does with data parallelism); nil
	// looks the name up in the comms map.
	CommFor func(name string, rank int) (*collectives.Comm, bool)
	// FoldOnto, when set, names for each rank an earlier rank whose
	// program it may run over its own memory (ranks.World.Fold: one data-
	// parallel replica's programs for all). Fold checks that the two
	// programs agree; a rank that names itself keeps its own.
	FoldOnto func(rank int) int
}

// DefaultWeight is a deterministic small weight per (op, rank), distinct
// across ranks of one op, so that mixed-up contributions show in values.
func DefaultWeight(op string, rank int) int64 {
	h := fnv.New32a()
	h.Write([]byte(op))
	return 2 + int64((h.Sum32()+uint32(rank))%89)
}

// Lowered is a graph lowered onto a world.
type Lowered struct {
	// Tensors[rank][name] is the buffer for a graph tensor.
	Tensors []map[string]*ranks.Buffer
	// Strategies records the concrete strategy each all-reduce got.
	Strategies map[string]collectives.Strategy
}

// Lower allocates every tensor of g on every rank of w and sets each rank's
// host program from schedule s: ops are launched on the current stream; the
// markers follow AutoDeploy's CudaStreamManager (one main_event and one
// aux_event per device, reused by every layer; begin_aux records main_event
// on the caller stream, switches to aux, and makes aux wait on it; end_aux
// records aux_event on aux and switches back; wait_aux makes the current
// stream wait on aux_event).
func Lower(w *ranks.World, g *Graph, s *Schedule, comms map[string]*collectives.Comm, cfg LowerConfig) (*Lowered, error) {
	weight := cfg.Weight
	if weight == nil {
		weight = DefaultWeight
	}
	lo := &Lowered{Strategies: map[string]collectives.Strategy{}, Tensors: allocTensors(w, g, cfg.Chunks, cfg.Init)}
	for r := 0; r < w.N; r++ {
		ts := lo.Tensors[r]
		p := &ranks.Program{Streams: []string{"main", "aux"}, Events: []string{"main_event", "aux_event"}}
		const main, aux, mainEv, auxEv = 0, 1, 0, 1
		cur, caller := main, main
		for _, st := range s.Steps {
			if st.Op < 0 {
				if !cfg.MultiStream {
					continue
				}
				switch st.Marker {
				case BeginAux:
					caller = cur
					p.Ops = append(p.Ops,
						ranks.HostOp{Kind: ranks.Record, Stream: caller, Event: mainEv},
						ranks.HostOp{Kind: ranks.Wait, Stream: aux, Event: mainEv})
					cur = aux
				case EndAux:
					p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Record, Stream: cur, Event: auxEv})
					cur = caller
				case WaitAux:
					p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Wait, Stream: cur, Event: auxEv})
				}
				continue
			}
			op := g.Ops[st.Op]
			ks, err := kernels(r, op, ts, comms, cfg, weight, lo)
			if err != nil {
				return nil, err
			}
			for _, k := range ks {
				p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: cur, Kernel: k})
			}
		}
		w.SetProgram(r, p)
		if cfg.FoldOnto != nil {
			if q := cfg.FoldOnto(r); q >= 0 && q < r {
				// Folded now, rank by rank: the rank's own kernels
				// are garbage before the next rank's are made.
				w.Fold(r, q)
			}
		}
	}
	return lo, nil
}

// allocTensors allocates every tensor of g on every rank of w and sets the
// graph inputs from init (chunk c+1 when init is nil).
func allocTensors(w *ranks.World, g *Graph, chunks int, init func(tensor string, rank, chunk int) uint64) []map[string]*ranks.Buffer {
	var out []map[string]*ranks.Buffer
	for r := 0; r < w.N; r++ {
		ts := map[string]*ranks.Buffer{}
		for _, t := range g.Tensors {
			b := w.Alloc(r, t.Name, t.Bytes, chunks)
			b.Output = t.Output
			if t.Input {
				name := t.Name
				w.Init(b, func(c int) uint64 {
					if init != nil {
						return init(name, r, c)
					}
					return uint64(c + 1)
				})
			}
			ts[t.Name] = b
		}
		out = append(out, ts)
	}
	return out
}

// kernels is what the host launches for op on rank r, in order on the
// current stream: one kernel, or a split MULTIMEM all-reduce's three
// (collectives.Comm.Launches).
func kernels(r int, op Op, ts map[string]*ranks.Buffer, comms map[string]*collectives.Comm, cfg LowerConfig, weight func(string, int) int64, lo *Lowered) ([]*ranks.KernelSpec, error) {
	if op.Kind == AllReduce {
		c, ok := comms[op.Comm]
		if cfg.CommFor != nil {
			c, ok = cfg.CommFor(op.Comm, r)
		}
		if !ok {
			return nil, fmt.Errorf("op %q: unknown communicator %q", op.Name, op.Comm)
		}
		out := ts[op.Output]
		s := collectives.Resolve(cfg.Strategy, cfg.HW.Arch, c.Size(), out.Bytes)
		lo.Strategies[op.Name] = s
		return c.Launches(r, collectives.Call{Name: op.Name, Op: collectives.AllReduce, Strategy: s, In: ts[op.Inputs[0]], Out: out})
	}
	k, err := kernel(r, op, ts, cfg, weight)
	if err != nil {
		return nil, err
	}
	return []*ranks.KernelSpec{k}, nil
}

// kernel is op's one kernel on rank r (every kind but all-reduce).
func kernel(r int, op Op, ts map[string]*ranks.Buffer, cfg LowerConfig, weight func(string, int) int64) (*ranks.KernelSpec, error) {
	out := ts[op.Output]
	srcs := make([]ranks.Src, len(op.Inputs))
	for i, in := range op.Inputs {
		srcs[i] = ranks.Src{Buf: ts[in], Coef: 1}
	}
	hw := cfg.HW
	switch op.Kind {
	case GEMM, MoE:
		srcs[0].Coef = weight(op.Name, r)
		sh := hw.Share()
		if op.Kind == MoE {
			return moeKernel(hw, op, out, srcs), nil
		}
		return &ranks.KernelSpec{Name: op.Name, Kind: string(op.Kind), Instrs: []ranks.Instr{{
			Op: ranks.OpCompute, Phase: string(op.Kind), Dst: out, N: out.Chunks(), Srcs: srcs, Fresh: true, Dur: hw.GEMMTime(op.M, op.K, op.N)}},
			Loads: []ranks.Load{sh.GEMMLoad(op.M, op.K, op.N)}}, nil
	case Add:
		dur := hw.KStart + ranks.Bytes(3*out.Bytes, hw.HBM)
		return &ranks.KernelSpec{Name: op.Name, Kind: string(op.Kind), Instrs: []ranks.Instr{{
			Op: ranks.OpCompute, Phase: "add", Dst: out, N: out.Chunks(), Srcs: srcs, Fresh: true, Dur: dur}},
			Loads: []ranks.Load{hw.Share().EltLoad(out.Bytes/2, 3*out.Bytes)}}, nil
	}
	return nil, fmt.Errorf("op %q: unknown kind %q", op.Name, op.Kind)
}

// moeKernel is the routed MoE at decode as TensorRT-LLM runs it: the
// router's top-k, the expansion, two grouped GEMMs over every active
// expert with the gated activation between, and the finalize (ranks/hw.go
// MeasuredMoEDecode, measured on the H200). The computation (reading the
// input and the logits, writing the output) is the first micro-op, as
// for any kernel; the others carry the remaining kernels' durations and
// loads, each waiting for SMs behind the kernels of other streams that
// were ready before it (ranks/share.go).
func moeKernel(hw ranks.Profile, op Op, out *ranks.Buffer, srcs []ranks.Src) *ranks.KernelSpec {
	parts := hw.MoEDecode(op.M, op.K, op.N, max(op.Experts, 1))
	k := &ranks.KernelSpec{Name: op.Name, Kind: string(op.Kind)}
	for i, p := range parts {
		in := ranks.Instr{Op: ranks.OpDelay, Phase: p.Name, Dur: p.Dur}
		if i == 0 {
			in = ranks.Instr{Op: ranks.OpCompute, Phase: p.Name, Dst: out, N: out.Chunks(), Srcs: srcs, Fresh: true, Dur: p.Dur}
		}
		k.Instrs = append(k.Instrs, in)
		k.Loads = append(k.Loads, ranks.Load{SMs: p.SMs})
	}
	return k
}
