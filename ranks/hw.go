package ranks

import (
	"fmt"

	"github.com/collsim/collsim/sim"
)

// Profile is the hardware a rank runs on: what the cost model needs.
//
// Sources: NVIDIA A100 datasheet (SXM4 80 GB: 108 SMs; HBM2e 2,039 GB/s;
// dense BF16 312 TFLOP/s; NVLink 3, 600 GB/s bidirectional); NVIDIA H100
// and H200 product briefs (SXM: 132 SMs; HBM3 3.35 TB/s, 80 GB; HBM3e
// 4.8 TB/s, 141 GB; dense BF16 989 TFLOP/s; NVLink 4, 900 GB/s
// bidirectional); NVIDIA B200 / DGX B200 datasheet (148 SMs: 74 enabled on
// each of two dies, per Chips and Cheese's B200 article; HBM3e 8 TB/s,
// 180 GB; dense BF16 2.25 PFLOP/s; NVLink 5, 1.8 TB/s bidirectional).
// NVLink below is per direction (half the bidirectional figure).
//
// Launch and signal latencies are the usual measured orders of magnitude (a
// few µs per cudaLaunchKernel; about 1 µs for a system-scope flag to cross
// NVLink), not vendor figures. StepLat, NCCL's per-hop latency, follows the
// NVLink base latencies of NCCL's tuning model (src/graph/tuning.cc
// hwLat[NCCL_HW_NVLINK], about 0.6–1 µs per step for the Simple protocol).
// EngineCall, the host cost of one Torch-TensorRT submodule call (the
// runtime module's shape checks and output allocation plus enqueueV3, or a
// PyTorch op dispatched between engines), is an assumption of this model
// at the order of magnitude of a PyTorch module call, not a measurement.
type Profile struct {
	Name     string
	Arch     string  // "sm80", "sm90" or "sm100"
	SMs      int     // streaming multiprocessors
	HBM      float64 // bytes/s
	NVLink   float64 // bytes/s per direction per GPU
	FLOPs    float64 // dense bf16 FLOP/s
	Launch   sim.Time
	EventOp  sim.Time // host cost of an event record / wait
	KStart   sim.Time // device-side kernel start latency
	SigLat   sim.Time // one signal put or wait round across NVLink
	StepLat  sim.Time // NCCL per-step (per hop) latency
	GraphGap sim.Time // device gap between dependent graph nodes

	MemBytes   int64    // HBM capacity
	EngineCall sim.Time // host cost of one TensorRT engine or PyTorch submodule call
}

// Profiles are the built-in hardware profiles, by name.
var Profiles = map[string]Profile{
	"a100": {Name: "a100", Arch: "sm80", SMs: 108, HBM: 2.039e12, NVLink: 300e9, FLOPs: 312e12, Launch: 4 * sim.Microsecond, EventOp: 1500, KStart: 1500, SigLat: 1000, StepLat: 1400, GraphGap: 300, MemBytes: 80 << 30, EngineCall: 12 * sim.Microsecond},
	"h100": {Name: "h100", Arch: "sm90", SMs: 132, HBM: 3.35e12, NVLink: 450e9, FLOPs: 989e12, Launch: 4 * sim.Microsecond, EventOp: 1500, KStart: 1500, SigLat: 900, StepLat: 1200, GraphGap: 300, MemBytes: 80 << 30, EngineCall: 12 * sim.Microsecond},
	"h200": {Name: "h200", Arch: "sm90", SMs: 132, HBM: 4.8e12, NVLink: 450e9, FLOPs: 989e12, Launch: 4 * sim.Microsecond, EventOp: 1500, KStart: 1500, SigLat: 900, StepLat: 1200, GraphGap: 300, MemBytes: 141 << 30, EngineCall: 12 * sim.Microsecond},
	"b200": {Name: "b200", Arch: "sm100", SMs: 148, HBM: 8e12, NVLink: 900e9, FLOPs: 2.25e15, Launch: 4 * sim.Microsecond, EventOp: 1500, KStart: 1500, SigLat: 800, StepLat: 1000, GraphGap: 300, MemBytes: 180 << 30, EngineCall: 12 * sim.Microsecond},
}

// ProfileFor returns the profile for a name or an arch ("sm80" → a100,
// "sm90" → h100, "sm100" → b200).
func ProfileFor(name string) (Profile, error) {
	switch name {
	case "sm80":
		name = "a100"
	case "sm90":
		name = "h100"
	case "sm100":
		name = "b200"
	}
	p, ok := Profiles[name]
	if !ok {
		return Profile{}, fmt.Errorf("unknown hardware profile %q (want a100, h100, h200, b200, sm80, sm90 or sm100)", name)
	}
	return p, nil
}

// Bytes returns the time to move n bytes at rate bytes/s.
func Bytes(n int64, rate float64) sim.Time {
	if n <= 0 {
		return 0
	}
	return sim.Time(float64(n) / rate * 1e9)
}

// GEMMTime is the roofline time of an m×k×n GEMM in bf16: the larger of its
// FLOP time and the time to move its operands through HBM.
func (p Profile) GEMMTime(m, k, n int64) sim.Time {
	flops := 2 * float64(m) * float64(k) * float64(n)
	bytes := 2 * (m*k + k*n + m*n)
	return max(sim.Time(flops/p.FLOPs*1e9), Bytes(bytes, p.HBM)) + p.KStart
}
