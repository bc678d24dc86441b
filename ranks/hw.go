package ranks

import (
	"github.com/collsim/collsim/ranks/gpu"
	"github.com/collsim/collsim/sim"
)

// The hardware a world runs on is package gpu's: its profiles, measured
// host costs and jitter, and the load model of concurrent kernels. These
// names keep it reachable as the ranks API has always spelled it.
type (
	Profile   = gpu.Profile
	HostCosts = gpu.HostCosts
	MoEPart   = gpu.MoEPart
	Share     = gpu.Share
	Load      = gpu.Load
)

var (
	Profiles           = gpu.Profiles
	MeasuredHost       = gpu.MeasuredHost
	MeasuredJitter     = gpu.MeasuredJitter
	MeasuredHostJitter = gpu.MeasuredHostJitter
	MeasuredMoEDecode  = gpu.MeasuredMoEDecode
)

// ProfileFor returns the profile for a name or an arch ([gpu.ProfileFor]).
func ProfileFor(name string) (Profile, error) { return gpu.ProfileFor(name) }

// Bytes returns the time to move n bytes at rate bytes/s ([gpu.Bytes]).
func Bytes(n int64, rate float64) sim.Time { return gpu.Bytes(n, rate) }

// Widen returns a jitter table widened f times ([gpu.Widen]).
func Widen(table []int64, f float64) []int64 { return gpu.Widen(table, f) }

// IssueCosts fills c's host issue costs for its mode from p.Host: eager
// ops cost what an eager PyTorch op costs the host (Python, dispatcher,
// launch).
func IssueCosts(p Profile, c Config) Config {
	h := p.Host
	if h == (HostCosts{}) {
		c.LaunchCost, c.EventCost = p.Launch, p.EventOp
		return c
	}
	if c.Mode == Eager {
		c.LaunchCost, c.GEMMLaunchCost, c.EventCost, c.WaitCost = h.EagerOp, h.EagerGEMM, h.EagerRecord, h.EagerWait
	} else {
		// Graph mode issues one replay at a time; its host cost only
		// spaces the replays (measured 2.8 µs against the profile's
		// Launch), so the profile's numbers stay.
		c.LaunchCost, c.EventCost = p.Launch, p.EventOp
	}
	return c
}

func (k *KernelSpec) isGEMM() bool {
	return k != nil && (k.Kind == "gemm" || k.Kind == "moe")
}
