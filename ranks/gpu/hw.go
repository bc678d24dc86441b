package gpu

import (
	"fmt"
	"math"

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

	// Host is what issuing work costs the host thread, measured
	// (HostCosts). The host CPU, not the GPU, sets these numbers: every
	// profile carries the ones measured on the H200 machine.
	Host HostCosts
	// GEMMLat and GEMMBW, when set, replace the roofline for decode-shape
	// GEMMs with a fit of measured times: GEMMLat + operand bytes / GEMMBW
	// (or the FLOP time, if longer). See GEMMTime.
	GEMMLat sim.Time
	GEMMBW  float64
	// HBMAchieved is the bandwidth a copy reaches (the h200's measured:
	// 537 MB copied in 128.9 µs, 4.17 TB/s; the others' datasheet figure
	// times the same 0.87): what concurrent kernels share (share.go, and ranks/share.go).
	HBMAchieved float64
}

// Measured on the H200 by validation/kernel_shapes.py (the profiler's grid,
// block, registers and shared memory of every decode kernel): cuBLAS's
// decode GEMMs (nvjet_sm90_tst_*) run 384-thread blocks of 168 registers
// and 164–225 KiB of shared memory, one block per SM; a GEMM's grid is
// n/64 tiles or one block per 170.7 KiB of weight (4096×128: 6 blocks,
// 4096×512 and 8192×256: 24, 8192×1024: 96, 512×4096: 64, 256×8192,
// 1024×8192 and larger: 128) at up to 32 tokens, twice that at 64 tokens
// (4096×128: 12, 4096×512: 48, 512×4096: 128), at most 128. PyTorch's elementwise kernels
// cover 1,024 elements a block (8×4096: 32 blocks of 128 threads).
const (
	gemmBlockBytes = 174763
	gemmTileN      = 64
	gemmTileM      = 32
	gemmMaxBlocks  = 128
	eltBlockElems  = 1024
	// MeasuredKeep is the share of its SMs (per mille) a kernel still gets
	// while kernels that started before it hold the GPU
	// (validation/concurrency.py "order", one launch each, the second 4 µs
	// after the first on another stream): behind a 35 µs GEMM of 128
	// blocks, a 24-block GEMM did 3.5 of its 7.6 µs in 32 µs (0.11) and an
	// add about 2 of 29 µs (0.07); behind a 41 µs GEMM and its split-K
	// reduce, a 128-block GEMM 4.5 of 13.5 µs in 33 µs (0.14).
	MeasuredKeep = 100
	// MeasuredGraphGap is the device gap between dependent nodes of a
	// replayed graph on the H200 (validation/host_costs.cu: 0.55 µs; 1.40 µs
	// between back-to-back launches on a stream). Every profile uses it.
	MeasuredGraphGap sim.Time = 550
)

// Share is the profile's GPU as concurrent kernels share it (share.go).
func (p Profile) Share() *Share {
	hbm := p.HBMAchieved
	if hbm == 0 {
		hbm = 0.87 * p.HBM
	}
	return &Share{SMs: p.SMs, Keep: MeasuredKeep, HBM: hbm, GEMMLat: p.GEMMLat, GEMMBW: p.GEMMBW, KStart: p.KStart,
		GEMMBlockBytes: gemmBlockBytes, GEMMTileN: gemmTileN, GEMMTileM: gemmTileM, GEMMMaxBlocks: gemmMaxBlocks, EltBlockElems: eltBlockElems}
}

// HostCosts are host issue costs, measured on one NVIDIA H200 machine
// (driver 580.159.04, torch 2.11.0+cu130, CUDA 13.0) by
// validation/host_costs.py and validation/host_costs.cu: medians of 40
// batches of 100 calls issued while the device is busy behind a long
// kernel, so the host never waits on a full launch queue. The numbers are
// in validation/results/h200.json (programs.host_costs); docs/fidelity.md
// quotes them.
type HostCosts struct {
	// Launch: a bare cudaLaunchKernel of an empty kernel (3.9 µs).
	Launch sim.Time
	// EventRecord and StreamWait: bare cudaEventRecord (0.26 µs) and
	// cudaStreamWaitEvent (0.25 µs).
	EventRecord, StreamWait sim.Time
	// GraphLaunch: torch.cuda.CUDAGraph.replay() (2.8 µs, 1 or 30 nodes;
	// a bare cudaGraphLaunch is 1.7 µs).
	GraphLaunch sim.Time
	// EagerOp: one eager elementwise PyTorch op (torch.add(out=) 5.8 µs,
	// a + b 7.3 µs, a * 0.5 8.4 µs: 7 µs).
	EagerOp sim.Time
	// EagerGEMM: one eager matmul at decode shapes (a @ w, 8×4096 by
	// 4096×512 or 4096×4096: 15.4 and 16.2 µs; F.linear 19.8 µs).
	EagerGEMM sim.Time
	// EagerRecord and EagerWait: torch.cuda.Event.record() (5.3 µs) and
	// Stream.wait_event() (0.8 µs).
	EagerRecord, EagerWait sim.Time
}

// MeasuredHost is HostCosts as measured on the H200 machine.
var MeasuredHost = HostCosts{
	Launch: 3900, EventRecord: 260, StreamWait: 250, GraphLaunch: 2800,
	EagerOp: 7000, EagerGEMM: 16000, EagerRecord: 5300, EagerWait: 800,
}

// MeasuredJitter is the run-to-run spread of device kernel durations on
// the H200 (validation/durations.py: 200 iterations × 3 runs of each of 42
// decode shapes, timed with an event pair per iteration): the median over
// shapes of each 5 % quantile of duration / median duration, per mille.
// Index 0 is nominal; the others are drawn uniformly, which samples the
// measured distribution.
var MeasuredJitter = []int64{1000, 886, 944, 960, 968, 973, 981, 984, 990, 993, 997, 1004, 1008, 1013, 1020, 1025, 1030, 1035, 1041, 1057, 1252}

// MeasuredHostJitter is the spread of host issue costs: the median over 13
// eager ops of p05 / median (0.94) and p95 / median (1.52)
// (validation/host_costs.py), with points between.
var MeasuredHostJitter = []int64{1000, 936, 960, 980, 1050, 1150, 1300, 1517}

// Widen scales a jitter table's spread around nominal by f (1: as is; 2:
// twice as far from ×1), keeping every multiplier at least 5 %.
func Widen(table []int64, f float64) []int64 {
	out := make([]int64, len(table))
	for i, m := range table {
		out[i] = max(50, 1000+int64(f*float64(m-1000)))
	}
	return out
}

// Profiles are the built-in hardware profiles, by name.
var Profiles = map[string]Profile{
	"a100": {Name: "a100", Arch: "sm80", SMs: 108, HBM: 2.039e12, NVLink: 300e9, FLOPs: 312e12, Launch: 4 * sim.Microsecond, EventOp: 1500, KStart: 1500, SigLat: 1000, StepLat: 1400, GraphGap: MeasuredGraphGap, MemBytes: 80 << 30, EngineCall: 12 * sim.Microsecond, Host: MeasuredHost},
	"h100": {Name: "h100", Arch: "sm90", SMs: 132, HBM: 3.35e12, NVLink: 450e9, FLOPs: 989e12, Launch: 4 * sim.Microsecond, EventOp: 1500, KStart: 1500, SigLat: 900, StepLat: 1200, GraphGap: MeasuredGraphGap, MemBytes: 80 << 30, EngineCall: 12 * sim.Microsecond, Host: MeasuredHost},
	"h200": {Name: "h200", Arch: "sm90", SMs: 132, HBM: 4.8e12, NVLink: 450e9, FLOPs: 989e12, Launch: 4 * sim.Microsecond, EventOp: 1500, KStart: 1500, SigLat: 900, StepLat: 1200, GraphGap: MeasuredGraphGap, MemBytes: 141 << 30, EngineCall: 12 * sim.Microsecond, Host: MeasuredHost, GEMMLat: 4500, GEMMBW: 4.3e12, HBMAchieved: 4.17e12},
	"b200": {Name: "b200", Arch: "sm100", SMs: 148, HBM: 8e12, NVLink: 900e9, FLOPs: 2.25e15, Launch: 4 * sim.Microsecond, EventOp: 1500, KStart: 1500, SigLat: 800, StepLat: 1000, GraphGap: MeasuredGraphGap, MemBytes: 180 << 30, EngineCall: 12 * sim.Microsecond, Host: MeasuredHost},
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
//
// A profile with a measured fit (GEMMLat, GEMMBW) uses it instead: decode
// GEMMs are bound by latency and achieved bandwidth, not the datasheet.
// The h200 fit is from validation/durations.py on an H200 (mean of 200
// back-to-back launches, so the gap between kernels is included): 8×8192
// by 8192×128 7.0 µs (roofline 1.9), 8×8192 by 8192×1024 9.7 µs (5.0),
// 8×4096 by 4096×16384 34.4 µs (29.5), 8×8192 by 8192×32768 122 µs (113):
// about 4.5 µs + bytes / 4.3 TB/s, within 30 % of every decode shape
// measured.
func (p Profile) GEMMTime(m, k, n int64) sim.Time {
	flops := 2 * float64(m) * float64(k) * float64(n)
	bytes := 2 * (m*k + k*n + m*n)
	if p.GEMMBW > 0 {
		return max(sim.Time(flops/p.FLOPs*1e9)+p.KStart, p.GEMMLat+Bytes(bytes, p.GEMMBW))
	}
	return max(sim.Time(flops/p.FLOPs*1e9), Bytes(bytes, p.HBM)) + p.KStart
}

// MoEPart is one kernel of the routed MoE at decode.
type MoEPart struct {
	Name string
	Dur  sim.Time // on the H200 at the measured shape
	SMs  int      // its grid's SMs (0: all)
	// Weights: a grouped GEMM, whose time scales with the expert weights
	// it reads (the other parts move activations only)
	Weights bool
}

// MeasuredMoEDecode is TensorRT-LLM's fused MoE at decode (AutoDeploy's
// torch.ops.trtllm.fused_moe, CutlassMoeFCRunner::runMoe in
// cpp/tensorrt_llm/kernels/mixtureOfExperts/moe_kernels.cu: the router's
// top-k, rows expanded and sorted by expert, the fc1 grouped GEMM, the
// gated activation, the fc2 grouped GEMM, finalizeMoeRoutingKernel) as
// validation/moe_decode.py timed it on the H200 with PyTorch's CUTLASS
// grouped GEMM (TensorRT-LLM is not installed there): medians of 600
// event-timed iterations at tp8-shared-expert's decode shape (8 tokens,
// hidden 8192, 128 experts, top-8, 256 intermediate per rank; 48–54
// experts active). Grids from validation/kernel_shapes.py.
var MeasuredMoEDecode = []MoEPart{
	{Name: "route", Dur: 16200, SMs: 8},
	{Name: "expand", Dur: 4500, SMs: 32},
	{Name: "fc1", Dur: 164800, Weights: true},
	{Name: "act", Dur: 8800, SMs: 32},
	{Name: "fc2", Dur: 137600, Weights: true},
	{Name: "finalize", Dur: 13800},
}

// MoEDecode is the routed MoE of m tokens, hidden k, per-rank expert
// intermediate n and top-k experts (of 128) as MeasuredMoEDecode's
// kernels on p: a grouped GEMM's time scales with the weights of the
// experts the tokens hit (128·(1−(1−topk/128)^m) of them), every part's
// with the H200's achieved bandwidth over p's (they are bandwidth-bound).
func (p Profile) MoEDecode(m, k, n, topk int64) []MoEPart {
	const total = 128.0
	active := func(m, topk int64) float64 { return total * (1 - math.Pow(1-float64(topk)/total, float64(m))) }
	wscale := active(m, topk) * float64(k*n) / (active(8, 8) * 8192 * 256)
	hbm := p.HBMAchieved
	if hbm == 0 {
		hbm = 0.87 * p.HBM
	}
	bw := 4.17e12 / hbm
	out := make([]MoEPart, len(MeasuredMoEDecode))
	for i, q := range MeasuredMoEDecode {
		f := bw
		if q.Weights {
			f *= wscale
		}
		q.Dur = sim.Time(float64(q.Dur) * f)
		if q.SMs == 0 {
			q.SMs = p.SMs
		}
		out[i] = q
	}
	return out
}
