package check_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

func runFamily(t *testing.T, name, variant string, sets ...string) *check.VariantReport {
	t.Helper()
	sc, ok := scenarios.Lookup(name)
	require.True(t, ok, name)
	v, ok := sc.Variant(variant)
	require.True(t, ok, variant)
	rep, err := check.RunVariant(sc, v, check.Options{Extra: append([]string{"budget=12"}, sets...)})
	require.NoError(t, err)
	return rep
}

// Every variant of the bug-class built-ins meets its expectation, and
// changing only the mechanism knob flips the verdict.
func TestFamilyVerdicts(t *testing.T) {
	tests := []struct {
		scenario, variant string
		sets              []string
		want              string
		finding           []string // kind, then substrings of one finding's message
	}{
		// caching allocator: reuse of a block aux still reads.
		{"aux-stream-lifetime", "buggy", nil, "corruption", []string{"race", "caching-allocator block 0x7f0000010000+64 KiB of segment #0, stream main's pool", "stream aux", "stream main"}},
		{"aux-stream-lifetime", "buggy", []string{"record_stream=on"}, "ok", nil},
		{"aux-stream-lifetime", "buggy", []string{"join_before_free=on"}, "ok", nil},
		{"aux-stream-lifetime", "buggy", []string{"caching=off"}, "ok", nil},
		// PyTorch puts the twice-as-large rt_out over the freed x_norm too.
		// At nominal eager timing it is a race, not corruption: an eager
		// PyTorch op costs the host 7–16 µs (ranks/gpu/hw.go HostCosts), so
		// rt_scale is issued after aux's late read (the H200 ran it 200
		// times clean); exploration finds the corrupting order.
		{"aux-stream-lifetime", "buggy", []string{"routed_dtype=fp32"}, "race", []string{"race", "L1.x_norm", "L1.rt_scale"}},
		{"aux-stream-lifetime", "buggy", []string{"routed_dtype=fp32", "tokens=128"}, "ok", nil},
		{"aux-stream-lifetime", "record-stream", []string{"record_stream=off"}, "corruption", nil},
		// Capture rules: without caching the first allocation inside the
		// capture is a cudaMalloc (validation/capture_errors.py: the H200
		// reports cudaErrorStreamCaptureInvalidated there); a host sync in
		// a captured program.
		{"aux-stream-lifetime", "buggy", []string{"mode=graph", "caching=off"}, "capture-error", []string{"capture-error", "L0.x_norm", "cudaErrorStreamCaptureInvalidated"}},
		{"aux-stream-lifetime", "buggy", []string{"mode=graph"}, "corruption", nil},
		{"symm-two-streams-one-group", "host-sync", []string{"mode=graph"}, "capture-error", []string{"capture-error", "cudaStreamSynchronize(s1) during capture"}},
		// unsharded reference: the shared expert counted W times.
		{"shared-expert-times-w", "buggy", nil, "corruption", []string{"corruption", "op L0.shared's contribution is counted 4 times"}},
		{"shared-expert-times-w", "buggy", []string{"tp=8"}, "corruption", []string{"corruption", "counted 8 times"}},
		{"shared-expert-times-w", "buggy", []string{"tp=1"}, "ok", nil},
		{"shared-expert-times-w", "buggy", []string{"shared_shard=sharded"}, "ok", nil},
		{"shared-expert-times-w", "buggy", []string{"shared_merge=after-ar"}, "ok", nil},
		{"shared-expert-times-w", "sharded-after-ar", nil, "corruption", []string{"corruption", "a partial never reduced"}},
		// graph-vs-eager: the op captured twice; a host value frozen.
		{"graph-double-shared-expert", "buggy", nil, "corruption", []string{"corruption", "graph path differs from eager path", "op L0.shared is captured 2× in the graph but runs 1× per eager step"}},
		{"graph-double-shared-expert", "buggy", []string{"capture_shared=once"}, "ok", nil},
		{"graph-double-shared-expert", "buggy", []string{"mode=eager"}, "ok", nil},
		{"graph-double-shared-expert", "host-step", nil, "corruption", []string{"corruption", "values the graph froze at capture"}},
		{"graph-double-shared-expert", "host-step", []string{"step_counter=device"}, "ok", nil},
		{"graph-double-shared-expert", "host-step", []string{"replays=1"}, "ok", nil},
		// pads shared across groups.
		{"symm-pad-aliasing", "buggy", nil, "corruption", []string{"mismatch", "consumed data of another collective", "slot 1"}},
		{"symm-pad-aliasing", "buggy", []string{"pad=per-group"}, "ok", nil},
		{"symm-pad-aliasing", "per-group-pads", []string{"pad=allocation"}, "corruption", nil},
		// two streams on one group's pad; host syncs.
		{"symm-two-streams-one-group", "buggy", nil, "hang", []string{"hang", "wait-for cycle", "waits for the GPU", "wait_signal"}},
		{"symm-two-streams-one-group", "buggy", []string{"coresident=both"}, "corruption", []string{"mismatch", "through signal pad"}},
		{"symm-two-streams-one-group", "buggy", []string{"streams=one"}, "ok", nil},
		{"symm-two-streams-one-group", "buggy", []string{"stream_guard=on"}, "ok", nil},
		{"symm-two-streams-one-group", "stream-guard", []string{"stream_guard=off"}, "hang", nil},
		{"symm-two-streams-one-group", "stream-guard", []string{"stream_guard=off", "coresident=both"}, "corruption", nil},
		{"symm-two-streams-one-group", "host-sync", nil, "hang", []string{"hang", "host cudaStreamSynchronize(s1) blocks rank 1's host thread", "host cudaStreamSynchronize(s1) blocks rank 0's host thread"}},
		{"symm-two-streams-one-group", "host-sync", []string{"host_sync=off"}, "hang", []string{"hang", "wait_signal"}},
		{"symm-two-streams-one-group", "host-sync", []string{"issue_order=same"}, "ok", nil},
	}
	for _, tt := range tests {
		t.Run(tt.scenario+"/"+tt.variant, func(t *testing.T) {
			rep := runFamily(t, tt.scenario, tt.variant, tt.sets...)
			require.Equal(t, tt.want, rep.Verdict, "sets %v: %v", tt.sets, rep.Findings)
			if len(tt.finding) > 0 {
				require.True(t, hasFinding(rep, tt.finding[0], tt.finding[1:]...), "no %s finding with %q in %v", tt.finding[0], tt.finding[1:], rep.Findings)
			}
		})
	}
}

// The built-ins run twice give the same bytes.
func TestFamilyDeterministic(t *testing.T) {
	for _, name := range []string{"aux-stream-lifetime", "symm-pad-aliasing", "symm-two-streams-one-group"} {
		a := runFamily(t, name, "buggy")
		b := runFamily(t, name, "buggy")
		require.Equal(t, a.TraceHash, b.TraceHash)
		require.Equal(t, a.Findings, b.Findings)
	}
}

func TestFamilyBadInput(t *testing.T) {
	// Both are scenario files: a rank count their programs do not cover is
	// an error, not a run.
	sc, _ := scenarios.Lookup("symm-pad-aliasing")
	v, _ := sc.Variant("buggy")
	_, err := check.RunVariant(sc, v, check.Options{Extra: []string{"tp=4"}})
	require.ErrorContains(t, err, "rank 3 has no program")
	sc, _ = scenarios.Lookup("symm-two-streams-one-group")
	v, _ = sc.Variant("buggy")
	_, err = check.RunVariant(sc, v, check.Options{Extra: []string{"tp=1"}})
	require.Error(t, err)
	sc, _ = scenarios.Lookup("graph-double-shared-expert")
	v, _ = sc.Variant("buggy")
	_, err = check.RunVariant(sc, v, check.Options{Extra: []string{"capture_shared=thrice"}})
	require.ErrorIs(t, err, scenarios.ErrBadKnob)
}

// For any world size W the replicated shared expert merged before the
// all-reduce is counted exactly W times against the unsharded model, and
// either fix matches the model exactly.
func TestUnshardedScalesWithWorldSize(t *testing.T) {
	sc, _ := scenarios.Lookup("shared-expert-times-w")
	v, _ := sc.Variant("buggy")
	rapid.Check(t, func(rt *rapid.T) {
		w := rapid.IntRange(1, 8).Draw(rt, "tp")
		chunks := rapid.IntRange(1, 4).Draw(rt, "chunks")
		strat := rapid.SampledFrom([]string{"nccl", "p2p-oneshot"}).Draw(rt, "strategy")
		fix := rapid.SampledFrom([]string{"", "shared_shard=sharded", "shared_merge=after-ar"}).Draw(rt, "fix")
		sets := []string{"budget=0", fmt.Sprintf("tp=%d", w), fmt.Sprintf("chunks=%d", chunks), "strategy=" + strat}
		if fix != "" {
			sets = append(sets, fix)
		}
		rep, err := check.RunVariant(sc, v, check.Options{Extra: sets})
		require.NoError(rt, err)
		if fix != "" || w == 1 {
			require.Equal(rt, check.OK, rep.Verdict, "%v", rep.Findings)
			return
		}
		require.Equal(rt, check.Corruption, rep.Verdict)
		require.True(rt, hasFinding(rep, check.Corruption, fmt.Sprintf("op L0.shared's contribution is counted %d times", w)), "%v", rep.Findings)
	})
}

// A tensor reduced twice: the routed partials are all-reduced, and the
// already-reduced result is all-reduced again. The serialized program
// agrees with itself; the unsharded model shows the op counted W times.
func TestUnshardedReducedTwice(t *testing.T) {
	for _, twice := range []bool{false, true} {
		sc := &scenarios.Scenario{
			Name: "reduced-twice",
			Base: scenarios.Config{TP: 4, Arch: "h100", Mode: "eager", Chunks: 2, Replays: 1},
			Build: func(cfg scenarios.Config, _ scenarios.BuildOptions, eng *sim.Engine) (*scenarios.Built, error) {
				hw, _ := cfg.Profile()
				w := ranks.NewWorld(cfg.TP, ranks.Config{LaunchCost: hw.Launch, EventCost: hw.EventOp}, eng)
				group := []int{0, 1, 2, 3}
				comm := collectives.NewComm(w, "tp", group, collectives.SharedWorkspace, hw, cfg.Chunks)
				b := &scenarios.Built{World: w}
				for r := range cfg.TP {
					x := w.Alloc(r, "x", 64, cfg.Chunks)
					w.Init(x, func(c int) uint64 { return uint64(c + 3) })
					rt := w.Alloc(r, "rt_y", 64, cfg.Chunks)
					mid := w.Alloc(r, "rt_once", 64, cfg.Chunks)
					out := w.Alloc(r, "out", 64, cfg.Chunks)
					p := &ranks.Program{Streams: []string{"main"}}
					p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Kernel: &ranks.KernelSpec{Name: "moe", Instrs: []ranks.Instr{{
						Op: ranks.OpCompute, Dst: rt, N: cfg.Chunks, Srcs: []ranks.Src{{Buf: x, Coef: int64(r + 2)}}, Fresh: true, Dur: 100}}}})
					k1, err := comm.AllReduce(r, "ar1", collectives.NCCL, rt, mid)
					if err != nil {
						return nil, err
					}
					p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Kernel: k1})
					src := mid
					if twice {
						k2, err := comm.AllReduce(r, "ar2", collectives.NCCL, mid, out)
						if err != nil {
							return nil, err
						}
						p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Kernel: k2})
						src = out
					}
					if !twice {
						p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Kernel: &ranks.KernelSpec{Name: "copy", Instrs: []ranks.Instr{{
							Op: ranks.OpCompute, Dst: out, N: cfg.Chunks, Srcs: []ranks.Src{{Buf: src, Coef: 1}}, Dur: 100}}}})
					}
					w.SetProgram(r, p)
					b.Compare = append(b.Compare, []*ranks.Buffer{out})
				}
				return b, nil
			},
			Unsharded: func(cfg scenarios.Config) (*check.Model, error) {
				return &check.Model{Chunks: cfg.Chunks,
					Inputs: []check.ModelInput{{Name: "x", Init: func(c int) uint64 { return uint64(c + 3) }}},
					Ops: []check.ModelOp{
						{Name: "moe", Kind: "linear", Inputs: []string{"x"}, Output: "rt_y", Weight: 2 + 3 + 4 + 5},
						{Name: "out", Kind: "add", Inputs: []string{"rt_y"}, Output: "out"},
					},
					Outputs: []string{"out"},
				}, nil
			},
		}
		rep, err := check.RunVariant(sc, scenarios.Variant{Name: "v"}, check.Options{})
		require.NoError(t, err)
		if !twice {
			require.Equal(t, check.OK, rep.Verdict, "%v", rep.Findings)
			continue
		}
		require.Equal(t, check.Corruption, rep.Verdict)
		require.True(t, hasFinding(rep, check.Corruption, "op moe's contribution is counted 4 times"), "%v", rep.Findings)
	}
}
