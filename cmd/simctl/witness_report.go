package main

import (
	"fmt"
	"io"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/explore"
	"github.com/collsim/collsim/report"
	"github.com/collsim/collsim/sim"
)

// maxDeviationLines is how many deviations replay prints before "… and N
// more" (the --html report lists them all).
const maxDeviationLines = 12

// witnessData runs witness w's schedule on t with the timeline on — nominal
// when w is nil — and returns it as report data, with the deviations from
// nominal in words. The re-run must give w's trace hash.
func witnessData(t *explore.Target, w *explore.Witness, devs []explore.Deviation) (*report.Data, error) {
	newCh := func() sim.Chooser { return sim.Nominal{} }
	mode := sim.Timed
	if w != nil {
		newCh = func() sim.Chooser { return &sim.Replay{Choices: w.Choices} }
		if w.Mode == "untimed" {
			mode = sim.Untimed
		}
	}
	v, err := report.ScheduleExplained(t.Scenario.Program(t.Config, t.Sets), &t.Config, t.Variant, mode, newCh)
	if err != nil {
		return nil, err
	}
	if w != nil {
		if v.TraceHash != w.TraceHash {
			return nil, fmt.Errorf("drawing the witness ran trace %s, the witness records %s", v.TraceHash, w.TraceHash)
		}
		v.Schedule = fmt.Sprintf("%s witness (%s), schedule %d, seed %d, %d deviations from nominal", w.Strategy, w.Mode, w.Schedule, w.Seed, w.Deviations)
		s := w.Seed
		v.Seed = &s
		// Not the nominal schedule: its step time is this schedule's,
		// and the nominal one is not known here.
		v.NominalStepTimeNs = 0
	}
	for _, d := range devs {
		v.Deviations = append(v.Deviations, d.String())
	}
	if sv, ok := t.Scenario.Variant(t.Variant); ok {
		v.Doc, v.Expect = sv.Doc, sv.Expect
		v.Met = check.Meets(v.Verdict, sv.Expect)
	}
	return &report.Data{Scenario: t.Scenario.Name, Description: t.Scenario.Description, Variants: []*report.Variant{v}}, nil
}

// writeWitnessFiles writes --trace and --html for witness w (nominal when
// nil).
func writeWitnessFiles(out reportFiles, t *explore.Target, w *explore.Witness, devs []explore.Deviation) error {
	if out.trace == "" && out.html == "" {
		return nil
	}
	d, err := witnessData(t, w, devs)
	if err != nil {
		return err
	}
	return out.writeData(d)
}

// writeDeviations prints each deviation from nominal, in words.
func writeDeviations(w io.Writer, devs []explore.Deviation) {
	if len(devs) == 0 {
		fmt.Fprintln(w, "  no deviation from nominal: the nominal schedule itself")
		return
	}
	fmt.Fprintf(w, "  deviations from nominal (%d):\n", len(devs))
	for i, d := range devs {
		if i == maxDeviationLines && len(devs) > maxDeviationLines+1 {
			fmt.Fprintf(w, "  … and %d more (simctl replay FILE --shrink keeps the ones that matter; --html lists them all)\n", len(devs)-i)
			break
		}
		fmt.Fprintf(w, "  %d. %s\n", i+1, d)
	}
}

// writeExploreReport writes explore's --trace and --html: the witness, or
// the nominal schedule when every schedule was ok.
func writeExploreReport(t *explore.Target, sum *explore.Summary, f exploreFlags, stdout io.Writer) error {
	if f.trace == "" && f.html == "" {
		return nil
	}
	var devs []explore.Deviation
	if sum.Witness != nil {
		var err error
		if devs, err = explore.Explain(t, sum.Witness); err != nil {
			return err
		}
	}
	return writeWitnessFiles(reportFiles{trace: f.trace, html: f.html, stdout: stdout}, t, sum.Witness, devs)
}
