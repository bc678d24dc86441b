package knobs

import "fmt"

// Knobs of the collective-family scenarios, appended to the common list.
func init() {
	knobs = append(knobs,
		enumKnob("issue", "how ranks issue their collectives: consistent, swapped (odd ranks swap two calls), count-differs (odd ranks pass a larger count), op-differs (odd ranks call all-gather where even ranks call all-reduce), host-opposite (odd ranks issue the two communicators' calls in the opposite host order), skipped (a rank does not issue a call its peers issue; scenario files)",
			[]string{"consistent", "swapped", "count-differs", "op-differs", "host-opposite", "skipped"}, func(c *Config) *string { return &c.Issue }),
		enumKnob("nccl-order", "NCCL launch order: per-comm (each communicator's kernels in host issue order, eager and captured: NCCL's strong stream, src/enqueue.cc), implicit (NCCL_LAUNCH_ORDER_IMPLICIT, NCCL ≥ 2.26: host program order across communicators, each kernel after the previous one completes: the serial mode), implicit-launch (the same in the launch mode of CUDA ≥ 12.3: each kernel after the previous one starts, when nccl-coresident is on), or graph-unordered (per-comm within the eager launches and within each graph, none between graphs captured apart: RCCL's graph path with graph mixing off, rocm/rccl #2179)",
			[]string{"per-comm", "implicit", "implicit-launch", "graph-unordered"}, func(c *Config) *string { return &c.NCCLOrder }),
		enumKnob("nccl-coresident", "NCCL kernels of different communicators on one GPU: off (one NCCL kernel at a time per GPU, the worst case CUDA allows: no forward-progress guarantee between streams) or on (they run together when the GPU's SMs hold them all; a communicator's own kernels still one at a time where the library orders them; under nccl-order graph-unordered those of graphs captured apart run together and race on the connections' step counters)",
			[]string{"off", "on"}, func(c *Config) *string { return &c.NCCLCoresident }),
		intKnob("sms", "streaming multiprocessors per GPU for kernel residency (unset: the hardware profile's count); spinning kernels hold their blocks' SMs while resident", 1, 1<<16, func(c *Config) *int { return &c.SMs }),
		intKnob("blocks", "grid size (thread blocks) of the second symmetric-memory call", 1, 64, func(c *Config) *int { return &c.Blocks }),
		enumKnob("engines", "TensorRT engine partition: fused (large graph, Myelin fuses the collective into a ForeignNode), standalone (collectives alone in their engines), workaround (collectives run in PyTorch: torch_executed_ops), per-layer (one engine per layer, collectives fused with GEMMs), keep-standalone (each collective in an engine of its own), myelin-fixed (hypothetical: Myelin maps fused collectives), ideal (hypothetical: that, and every collective engine multi-device)",
			[]string{"fused", "standalone", "workaround", "per-layer", "keep-standalone", "myelin-fixed", "ideal"}, func(c *Config) *string { return &c.Engines }),
	)
}

// familySummary is Summary for the collective-family scenarios: only the
// knobs they set.
func (c *Config) familySummary() string {
	s := fmt.Sprintf("tp=%d arch=%s mode=%s strategy=%s", c.TP, c.Arch, c.Mode, c.Strategy)
	for _, kv := range [][2]string{{"issue", c.Issue}, {"nccl-order", c.NCCLOrder}, {"nccl-coresident", c.NCCLCoresident}, {"engines", c.Engines}} {
		if kv[1] != "" {
			s += " " + kv[0] + "=" + kv[1]
		}
	}
	if c.Blocks > 0 {
		s += fmt.Sprintf(" blocks=%d", c.Blocks)
	}
	if c.Layers > 0 {
		s += fmt.Sprintf(" layers=%d", c.Layers)
	}
	return s
}
