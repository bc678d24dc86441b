package scenarios

func init() {
	Register(&Scenario{
		Name: "tp8-shared-expert",
		Description: `TensorRT-LLM PR #14917 (nvbugs/6248757): AutoDeploy's multi_stream_moe put the
shared expert's trailing all-reduce on the aux stream. At TP=8 on SM100 both the
shared and the routed all-reduce are MULTIMEM kernels over one symmetric
workspace and signal pad; inside the decode CUDA graph they run unordered and
consume each other's signals and data. TP=4 used NCCL (MULTIMEM is off for
world size 4 on SM100); prefill runs with the stream helpers disabled.`,
		Base: Config{
			TP: 8, Arch: "sm100", Mode: "graph", Phase: "decode", Strategy: "auto", Workspace: "shared",
			Placement: "buggy", Order: "shared-first", Shared: "trailing", Layers: 2, Replays: 2,
			Tokens: 8, Hidden: 8192, Chunks: 4, Seed: 1, Budget: 200,
		},
		Variants: []Variant{
			{Name: "buggy", Expect: "corruption", Doc: "TP=8, SM100, decode CUDA graph, auto → MULTIMEM, shared all-reduce on aux"},
			{Name: "fixed", Sets: []string{"placement=fixed"}, Expect: "ok", Doc: "PR #14917: join before the collective; it runs on main"},
			{Name: "fixed-overlap", Sets: []string{"placement=fixed-overlap"}, Expect: "ok", Doc: "routed experts issued before the join: GEMMs overlap, collectives stay on main"},
			{Name: "tp4-buggy", Sets: []string{"tp=4"}, Expect: "ok", Doc: "TP=4 on SM100: MULTIMEM is off, auto picks NCCL, which orders calls per communicator"},
			{Name: "prefill-buggy", Sets: []string{"phase=prefill", "tokens=2048"}, Expect: "ok", Doc: "piecewise prefill graph: stream helpers are no-ops, one stream"},
			{Name: "eager-buggy", Sets: []string{"mode=eager"}, Expect: "race|corruption", Doc: "eager with two streams: launch gaps narrow the window but do not close it"},
		},
		Compare: []Comparison{
			{Variant: "fixed", Against: "buggy", Label: "the join before the collective serializes the shared GEMMs"},
			{Variant: "fixed-overlap", Against: "fixed", Label: "routed experts issued before the join overlap the shared GEMMs again"},
		},
		Build: BuildMoE,
	})
}
