package scenarios

import (
	"fmt"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

func init() {
	Register(&Scenario{
		Name: "shared-expert-times-w",
		Description: `TensorRT-LLM #15922 / #16286: the shared expert is left replicated (every
rank holds its whole weight) while the routed experts are sharded, and both are
added at one merge point before the all-reduce. The all-reduce sums the routed
partials, as it should, and also W full copies of the shared output: the shared
expert is counted world-size times. The program agrees with itself; only the
unsharded model run on one device shows the difference. Fixes: shard the shared
expert like the routed ones, or add it after the all-reduce. World size 1 hides
the bug.`,
		Base: Config{
			TP: 4, Arch: "sm100", Mode: "eager", Strategy: "nccl", Layers: 1, Replays: 1,
			Tokens: 8, Hidden: 4096, Chunks: 2, Seed: 1, Budget: 8,
			Bug: BugKnobs{SharedShard: "replicated", SharedMerge: "before-ar"},
		},
		Variants: []Variant{
			{Name: "buggy", Expect: "corruption", Doc: "replicated shared expert merged before the all-reduce: counted 4 times at TP=4"},
			{Name: "buggy-tp2", Sets: []string{"tp=2"}, Expect: "corruption", Doc: "the same at TP=2: counted 2 times"},
			{Name: "tp1", Sets: []string{"tp=1"}, Expect: "ok", Doc: "world size 1: one copy, nothing to over-count"},
			{Name: "fix-sharded", Sets: []string{"shared_shard=sharded"}, Expect: "ok", Doc: "shared expert sharded like the routed experts: the all-reduce sums its partials"},
			{Name: "fix-after-ar", Sets: []string{"shared_merge=after-ar"}, Expect: "ok", Doc: "replicated shared output added after the all-reduce"},
			{Name: "sharded-after-ar", Sets: []string{"shared_shard=sharded", "shared_merge=after-ar"}, Expect: "corruption", Doc: "both changes at once: a sharded partial added after the all-reduce is never reduced"},
		},
		Build:     buildTimesW,
		Unsharded: modelTimesW,
	})
}

// sharedWeight is the weight rank r holds for the shared expert of layer
// prefix p: its shard, or the whole weight (the sum of every shard) when
// replicated.
func sharedWeight(cfg Config, p string, r int) int64 {
	if cfg.Bug.SharedShard == "sharded" {
		return weightOf(p+"shared", r)
	}
	return fullWeight(cfg, p+"shared")
}

// fullWeight is the unsharded weight of op: the sum of its TP shards.
func fullWeight(cfg Config, op string) int64 {
	var s int64
	for r := range cfg.TP {
		s += weightOf(op, r)
	}
	return s
}

func timesWInput(c int) uint64 { return uint64(5 + 2*c) }

func buildTimesW(cfg Config, opt BuildOptions, eng *sim.Engine) (*Built, error) {
	f, err := newFam(cfg, opt, eng, []string{"main"}, nil)
	if err != nil {
		return nil, err
	}
	strat, err := cfg.strategy()
	if err != nil {
		return nil, err
	}
	group := make([]int, cfg.TP)
	for i := range group {
		group[i] = i
	}
	comm := collectives.NewComm(f.w, "tp", group, collectives.SharedWorkspace, f.hw, cfg.Chunks)
	hw := f.hw
	T, H := cfg.Tokens, cfg.Hidden
	act := T * H * 2
	C := cfg.Chunks
	b := &Built{World: f.w}
	b.Notes = append(b.Notes, fmt.Sprintf("shared expert %s, merged %s", cfg.Bug.SharedShard, cfg.Bug.SharedMerge))
	for r := range cfg.TP {
		in := f.w.Alloc(r, "x", act, C)
		f.w.Init(in, timesWInput)
		var cmp []*ranks.Buffer
		for l := range cfg.Layers {
			p := fmt.Sprintf("L%d.", l)
			rtY := f.w.Alloc(r, p+"rt_y", act, C)
			f.launch(r, 0, linear(p+"moe", rtY, weightOf(p+"moe", r), 2*hw.GEMMTime(T, H, H/8), in))
			shY := f.w.Alloc(r, p+"sh_y", act, C)
			f.launch(r, 0, linear(p+"shared", shY, sharedWeight(cfg, p, r), hw.GEMMTime(T, H, H), in))
			out := f.w.Alloc(r, p+"out", act, C)
			s := collectives.Resolve(strat, hw.Arch, cfg.TP, act)
			if cfg.Bug.SharedMerge == "after-ar" {
				rtO := f.w.Alloc(r, p+"rt_out", act, C)
				k, err := comm.AllReduce(r, p+"ar", s, rtY, rtO)
				if err != nil {
					return nil, err
				}
				f.launch(r, 0, k)
				f.launch(r, 0, sum(p+"merge", out, hw.KStart+ranks.Bytes(3*act, hw.HBM), rtO, shY))
			} else {
				pre := f.w.Alloc(r, p+"pre", act, C)
				f.launch(r, 0, sum(p+"merge", pre, hw.KStart+ranks.Bytes(3*act, hw.HBM), rtY, shY))
				k, err := comm.AllReduce(r, p+"ar", s, pre, out)
				if err != nil {
					return nil, err
				}
				f.launch(r, 0, k)
			}
			cmp = append(cmp, out)
			in = out
		}
		b.Compare = append(b.Compare, cmp)
	}
	f.finish()
	return b, nil
}

// modelTimesW is the model sharded by buildTimesW: out = moe(x) + shared(x),
// both with their whole weights, on one device.
func modelTimesW(cfg Config) (*check.Model, error) {
	m := &check.Model{Chunks: cfg.Chunks, Inputs: []check.ModelInput{{Name: "x", Init: timesWInput}}}
	in := "x"
	for l := range cfg.Layers {
		p := fmt.Sprintf("L%d.", l)
		m.Ops = append(m.Ops,
			check.ModelOp{Name: p + "moe", Kind: "linear", Inputs: []string{in}, Output: p + "rt_y", Weight: fullWeight(cfg, p+"moe")},
			check.ModelOp{Name: p + "shared", Kind: "linear", Inputs: []string{in}, Output: p + "sh_y", Weight: fullWeight(cfg, p+"shared")},
			check.ModelOp{Name: p + "merge", Kind: "add", Inputs: []string{p + "rt_y", p + "sh_y"}, Output: p + "out"},
		)
		m.Outputs = append(m.Outputs, p+"out")
		in = p + "out"
	}
	return m, nil
}
