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
	Bytes    int64 `json:"bytes"`     // estimated peak memory of a run (reference included)
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

// ErrBudget wraps an estimate over the budget.
var ErrBudget = errors.New("over the resource budget")

// Calibration of the byte estimate: peak resident memory of `simctl run
// tp8-shared-expert --variant buggy --set budget=0` (the reference and the
// nominal schedule) measured at tp 8–256, dp 1–16, layers 1–61: a term per
// rank-layer (tasks, buffers, clocks) and one per rank-layer and peer
// (a collective's steps and the clock entries they carry grow with the
// group). The estimate is within 1–3× above what was measured.
const (
	bytesPerRankLayer     = 133 << 10
	bytesPerRankLayerPeer = 2600
	baseBytes             = 16 << 20
	defaultOpsPerLayer    = 12 // ops and stream markers of one MoE layer
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

// Estimate computes what a run of s with cfg will cost.
func (s *Scenario) Estimate(cfg Config) Estimate {
	tp, dp := int64(max(cfg.TP, 1)), int64(max(cfg.DP, 1))
	layers, chunks := int64(max(cfg.Layers, 1)), int64(max(cfg.Chunks, 1))
	replays := int64(1)
	if cfg.Mode == "graph" {
		replays = int64(max(cfg.Replays, 1))
	}
	ranks := tp * dp
	ops := s.opsPerLayer(cfg)
	if sp := s.Spec; sp != nil && (len(sp.Programs) > 0 || sp.Graph != nil && sp.Graph.Builder == "") {
		layers = 1 // a file's programs or op graph are the whole program (repeats counted in ops)
	}
	units := sat(ranks, layers, replays) // rank-layer-replays
	// Every factor is at most 2^20 (the knobs' own ranges), so the
	// products below are computed saturating, never overflowing.
	e := Estimate{Ranks: int(ranks)}
	e.Tasks = sat(units, ops)
	e.MicroOps = sat(units, ops, tp, chunks)
	e.Chunks = sat(units, ops, chunks)
	scale := max(replays, 2) * max(chunks, 4) // calibrated at 2 replays, 4 chunks
	// Memory in MoE-layer equivalents (the calibration's unit): a file's
	// program of many ops counts as many layers.
	eq := max(sat(layers, ops)/defaultOpsPerLayer, 1)
	e.Bytes = satAdd(baseBytes, sat(bytesPerRankLayer, ranks, eq, scale)/8, sat(bytesPerRankLayerPeer, ranks, tp, eq, scale)/8)
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
