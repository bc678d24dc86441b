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
// --set budget=0 --set tp=… --set dp=… --set layers=…`, with finished
// tasks and clock snapshots retired as the run goes (ranks/retire.go),
// measured at 8–4096 ranks (tp up to 1024, dp up to 512), 1–61 layers,
// 2–8 replays, 4–16 chunks, graph and eager mode (TestEstimateBounds lists
// the points). Such a run keeps the reference's world (built whole, one
// stream per rank) while the nominal schedule runs, so it peaks at about
// twice a nominal schedule alone (simctl bench's scale rows). What is
// live grows with the program, built whole before the run: a term per
// rank (communicators, streams), one per rank-layer (kernels, tensors,
// lowered graph nodes), one per rank-layer-replay (a replay's values and
// provenance) and one per chunk of those. A collective's per-peer state no
// longer shows (tp 256–1024, one layer: 44–104 MiB). The variable part is
// counted with a margin of 5/4; the estimate is above every measured peak
// and within 2× of it.
const (
	bytesPerRank              = 64 << 10
	bytesPerRankLayer         = 14 << 10
	bytesPerRankLayerReplay   = 21 << 10
	bytesPerRankLayerReplayCk = 800
	baseBytes                 = 20 << 20
	defaultOpsPerLayer        = 12 // ops and stream markers of one MoE layer
)

// The collector's target for a run (Estimate.GCPercent): a small run
// collects at GOGC=400, which saves CPU (10–30 % in the calibration's
// runs) and costs little memory; a run whose peak at 400 would pass
// smallRunBytes collects at Go's default 100: at 400 the heap goal is 5×
// the live heap instead of 2× (512 ranks × 61 layers peaked at 2,500
// MiB at 400 against 1,920–2,090 at 100). The peak at 400 was up to 1.9× the
// peak at 100 (tp=512, one layer: 121 against 64 MiB), so the variable
// part is counted 7/4 times there (its margin of 5/4 included, 2.2×).
const (
	SmallRunGCPercent = 400
	LargeRunGCPercent = 100
	smallRunBytes     = 512 << 20
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
			most = max(most, int64(sp.Programs[i].expandedLen(cfg))) // repeated blocks counted, not expanded
		}
		return max(most, 1)
	}
	return defaultOpsPerLayer
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
	used := sp.usedKnobs()
	if !used["dp"] {
		dp = 1
	}
	if !used["layers"] || len(sp.Programs) > 0 || sp.Graph != nil && sp.Graph.Builder == "" {
		layers = 1 // the file's programs or op graph are the whole program (repeats counted in ops)
	}
	if !used["replays"] || !used["mode"] || sp.graphProgram() {
		replays = 1
	}
	return tp, dp, layers, replays
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
	e.Chunks = sat(units, ops, chunks)
	// Memory in MoE-layer equivalents (the calibration's unit): a file's
	// program of many ops counts as many layers. An eager run keeps about
	// what a graph run of 2 replays keeps.
	rep := max(replays, 2)
	eq := max(sat(layers, ops)/defaultOpsPerLayer, 1)
	perLayer := satAdd(bytesPerRankLayer, sat(rep, satAdd(bytesPerRankLayerReplay, sat(chunks, bytesPerRankLayerReplayCk))))
	live := satAdd(sat(ranks, bytesPerRank), sat(ranks, eq, perLayer))
	live = satAdd(live, live/4) // the margin
	// The peak under the collector's target the run will use: at
	// GOGC=400 while that stays small, else at 100 (and never below
	// smallRunBytes, so the estimate grows with every knob).
	e.GCPercent, e.Bytes = SmallRunGCPercent, satAdd(baseBytes, sat(live, 7)/4)
	if e.Bytes > smallRunBytes {
		e.GCPercent, e.Bytes = LargeRunGCPercent, max(satAdd(baseBytes, live), smallRunBytes)
	}
	return e
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
	return fmt.Errorf("%w: %w: %s would need %s; lower %s", ErrBadKnob, ErrBudget, cfg.budgetSummary(), what, s.knobToLower(cfg))
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
func (c Config) budgetSummary() string {
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
