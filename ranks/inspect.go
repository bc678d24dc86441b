package ranks

// KernelCounts returns how many times each kernel name is launched in
// rank's program (once per graph replay in graph mode, once per run in
// eager mode).
func (w *World) KernelCounts(rank int) map[string]int {
	out := map[string]int{}
	if rank < 0 || rank >= len(w.progs) || w.progs[rank] == nil {
		return out
	}
	for _, op := range w.progs[rank].Ops {
		if op.Kind == Launch && op.Kernel != nil {
			out[op.Kernel.Name]++
		}
	}
	return out
}

// Replays is how many times the program runs: the graph replays in graph
// mode, 1 in eager mode.
func (w *World) Replays() int {
	if w.cfg.Mode == Graph {
		return w.cfg.Replays
	}
	return 1
}
