package ranks

import "fmt"

// HostScalar is a host-side value that kernels take as a launch argument: a
// step counter, a sequence length, a slot index. Eager launches read it each
// time the host issues them; a CUDA-graph capture reads it once, and the
// value is frozen into the graph's kernel parameters, so replay N reads what
// the capture saw. Programs are built in host order, so a builder that reads
// Arg while building each launch gets exactly that behaviour: an eager
// program built over N steps reads N values, a graph built once reads one
// and the world replays it.
type HostScalar struct {
	Name string
	V    int64
	// Reads records every value read, in order, for reports.
	Reads []int64
}

// Arg reads the value as a launch argument.
func (h *HostScalar) Arg() int64 {
	h.Reads = append(h.Reads, h.V)
	return h.V
}

// Advance adds d to the value (the host's step += d).
func (h *HostScalar) Advance(d int64) { h.V += d }

// Describe says which values launches read ("host scalar step read 1, 1
// (frozen at capture)").
func (h *HostScalar) Describe(captured bool) string {
	s := fmt.Sprintf("host scalar %s read %v", h.Name, h.Reads)
	if captured {
		s += " at capture; every replay reuses the captured value"
	}
	return s
}
