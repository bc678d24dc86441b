package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios"
)

func init() { register(newRunCmd) }

type runFlags struct {
	variants []string // --variant, repeatable or comma-separated
	noExpect bool     // --no-expect: print verdicts, exit 0 whatever they are
	// maxFindings caps the findings kept per kind (--max-findings).
	maxFindings int
	sets        []string
	format      string
	out         reportFiles // --trace, --html (report_files.go)
	fineSteps   bool        // --fine-steps (finesteps.go)
}

func newRunCmd(stdout, _ io.Writer) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run NAME|FILE",
		Short: "Run a scenario's variants: nominal schedule plus seeded exploration, with verdicts",
		Example: `  simctl run tp8-shared-expert
  simctl run tp8-shared-expert --variant buggy,fixed --set budget=20
  simctl run tp8-shared-expert --variant buggy --set workspace=per-call --no-expect
  simctl run tp8-shared-expert --variant tp4-buggy --set strategy=multimem --format json --no-expect
  simctl run docs/examples/two-stream.yaml`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeScenarios,
		RunE: func(_ *cobra.Command, args []string) error {
			return runScenario(stdout, args[0], f)
		},
	}
	cmd.Flags().StringSliceVar(&f.variants, "variant", nil, "run only these variants (repeatable or comma-separated: --variant buggy,fixed)")
	cmd.Flags().BoolVar(&f.noExpect, "no-expect", false, "report verdicts without judging them: exit 0 whatever the verdicts (2 still means bad input)")
	cmd.Flags().StringArrayVar(&f.sets, "set", nil, "override a knob, key=value (repeatable); knobs:\n"+scenarios.KnobHelp())
	cmd.Flags().StringVar(&f.format, "format", "text", "output format: text or json")
	cmd.Flags().IntVar(&f.maxFindings, "max-findings", 32, "keep at most N findings of each kind per variant (JSON's findings_total counts them all; findings_truncated says some were left out)")
	addFineStepsFlag(cmd, &f.fineSteps)
	f.out.addFlags(cmd)
	return cmd
}

// Report is the JSON document of `simctl run`.
type Report struct {
	Scenario string                 `json:"scenario"`
	Variants []*check.VariantReport `json:"variants"`
	// Comparisons are the scenario's step-time comparisons (compare.go).
	Comparisons []comparison `json:"comparisons,omitempty"`
}

func runScenario(stdout io.Writer, name string, f runFlags) error {
	sc, err := loadScenario(name)
	if err != nil {
		return err
	}
	sc = sc.WithFineSteps(f.fineSteps)
	if f.format != "text" && f.format != "json" {
		return usagef("--format %q: want text or json", f.format)
	}
	vs, err := pickVariants(sc, name, f.variants)
	if err != nil {
		return err
	}
	// Validate the overrides once, before anything runs.
	probe := sc.Base
	if err := probe.ApplySets(f.sets); err != nil {
		return usageError{err}
	}
	if f.maxFindings < 1 {
		return usagef("--max-findings %d: want at least 1", f.maxFindings)
	}
	rep := &Report{Scenario: sc.Name}
	for _, v := range vs {
		vr, err := check.RunVariant(sc, v, check.Options{Extra: f.sets, MaxFindings: f.maxFindings})
		if err != nil {
			return usageError{fmt.Errorf("variant %s: %w", v.Name, err)}
		}
		rep.Variants = append(rep.Variants, vr)
	}
	rep.Comparisons = comparisons(sc, rep.Variants)
	// The summary first: an optional file that cannot be written (a full
	// disk) must not cost the result.
	if f.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		writeText(stdout, sc, rep)
	}
	if err := f.out.write(sc, rep.Variants); err != nil {
		return err
	}
	for _, v := range rep.Variants {
		if !v.Met && !f.noExpect {
			return errUnmet
		}
	}
	return nil
}

func writeText(w io.Writer, sc *scenarios.Scenario, rep *Report) {
	fmt.Fprintf(w, "scenario %s\n", quoteName(sc.Name))
	for _, line := range strings.Split(sc.Description, "\n") {
		fmt.Fprintf(w, "  %s\n", quoteName(line))
	}
	fmt.Fprintln(w)
	// Columns at least as wide as they always were, wider where a name,
	// expectation or verdict (invalid-access) is longer, so rows stay in line.
	nw, ew, vw := 14, 16, 11
	for _, v := range rep.Variants {
		nw = max(nw, len(quoteName(v.Name)))
		ew = max(ew, len(v.Expect))
		vw = max(vw, len(v.Verdict))
	}
	fmt.Fprintf(w, "%-*s %-*s %-*s %-4s %9s %12s  %s\n", nw, "variant", ew, "expect", vw, "verdict", "met", "schedules", "step time", "trace")
	for _, v := range rep.Variants {
		met := "yes"
		if !v.Met {
			met = "NO"
		}
		fmt.Fprintf(w, "%-*s %-*s %-*s %-4s %9d %12s  %s\n", nw, quoteName(v.Name), ew, v.Expect, vw, v.Verdict, met, v.Schedules, fmtNs(v.StepTimeNs), v.TraceHash)
	}
	writeComparisons(w, rep.Comparisons)
	for _, v := range rep.Variants {
		fmt.Fprintf(w, "\n== %s: %s\n", quoteName(v.Name), v.Verdict)
		if v.Doc != "" {
			fmt.Fprintf(w, "   %s\n", v.Doc)
		}
		fmt.Fprintf(w, "   config: %s\n", v.Config.Summary())
		for _, n := range v.Notes {
			fmt.Fprintf(w, "   note: %s\n", n)
		}
		fmt.Fprintf(w, "   schedules: %d (nominal: %s)", v.Schedules, v.NominalResult)
		if v.WitnessSeed != nil {
			strat := ""
			if v.WitnessStrategy == check.StrategyPCT {
				strat = "pct, "
			}
			fmt.Fprintf(w, "; witness seed %d (%strace %s)", *v.WitnessSeed, strat, v.WitnessHash)
		}
		fmt.Fprintln(w)
		// At most three findings of each kind; the JSON has them all.
		shown := map[string]int{}
		for _, f := range v.Findings {
			shown[f.Kind]++
			switch n := shown[f.Kind]; {
			case n <= 3:
				fmt.Fprintf(w, "   [%s] %s\n", f.Kind, quoteName(f.Message))
			case n == 4:
				fmt.Fprintf(w, "   [%s] … and %d more (%s)\n", f.Kind, v.Counts[f.Kind]-3, moreWhere(v, f.Kind))
			}
		}
	}
}

func fmtNs(ns int64) string {
	return fmt.Sprintf("%.2fµs", float64(ns)/1000)
}
