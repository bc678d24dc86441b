package check

import (
	"github.com/collsim/collsim/sim"
)

// runCapped is RunSchedule with the world keeping at most maxFindings
// findings of each kind (0: its default).
func runCapped(p Program, ref *Reference, mode sim.Mode, ch sim.Chooser, maxFindings int) (*Outcome, error) {
	b, err := ref.Build(p, sim.NewEngine(mode, ch))
	if err != nil {
		return nil, err
	}
	if maxFindings > 0 {
		b.World.SetMaxFindings(maxFindings)
	}
	return RunBuilt(b, ref)
}

// FindingTotals counts o's findings per kind, kept or not; see
// findingTotals. Call it before o is released.
func FindingTotals(o *Outcome) map[string]int { return findingTotals(o) }

// findingTotals counts o's findings per kind, including those the world
// left out past its per-kind cap: for each kind, the world's own count
// (Result.Counts, taken before the cap) stands in for the findings of that
// kind it kept.
func findingTotals(o *Outcome) map[string]int {
	out := map[string]int{}
	for _, f := range o.Findings {
		out[f.Kind]++
	}
	if o.Result == nil {
		return out
	}
	kept := map[string]int{}
	for _, f := range o.Result.Findings {
		kept[f.Kind]++
	}
	for k, n := range o.Result.Counts {
		if n > kept[k] {
			out[k] += n - kept[k]
		}
	}
	return out
}
