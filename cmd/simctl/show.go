package main

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/explore"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

func init() { register(newShowCmd) }

type showFlags struct {
	variant string
	sets    []string
	yaml    bool
	lowered bool // --lowered: with --yaml, a graph's program op by op
	width   int
	format  string
	// fineSteps is --fine-steps (finesteps.go)
	fineSteps bool
	witness   string // --witness FILE: draw that schedule, not the nominal one
}

func newShowCmd(stdout, _ io.Writer) *cobra.Command {
	var f showFlags
	cmd := &cobra.Command{
		Use:   "show NAME|FILE",
		Short: "Show a scenario: an ASCII timeline per rank and stream of its nominal schedule, or its YAML",
		Long: `show runs one variant of a scenario on its nominal schedule (the cost model,
no jitter, no skew) and draws what ran when: one row per rank and stream, one
column per slice of simulated time. Compute kernels are drawn with '=',
each collective call with its own letter (A, B, …; the legend names them),
event records and waits with '|'. Two letters stacked in one column on two
streams of a rank are two collectives running at the same time.

With --witness FILE it draws the schedule that witness recorded instead.

With --yaml it prints the scenario as a scenario file instead (see
docs/scenario-format.md); running that file gives the same verdicts and
trace hashes as the built-in. A scenario whose work is an op graph (the MoE
form of tp8-shared-expert, a file's graph: ops) prints as that graph; add
--lowered to print the program the graph lowers to instead, op by op: every
kernel with its reads, writes, time and weights, every collective, every
event record and wait on its stream. Each variant that set a knob the
lowering consumed (placement, phase, tokens, …) becomes a patch of that
program. Running the lowered file gives the same verdicts and trace hashes,
variant by variant; edit any op of it and run it.`,
		Example: `  simctl show tp8-shared-expert
  simctl show tp8-shared-expert --variant fixed --width 120
  simctl run tp8-shared-expert --variant buggy --set layers=1 --witness /tmp/w.json
  simctl show --witness /tmp/w.json
  simctl show tp8-shared-expert --yaml > /tmp/my-tp8.yaml
  simctl show tp8-shared-expert --yaml --lowered > /tmp/tp8-ops.yaml
  simctl show docs/examples/two-stream.yaml --format json`,
		Args:              cobra.RangeArgs(0, 1),
		ValidArgsFunction: completeScenarios,
		RunE: func(_ *cobra.Command, args []string) error {
			switch {
			case f.witness != "" && len(args) == 0:
				return showScenario(stdout, "", f)
			case f.witness != "":
				return usagef("show --witness %s: the witness names its scenario; give no NAME", quoteName(f.witness))
			case len(args) == 0:
				return usagef("show: give a scenario NAME or FILE (or --witness FILE)")
			}
			return showScenario(stdout, args[0], f)
		},
	}
	cmd.Flags().Var(&singleVariant{p: &f.variant}, "variant", "variant to draw (default: the first)")
	cmd.Flags().StringArrayVar(&f.sets, "set", nil, "override a knob, key=value (repeatable); see simctl run --help")
	cmd.Flags().BoolVar(&f.yaml, "yaml", false, "print the scenario as a scenario file instead")
	cmd.Flags().BoolVar(&f.lowered, "lowered", false, "with --yaml: print an op graph's program op by op (a programs file)")
	cmd.Flags().IntVar(&f.width, "width", 100, "timeline width in columns (20..1000)")
	cmd.Flags().StringVar(&f.witness, "witness", "", "draw the schedule of witness `FILE` (from run, explore or replay --shrink) instead of the nominal one")
	addFineStepsFlag(cmd, &f.fineSteps)
	addFormatFlag(cmd, &f.format)
	return cmd
}

// showReport is the JSON document of `simctl show`.
type showReport struct {
	Scenario   string `json:"scenario"`
	Variant    string `json:"variant"`
	Config     string `json:"config"`
	Verdict    string `json:"verdict"`
	TraceHash  string `json:"trace_hash"`
	StepTimeNs int64  `json:"step_time_ns"`
	// Notes are the build's notes: strategies chosen, transform decisions
	// ("skipped: mid-branch collective").
	Notes []string   `json:"notes,omitempty"`
	Spans []spanJSON `json:"spans"`
}

type spanJSON struct {
	Rank    int         `json:"rank"`
	Stream  string      `json:"stream"`
	Name    string      `json:"name"`
	Kind    string      `json:"kind"`
	Replay  int         `json:"replay"`
	Coll    string      `json:"coll,omitempty"`
	StartNs int64       `json:"start_ns"`
	EndNs   int64       `json:"end_ns"`
	Phases  []phaseJSON `json:"phases,omitempty"`
}

type phaseJSON struct {
	Name    string `json:"name"`
	StartNs int64  `json:"start_ns"`
	EndNs   int64  `json:"end_ns"`
}

func showScenario(stdout io.Writer, arg string, f showFlags) error {
	if err := checkFormat(f.format); err != nil {
		return err
	}
	if f.width < 20 || f.width > 1000 {
		return usagef("--width %d: want 20..1000", f.width)
	}
	if f.witness != "" {
		return showWitness(stdout, f)
	}
	sc, err := loadScenario(arg)
	if err != nil {
		return err
	}
	if f.lowered && !f.yaml {
		return usagef("--lowered goes with --yaml: simctl show %s --yaml --lowered", arg)
	}
	if f.lowered && sc.Spec != nil && sc.Spec.Graph != nil {
		spec, err := scenarios.Lowered(sc)
		if errors.Is(err, scenarios.ErrNotExpressible) {
			return usageError{err}
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "# %s lowered to its program, op by op (simctl show %s --yaml --lowered).\n", sc.Name, arg)
		fmt.Fprintf(stdout, "# Running this file gives the same verdicts and trace hashes as %s.\n", arg)
		_, err = stdout.Write(scenarios.MarshalSpec(spec))
		return err
	}
	if f.yaml {
		// A built-in written as a file prints that file, byte for byte,
		// comments included. (A programs file is its program already:
		// --lowered prints it the same way.)
		if b, ok := scenarios.Lookup(arg); ok && b == sc {
			if data, ok := scenarios.BuiltinFile(arg); ok {
				_, err = stdout.Write(data)
				return err
			}
		}
		data, err := scenarios.ExportYAML(sc)
		if errors.Is(err, scenarios.ErrNotExpressible) {
			return usageError{err}
		}
		if err != nil {
			return err
		}
		_, err = stdout.Write(data)
		return err
	}
	if len(sc.Variants) == 0 {
		return usagef("scenario %q has no variants", sc.Name)
	}
	sc = sc.WithFineSteps(f.fineSteps)
	v := sc.Variants[0]
	if f.variant != "" {
		var ok bool
		if v, ok = sc.Variant(f.variant); !ok {
			names := make([]string, len(sc.Variants))
			for i, x := range sc.Variants {
				names[i] = x.Name
			}
			return usagef("scenario %q has no variant %q (variants: %s)", sc.Name, f.variant, strings.Join(names, ", "))
		}
	}
	cfg, err := sc.VariantConfig(v, f.sets)
	if err != nil {
		return usageError{err}
	}
	return drawSchedule(stdout, sc, v.Name, cfg, sc.Program(cfg, f.sets), sim.Timed, sim.Nominal{}, "nominal schedule", "", f)
}

// showWitness draws the schedule of the witness --witness names.
func showWitness(stdout io.Writer, f showFlags) error {
	data, err := readFile(inputArg(f.witness), "witness", maxWitnessBytes)
	if err != nil {
		return usagef("show: %w", err)
	}
	w, err := explore.ParseWitness(data)
	if err != nil {
		return usagef("%s: %w", f.witness, err)
	}
	read, note := witnessSource(f.witness, w, false)
	if note != "" {
		fmt.Fprintln(stdout, note)
	}
	t, err := w.TargetFrom(read)
	if err != nil {
		return usagef("%s: %w", f.witness, err)
	}
	mode := sim.Timed
	if w.Mode == "untimed" {
		mode = sim.Untimed
	}
	what := fmt.Sprintf("witness %s: %s schedule %d (%s)", quoteName(f.witness), w.Strategy, w.Schedule, w.Mode)
	return drawSchedule(stdout, t.Scenario, t.Variant, t.Config, t.Scenario.Program(t.Config, t.Sets), mode, &sim.Replay{Choices: w.Choices}, what, w.TraceHash, f)
}

// drawSchedule runs variant name of sc (its settings cfg, its program
// prog) on the schedule ch makes in mode, with the timeline on, and draws
// it (what says which schedule). A witness's (want: its trace hash) must
// reproduce.
func drawSchedule(stdout io.Writer, sc *scenarios.Scenario, name string, cfg scenarios.Config, prog check.Program, mode sim.Mode, ch sim.Chooser, what, want string, f showFlags) error {
	ref, err := check.NewReference(prog)
	if err != nil {
		return usageError{fmt.Errorf("variant %s: %w", name, err)}
	}
	o, err := check.RunScheduleOpt(prog, ref, mode, ch, check.BuildOptions{Timeline: true})
	if err != nil {
		return usageError{fmt.Errorf("variant %s: %w", name, err)}
	}
	if want != "" && o.TraceHash != want {
		return fmt.Errorf("drawing the witness ran trace %s, the witness records %s", o.TraceHash, want)
	}
	spans := o.Built.World.Spans()
	if f.format == formatJSON {
		rep := showReport{Scenario: sc.Name, Variant: name, Config: configSummary(sc, &cfg), Verdict: o.Verdict, TraceHash: o.TraceHash,
			StepTimeNs: int64(o.StepTime), Notes: o.Built.Notes, Spans: []spanJSON{}}
		for _, s := range spans {
			sj := spanJSON{Rank: s.Rank, Stream: s.Stream, Name: s.Name, Kind: s.Kind, Replay: s.Replay, Coll: s.Coll, StartNs: int64(s.Start), EndNs: int64(s.End)}
			for _, p := range s.Phases {
				sj.Phases = append(sj.Phases, phaseJSON{Name: p.Name, StartNs: int64(p.Start), EndNs: int64(p.End)})
			}
			rep.Spans = append(rep.Spans, sj)
		}
		return writeJSON(stdout, rep)
	}
	pal := paletteFor(stdout)
	fmt.Fprintf(stdout, "scenario %s, variant %s\n", pal.Bold(quoteName(sc.Name)), pal.Bold(quoteName(name)))
	fmt.Fprintf(stdout, "config: %s\n", configSummary(sc, &cfg))
	for _, n := range o.Built.Notes {
		fmt.Fprintf(stdout, "note: %s\n", n)
	}
	replays := 0
	for _, s := range spans {
		replays = max(replays, s.Replay+1)
	}
	per := ""
	if replays > 1 {
		// The step time is one step's; the axis runs through every replay.
		per = fmt.Sprintf(" (one replay); the timeline shows all %d graph replays", replays)
	}
	fmt.Fprintf(stdout, "%s: verdict %s, trace %s, step time %s%s\n\n", what, pal.Verdict(o.Verdict), o.TraceHash, fmtNs(int64(o.StepTime)), per)
	renderTimeline(stdout, spans, f.width, pal)
	// The first finding of each kind, worst first (run shows them all).
	var firsts []ranks.Finding
	seen := map[string]bool{}
	for _, fd := range o.Findings {
		if !seen[fd.Kind] {
			seen[fd.Kind] = true
			firsts = append(firsts, fd)
		}
	}
	sort.SliceStable(firsts, func(i, j int) bool { return check.Worse(firsts[i].Kind, firsts[j].Kind) })
	if len(firsts) > 0 {
		fmt.Fprintln(stdout)
	}
	for _, fd := range firsts {
		fmt.Fprintf(stdout, "[%s] %s\n", pal.Verdict(fd.Kind), quoteName(fd.Message))
	}
	return nil
}

// renderTimeline draws spans as one row per (rank, stream): '=' for compute,
// a letter per collective call, '|' for event records and waits.
func renderTimeline(w io.Writer, spans []ranks.Span, width int, pal palette) {
	type rowKey struct {
		rank   int
		stream string
	}
	var work []ranks.Span
	for _, s := range spans {
		if s.Kind != "replay" {
			work = append(work, s)
		}
	}
	if len(work) == 0 {
		fmt.Fprintln(w, "(nothing ran)")
		return
	}
	// By start time; ties keep completion order (a record completes before
	// the wait it releases), so each rank's origin stream comes first.
	sort.SliceStable(work, func(i, j int) bool { return work[i].Start < work[j].Start })
	t0, t1 := work[0].Start, work[0].End
	firstSeen := map[rowKey]int{}
	var rows []rowKey
	letters := map[string]byte{}
	var collOrder []string
	for _, s := range work {
		t0, t1 = min(t0, s.Start), max(t1, s.End)
		k := rowKey{s.Rank, s.Stream}
		if _, ok := firstSeen[k]; !ok {
			firstSeen[k] = len(rows)
			rows = append(rows, k)
		}
		if s.Coll != "" {
			label := collLabel(s)
			if _, ok := letters[label]; !ok {
				letters[label] = letterFor(len(collOrder))
				collOrder = append(collOrder, label)
			}
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].rank != rows[j].rank {
			return rows[i].rank < rows[j].rank
		}
		return firstSeen[rows[i]] < firstSeen[rows[j]]
	})
	span := max(t1-t0, 1)
	col := func(t sim.Time) int { return int(int64(t-t0) * int64(width) / int64(span)) }
	grid := map[rowKey][]byte{}
	for _, k := range rows {
		grid[k] = []byte(strings.Repeat(".", width))
	}
	for _, s := range work {
		line := grid[rowKey{s.Rank, s.Stream}]
		a, b := col(s.Start), col(s.End)
		if b <= a {
			b = a + 1
		}
		a, b = min(a, width-1), min(b, width)
		var c byte
		switch {
		case s.Coll != "":
			c = letters[collLabel(s)]
		case s.Kind == "record" || s.Kind == "wait":
			c = '|'
		default:
			c = '='
		}
		for i := a; i < b; i++ {
			if c == '|' && line[i] != '.' {
				continue
			}
			if c == '=' && line[i] != '.' && line[i] != '|' {
				continue
			}
			line[i] = c
		}
	}
	label := func(k rowKey) string { return fmt.Sprintf("r%d %s", k.rank, k.stream) }
	lw := 0
	for _, k := range rows {
		lw = max(lw, len(label(k)))
	}
	ruler := []byte(strings.Repeat("-", width))
	for i := 0; i < width; i += 10 {
		ruler[i] = '+'
	}
	fmt.Fprintf(w, "%-*s  %s\n", lw, "", string(ruler))
	for _, k := range rows {
		fmt.Fprintf(w, "%-*s  %s\n", lw, label(k), paintRow(grid[k], pal))
	}
	end := "+" + fmtNs(int64(span))
	fmt.Fprintf(w, "%-*s  0%s%s\n", lw, "", strings.Repeat(" ", max(1, width-1-len(end))), end)
	fmt.Fprintf(w, "\none column = %s; '=' compute kernel, '|' event record/wait, '.' idle\n", fmtNs(int64(span)/int64(width)))
	for _, label := range collOrder {
		fmt.Fprintf(w, "%c  %s\n", letters[label], label)
	}
	// The compute kernels, by name, in the order they first start.
	var kernels []string
	seenK := map[string]bool{}
	for _, s := range work {
		if s.Coll == "" && s.Kind != "record" && s.Kind != "wait" && !seenK[s.Name] {
			seenK[s.Name] = true
			kernels = append(kernels, s.Name)
		}
	}
	if len(kernels) > maxKernelNames {
		kernels = append(kernels[:maxKernelNames], fmt.Sprintf("… %d more (--format json lists every span)", len(kernels)-maxKernelNames))
	}
	if len(kernels) > 0 {
		fmt.Fprintf(w, "=  compute kernels, in start order: %s\n", quoteName(strings.Join(kernels, ", ")))
	}
}

// maxKernelNames is how many compute kernels the legend names.
const maxKernelNames = 16

// collLabel names a collective call in the legend: the call and its kind,
// and the graph replay when there are several.
func collLabel(s ranks.Span) string {
	l := fmt.Sprintf("%s (%s)", s.Coll, s.Kind)
	if s.Replay > 0 {
		l += fmt.Sprintf(" replay %d", s.Replay)
	}
	return l
}

// letterFor is the i-th collective letter: A..Z, then a..z, then digits,
// then '#'.
func letterFor(i int) byte {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	if i < len(alphabet) {
		return alphabet[i]
	}
	return '#'
}

func paintRow(line []byte, pal palette) string {
	if !pal.on {
		return string(line)
	}
	var b strings.Builder
	for _, c := range line {
		switch {
		case c == '.':
			b.WriteString(pal.Dim("."))
		case c == '=' || c == '|':
			b.WriteByte(c)
		default:
			b.WriteString(pal.Bold(string(c)))
		}
	}
	return b.String()
}
