package main

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"time"

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
	witness     string      // --witness FILE: the worst schedule, for simctl replay
	budget      int         // --budget N: --set budget=N
	budgetSet   bool
	time        time.Duration // --time: stop exploring when it has passed
	stdout      io.Writer     // takes the output named "-"
}

func newRunCmd(stdout, stderr io.Writer) *cobra.Command {
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
		RunE: func(c *cobra.Command, args []string) error {
			f.budgetSet = c.Flags().Changed("budget")
			if err := checkOutputs("--witness, --trace, --html:", []string{f.witness, f.out.trace, f.out.html}, args); err != nil {
				return err
			}
			rep, err := dashOutputs("--witness, --trace, --html:", stdout, stderr, f.witness, f.out.trace, f.out.html)
			if err != nil {
				return err
			}
			f.out.stdout, f.stdout = stdout, stdout
			return runScenario(rep, args[0], f)
		},
	}
	cmd.Flags().StringSliceVar(&f.variants, "variant", nil, "run only these variants (repeatable or comma-separated: --variant buggy,fixed)")
	cmd.Flags().BoolVar(&f.noExpect, "no-expect", false, "report verdicts without judging them: exit 0 whatever the verdicts (2 still means bad input)")
	cmd.Flags().StringArrayVar(&f.sets, "set", nil, "override a knob, key=value (repeatable); knobs:\n"+scenarios.KnobHelp())
	cmd.Flags().StringVar(&f.format, "format", "text", "output format: text or json")
	cmd.Flags().IntVar(&f.maxFindings, "max-findings", 32, "keep at most N findings of each kind per variant (JSON's findings_total counts them all; findings_truncated says some were left out)")
	cmd.Flags().IntVar(&f.budget, "budget", 0, "schedules to explore besides the nominal one, per variant (the same as --set budget=N; default: the scenario's budget knob)")
	cmd.Flags().StringVar(&f.witness, "witness", "", "write the schedule behind the worst verdict to `FILE`, a witness for simctl replay (-: standard output, the summary then to stderr)")
	cmd.Flags().DurationVar(&f.time, "time", 0, "stop starting schedules after this long (e.g. 30s, 10m), over all variants; a variant cut short says so (partial), and its verdict is from the schedules run")
	addFineStepsFlag(cmd, &f.fineSteps)
	f.out.addFlags(cmd)
	return cmd
}

// budgetSets folds --budget into the overrides: one budget, however it
// is given (--budget N, --set budget=N, or both alike).
func budgetSets(sets []string, budget int, given bool) ([]string, error) {
	if !given {
		return sets, nil
	}
	if budget < 0 {
		return nil, usagef("--budget %d: want 0 or more schedules besides the nominal one", budget)
	}
	for _, s := range sets {
		if k, v, ok := strings.Cut(s, "="); ok && strings.TrimSpace(k) == "budget" && strings.TrimSpace(v) != fmt.Sprint(budget) {
			return nil, usagef("--budget %d and --set %s disagree: give the budget once", budget, s)
		}
	}
	return append(append([]string{}, sets...), fmt.Sprintf("budget=%d", budget)), nil
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
	if f.sets, err = budgetSets(f.sets, f.budget, f.budgetSet); err != nil {
		return err
	}
	// Validate the overrides once, before anything runs.
	probe := sc.Base
	if err := probe.ApplySets(f.sets); err != nil {
		return usageError{knobHint(f.sets, err)}
	}
	if f.maxFindings < 1 {
		return usagef("--max-findings %d: want at least 1", f.maxFindings)
	}
	if f.time < 0 {
		return usagef("--time %s: want a positive duration", f.time)
	}
	var stop func() bool
	if f.time > 0 {
		deadline := time.Now().Add(f.time)
		stop = func() bool { return time.Now().After(deadline) }
	}
	rep := &Report{Scenario: sc.Name}
	for _, v := range vs {
		vr, err := check.RunVariant(sc, v, check.Options{Extra: f.sets, MaxFindings: f.maxFindings, Stop: stop})
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
		writeText(stdout, sc, rep, f)
		for _, v := range rep.Variants {
			if v.Partial {
				fmt.Fprintf(stdout, "incomplete: --time %s ran out: variant %s ran %d of %d schedules\n", f.time, quoteName(v.Name), v.Schedules, v.Planned)
			}
		}
	}
	if err := f.out.write(sc, rep.Variants); err != nil {
		return err
	}
	if err := writeRunWitness(name, rep.Variants, f); err != nil {
		return err
	}
	for _, v := range rep.Variants {
		if !v.Met && !f.noExpect {
			return errUnmet
		}
	}
	return nil
}

func writeText(w io.Writer, sc *scenarios.Scenario, rep *Report, f runFlags) {
	fmt.Fprintf(w, "scenario %s\n", quoteName(sc.Name))
	if sc.Description != "" { // a file may have none: no blank line for it
		for _, line := range strings.Split(sc.Description, "\n") {
			fmt.Fprintf(w, "  %s\n", quoteName(line))
		}
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
	if f.noExpect {
		// Verdicts without judging them: no expectation, nothing met or not.
		fmt.Fprintf(w, "%-*s %-*s %9s %12s  %s\n", nw, "variant", vw, "verdict", "schedules", "step time", "trace")
		for _, v := range rep.Variants {
			fmt.Fprintf(w, "%-*s %-*s %9d %12s  %s\n", nw, quoteName(v.Name), vw, v.Verdict, v.Schedules, fmtNs(v.StepTimeNs), v.TraceHash)
		}
	} else {
		fmt.Fprintf(w, "%-*s %-*s %-*s %-4s %9s %12s  %s\n", nw, "variant", ew, "expect", vw, "verdict", "met", "schedules", "step time", "trace")
		for _, v := range rep.Variants {
			met := "yes"
			if !v.Met {
				met = "NO"
			}
			fmt.Fprintf(w, "%-*s %-*s %-*s %-4s %9d %12s  %s\n", nw, quoteName(v.Name), ew, v.Expect, vw, v.Verdict, met, v.Schedules, fmtNs(v.StepTimeNs), v.TraceHash)
		}
	}
	writeComparisons(w, rep.Comparisons)
	for _, v := range rep.Variants {
		fmt.Fprintf(w, "\n== %s: %s\n", quoteName(v.Name), v.Verdict)
		if v.Doc != "" {
			if sets := userSets(f.sets); sets != "" {
				// The description is the variant's as written: --set may
				// have changed what it describes.
				fmt.Fprintf(w, "   as written, before --set %s: %s\n", quoteName(sets), v.Doc)
			} else {
				fmt.Fprintf(w, "   %s\n", v.Doc)
			}
		}
		fmt.Fprintf(w, "   config: %s\n", configSummary(sc, v.Config))
		for _, n := range v.Notes {
			fmt.Fprintf(w, "   note: %s\n", n)
		}
		fmt.Fprintf(w, "   schedules: %d (nominal: %s)", v.Schedules, v.NominalResult)
		if v.WitnessSeed != nil {
			// What reproduces it as printed: the same run cut after
			// that schedule (--budget N), or its witness file.
			fmt.Fprintf(w, "; witness: schedule %d of seed %d (%s, trace %s): --budget %d reaches it, --witness FILE writes it for simctl replay",
				v.WitnessSchedule, v.BaseSeed, v.WitnessStrategy, v.WitnessHash, v.WitnessSchedule)
		}
		fmt.Fprintln(w)
		writeGroups(w, v)
	}
}

// userSets is the --set overrides that change the program (budget and
// seed only choose schedules), joined by spaces.
func userSets(sets []string) string {
	var out []string
	for _, s := range sets {
		k, _, _ := strings.Cut(s, "=")
		if k = strings.TrimSpace(k); k != "budget" && k != "seed" {
			out = append(out, s)
		}
	}
	return strings.Join(out, " ")
}

// maxGroupsShown is how many groups of findings of each kind a variant's
// text shows.
const maxGroupsShown = 3

// writeGroups prints v's root cause, then one line per group of findings
// (the root cause's first; at most maxGroupsShown of a kind), with how
// many more are like it, and how many findings of each kind are not shown.
func writeGroups(w io.Writer, v *check.VariantReport) {
	writeCauseAndGroups(w, "   ", v.RootCause, v.Groups, v.Counts, func(k string) string { return moreWhere(v, k) })
}

// writeCauseAndGroups is the text of a root cause and its grouped findings,
// each line indented by indent: the cause and the missing edge, one line
// per group (at most maxGroupsShown of a kind, with "N more like it"), how
// many of each kind in counts are not shown and where they are (rest), and
// the provenance legend when a line uses it.
func writeCauseAndGroups(w io.Writer, indent string, c *check.Cause, gs []check.Group, counts map[string]int, rest func(kind string) string) {
	if c != nil {
		sentence, _, _ := strings.Cut(c.Text, ". Missing: ")
		fmt.Fprintf(w, "%scause: %s\n", indent, quoteName(sentence))
		fmt.Fprintf(w, "%smissing: %s\n", indent, quoteName(c.Edge))
	}
	legend := false
	groups, shown := map[string]int{}, map[string]int{}
	for _, g := range gs {
		if groups[g.Kind] == maxGroupsShown {
			continue
		}
		groups[g.Kind]++
		shown[g.Kind] += 1 + g.More
		msg := shortProvenance(g.Message)
		legend = legend || provTermRe.MatchString(msg)
		more := ""
		if g.More > 0 {
			more = fmt.Sprintf(" (%d more like it)", g.More)
		}
		fmt.Fprintf(w, "%s[%s] %s%s\n", indent, g.Kind, quoteName(msg), more)
	}
	for _, k := range sortedKinds(counts) {
		if n := counts[k] - shown[k]; n > 0 {
			fmt.Fprintf(w, "%s[%s] … and %d more (%s)\n", indent, k, n, rest(k))
		}
	}
	if legend {
		fmt.Fprintf(w, "%s(r0:T[c] is chunk c of tensor T as rank 0 computed it; 7·r0:T[c] counts it 7 times)\n", indent)
	}
}

// sortedKinds is m's kinds, most severe first.
func sortedKinds(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		if check.Worse(ks[i], ks[j]) != check.Worse(ks[j], ks[i]) {
			return check.Worse(ks[i], ks[j])
		}
		return ks[i] < ks[j]
	})
	return ks
}

// provTermRe matches a provenance term ("r0:x[1]", "7·r2:y[0]").
var provTermRe = regexp.MustCompile(`(\d+·)?r\d+:[^ \[\];]+\[\d+\]`)

// maxProvTerms is how many terms of a value's provenance a text line
// shows; the JSON has them all.
const maxProvTerms = 3

// shortProvenance cuts each provenance sum in msg ("= a + b + c + …") to
// its first maxProvTerms terms and says how many there are.
func shortProvenance(msg string) string {
	var b strings.Builder
	for {
		i := strings.Index(msg, " = ")
		if i < 0 {
			b.WriteString(msg)
			return b.String()
		}
		b.WriteString(msg[:i+3])
		msg = msg[i+3:]
		end := len(msg)
		if j := strings.IndexAny(msg, ";("); j >= 0 {
			end = j
		}
		sum := strings.TrimRight(msg[:end], " ")
		terms := strings.Split(sum, " + ")
		if len(terms) > maxProvTerms+1 {
			sum = strings.Join(terms[:maxProvTerms], " + ") + fmt.Sprintf(" + … (%d terms)", len(terms))
		}
		b.WriteString(sum)
		msg = msg[len(strings.TrimRight(msg[:end], " ")):]
	}
}

func fmtNs(ns int64) string {
	return fmt.Sprintf("%.2fµs", float64(ns)/1000)
}

// configSummary is a variant's config line: for a scenario file, only the
// knobs its form reads (format.Spec.Summary).
func configSummary(sc *scenarios.Scenario, c check.Settings) string {
	if cfg, ok := c.(*scenarios.Config); ok && sc != nil && sc.Spec != nil {
		return sc.Spec.Summary(*cfg)
	}
	return c.Summary()
}
