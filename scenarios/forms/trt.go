package forms

import (
	"fmt"
	"strings"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios/knobs"
	"github.com/collsim/collsim/sim"
	"github.com/collsim/collsim/streamsched"
)

// The Torch-TensorRT fused-collective seed
// (shared/seeds/torch-tensorrt-distcollective-fused-foreignnode.txt): TRT 11
// native collectives fused into Myelin ForeignNodes fail to build; engines
// that hold a collective and GEMMs are not multi-device, so the
// communicator binding is rejected and the collective does nothing. The
// engine model is streamsched.PartitionEngines.

// myelinMinOps stands for "a large graph": engines of at least this many
// ops are handed to Myelin (the seed sees the fusion on a 48-layer DiT, not
// on a small test module).
const myelinMinOps = 40

// engineOptions maps the engines knob to the builder and partitioner.
func engineOptions(cfg knobs.Config) (streamsched.EngineOptions, error) {
	o := streamsched.EngineOptions{MyelinMinOps: myelinMinOps}
	switch cfg.Engines {
	case "fused", "per-layer", "standalone":
	case "workaround":
		o.TorchExecuted = []streamsched.OpKind{streamsched.AllReduce, streamsched.AllToAll}
	case "keep-standalone":
		o.Standalone = true
	case "myelin-fixed":
		o.MyelinComm = true
	case "ideal":
		o.MyelinComm, o.PromoteAll = true, true
	default:
		return o, fmt.Errorf("%w: engines=%q: this scenario does not support it", knobs.ErrBadKnob, cfg.Engines)
	}
	return o, nil
}

// ditGraph is a DiT-like stack: per layer, Ulysses attention (QKV GEMM,
// reshape/unsqueeze, all_to_all over SP, attention, all_to_all back,
// reshape, output projection, residual) and a TP MLP (up, GELU, down,
// all-reduce over TP, residual). collectivesOnly keeps just the two
// collectives (the seed's standalone test).
func ditGraph(layers int, tokens, hidden int64, sp, tp int64, collectivesOnly bool) *streamsched.Graph {
	g := &streamsched.Graph{}
	act := tokens / sp * hidden * 2
	g.Tensors = append(g.Tensors, streamsched.Tensor{Name: "x", Bytes: act, Input: true})
	in := "x"
	for l := range layers {
		p := fmt.Sprintf("L%d.", l)
		op := func(name string, kind streamsched.OpKind, inputs []string, bytes int64, mod func(*streamsched.Op)) string {
			out := p + name
			g.Tensors = append(g.Tensors, streamsched.Tensor{Name: out, Bytes: bytes})
			o := streamsched.Op{Name: p + name, Kind: kind, Inputs: inputs, Output: out, Layer: l}
			if mod != nil {
				mod(&o)
			}
			g.Ops = append(g.Ops, o)
			return out
		}
		gemm := func(k, n int64) func(*streamsched.Op) {
			return func(o *streamsched.Op) { o.M, o.K, o.N = tokens/sp, k, n }
		}
		comm := func(c string) func(*streamsched.Op) { return func(o *streamsched.Op) { o.Comm = c } }
		if collectivesOnly {
			a := op("all_to_all", streamsched.AllToAll, []string{in}, act, comm("sp"))
			in = op("all_reduce", streamsched.AllReduce, []string{a}, act, comm("tp"))
			g.Tensors[len(g.Tensors)-1].Output = true
			continue
		}
		qkv := op("qkv", streamsched.GEMM, []string{in}, act, gemm(hidden, hidden/tp))
		r1 := op("qkv_reshape", streamsched.Shuffle, []string{qkv}, act, nil)
		u1 := op("qkv_unsqueeze", streamsched.Shuffle, []string{r1}, act, nil)
		a1 := op("a2a_in", streamsched.AllToAll, []string{u1}, act, comm("sp"))
		r2 := op("a2a_in_reshape", streamsched.Shuffle, []string{a1}, act, nil)
		at := op("attn", streamsched.Pointwise, []string{r2}, act, nil)
		r3 := op("attn_reshape", streamsched.Shuffle, []string{at}, act, nil)
		a2 := op("a2a_out", streamsched.AllToAll, []string{r3}, act, comm("sp"))
		r4 := op("proj_out_reshape_copy", streamsched.Shuffle, []string{a2}, act, nil)
		pr := op("proj_out", streamsched.GEMM, []string{r4}, act, gemm(hidden/tp, hidden))
		h := op("res1", streamsched.Add, []string{pr, in}, act, nil)
		up := op("mlp_up", streamsched.GEMM, []string{h}, 4*act/tp, gemm(hidden, 4*hidden/tp))
		ge := op("gelu", streamsched.Pointwise, []string{up}, 4*act/tp, nil)
		dn := op("mlp_down", streamsched.GEMM, []string{ge}, act, gemm(4*hidden/tp, hidden))
		ar := op("mlp_all_reduce", streamsched.AllReduce, []string{dn}, act, comm("tp"))
		in = op("res2", streamsched.Add, []string{ar, h}, act, nil)
		g.Tensors[len(g.Tensors)-1].Output = true
	}
	return g
}

// moeEPGraph is the Qwen3-like MoE stack of moe-ep-dropped-allreduce.
func moeEPGraph(layers int, tokens, hidden int64) *streamsched.Graph {
	g := &streamsched.Graph{}
	act := tokens * hidden * 2
	g.Tensors = append(g.Tensors, streamsched.Tensor{Name: "x", Bytes: act, Input: true})
	in := "x"
	const experts, inter = 128, 768
	for l := range layers {
		p := fmt.Sprintf("layers.%d.", l)
		op := func(name string, kind streamsched.OpKind, inputs []string, bytes, m, k, n int64) string {
			out := p + name
			g.Tensors = append(g.Tensors, streamsched.Tensor{Name: out, Bytes: bytes})
			g.Ops = append(g.Ops, streamsched.Op{Name: out, Kind: kind, Inputs: inputs, Output: out, Layer: l, M: m, K: k, N: n, Comm: "ep"})
			return out
		}
		logits := op("router", streamsched.GEMM, []string{in}, tokens*experts*2, tokens, hidden, experts)
		topk := op("topk", streamsched.TorchOp, []string{logits}, tokens*8*2, 0, 0, 0)
		up := op("experts_up", streamsched.GEMM, []string{in}, tokens*inter*2, tokens*8/2, hidden, 2*inter)
		down := op("experts_down", streamsched.GEMM, []string{up}, act, tokens*8/2, inter, hidden)
		comb := op("combine", streamsched.TorchOp, []string{down, topk}, act, 0, 0, 0)
		ar := op("all_reduce", streamsched.AllReduce, []string{comb}, act, 0, 0, 0)
		in = op("residual", streamsched.Add, []string{ar, in}, act, 0, 0, 0)
	}
	g.Tensors = append(g.Tensors, streamsched.Tensor{Name: "final_norm", Bytes: act, Output: true})
	g.Ops = append(g.Ops, streamsched.Op{Name: "final_norm", Kind: streamsched.Pointwise, Inputs: []string{in}, Output: "final_norm", Layer: layers - 1})
	return g
}

// groupComms makes sub-communicators: for each logical name, the groups
// that partition the world.
type groupComms struct {
	w      *ranks.World
	hw     ranks.Profile
	chunks int
	groups map[string][][]int
	made   map[string]*collectives.Comm
}

func (gc *groupComms) comm(name string, rank int) (*collectives.Comm, error) {
	for i, g := range gc.groups[name] {
		for _, r := range g {
			if r != rank {
				continue
			}
			key := fmt.Sprintf("%s%d", name, i)
			c, ok := gc.made[key]
			if !ok {
				c = collectives.NewComm(gc.w, key, g, collectives.SharedWorkspace, gc.hw, gc.chunks)
				gc.made[key] = c
			}
			return c, nil
		}
	}
	return nil, fmt.Errorf("no communicator %q holds rank %d", name, rank)
}

func buildEngines(cfg knobs.Config, opt check.BuildOptions, eng *sim.Engine, g *streamsched.Graph, groups map[string][][]int) (*check.Built, error) {
	hw, err := cfg.Profile()
	if err != nil {
		return nil, err
	}
	strat, err := concreteStrategy(cfg, hw, cfg.TP, 1<<20)
	if err != nil {
		return nil, err
	}
	eo, err := engineOptions(cfg)
	if err != nil {
		return nil, err
	}
	var part *streamsched.Partition
	if !opt.Reference {
		if part, err = streamsched.PartitionEngines(g, eo); err != nil {
			return nil, err
		}
	}
	// Every submodule call (engine or PyTorch op) costs the host a round
	// trip; eager PyTorch (the reference) costs a kernel launch per op.
	launch := hw.EngineCall
	if opt.Reference {
		launch = hw.Launch
	}
	wc := ranks.Config{Mode: ranks.Eager, LaunchCost: launch, EventCost: hw.EventOp, Timeline: opt.Timeline, SMs: hw.SMs, FineSteps: cfg.FineSteps}
	wc.Jitter, wc.HostJitter = knobs.JitterTables(cfg.Jitter) // its host costs are engine calls, not eager ops
	w := ranks.NewWorld(cfg.TP, wc, eng)
	gc := &groupComms{w: w, hw: hw, chunks: cfg.Chunks, groups: groups, made: map[string]*collectives.Comm{}}
	b := &check.Built{World: w}
	if part != nil && len(part.BuildErrors) > 0 {
		// The engine never builds: nothing runs.
		b.Findings = append(b.Findings, part.BuildErrors...)
		for i := range b.Findings {
			b.Findings[i].Ranks = allRanks(cfg.TP)
		}
		b.Notes = append(b.Notes, fmt.Sprintf("%s, %d failed to build", plural(len(part.Engines), "engine"), len(part.BuildErrors)))
		return b, nil
	}
	run, err := streamsched.LowerEngines(w, g, part, streamsched.EngineLowerConfig{HW: hw, Chunks: cfg.Chunks, Comm: gc.comm, Strategy: strat})
	if err != nil {
		return nil, err
	}
	for r := range cfg.TP {
		var cmp []*ranks.Buffer
		for _, op := range g.Ops {
			cmp = append(cmp, run.Tensors[r][op.Output])
		}
		b.Compare = append(b.Compare, cmp)
	}
	if part != nil {
		calls, md, coll := len(part.Segments), 0, 0
		for _, e := range part.Engines {
			if len(e.Collectives) > 0 {
				coll++
				if e.MultiDevice {
					md++
				}
			}
		}
		b.Notes = append(b.Notes, fmt.Sprintf("%d submodule calls per step: %d TensorRT engines (%d hold collectives, %d of them multi-device), %d PyTorch ops",
			calls, len(part.Engines), coll, md, calls-len(part.Engines)))
		binds, ok := 0, 0
		for _, e := range part.Engines {
			if len(e.Collectives) > 0 {
				binds += cfg.TP
				ok += cfg.TP - len(run.Rejected[e.Name])
			}
		}
		if binds > 0 {
			b.Notes = append(b.Notes, fmt.Sprintf("setCommunicator: %d of %d bind attempts succeed", ok, binds))
		}
		var rej []string
		for _, e := range part.Engines {
			if rs := run.Rejected[e.Name]; len(rs) > 0 && len(rej) < 3 {
				rej = append(rej, fmt.Sprintf("%s (%d GEMMs + %d collectives) on ranks %v", e.Name, e.GEMMs, len(e.Collectives), rs))
			}
		}
		if len(rej) > 0 {
			b.Notes = append(b.Notes, "not multi-device, binding rejected (mIsMdEngine == false): "+strings.Join(rej, "; ")+"…")
		}
	}
	return b, nil
}

func buildDiT(cfg knobs.Config, opt check.BuildOptions, eng *sim.Engine) (*check.Built, error) {
	if cfg.TP != 4 {
		return nil, fmt.Errorf("%w: tp=%d: trt-fused-collective runs SP=2 × TP=2 on 4 ranks", knobs.ErrBadKnob, cfg.TP)
	}
	if cfg.Chunks%2 != 0 {
		return nil, fmt.Errorf("%w: chunks=%d: all_to_all over SP=2 needs an even chunk count", knobs.ErrBadKnob, cfg.Chunks)
	}
	g := ditGraph(cfg.Layers, cfg.Tokens, cfg.Hidden, 2, 2, cfg.Engines == "standalone")
	// TP groups {0,1}, {2,3}; SP groups {0,2}, {1,3}.
	groups := map[string][][]int{"tp": {{0, 1}, {2, 3}}, "sp": {{0, 2}, {1, 3}}}
	return buildEngines(cfg, opt, eng, g, groups)
}

func buildMoEEP(cfg knobs.Config, opt check.BuildOptions, eng *sim.Engine) (*check.Built, error) {
	if err := needTP(cfg, 2); err != nil {
		return nil, err
	}
	g := moeEPGraph(cfg.Layers, cfg.Tokens, cfg.Hidden)
	return buildEngines(cfg, opt, eng, g, map[string][][]int{"ep": {allRanks(cfg.TP)}})
}

func allRanks(n int) []int {
	g := make([]int, n)
	for i := range g {
		g[i] = i
	}
	return g
}

func concreteStrategy(cfg knobs.Config, hw ranks.Profile, n int, bytes int64) (collectives.Strategy, error) {
	s, err := cfg.ParsedStrategy()
	if err != nil {
		return "", err
	}
	return collectives.Resolve(s, hw.Arch, n, bytes), nil
}

func needTP(cfg knobs.Config, lo int) error {
	if cfg.TP < lo {
		return fmt.Errorf("%w: tp=%d: this scenario needs at least %d ranks", knobs.ErrBadKnob, cfg.TP, lo)
	}
	return nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
