package knobs

// The symm-guard knob: PyTorch's GroupStreamGuard on every communicator of
// a file or of the MoE builder (collectives.Comm.StreamGuard).
func init() {
	knobs = append(knobs,
		enumKnob("symm-guard", "PyTorch's GroupStreamGuard (PR #195947, symm_mem/GroupStreamGuard.cpp): on orders a group's signal-pad kernels on each rank in host issue order, whatever the stream, within one capture context (eager ops, or one capture; a replay is ordered with no eager pad op); it does not order TensorRT-LLM's copies in and out of the workspace (collectives/multimem.go). off (the default): no guard",
			[]string{"off", "on"}, func(c *Config) *string { return &c.SymmGuard }),
	)
}
