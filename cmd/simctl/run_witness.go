package main

import (
	"fmt"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/explore"
)

// writeRunWitness writes run's --witness: the schedule behind the worst
// verdict among vrs (the first variant with it), re-run with its choices
// recorded, for simctl replay. The re-run must give the trace hash run
// reported, or nothing is written.
func writeRunWitness(name string, vrs []*check.VariantReport, f runFlags) error {
	if f.witness == "" || len(vrs) == 0 {
		return nil
	}
	worst := vrs[0]
	for _, v := range vrs[1:] {
		if check.Worse(v.Verdict, worst.Verdict) {
			worst = v
		}
	}
	t, err := explore.NewTargetWith(inputArg(name), worst.Name, f.sets, readInput, explore.TargetOptions{FineSteps: f.fineSteps})
	if err != nil {
		return usageError{err}
	}
	mode, ch := worst.WitnessChooser()
	s, err := t.Run(mode, ch)
	if err != nil {
		return err
	}
	want, strategy, seed := worst.TraceHash, "nominal", uint64(0)
	if worst.WitnessSeed != nil {
		want, strategy, seed = worst.WitnessHash, worst.WitnessStrategy, uint64(*worst.WitnessSeed)
	}
	if s.TraceHash != want {
		return fmt.Errorf("--witness: variant %s's schedule %d ran again with trace %s, not %s: not written", quoteName(worst.Name), worst.WitnessSchedule, s.TraceHash, want)
	}
	w := explore.WitnessOf(t, strategy, mode, seed, worst.WitnessSchedule, s)
	return writeWitness(nil, f.stdout, w, f.witness)
}
