package main

import (
	"fmt"
	"io"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios"
)

// comparison is one step-time comparison of the report: what Variant costs
// against Against.
type comparison struct {
	Variant   string  `json:"variant"`
	Against   string  `json:"against"`
	Label     string  `json:"label"`
	DeltaNs   int64   `json:"delta_ns"`
	DeltaPct  float64 `json:"delta_pct"`
	VariantNs int64   `json:"variant_ns"`
	AgainstNs int64   `json:"against_ns"`
}

// comparisons computes the scenario's declared comparisons among the
// variants that ran (both sides must have run and produced a step time).
func comparisons(sc *scenarios.Scenario, vs []*check.VariantReport) []comparison {
	by := map[string]*check.VariantReport{}
	for _, v := range vs {
		by[v.Name] = v
	}
	var out []comparison
	for _, c := range sc.Compare {
		a, b := by[c.Variant], by[c.Against]
		if a == nil || b == nil || b.StepTimeNs == 0 {
			continue
		}
		d := a.StepTimeNs - b.StepTimeNs
		out = append(out, comparison{Variant: c.Variant, Against: c.Against, Label: c.Label, DeltaNs: d,
			DeltaPct: 100 * float64(d) / float64(b.StepTimeNs), VariantNs: a.StepTimeNs, AgainstNs: b.StepTimeNs})
	}
	return out
}

func writeComparisons(w io.Writer, cs []comparison) {
	if len(cs) == 0 {
		return
	}
	fmt.Fprintln(w)
	for _, c := range cs {
		verb := "costs"
		d := c.DeltaNs
		if d < 0 {
			verb, d = "saves", -d
		}
		fmt.Fprintf(w, "step time: %s %s %s (%+.1f%%) against %s: %s\n", c.Variant, verb, fmtNs(d), c.DeltaPct, c.Against, c.Label)
	}
}
