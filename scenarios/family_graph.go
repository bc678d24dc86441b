package scenarios

import (
	"fmt"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

func init() {
	Register(&Scenario{
		Name: "graph-double-shared-expert",
		Description: `SGLang #37948: the CUDA-graph capture path runs the shared expert a second
time, so the captured graph holds its GEMM and its in-place add twice, and every
replay adds the shared output twice. Eager execution runs it once and is right;
the program agrees with itself when serialized, so only comparing the graph path
with the eager path (which the scenario declares must match) shows it, naming the
op captured twice. The same comparison catches a host-side step counter read at
capture and frozen into the graph (step_counter=host): replay N reads what the
capture saw.`,
		Base: Config{
			TP: 1, Arch: "sm100", Mode: "graph", Layers: 1, Replays: 2,
			Tokens: 8, Hidden: 4096, Chunks: 2, Seed: 1, Budget: 8,
			Bug: BugKnobs{CaptureShared: "twice", StepCounter: "device"},
		},
		Variants: []Variant{
			{Name: "buggy", Expect: "corruption", Doc: "capture path calls the shared expert twice; replays add it twice"},
			{Name: "fixed", Sets: []string{"capture_shared=once"}, Expect: "ok", Doc: "the capture path calls the shared expert once, like eager"},
			{Name: "eager-buggy", Sets: []string{"mode=eager"}, Expect: "ok", Doc: "eager execution never takes the capture path"},
			{Name: "host-step", Sets: []string{"capture_shared=once", "step_counter=host"}, Expect: "corruption", Doc: "a host step counter frozen at capture: replay 2 reads step 1"},
			{Name: "host-step-one-replay", Sets: []string{"capture_shared=once", "step_counter=host", "replays=1"}, Expect: "ok", Doc: "with one replay the frozen value is the right one"},
		},
		Build:             buildGraphDouble,
		GraphMatchesEager: true,
	})
}

func buildGraphDouble(cfg Config, opt BuildOptions, eng *sim.Engine) (*Built, error) {
	f, err := newFam(cfg, opt, eng, []string{"main", "aux"}, []string{"fork", "join"})
	if err == nil {
		f.w.SetIndependentReplays(false) // acc and the step counter carry from replay to replay
	}
	if err != nil {
		return nil, err
	}
	const main, aux, fork, join = 0, 1, 0, 1
	hw := f.hw
	T, H := cfg.Tokens, cfg.Hidden
	act := T * H * 2
	C := cfg.Chunks
	graphPath := cfg.Mode == "graph"
	b := &Built{World: f.w}
	for r := range cfg.TP {
		x := f.w.Alloc(r, "x", act, C)
		f.w.Init(x, func(c int) uint64 { return uint64(7 + c) })
		one := f.w.Alloc(r, "one", act, C)
		f.w.Init(one, func(int) uint64 { return 1 })
		pos := f.w.Alloc(r, "step", 8, C)
		f.w.Init(pos, func(int) uint64 { return 1 })
		acc := f.w.Alloc(r, "acc", act, C)
		step := &ranks.HostScalar{Name: "step", V: 1}
		var cmp []*ranks.Buffer
		bufs := map[string]*ranks.Buffer{}
		alloc := func(name string) *ranks.Buffer {
			if b, ok := bufs[name]; ok {
				return b
			}
			b := f.w.Alloc(r, name, act, C)
			bufs[name] = b
			return b
		}
		// body issues one decode step; the capture path may call the shared
		// expert twice.
		body := func() {
			in := x
			for l := range cfg.Layers {
				p := fmt.Sprintf("L%d.", l)
				rtY, shY, out := alloc(p+"rt_y"), alloc(p+"sh_y"), alloc(p+"out")
				f.launch(r, main, linear(p+"moe", rtY, weightOf(p+"moe", r), 2*hw.GEMMTime(T, H, H/8), in))
				f.launch(r, main, sum(p+"copy_out", out, hw.KStart+ranks.Bytes(2*act, hw.HBM), rtY))
				calls := 1
				if graphPath && cfg.Bug.CaptureShared == "twice" {
					calls = 2
				}
				for range calls {
					f.record(r, main, fork)
					f.wait(r, aux, fork)
					f.launch(r, aux, linear(p+"shared", shY, weightOf(p+"shared", r), hw.GEMMTime(T, H, H), in))
					f.record(r, aux, join)
					f.wait(r, main, join)
					f.launch(r, main, sum(p+"add_shared", out, hw.KStart+ranks.Bytes(3*act, hw.HBM), out, shY))
				}
				bias := weightOf(p+"pos_bias", r)
				addPos := &ranks.KernelSpec{Name: p + "add_pos", Kind: "add", Instrs: []ranks.Instr{{Op: ranks.OpCompute, Phase: "add", Dst: out, N: C, Dur: hw.KStart,
					Srcs: []ranks.Src{{Buf: out, Coef: 1}, {Buf: pos, Coef: bias}}}}}
				if cfg.Bug.StepCounter == "host" {
					addPos.Instrs[0].Srcs[1] = ranks.Src{Buf: one, Coef: bias * step.Arg()}
				}
				f.launch(r, main, addPos)
				in = out
			}
			f.launch(r, main, sum("accumulate", acc, hw.KStart, acc, in))
			if cfg.Bug.StepCounter != "host" {
				f.launch(r, main, sum("step_inc", pos, hw.KStart, pos, one))
			}
			if len(cmp) == 0 {
				cmp = []*ranks.Buffer{acc, in}
			}
		}
		if graphPath {
			// Capture once; the world replays it. The serialized reference
			// runs the captured body once per replay.
			start := len(f.progs[r].Ops)
			body()
			captured := append([]ranks.HostOp(nil), f.progs[r].Ops[start:]...)
			if opt.Reference {
				for i := 1; i < cfg.Replays; i++ {
					f.progs[r].Ops = append(f.progs[r].Ops, captured...)
				}
			}
		} else {
			for range cfg.Replays {
				body()
				step.Advance(1)
			}
		}
		if cfg.Bug.StepCounter == "host" && r == 0 && !opt.Reference {
			b.Notes = append(b.Notes, step.Describe(graphPath))
		}
		b.Compare = append(b.Compare, cmp)
	}
	f.finish()
	return b, nil
}
