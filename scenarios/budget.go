package scenarios

import (
	"errors"
	"fmt"
	"strings"
)

// Estimate is what one run of a configuration will cost, computed from
// the resolved knobs before anything is built: every knob that multiplies
// the work (tp, dp, layers, replays, chunks) and the scenario's own size
// (ops per layer, from its file when it has one).
type Estimate struct {
	Ranks    int   `json:"ranks"`     // tp·dp
	Tasks    int64 `json:"tasks"`     // ops issued over all ranks, layers and replays
	MicroOps int64 `json:"micro_ops"` // device steps, collectives' per-peer steps included
	Chunks   int64 `json:"chunks"`    // value chunks of all tensors
	Bytes    int64 `json:"bytes"`     // estimated peak memory of a run (reference included), under GCPercent
	// GCPercent is the collector's target a run this size should use
	// (SmallRunGCPercent or LargeRunGCPercent): simctl sets it unless
	// GOGC is in the environment. It depends on the knobs alone.
	GCPercent int `json:"gc_percent"`
}

// Limits a run's estimate must stay within. MemoryBudget is the estimated
// bytes allowed; the command line sets it from --max-memory before
// anything runs (the default here serves library callers and tests).
var MemoryBudget int64 = 16 << 30

const (
	// MaxEstimatedTasks and MaxEstimatedMicroOps bound a run's work
	// independently of memory.
	MaxEstimatedTasks    = 1 << 24
	MaxEstimatedMicroOps = 1 << 32
)

// Admitted, when set, sees the estimate of every configuration
// CheckBudget admits, before anything is built (simctl picks the
// collector's target from it: cmd/simctl/gc.go). It must not change
// what a run computes.
var Admitted func(Estimate)

// ErrBudget wraps an estimate over the budget.
var ErrBudget = errors.New("over the resource budget")

// Calibration of the byte estimate: peak resident memory (getrusage, one
// fresh process each) of `simctl run tp8-shared-expert --variant fixed
// --set budget=0 --set tp=… --set dp=… --set layers=…`, measured at
// 8–4096 ranks (tp up to 1024, dp up to 512), 1–61 layers, 2–8 replays,
// 4–16 chunks, graph and eager mode (TestEstimateBounds lists the points).
// Such a run builds and runs the reference's world first and keeps only a
// record of its compared values (check/), so its peak is the larger of
// the two worlds, not their sum. What is live is built before the run
// and read until its last replay, in two parts:
//
//   - the program: kernels, micro-ops, host ops and the lowered graph, a
//     term per program-layer. It grows with the distinct programs
//     ([Scenario.programs]): the MoE builder folds every data-parallel
//     replica onto the first (ranks.World.Fold), so tp programs serve
//     tp·dp ranks; a scenario file's ranks each keep their own.
//   - per-rank state: a term per rank (communicators, streams), one per
//     rank-layer (tensors, buffers), one per rank-layer-replay (a replay's
//     values and tasks) and one per rank-layer-chunk (value chunks and
//     their shadows). At 8 × 512 ranks and 61 layers this is nearly all of
//     it: 21 KiB per rank-layer, against 16 KiB per program-layer.
//
// The sum is counted with a margin of 5/4; the estimate is above every
// measured peak and within 2× of it.
const (
	bytesPerRank            = 4 << 10
	bytesPerProgramLayer    = 16 << 10
	bytesPerRankLayer       = 21 << 10
	bytesPerRankLayerReplay = 768
	bytesPerRankLayerChunk  = 640
	baseBytes               = 31 << 20
	// bytesPerTensorChunk is one value chunk of a file's tensor on one
	// rank, before the margin and the collector's headroom: 64 tensors of
	// chunks: 4096 on 8 ranks peaked at 191 MB RSS, 32 at 82 MB (issue 31:
	// such a file ran into the watchdog instead of being refused before it
	// ran).
	bytesPerTensorChunk = 40
	defaultOpsPerLayer  = 12 // ops and stream markers of one MoE layer
)

// The collector's target for a run (Estimate.GCPercent), in three tiers
// by the estimated peak:
//
//   - GOGC=400 while the peak there stays under smallRunBytes: it saves
//     CPU on small runs (10–30 % in earlier calibrations) and costs
//     memory, since the heap goal is 5× the live heap. The peak at 400 was
//     up to 2.8× the peak at 100 (8 × 16 ranks, 61 layers: 494 against 174
//     MiB), so the variable part is counted 9/4 times there (its margin of
//     5/4 included, 2.8×).
//   - Go's default 100 above that (a heap goal of 2×). The estimate keeps
//     smallRunBytes as its floor, so that it grows with every knob across
//     the switch: just above it, it may be up to 2.8× a run's peak
//     (measured: 8 × 32 × 61, 704 against 362 MiB, 1.95×).
//   - 50 where the peak at 100 would pass hugeRunBytes (a heap goal of
//     1.5×; the estimate counts 3/4 of the variable part, floored at
//     hugeRunBytes). One process each, twice, the higher peak and the
//     lower CPU time kept: 8 × 512 × 61 peaked at 4,314 MiB against 5,566
//     at 100 (0.78×) in 216 CPU-s against 193 (1.12×); 8 × 128 × 61 at
//     1,102 against 1,472 MiB (0.75×) in 41.5 CPU-s against 39.2 (1.06×).
const (
	SmallRunGCPercent = 400
	LargeRunGCPercent = 100
	HugeRunGCPercent  = 50
	smallRunBytes     = 704 << 20
	hugeRunBytes      = 1 << 30
)

// opsPerLayer is how many ops one rank issues per layer and replay: from
// the scenario's file when it has one (its longest program, repeated
// blocks and conditions applied), else a MoE layer's.
func (s *Scenario) opsPerLayer(cfg Config) int64 {
	sp := s.Spec
	if sp == nil {
		return defaultOpsPerLayer
	}
	if sp.Graph != nil && sp.Graph.Builder == "" {
		return max(int64(len(sp.Graph.Ops))*3, 1) // with stream markers
	}
	if len(sp.Programs) > 0 {
		var most int64
		for i := range sp.Programs {
			most = max(most, int64(sp.Programs[i].ExpandedLen(cfg))) // repeated blocks counted, not expanded
		}
		return max(most, 1)
	}
	return defaultOpsPerLayer
}

// tensorChunks is the value chunks of a file's tensors on one rank (each
// tensor's own chunks, or the chunks knob); 0 for a built-in's form, whose
// chunks the per-layer term counts.
func (s *Scenario) tensorChunks(cfg Config) int64 {
	if s.Spec == nil {
		return 0
	}
	var n int64
	for i := range s.Spec.Tensors {
		n = satAdd(n, int64(max(s.Spec.Tensors[i].ChunksIn(cfg), 1)))
	}
	return n
}

// multipliers are the knobs that multiply a run's work as s's form reads
// them: a file's per-rank programs and op graphs make a world of tp ranks
// (dp is not read: spec_build.go's world) whose programs are the whole run
// (layers count through repeated blocks, in ops); a program with capture
// blocks replays through its own ops; a graph builder that does not read
// replays or dp is not multiplied by them.
func (s *Scenario) multipliers(cfg Config) (tp, dp, layers, replays int64) {
	tp, dp, layers = int64(max(cfg.TP, 1)), int64(max(cfg.DP, 1)), int64(max(cfg.Layers, 1))
	replays = 1
	if cfg.Mode == "graph" {
		replays = int64(max(cfg.Replays, 1))
	}
	sp := s.Spec
	if sp == nil {
		return tp, dp, layers, replays
	}
	used := sp.UsedKnobs()
	if !used["dp"] {
		dp = 1
	}
	if !used["layers"] || len(sp.Programs) > 0 || sp.Graph != nil && sp.Graph.Builder == "" {
		layers = 1 // the file's programs or op graph are the whole program (repeats counted in ops)
	}
	if !used["replays"] || !used["mode"] || sp.GraphProgram() {
		replays = 1
	}
	return tp, dp, layers, replays
}

// programs is how many distinct programs a run of s with cfg builds, of
// its tp·dp ranks: the MoE builder folds every data-parallel replica onto
// the first (BuildMoE's FoldOnto), so its ranks share tp programs; every
// other form (a file's programs or op graph, the other graph builders)
// keeps one program per rank.
func (s *Scenario) programs(tp, dp int64) int64 {
	if sp := s.Spec; sp != nil && sp.Graph != nil && sp.Graph.Builder == "moe" {
		return tp
	}
	return tp * dp
}

// Estimate computes what a run of s with cfg will cost.
func (s *Scenario) Estimate(cfg Config) Estimate {
	tp, dp, layers, replays := s.multipliers(cfg)
	chunks := int64(max(cfg.Chunks, 1))
	ranks := tp * dp
	ops := s.opsPerLayer(cfg)
	units := sat(ranks, layers, replays) // rank-layer-replays
	// Every factor is at most 2^20 (the knobs' own ranges), so the
	// products below are computed saturating, never overflowing.
	e := Estimate{Ranks: int(ranks)}
	e.Tasks = sat(units, ops)
	e.MicroOps = sat(units, ops, tp, chunks)
	e.Chunks = satAdd(sat(units, ops, chunks), sat(ranks, s.tensorChunks(cfg)))
	// Memory in MoE-layer equivalents (the calibration's unit): a file's
	// program of many ops counts as many layers. An eager run counts as
	// one replay.
	eq := max(sat(layers, ops)/defaultOpsPerLayer, 1)
	program := sat(s.programs(tp, dp), eq, bytesPerProgramLayer)
	perLayer := satAdd(bytesPerRankLayer, sat(replays, bytesPerRankLayerReplay), sat(chunks, bytesPerRankLayerChunk))
	state := satAdd(sat(ranks, bytesPerRank), sat(ranks, eq, perLayer))
	live := satAdd(program, state, sat(ranks, s.tensorChunks(cfg), bytesPerTensorChunk))
	live = satAdd(live, live/4) // the margin
	e.GCPercent, e.Bytes = gcTier(live)
	return e
}

// gcTier picks the collector's target for a run that keeps live bytes
// (margin included) and the peak it reaches there: GOGC=400 while that
// peak stays under smallRunBytes, else 100 while it stays under
// hugeRunBytes, else HugeRunGCPercent. Each tier's peak is floored at the
// threshold below it, so the estimate grows with every knob across a
// switch.
func gcTier(live int64) (pct int, bytes int64) {
	if b := satAdd(baseBytes, live, live, live/4); b <= smallRunBytes { // 9/4 of live
		return SmallRunGCPercent, b
	}
	if b := max(satAdd(baseBytes, live), smallRunBytes); b <= hugeRunBytes {
		return LargeRunGCPercent, b
	}
	return HugeRunGCPercent, max(satAdd(baseBytes, live-live/4), hugeRunBytes) // 3/4 of live
}

// sat multiplies non-negative factors, saturating at 2^62.
func sat(fs ...int64) int64 {
	const top = int64(1) << 62
	p := int64(1)
	for _, f := range fs {
		if f <= 0 {
			return 0
		}
		if p > top/f {
			return top
		}
		p *= f
	}
	return p
}

func satAdd(xs ...int64) int64 {
	const top = int64(1) << 62
	var s int64
	for _, x := range xs {
		s += x
		if s > top {
			return top
		}
	}
	return s
}

// CheckBudget returns an error wrapping [ErrBadKnob] and [ErrBudget]
// when a run of s with cfg would exceed the budget: it names the estimate,
// the limit and the knob whose halving saves the most.
func (s *Scenario) CheckBudget(cfg Config) error {
	e := s.Estimate(cfg)
	var what string
	switch {
	case e.Bytes > MemoryBudget:
		what = fmt.Sprintf("an estimated %s of memory (%d ranks, %d tasks, %d micro-ops, %d value chunks); the limit is %s (--max-memory)",
			FormatBytes(e.Bytes), e.Ranks, e.Tasks, e.MicroOps, e.Chunks, FormatBytes(MemoryBudget))
	case e.Tasks > MaxEstimatedTasks:
		what = fmt.Sprintf("about %d tasks (ranks × layers × replays × ops per layer); at most %d", e.Tasks, MaxEstimatedTasks)
	case e.MicroOps > MaxEstimatedMicroOps:
		what = fmt.Sprintf("about %d micro-ops; at most %d", e.MicroOps, int64(MaxEstimatedMicroOps))
	default:
		if Admitted != nil {
			Admitted(e)
		}
		return nil
	}
	lower := s.knobToLower(cfg)
	if tc := s.tensorChunks(cfg); sat(int64(e.Ranks), tc) > e.Chunks/2 {
		lower += fmt.Sprintf(", or the chunks of the file's tensors (%d per rank)", tc)
	}
	return fmt.Errorf("%w: %w: %s would need %s; lower %s", ErrBadKnob, ErrBudget, budgetSummary(cfg), what, lower)
}

// knobToLower names the knob most responsible for the estimate: the one
// whose setting to 1 lowers it most.
func (s *Scenario) knobToLower(cfg Config) string {
	type cand struct {
		key string
		f   func(*Config) *int
	}
	best, bestB := "", s.Estimate(cfg).Bytes
	for _, c := range []cand{
		{"tp", func(c *Config) *int { return &c.TP }},
		{"dp", func(c *Config) *int { return &c.DP }},
		{"layers", func(c *Config) *int { return &c.Layers }},
		{"replays", func(c *Config) *int { return &c.Replays }},
		{"chunks", func(c *Config) *int { return &c.Chunks }},
	} {
		x := cfg
		if p := c.f(&x); *p > 1 {
			*p = 1
			if b := s.Estimate(x).Bytes; b < bestB {
				best, bestB = fmt.Sprintf("%s (now %d)", c.key, *c.f(&cfg)), b
			}
		}
	}
	if best == "" {
		return "the scenario's size"
	}
	return best
}

// budgetSummary lists the knobs the estimate depends on.
func budgetSummary(c Config) string {
	parts := []string{fmt.Sprintf("tp=%d", c.TP)}
	if c.DP > 1 {
		parts = append(parts, fmt.Sprintf("dp=%d", c.DP))
	}
	parts = append(parts, fmt.Sprintf("layers=%d", c.Layers), fmt.Sprintf("replays=%d", c.Replays), fmt.Sprintf("chunks=%d", c.Chunks))
	return strings.Join(parts, " ")
}

// FormatBytes writes n in binary units (KiB, MiB, GiB, TiB).
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n), 0
	for v >= unit && u < 4 {
		v /= unit
		u++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[u-1])
}
