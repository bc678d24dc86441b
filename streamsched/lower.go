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
	// Tensors are every rank's buffers for the graph's tensors.
	Tensors *Tensors
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
	if cfg.Weight == nil {
		cfg.Weight = DefaultWeight
	}
	lo := &Lowered{Strategies: map[string]collectives.Strategy{}, Tensors: allocTensors(w, g, cfg.Chunks, cfg.Init)}
	l := lowering{g: g, comms: comms, cfg: cfg, lo: lo, moe: make([][]ranks.MoEPart, len(g.Ops)), opTensors: make([][]int, len(g.Ops))}
	for i, op := range g.Ops {
		l.opTensors[i] = append(l.opTensors[i], lo.Tensors.place(op.Output))
		for _, in := range op.Inputs {
			l.opTensors[i] = append(l.opTensors[i], lo.Tensors.place(in))
		}
	}
	// A rank to be folded is built in the storage the last folded rank
	// left: its kernels (store) and its host ops (spare). Every rank
	// allocates hint host ops: the longest program so far.
	var store *ranks.KernelStore
	var spare []ranks.HostOp
	hint := 0
	plan := Plan(s, cfg.MultiStream)
	for r := 0; r < w.N; r++ {
		ts := lo.Tensors.rank(r)
		q := r
		if cfg.FoldOnto != nil {
			q = cfg.FoldOnto(r)
		}
		folds := q >= 0 && q < r
		p := &ranks.Program{Streams: PlanStreams(), Events: PlanEvents()}
		var st *ranks.KernelStore
		if folds {
			if store == nil {
				store = new(ranks.KernelStore)
			}
			st, p.Ops = store, spare[:0]
		}
		if cap(p.Ops) < hint {
			p.Ops = make([]ranks.HostOp, 0, hint)
		}
		for _, step := range plan {
			if step.Op < 0 {
				p.Ops = append(p.Ops, ranks.HostOp{Kind: step.Kind, Stream: step.Stream, Event: step.Event})
				continue
			}
			ks, err := l.kernels(l.ks[:0], st, r, step.Op, ts)
			if err != nil {
				return nil, err
			}
			l.ks = ks
			for _, k := range ks {
				p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: step.Stream, Kernel: k})
			}
		}
		hint = max(hint, len(p.Ops))
		w.SetProgram(r, p)
		if folds {
			// Folded now, rank by rank: the rank's own kernels are
			// garbage then, and the next rank's are made in their place.
			if w.Fold(r, q) {
				st.Reset()
				spare = p.Ops
			} else {
				store, spare = nil, nil // the rank keeps them
			}
		}
	}
	return lo, nil
}

// PlanStep is one host step of a placed schedule: launch graph op Op (its
// kernels, on Stream), or, with Op < 0, record or wait Event on Stream.
type PlanStep struct {
	Op     int
	Kind   ranks.HostOpKind // Launch for an op; Record or Wait
	Stream int              // index into PlanStreams
	Event  int              // index into PlanEvents
}

// PlanStreams and PlanEvents are the streams and events of every rank's
// program Lower makes: AutoDeploy's main and aux streams and the two
// events its CudaStreamManager keeps per device.
func PlanStreams() []string { return []string{"main", "aux"} }

// PlanEvents: see [PlanStreams].
func PlanEvents() []string { return []string{"main_event", "aux_event"} }

// Plan is the host steps of s on every rank, in issue order: the ops on the
// stream current when they are issued and the stream helpers as event
// records and waits (see [Lower]); with multi false every helper is a
// no-op and every op runs on main. Lower launches exactly these steps, and
// a scenario file written from a graph (simctl show --lowered) lists them.
func Plan(s *Schedule, multi bool) []PlanStep {
	const main, aux, mainEv, auxEv = 0, 1, 0, 1
	var out []PlanStep
	cur, caller := main, main
	for _, step := range s.Steps {
		if step.Op >= 0 {
			out = append(out, PlanStep{Op: step.Op, Kind: ranks.Launch, Stream: cur})
			continue
		}
		if !multi {
			continue
		}
		switch step.Marker {
		case BeginAux:
			caller = cur
			out = append(out,
				PlanStep{Op: -1, Kind: ranks.Record, Stream: caller, Event: mainEv},
				PlanStep{Op: -1, Kind: ranks.Wait, Stream: aux, Event: mainEv})
			cur = aux
		case EndAux:
			out = append(out, PlanStep{Op: -1, Kind: ranks.Record, Stream: cur, Event: auxEv})
			cur = caller
		case WaitAux:
			out = append(out, PlanStep{Op: -1, Kind: ranks.Wait, Stream: cur, Event: auxEv})
		}
	}
	return out
}

// MoEKernel is the routed-experts kernel of the op named name at decode
// (parts from ranks.Profile.MoEDecode) writing out from srcs: see moeKernel.
func MoEKernel(name string, out *ranks.Buffer, srcs []ranks.Src, parts []ranks.MoEPart) *ranks.KernelSpec {
	return moeKernel(nil, &Op{Name: name, Kind: MoE}, out, srcs, parts)
}

// lowering is what Lower keeps while it makes kernels.
type lowering struct {
	g     *Graph
	comms map[string]*collectives.Comm
	cfg   LowerConfig
	lo    *Lowered
	moe   [][]ranks.MoEPart   // per MoE op, its kernels (the same on every rank)
	ks    []*ranks.KernelSpec // kernels' result, reused
	// per op, the places of its output and inputs among a rank's
	// tensors (Tensors.place)
	opTensors [][]int
}

// Tensors are a graph's tensors' buffers on every rank of a world.
type Tensors struct {
	index  map[string]int // a tensor's name → its place in the graph's list
	n      int            // tensors per rank
	nRanks int
	bufs   []*ranks.Buffer // rank r's at [r·n, (r+1)·n)
}

// Of returns rank's buffer for the tensor named name (nil for none).
func (t *Tensors) Of(rank int, name string) *ranks.Buffer {
	return at(t.rank(rank), t.place(name))
}

// place is the place of the tensor named name among a rank's (the last
// of that name); -1 for none.
func (t *Tensors) place(name string) int {
	if i, ok := t.index[name]; ok {
		return i
	}
	return -1
}

// rank is rank's buffers, by place.
func (t *Tensors) rank(r int) []*ranks.Buffer { return t.bufs[r*t.n : (r+1)*t.n] }

// maps is every rank's buffers by name.
func (t *Tensors) maps() []map[string]*ranks.Buffer {
	out := make([]map[string]*ranks.Buffer, 0, t.nRanks)
	for r := range t.nRanks {
		m := make(map[string]*ranks.Buffer, len(t.index))
		for name, i := range t.index {
			m[name] = t.rank(r)[i]
		}
		out = append(out, m)
	}
	return out
}

// at is ts[i], or nil for i = -1.
func at(ts []*ranks.Buffer, i int) *ranks.Buffer {
	if i < 0 {
		return nil
	}
	return ts[i]
}

// allocTensors allocates every tensor of g on every rank of w and sets the
// graph inputs from init (chunk c+1 when init is nil).
func allocTensors(w *ranks.World, g *Graph, chunks int, init func(tensor string, rank, chunk int) uint64) *Tensors {
	n := len(g.Tensors)
	t := &Tensors{index: make(map[string]int, n), n: n, nRanks: w.N, bufs: make([]*ranks.Buffer, 0, w.N*n)}
	for i, x := range g.Tensors {
		t.index[x.Name] = i
	}
	for r := 0; r < w.N; r++ {
		for _, x := range g.Tensors {
			b := w.Alloc(r, x.Name, x.Bytes, chunks)
			b.Output = x.Output
			if x.Input {
				name := x.Name
				w.Init(b, func(c int) uint64 {
					if init != nil {
						return init(name, r, c)
					}
					return uint64(c + 1)
				})
			}
			t.bufs = append(t.bufs, b)
		}
	}
	return t
}

// kernels appends to ks what the host launches for op i on rank r, in
// order on the current stream: one kernel, or a split MULTIMEM all-reduce's
// three (collectives.Comm.AppendLaunches), made in st.
func (l *lowering) kernels(ks []*ranks.KernelSpec, st *ranks.KernelStore, r, i int, ts []*ranks.Buffer) ([]*ranks.KernelSpec, error) {
	op, cfg, places := &l.g.Ops[i], &l.cfg, l.opTensors[i]
	if op.Kind == AllReduce {
		c, ok := l.comms[op.Comm]
		if cfg.CommFor != nil {
			c, ok = cfg.CommFor(op.Comm, r)
		}
		if !ok {
			return nil, fmt.Errorf("op %q: unknown communicator %q", op.Name, op.Comm)
		}
		out := at(ts, places[0])
		s := collectives.Resolve(cfg.Strategy, cfg.HW.Arch, c.Size(), out.Bytes)
		l.lo.Strategies[op.Name] = s
		return c.AppendLaunches(ks, st, r, collectives.Call{Name: op.Name, Op: collectives.AllReduce, Strategy: s, In: at(ts, places[1]), Out: out})
	}
	if op.Kind == MoE && l.moe[i] == nil && op.Time == 0 {
		l.moe[i] = cfg.HW.MoEDecode(op.M, op.K, op.N, max(op.Experts, 1))
	}
	k, err := kernel(st, r, op, ts, places, cfg, l.moe[i])
	if err != nil {
		return nil, err
	}
	return append(ks, k), nil
}

// kernel is op's one kernel on rank r (every kind but all-reduce), made in
// st: its output and inputs are ts at places; a MoE op's kernels are parts.
func kernel(st *ranks.KernelStore, r int, op *Op, ts []*ranks.Buffer, places []int, cfg *LowerConfig, parts []ranks.MoEPart) (*ranks.KernelSpec, error) {
	out := at(ts, places[0])
	srcs := st.Srcs(len(op.Inputs))
	for i := range op.Inputs {
		srcs[i] = ranks.Src{Buf: at(ts, places[1+i]), Coef: 1}
	}
	hw := cfg.HW
	switch op.Kind {
	case GEMM, MoE:
		srcs[0].Coef = cfg.Weight(op.Name, r)
		if op.Kind == MoE && op.Time == 0 {
			return moeKernel(st, op, out, srcs, parts), nil
		}
		k, _ := st.Kernel()
		*k = ranks.KernelSpec{Name: op.Name, Kind: string(op.Kind), Instrs: st.Instrs(1), Loads: st.Loads(1)}
		k.Instrs[0] = ranks.Instr{Op: ranks.OpCompute, Phase: string(op.Kind), Dst: out, N: out.Chunks(), Srcs: srcs, Fresh: true, Dur: hw.GEMMTime(op.M, op.K, op.N)}
		k.Loads[0] = hw.Share().GEMMLoad(op.M, op.K, op.N)
		if op.Time > 0 {
			k.Instrs[0].Dur = op.Time
		}
		return k, nil
	case Add:
		k, _ := st.Kernel()
		*k = ranks.KernelSpec{Name: op.Name, Kind: string(op.Kind), Instrs: st.Instrs(1), Loads: st.Loads(1)}
		k.Instrs[0] = ranks.Instr{Op: ranks.OpCompute, Phase: "add", Dst: out, N: out.Chunks(), Srcs: srcs, Fresh: true, Dur: hw.KStart + ranks.Bytes(3*out.Bytes, hw.HBM)}
		k.Loads[0] = hw.Share().EltLoad(out.Bytes/2, 3*out.Bytes)
		if op.Time > 0 {
			k.Instrs[0].Dur = op.Time
		}
		return k, nil
	}
	return nil, fmt.Errorf("op %q: unknown kind %q", op.Name, op.Kind)
}

// moeKernel is the routed MoE at decode as TensorRT-LLM runs it, parts
// (ranks.Profile.MoEDecode): the router's top-k, the expansion, two
// grouped GEMMs over every active expert with the gated activation
// between, and the finalize (ranks/gpu/hw.go MeasuredMoEDecode, measured on
// the H200). The computation (reading the input and the logits, writing
// the output) is the first micro-op, as for any kernel; the others carry
// the remaining kernels' durations and loads, each waiting for SMs behind
// the kernels of other streams that were ready before it
// (ranks/share.go).
func moeKernel(st *ranks.KernelStore, op *Op, out *ranks.Buffer, srcs []ranks.Src, parts []ranks.MoEPart) *ranks.KernelSpec {
	k, _ := st.Kernel()
	*k = ranks.KernelSpec{Name: op.Name, Kind: string(op.Kind), Instrs: st.Instrs(len(parts)), Loads: st.Loads(len(parts))}
	for i, p := range parts {
		in := ranks.Instr{Op: ranks.OpDelay, Phase: p.Name, Dur: p.Dur}
		if i == 0 {
			in = ranks.Instr{Op: ranks.OpCompute, Phase: p.Name, Dst: out, N: out.Chunks(), Srcs: srcs, Fresh: true, Dur: p.Dur}
		}
		k.Instrs[i] = in
		k.Loads[i] = ranks.Load{SMs: p.SMs}
	}
	return k
}
