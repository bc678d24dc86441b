package scenarios

import (
	"fmt"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
	"github.com/collsim/collsim/streamsched"
)

func init() {
	Register(&Scenario{
		Name: "p2p-oneshot-probe",
		Description: `The symmetric-memory part of validation/race_probe.py, the real-GPU anchor: 2 ranks;
rank r's shared input is 100·(r+1) and its routed input r+1 in every element,
weight 1; both all-reduces are P2P one-shot (torch symm_mem one_shot_all_reduce,
no multicast) over one symmetric buffer and one signal pad. buggy: the shared
all-reduce runs on the aux stream inside the replayed CUDA graph, concurrently
with the routed one on main; fixed: the streams are joined first and both
all-reduces run on main. Outputs: "shared" (300 on every rank when right) and
"routed" (3).`,
		Base: Config{
			TP: 2, Arch: "sm100", Mode: "graph", Phase: "decode", Strategy: "p2p-oneshot", Workspace: "shared",
			Placement: "buggy", Order: "shared-first", Shared: "trailing", Layers: 1, Replays: 1,
			Tokens: 1, Hidden: 1 << 15, Chunks: 1, Seed: 1, Budget: 200,
		},
		Variants: []Variant{
			{Name: "buggy", Expect: "corruption", Doc: "shared all-reduce on aux inside the replayed graph, unordered with the routed one"},
			{Name: "fixed", Sets: []string{"placement=fixed"}, Expect: "ok", Doc: "streams joined before the all-reduces, both on main"},
		},
		Build: BuildProbe,
	})
}

// BuildProbe builds the p2p-oneshot-probe world: per rank, y_sh = x_sh (aux
// stream in the buggy placement), y_rt = x_rt (main), shared = all-reduce(y_sh),
// routed = all-reduce(y_rt), merge = shared + routed. The op graph is the
// shape multi_stream_moe matches (a routed "MoE" node whose merge also reads a
// shared branch), so the buggy and fixed placements are the transform's own.
// Knobs used: tp, arch, mode, phase, strategy, workspace, placement, replays,
// hidden (bytes of the fp32 tensors are 4·hidden), chunks.
func BuildProbe(cfg Config, opt BuildOptions, eng *sim.Engine) (*Built, error) {
	hw, err := cfg.Profile()
	if err != nil {
		return nil, err
	}
	strat, err := cfg.strategy()
	if err != nil {
		return nil, err
	}
	bytes := 4 * cfg.Hidden
	g := &streamsched.Graph{
		Tensors: []streamsched.Tensor{
			{Name: "x_sh", Bytes: bytes, Input: true},
			{Name: "x_rt", Bytes: bytes, Input: true},
			{Name: "y_sh", Bytes: bytes},
			{Name: "shared", Bytes: bytes, Output: true},
			{Name: "y_rt", Bytes: bytes},
			{Name: "routed", Bytes: bytes, Output: true},
			{Name: "merge", Bytes: bytes},
		},
		Ops: []streamsched.Op{
			{Name: "sh_gemm", Kind: streamsched.GEMM, Inputs: []string{"x_sh"}, Output: "y_sh", M: 1, K: cfg.Hidden, N: 1},
			{Name: "shared_ar", Kind: streamsched.AllReduce, Inputs: []string{"y_sh"}, Output: "shared", Comm: "world"},
			{Name: "rt_gemm", Kind: streamsched.MoE, Inputs: []string{"x_rt"}, Output: "y_rt", M: 1, K: cfg.Hidden, N: 1, Experts: 1},
			{Name: "routed_ar", Kind: streamsched.AllReduce, Inputs: []string{"y_rt"}, Output: "routed", Comm: "world"},
			{Name: "merge", Kind: streamsched.Add, Inputs: []string{"shared", "routed"}, Output: "merge"},
		},
	}
	sched, mode, multi, err := placeGraph(cfg, opt, g)
	if err != nil {
		return nil, err
	}
	w := ranks.NewWorld(cfg.TP, ranks.Config{Mode: mode, Replays: cfg.Replays, LaunchCost: hw.Launch, EventCost: hw.EventOp, Timeline: opt.Timeline}, eng)
	group := make([]int, cfg.TP)
	for i := range group {
		group[i] = i
	}
	ws := collectives.SharedWorkspace
	if cfg.Workspace == "per-call" {
		ws = collectives.PerCallWorkspace
	}
	comms := map[string]*collectives.Comm{"world": collectives.NewComm(w, "world", group, ws, hw, cfg.Chunks)}
	lo, err := streamsched.Lower(w, g, sched, comms, streamsched.LowerConfig{
		HW: hw, MultiStream: multi, Strategy: strat, Chunks: cfg.Chunks,
		Init: func(tensor string, rank, _ int) uint64 {
			if tensor == "x_sh" {
				return uint64(100 * (rank + 1))
			}
			return uint64(rank + 1)
		},
		Weight: func(string, int) int64 { return 1 },
	})
	if err != nil {
		return nil, err
	}
	b := &Built{World: w}
	for r := range cfg.TP {
		var cmp []*ranks.Buffer
		for _, op := range g.Ops {
			cmp = append(cmp, lo.Tensors[r][op.Output])
		}
		b.Compare = append(b.Compare, cmp)
	}
	for _, op := range g.Ops {
		if s, ok := lo.Strategies[op.Name]; ok {
			b.Notes = append(b.Notes, fmt.Sprintf("%s → %s", op.Name, s))
		}
	}
	return b, nil
}
