package scenarios

import (
	"fmt"
	"strings"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

func init() {
	Register(&Scenario{
		Name: "aux-stream-lifetime",
		Description: `vLLM fork local-inference-lab/vllm #93; TensorRT-LLM #12847: a tensor whose
lifetime crosses the aux stream. The normalized hidden states are allocated on
the main stream and read on the aux stream by the shared expert (its up GEMM,
and late, its gate). Main drops its last reference after the routed experts
are issued, without tensor.record_stream(aux), so PyTorch's caching allocator
hands the block to main's next allocation of that size at once: the routed
output is written into memory the aux stream has not finished reading (a use
after free). record_stream, a join before the free, or no caching avoids it.`,
		Base: Config{
			TP: 1, Arch: "sm100", Mode: "eager", Layers: 2, Replays: 1,
			Tokens: 8, Hidden: 4096, Chunks: 2, Seed: 1, Budget: 40,
			Bug: BugKnobs{RecordStream: "off", JoinBeforeFree: "off", Caching: "on", RoutedDtype: "bf16"},
		},
		Variants: []Variant{
			{Name: "buggy", Expect: "race|corruption", Doc: "x_norm freed on main with aux still reading it; main's next allocation reuses its memory"},
			{Name: "record-stream", Sets: []string{"record_stream=on"}, Expect: "ok", Doc: "x_norm.record_stream(aux): the free waits for aux's use"},
			{Name: "joined", Sets: []string{"join_before_free=on"}, Expect: "ok", Doc: "main waits on aux's event before dropping x_norm"},
			{Name: "no-caching", Sets: []string{"caching=off"}, Expect: "ok", Doc: "PYTORCH_NO_CUDA_MEMORY_CACHING=1: every tensor gets fresh memory"},
			{Name: "fp32-routed", Sets: []string{"routed_dtype=fp32"}, Expect: "race|corruption", Doc: "rt_out twice x_norm's size: the freed x_norm merged with free memory next to it, and the best fit still overlaps it (PyTorch places it so)"},
			{Name: "tokens-1", Sets: []string{"tokens=1"}, Expect: "race|corruption", Doc: "1 token: 8 KiB tensors in the small pool; rt_out lands on x_norm"},
			{Name: "tokens-64-fp32", Sets: []string{"tokens=64", "routed_dtype=fp32"}, Expect: "ok", Doc: "64 tokens, fp32 rt_out (1 MiB): the best-fitting free block overlaps nothing aux still reads"},
			{Name: "tokens-128-fp32", Sets: []string{"tokens=128", "routed_dtype=fp32"}, Expect: "ok", Doc: "128 tokens, fp32 rt_out (2 MiB) is a large-pool request: the small pool's freed x_norm is never handed to it"},
			{Name: "tokens-256", Sets: []string{"tokens=256"}, Expect: "race|corruption", Doc: "256 tokens: 2 MiB tensors in the large pool's 20 MiB segments; rt_out lands on x_norm"},
		},
		Build: buildLifetime,
	})
}

// buildLifetime lowers a stack of MoE layers with a shared expert on the aux
// stream, allocating every tensor from a per-rank caching allocator in host
// order.
func buildLifetime(cfg Config, opt BuildOptions, eng *sim.Engine) (*Built, error) {
	f, err := newFam(cfg, opt, eng, []string{"main", "aux"}, []string{"fork", "join"})
	if err != nil {
		return nil, err
	}
	const main, aux, fork, join = 0, 1, 0, 1
	hw := f.hw
	T, H := cfg.Tokens, cfg.Hidden
	act := T * H * 2
	C := cfg.Chunks
	b := &Built{World: f.w}
	for r := range cfg.TP {
		a := f.w.NewAllocator(r, cfg.Bug.Caching != "off")
		graph := cfg.Mode == "graph" && !opt.Reference
		// Every size below is positive for any knob values and every free is
		// of a live tensor, so the allocator errors after the first malloc
		// cannot happen; they are checked where they could.
		malloc := func(name string, s int, bytes int64) (*ranks.Buffer, error) {
			return a.Malloc(name, f.streamName(r, s), bytes, C)
		}
		x, err := malloc("x", main, act)
		if err != nil {
			return nil, err
		}
		f.w.Init(x, func(c int) uint64 { return uint64(3 + c) })
		if graph {
			// The step after the static input is captured: its allocations
			// come from the graph's private pool (or, without caching,
			// break the capture at the first one).
			a.BeginCapture()
		}
		in := x
		var out *ranks.Buffer
		for l := range cfg.Layers {
			p := fmt.Sprintf("L%d.", l)
			w := func(op string) int64 { return weightOf(p+op, r) }
			xn, err := malloc(p+"x_norm", main, act)
			if err != nil {
				return nil, err
			}
			f.launch(r, main, linear(p+"norm", xn, w("norm"), hw.KStart+ranks.Bytes(2*act, hw.HBM), in))
			if l > 0 {
				if err := a.Free(in); err != nil {
					return nil, err
				}
			}
			// Fork: the shared expert on aux.
			f.record(r, main, fork)
			f.wait(r, aux, fork)
			if cfg.Bug.RecordStream == "on" {
				if err := a.RecordStream(xn, f.streamName(r, aux)); err != nil {
					return nil, err
				}
			}
			shH, _ := malloc(p+"sh_h", aux, T*4*H*2)
			f.launch(r, aux, linear(p+"sh_up", shH, w("sh_up"), hw.GEMMTime(T, H, 4*H), xn))
			shY, _ := malloc(p+"sh_y", aux, act)
			f.launch(r, aux, linear(p+"sh_down", shY, w("sh_down"), hw.GEMMTime(T, 4*H, H), shH))
			_ = a.Free(shH)
			// Qwen2-MoE's shared_expert_gate reads the input again, late.
			shG, _ := malloc(p+"sh_g", aux, act)
			f.launch(r, aux, linear(p+"sh_gate", shG, w("sh_gate"), hw.GEMMTime(T, H, H), xn))
			shO, _ := malloc(p+"sh_out", aux, act)
			f.launch(r, aux, sum(p+"sh_mul", shO, hw.KStart+ranks.Bytes(3*act, hw.HBM), shY, shG))
			_ = a.Free(shY)
			_ = a.Free(shG)
			f.record(r, aux, join)
			// Main: router and routed experts.
			lg, _ := malloc(p+"logits", main, T*128*2)
			f.launch(r, main, linear(p+"gate", lg, w("gate"), hw.GEMMTime(T, H, 128), xn))
			rtY, _ := malloc(p+"rt_y", main, act)
			f.launch(r, main, linear(p+"moe", rtY, w("moe"), 2*hw.GEMMTime(T, H, H/8), xn, lg))
			_ = a.Free(lg)
			if cfg.Bug.JoinBeforeFree == "on" {
				f.wait(r, main, join)
			}
			// Main's last use of x_norm is issued: Python drops it.
			if err := a.Free(xn); err != nil {
				return nil, err
			}
			rtBytes := act
			if cfg.Bug.RoutedDtype == "fp32" {
				rtBytes = 2 * act
			}
			rtO, _ := malloc(p+"rt_out", main, rtBytes)
			f.launch(r, main, linear(p+"rt_scale", rtO, w("rt_scale"), hw.KStart+ranks.Bytes(2*act, hw.HBM), rtY))
			_ = a.Free(rtY)
			f.wait(r, main, join)
			out, _ = malloc(p+"out", main, act)
			f.launch(r, main, sum(p+"merge", out, hw.KStart+ranks.Bytes(3*act, hw.HBM), rtO, shO))
			_ = a.Free(rtO)
			_ = a.Free(shO)
			in = out
		}
		if graph {
			a.EndCapture()
		}
		if len(a.Findings) > 0 {
			b.Findings = append(b.Findings, a.Findings[0]) // the op that breaks the capture
		}
		b.Compare = append(b.Compare, []*ranks.Buffer{out})
		if r == 0 && !opt.Reference {
			for _, l := range a.Log {
				if len(b.Notes) < 6 && strings.Contains(l, "overlaps") {
					b.Notes = append(b.Notes, "rank 0 allocator: "+l)
				}
			}
		}
	}
	f.finish()
	return b, nil
}
