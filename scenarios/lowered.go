package scenarios

import (
	"fmt"
	"slices"
	"strings"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios/format"
	"github.com/collsim/collsim/scenarios/forms"
	"github.com/collsim/collsim/sim"
	"github.com/collsim/collsim/streamsched"
)

// Lowering a graph to programs (simctl show NAME --yaml --lowered). A
// scenario whose work is an op graph — the MoE form, or a file's own
// graph: ops — runs the host program streamsched.Lower makes from the
// graph, its stream placement and the knobs. Lowered writes that program
// out as an ordinary programs file: every kernel with its reads, writes,
// time and per-rank weight, every collective, every event record and wait
// of the stream helpers, the tensors and communicators. Loading the result
// gives the scenario's verdicts and trace hashes, variant by variant.
//
// The base program is the lowering under the file's own knobs. A knob the
// lowering consumed (placement, phase, tokens, layers, …) no longer
// exists in the programs file, so a variant that set one carries what it
// changed instead: a patch that moves, adds, removes or replaces ops and
// resizes tensors, from the base program to its own. A knob a programs
// file still reads (ranks, mode, strategy, workspace, replays, …) stays a
// set: of the variant.

// Lowered returns sc as a programs file (see above). A programs file is
// returned as it is. A Go form other than the MoE layer stack (the
// Torch-TensorRT engine builds, which fuse ops into one launch per engine)
// has no programs form: the error wraps [ErrNotExpressible].
func Lowered(sc *Scenario) (*Spec, error) {
	spec, err := SpecOf(sc)
	if err != nil {
		return nil, err
	}
	if spec.Graph == nil {
		return spec, nil
	}
	if b := spec.Graph.Builder; b != "" && b != "moe" {
		return nil, fmt.Errorf("scenario %q: form %q fuses ops into engines, one launch each, which a programs file cannot state: %w", sc.Name, b, ErrNotExpressible)
	}
	base, err := lowerConfig(spec, sc.Base)
	if err != nil {
		return nil, fmt.Errorf("scenario %q: %w", sc.Name, err)
	}
	out := &Spec{Name: spec.Name, Description: spec.Description, Base: sc.Base, Comms: base.comms, Tensors: base.tensors,
		Programs: []ProgramSpec{base.prog}, References: slices.Clone(spec.References), Refs: slices.Clone(spec.Refs),
		Compare: slices.Clone(spec.Compare)}
	out.Base.Patch = ""
	used := out.UsedKnobs()
	var patches [][]PatchSpec
	for _, v := range spec.Variants {
		cfg, err := sc.VariantConfig(v, nil)
		if err != nil {
			return nil, err
		}
		lv, err := lowerConfig(spec, cfg)
		if err != nil {
			return nil, fmt.Errorf("scenario %q variant %q: %w", sc.Name, v.Name, err)
		}
		nv := Variant{Name: v.Name, Expect: v.Expect, Doc: v.Doc}
		for _, kv := range v.Sets {
			if k, _, _ := strings.Cut(kv, "="); used[k] && k != "patch" {
				nv.Sets = append(nv.Sets, kv)
			}
		}
		// a smaller world's weight lists: the base's for the ranks it
		// lacks (unread), so an op the variant leaves alone stays alone
		for i := range lv.prog.Ops {
			op := &lv.prog.Ops[i]
			for _, b := range base.prog.Ops {
				if format.OpRef(&b) == format.OpRef(op) && len(op.Weights) > 0 && len(op.Weights) < len(b.Weights) && slices.Equal(op.Weights, b.Weights[:len(op.Weights)]) {
					op.Weights = slices.Clone(b.Weights)
				}
			}
		}
		patch, err := diffLowered(base, lv)
		if err != nil {
			return nil, fmt.Errorf("scenario %q variant %q: %w", sc.Name, v.Name, err)
		}
		if len(patch) > 0 {
			nv.Sets = append(nv.Sets, "patch="+v.Name)
		}
		out.Variants = append(out.Variants, nv)
		patches = append(patches, patch)
	}
	out.SetPatches(patches)
	return out, nil
}

// lowered is one configuration's lowering.
type lowered struct {
	tensors []TensorSpec
	comms   []CommSpec
	prog    ProgramSpec
}

// lowerConfig lowers the spec's graph under cfg: the graph and weights
// the scenario's build uses, placed and planned as streamsched.Lower does.
func lowerConfig(s *Spec, cfg Config) (*lowered, error) {
	var err error
	var (
		g      *streamsched.Graph
		weight func(op string, rank int) int64
		init   func(tensor string, rank, chunk int) (uint64, bool)
		lo     = &lowered{}
	)
	if s.Graph.Builder == "moe" {
		if cfg.DP > 1 {
			return nil, fmt.Errorf("dp = %d: each data-parallel replica has a communicator of its own, which this lowering does not write; lower at dp = 1", cfg.DP)
		}
		g = forms.MoEGraph(cfg)
		weight = func(op string, r int) int64 { return forms.MoEWeight(cfg, op, r) }
		init = func(string, int, int) (uint64, bool) { return 0, false }
		lo.comms = []CommSpec{{Name: "tp", Ranks: RankSet{All: true}}}
	} else {
		if s, err = s.Sized(cfg); err != nil {
			return nil, err
		}
		g = &streamsched.Graph{}
		produced := map[string]bool{}
		weights := map[string]int64{}
		for _, op := range s.Graph.Ops {
			produced[op.Output] = true
			g.Ops = append(g.Ops, streamsched.Op{Name: op.Name, Kind: streamsched.OpKind(op.Kind), Inputs: op.Inputs, Output: op.Output,
				M: op.M, K: op.K, N: op.N, Experts: op.Experts, Comm: op.Comm, Time: sim.Time(op.TimeNs)})
			if op.Weight != 0 {
				weights[op.Name] = op.Weight
			}
		}
		for _, t := range s.Tensors {
			g.Tensors = append(g.Tensors, streamsched.Tensor{Name: t.Name, Bytes: t.Bytes, Input: !produced[t.Name], Output: t.Output})
		}
		weight = func(op string, r int) int64 {
			if w, ok := weights[op]; ok {
				return w
			}
			return s.KernelWeight(op, r)
		}
		init = func(tensor string, r, c int) (uint64, bool) {
			if t := s.Tensor(tensor); t != nil {
				return t.InitValue(r, c)
			}
			return 0, false
		}
		lo.comms = slices.Clone(s.Comms)
	}
	sched, _, multi, err := forms.PlaceGraph(cfg, BuildOptions{}, g)
	if err != nil {
		return nil, err
	}
	n := cfg.World()
	for _, t := range g.Tensors {
		ts := TensorSpec{Name: t.Name, Bytes: t.Bytes, Output: t.Output && s.Graph.Builder == ""}
		if t.Input {
			// streamsched.Lower's inputs: the file's values, else chunk c+1
			rows := make([][]uint64, n)
			for r := range rows {
				for c := range cfg.Chunks {
					v, ok := init(t.Name, r, c)
					if !ok {
						v = uint64(c + 1)
					}
					rows[r] = append(rows[r], v)
				}
			}
			if allEqual(rows) {
				ts.Init = rows[0]
			} else {
				ts.InitPerRank = rows
			}
		}
		lo.tensors = append(lo.tensors, ts)
	}
	streams, events := streamsched.PlanStreams(), streamsched.PlanEvents()
	lo.prog = ProgramSpec{Ranks: RankSet{All: true}, Streams: streams, Events: events}
	ids := map[string]int{}
	plan := streamsched.Plan(sched, multi)
	for i, step := range plan {
		if step.Op < 0 {
			op := OpSpec{Kind: OpRecord, Name: events[step.Event], Stream: streams[step.Stream]}
			if step.Kind != ranks.Record {
				op.Kind = OpWait
			}
			// an id that says where it stands: before the next launch
			next := "end"
			for _, later := range plan[i+1:] {
				if later.Op >= 0 {
					next = g.Ops[later.Op].Name
					break
				}
			}
			op.ID = fmt.Sprintf("%s.%s.before.%s", op.Kind, op.Name, next)
			if ids[op.ID]++; ids[op.ID] > 1 {
				op.ID = fmt.Sprintf("%s.%d", op.ID, ids[op.ID])
			}
			lo.prog.Ops = append(lo.prog.Ops, op)
			continue
		}
		op, err := lowerGraphOp(&g.Ops[step.Op], g, n, weight)
		if err != nil {
			return nil, err
		}
		op.Stream = streams[step.Stream]
		lo.prog.Ops = append(lo.prog.Ops, op)
	}
	return lo, nil
}

// lowerGraphOp is graph op op as a program op: the kernel or collective
// streamsched.Lower launches for it, with each of n ranks' weights.
func lowerGraphOp(op *streamsched.Op, g *streamsched.Graph, n int, weight func(string, int) int64) (OpSpec, error) {
	out, _ := g.Tensor(op.Output)
	weights := func() []int64 {
		ws := make([]int64, n)
		for r := range ws {
			ws[r] = weight(op.Name, r)
		}
		return ws
	}
	k := OpSpec{Kind: OpKernel, Name: op.Name, Reads: slices.Clone(op.Inputs), Writes: []string{op.Output}}
	var src string
	switch {
	case op.Time > 0 && (op.Kind == streamsched.GEMM || op.Kind == streamsched.MoE):
		// one kernel of the op's own time, a GEMM's SM use and launch
		src = fmt.Sprintf("gemm(%d, %d, %d, %d)", op.M, op.K, op.N, op.Time)
		k.Weights = weights()
	case op.Kind == streamsched.GEMM:
		src = fmt.Sprintf("gemm(%d, %d, %d)", op.M, op.K, op.N)
		k.Weights = weights()
	case op.Kind == streamsched.MoE:
		src = fmt.Sprintf("moe(%d, %d, %d, %d)", op.M, op.K, op.N, max(op.Experts, 1))
		k.Weights = weights()
	case op.Kind == streamsched.Add:
		// streamsched's add: its output's elements, three times its bytes
		// moved (or the op's own time)
		src = fmt.Sprintf("elt(%d, %d)", out.Bytes/2, 3*out.Bytes)
		if op.Time > 0 {
			src = fmt.Sprintf("elt(%d, %d, %d)", out.Bytes/2, 3*out.Bytes, op.Time)
		}
		k.Weight = 1
	case op.Kind == streamsched.AllReduce:
		if len(op.Inputs) != 1 {
			return OpSpec{}, fmt.Errorf("op %q: an all-reduce reads one tensor, not %d", op.Name, len(op.Inputs))
		}
		return OpSpec{Kind: OpAllReduce, Name: op.Name, Comm: op.Comm, In: op.Inputs[0], Out: op.Output}, nil
	default:
		return OpSpec{}, fmt.Errorf("op %q: kind %q has no program form", op.Name, op.Kind)
	}
	e, _, err := ParseExpr(src)
	if err != nil {
		return OpSpec{}, fmt.Errorf("op %q: %w", op.Name, err)
	}
	k.TimeExpr = e
	if len(k.Weights) > 0 && allSame(k.Weights) {
		k.Weight, k.Weights = k.Weights[0], nil
	}
	return k, nil
}

func allSame(ws []int64) bool {
	for _, w := range ws {
		if w != ws[0] {
			return false
		}
	}
	return true
}

func allEqual(rows [][]uint64) bool {
	for _, r := range rows {
		if !slices.Equal(r, rows[0]) {
			return false
		}
	}
	return true
}

// diffLowered is the patch that turns base's lowering into v's: the
// tensors v sizes otherwise resized, then format.DiffOps of the programs
// (which checks that its patch gives v's program exactly).
func diffLowered(base, v *lowered) ([]PatchSpec, error) {
	if len(base.tensors) != len(v.tensors) || len(base.comms) != len(v.comms) {
		return nil, fmt.Errorf("its tensors or communicators differ from the base configuration's in number; a patch cannot add a tensor")
	}
	var steps []PatchSpec
	for i := range base.tensors {
		b, t := base.tensors[i], v.tensors[i]
		if b.Name != t.Name || !slices.Equal(b.Init, t.Init) || len(b.InitPerRank) != len(t.InitPerRank) || b.Output != t.Output {
			return nil, fmt.Errorf("tensor %q differs from the base configuration's in more than its size", t.Name)
		}
		for r := range b.InitPerRank {
			if !slices.Equal(b.InitPerRank[r], t.InitPerRank[r]) {
				return nil, fmt.Errorf("tensor %q's values differ from the base configuration's", t.Name)
			}
		}
		if b.Bytes != t.Bytes {
			steps = append(steps, PatchSpec{Verb: "resize", Ref: t.Name, Bytes: t.Bytes, Program: -1})
		}
	}
	for i := range base.comms {
		if base.comms[i].Name != v.comms[i].Name {
			return nil, fmt.Errorf("its communicators differ from the base configuration's")
		}
	}
	ops, err := format.DiffOps(base.prog.Ops, v.prog.Ops)
	if err != nil {
		return nil, err
	}
	return append(steps, ops...), nil
}
