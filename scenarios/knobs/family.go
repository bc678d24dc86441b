package knobs

// BugKnobs are the mechanism switches of the bug-class built-ins
// (aux-stream-lifetime, shared-expert-times-w, graph-double-shared-expert,
// symm-two-streams-one-group, symm-pad-aliasing). Each one changes a
// mechanism, never a verdict: the verdict still comes out of the simulated
// memory, signals and timing.
type BugKnobs struct {
	RecordStream   string `json:"record_stream,omitempty"`    // on | off: tensor.record_stream(aux) on the tensor aux reads
	JoinBeforeFree string `json:"join_before_free,omitempty"` // on | off: main waits on aux before dropping the tensor
	Caching        string `json:"caching,omitempty"`          // on | off: CUDA caching allocator (off = PYTORCH_NO_CUDA_MEMORY_CACHING=1)
	SharedShard    string `json:"shared_shard,omitempty"`     // replicated | sharded: the shared expert's weights under TP
	SharedMerge    string `json:"shared_merge,omitempty"`     // before-ar | after-ar: where the shared output joins the routed one
	CaptureShared  string `json:"capture_shared,omitempty"`   // twice | once: the graph-capture path's shared-expert calls
	Pad            string `json:"pad,omitempty"`              // allocation | per-group: signal-pad scope
	Streams        string `json:"streams,omitempty"`          // one | two: streams carrying one group's symmetric ops
	SkewNs         int    `json:"skew_ns,omitempty"`          // extra work on odd ranks' first stream before the collectives
	HostSync       string `json:"host_sync,omitempty"`        // on | off: a host stream synchronize between the two collectives
	StepCounter    string `json:"step_counter,omitempty"`     // host | device: where the step counter a kernel reads lives
	IssueOrder     string `json:"issue_order,omitempty"`      // same | differs: odd ranks issue the second collective first
	RoutedDtype    string `json:"routed_dtype,omitempty"`     // bf16 | fp32: element type of the routed output (its allocation size)
	StreamGuard    string `json:"stream_guard,omitempty"`     // on | off: PyTorch's GroupStreamGuard (PR #195947) orders a group's pad ops across streams
	Coresident     string `json:"coresident,omitempty"`       // both | one: whether a GPU runs the two spinning one-shot kernels at once
}

func init() {
	onOff := []string{"on", "off"}
	knobs = append(knobs,
		enumKnob("record_stream", "aux-stream-lifetime: record_stream(aux) on the tensor the aux stream reads", onOff, func(c *Config) *string { return &c.Bug.RecordStream }),
		enumKnob("join_before_free", "aux-stream-lifetime: main waits on aux before the tensor is dropped", onOff, func(c *Config) *string { return &c.Bug.JoinBeforeFree }),
		enumKnob("caching", "caching allocator on, or off (PYTORCH_NO_CUDA_MEMORY_CACHING=1)", onOff, func(c *Config) *string { return &c.Bug.Caching }),
		enumKnob("shared_shard", "shared-expert-times-w: shared expert weights replicated or sharded like the routed experts", []string{"replicated", "sharded"}, func(c *Config) *string { return &c.Bug.SharedShard }),
		enumKnob("shared_merge", "shared-expert-times-w: shared output added before or after the all-reduce", []string{"before-ar", "after-ar"}, func(c *Config) *string { return &c.Bug.SharedMerge }),
		enumKnob("capture_shared", "graph-double-shared-expert: shared-expert calls on the capture path", []string{"twice", "once"}, func(c *Config) *string { return &c.Bug.CaptureShared }),
		enumKnob("pad", "signal pad per symmetric allocation (slot ws·channel+rank, no group id) or per group", []string{"allocation", "per-group"}, func(c *Config) *string { return &c.Bug.Pad }),
		enumKnob("streams", "symm-two-streams-one-group: streams carrying the group's symmetric ops", []string{"one", "two"}, func(c *Config) *string { return &c.Bug.Streams }),
		intKnob("skew_ns", "symm-two-streams-one-group: extra work (ns) on odd ranks' first stream", 0, 1<<30, func(c *Config) *int { return &c.Bug.SkewNs }),
		enumKnob("step_counter", "graph-double-shared-expert: step counter passed as a host scalar (frozen at capture) or kept in device memory", []string{"host", "device"}, func(c *Config) *string { return &c.Bug.StepCounter }),
		enumKnob("issue_order", "symm-two-streams-one-group: odd ranks issue the two collectives in the same or the other order", []string{"same", "differs"}, func(c *Config) *string { return &c.Bug.IssueOrder }),
		enumKnob("routed_dtype", "aux-stream-lifetime: routed output bf16 (fits the freed block) or fp32 (twice the size: a new block)", []string{"bf16", "fp32"}, func(c *Config) *string { return &c.Bug.RoutedDtype }),
		enumKnob("stream_guard", "symm-two-streams-one-group: GroupStreamGuard makes a group's pad op on a new stream wait for the previous one", onOff, func(c *Config) *string { return &c.Bug.StreamGuard }),
		enumKnob("host_sync", "symm-two-streams-one-group: host stream synchronize after issuing the first collective", onOff, func(c *Config) *string { return &c.Bug.HostSync }),
		enumKnob("coresident", "symm-two-streams-one-group: the one-shot kernels' grids: one block per channel (both: two grids fit a GPU at once), or one block per SM of the profile (one: the first grid holds every SM while it spins; --set sms= above twice the profile's count makes room for both)", []string{"both", "one"}, func(c *Config) *string { return &c.Bug.Coresident }),
	)
}
