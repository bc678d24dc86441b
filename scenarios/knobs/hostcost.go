package knobs

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/collsim/collsim/ranks"
)

// WorldConfig completes a world's config with what the hardware profile
// measured: host issue costs for the mode (ranks.IssueCosts: an
// eager PyTorch op, a matmul, an event record or wait, a graph replay) and
// the jitter tables the jitter knob picks.
func WorldConfig(cfg Config, hw ranks.Profile, c ranks.Config) ranks.Config {
	c = ranks.IssueCosts(hw, c)
	c.Jitter, c.HostJitter = JitterTables(cfg.Jitter)
	c.Share, c.GraphGap = hw.Share(), hw.GraphGap
	c.FineSteps = cfg.FineSteps
	return c
}

// JitterTables returns the device and host jitter tables for the jitter
// knob's value (validated by jitterKnob): the H200's measured spread for
// "measured" and for no value (the default: exploration's noise is the
// hardware's), widened F times for "measured:F", and nil for "wide" (the
// world's ×0.25 to ×5, on purpose).
func JitterTables(v string) (dev, host []int64) {
	if v == "wide" {
		return nil, nil
	}
	f := 1.0
	if _, num, ok := strings.Cut(v, ":"); ok {
		f, _ = strconv.ParseFloat(num, 64)
	}
	return ranks.Widen(ranks.MeasuredJitter, f), ranks.Widen(ranks.MeasuredHostJitter, f)
}

func init() { knobs = append(knobs, jitterKnob) }

var jitterKnob = knob{
	key:  "jitter",
	help: "duration noise of exploration: measured (the H200's spread; default), measured:F (widened F×), wide (×0.25–×5)",
	set: func(c *Config, v string) error {
		if v == "wide" || v == "measured" {
			c.Jitter = v
			return nil
		}
		if rest, ok := strings.CutPrefix(v, "measured:"); ok {
			if f, err := strconv.ParseFloat(rest, 64); err == nil && f >= 0 && f <= 100 {
				c.Jitter = v
				return nil
			}
		}
		return fmt.Errorf("%w: jitter=%q: want wide, measured or measured:F with F a number in [0, 100]", ErrBadKnob, v)
	},
	get: func(c *Config) string { return c.Jitter }, // "": measured
}
