package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/explore"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

func init() { register(newExploreCmd) }

type exploreFlags struct {
	variant  string
	strategy string
	budget   int
	time     time.Duration
	workers  int
	seed     uint64
	witness  string
	outcomes bool
	format   string
	sets     []string
	shard    string
	noExpect bool
	maxFind  int // --max-findings
	// budgetSet: --budget was given (0 then is an error, not the default).
	budgetSet bool
	trace     string // --trace, --html: the witness's timeline (explore_report.go)
	html      string
	// checkpoint and resume name a checkpoint file (checkpoint.go).
	checkpoint string
	resume     string
	// checkpointEvery is how often the checkpoint is written (hidden:
	// tests make it short).
	checkpointEvery time.Duration
	fineSteps       bool // --fine-steps (finesteps.go)
}

// maxWorkers bounds --workers: each worker holds a world in memory, and a
// number from the command line must not size channels and goroutines
// unchecked.
const maxWorkers = 1024

// Default budgets: sampling strategies stop after this many schedules; DPOR
// stops (incomplete) after this many traces.
const (
	defaultSampleBudget = 1000
	defaultDPORBudget   = 200000
)

func newExploreCmd(stdout, stderr io.Writer) *cobra.Command {
	var f exploreFlags
	cmd := &cobra.Command{
		Use:   "explore NAME",
		Short: "Search a variant's schedules: random jitter, PCT, or exhaustive DPOR",
		Long: `explore runs many schedules of one scenario variant and summarises them:
schedules, schedules/s, distinct outcomes (by output hash) with counts, findings
by kind and the first witness (the first schedule with the worst verdict).

Strategies:
  random  seeded jitter on durations and launch costs, rank skew (timed)
  pct     untimed adversarial scheduling with PCT priorities (depth 3)
  dpor    exhaustive over orderings of dependent micro-ops, with dynamic
          partial-order reduction; reports the trace count and complete: true
          when every class of interleavings was explored

Results do not depend on --workers: schedules are merged in a fixed order (dpor
runs sequentially). Exit status: 0 when the verdict meets the variant's
expectation, 1 when it does not, 2 on bad input.`,
		Example: `  simctl explore tp8-shared-expert --variant buggy --strategy pct --budget 50 --witness /tmp/w.json --html /tmp/w.html
  simctl explore tp8-shared-expert --variant fixed --strategy random --budget 200 --set layers=1 --workers 2
  simctl explore tp8-shared-expert --variant fixed --set tp=2 --set layers=1 --strategy dpor
  simctl explore p2p-oneshot-probe --variant buggy --strategy dpor --outcomes --format json`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			f.budgetSet = c.Flags().Changed("budget")
			if err := checkOutputs("--witness, --checkpoint, --trace, --html:", []string{f.witness, f.checkpoint, f.trace, f.html}, args); err != nil {
				return err
			}
			return runExplore(stdout, stderr, args[0], f, c.Flags().Changed("seed"))
		},
	}
	fl := cmd.Flags()
	fl.Var(&singleVariant{p: &f.variant}, "variant", "variant to explore (default: the scenario's first)")
	fl.StringVar(&f.strategy, "strategy", "random", "exploration strategy: "+strings.Join(explore.Names, ", "))
	fl.IntVar(&f.budget, "budget", 0, fmt.Sprintf("most schedules to run (default %d; dpor: %d)", defaultSampleBudget, defaultDPORBudget))
	fl.DurationVar(&f.time, "time", 0, "stop after this much wall-clock time (0: no limit)")
	fl.IntVar(&f.workers, "workers", 1, "parallel workers for random and pct (results do not depend on it)")
	fl.Uint64Var(&f.seed, "seed", 0, "base seed (default: the scenario's seed knob)")
	fl.StringVar(&f.witness, "witness", "", "write the first witness to FILE (-: standard output, the summary then to stderr)")
	fl.BoolVar(&f.outcomes, "outcomes", false, "list the distinct output values per rank and tensor, with provenance")
	fl.StringVar(&f.format, "format", "text", "output format: text or json")
	fl.StringArrayVar(&f.sets, "set", nil, "override a knob, key=value (repeatable); knobs:\n"+scenarios.KnobHelp())
	fl.IntVar(&f.maxFind, "max-findings", 32, "keep at most N findings of each kind per schedule (JSON's witness_findings_total counts them all)")
	fl.BoolVar(&f.noExpect, "no-expect", false, "report the verdict without judging it: exit 0 whatever it is (2 still means bad input)")
	fl.StringVar(&f.trace, "trace", "", "write the witness schedule's Chrome trace-event timeline to `FILE` (nominal when every schedule was ok; -: standard output)")
	fl.StringVar(&f.html, "html", "", "write the witness schedule as a self-contained HTML report to `FILE`, with its deviations from nominal (-: standard output)")
	fl.StringVar(&f.checkpoint, "checkpoint", "", fmt.Sprintf("append completed schedules to `FILE` every few seconds, for --resume (random, pct; on by default, in the working directory, from %d schedules)", checkpointThreshold))
	fl.DurationVar(&f.checkpointEvery, "checkpoint-every", checkpointEvery, "how often the checkpoint is written")
	_ = fl.MarkHidden("checkpoint-every")
	fl.StringVar(&f.resume, "resume", "", "continue the exploration checkpointed in `FILE` (same scenario and flags); the result is the one an uninterrupted run gives")
	addFineStepsFlag(cmd, &f.fineSteps)
	fl.StringVar(&f.shard, "shard", "", "run only shard i/n of the schedules (random, pct) and print its shard file (JSON) for `simctl merge`")
	return cmd
}

func runExplore(stdout, stderr io.Writer, name string, f exploreFlags, seedSet bool) error {
	if f.format != "text" && f.format != "json" {
		return usagef("--format %q: want text or json", f.format)
	}
	// One budget: --set budget=N (simctl run's way) is --budget N here.
	for _, s := range f.sets {
		k, v, ok := strings.Cut(s, "=")
		if !ok || strings.TrimSpace(k) != "budget" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return usagef("--set %s: want a number of schedules", s)
		}
		if f.budgetSet && n != f.budget {
			return usagef("--budget %d and --set %s disagree: give the budget once", f.budget, s)
		}
		f.budget, f.budgetSet = n, true
	}
	if f.budget < 0 || (f.budgetSet && f.budget == 0) {
		return usagef("--budget %d: want a positive number of schedules (for the nominal schedule alone: simctl run NAME --variant V --set budget=0)", f.budget)
	}
	if f.workers < 1 || f.workers > maxWorkers {
		return usagef("--workers %d: want 1 to %d", f.workers, maxWorkers)
	}
	if f.checkpoint == "-" || f.resume == "-" {
		return usagef("--checkpoint -, --resume -: a checkpoint is a file that a later run reads back and appends to; name a file")
	}
	if f.shard != "" && slices.Contains([]string{f.witness, f.trace, f.html}, "-") {
		return usagef("--shard with --witness, --trace or --html -: the shard file goes to standard output; name files for the others")
	}
	dash := stdout
	stdout, err := dashOutputs("--witness, --trace, --html:", stdout, stderr, f.witness, f.trace, f.html)
	if err != nil {
		return err
	}
	if f.checkpoint != "" && f.resume != "" && f.checkpoint != f.resume {
		return usagef("--checkpoint %s --resume %s: a resumed run appends to the file it resumes; give one", quoteName(f.checkpoint), quoteName(f.resume))
	}
	if f.time < 0 {
		return usagef("--time %s: want a positive duration", f.time)
	}
	t, err := explore.NewTargetWith(inputArg(name), f.variant, f.sets, readInput, explore.TargetOptions{FineSteps: f.fineSteps})
	if err != nil {
		return asUsage(knobHint(f.sets, err))
	}
	if f.maxFind < 1 {
		return usagef("--max-findings %d: want at least 1", f.maxFind)
	}
	t.MaxFindings = f.maxFind
	seed := t.Config.Seed
	if seedSet {
		seed = f.seed
	}
	s, err := explore.New(f.strategy, t, seed)
	if err != nil {
		return asUsage(err)
	}
	budget := f.budget
	if budget == 0 {
		budget = defaultSampleBudget
		if f.strategy == "dpor" {
			budget = defaultDPORBudget
		}
	}
	// The collector's target from the run's size (gc.go): DefaultGCPercent
	// for the small worlds an exploration usually makes, 100 for a large one.
	est := t.Scenario.Estimate(t.Config)
	opt := explore.Options{Budget: budget, Workers: f.workers, Outcomes: f.outcomes, GCPercent: est.GCPercent}
	if err := checkWorkers(f.workers, f.strategy, est.Bytes); err != nil {
		return err
	}
	if f.shard != "" {
		sh, err := explore.ParseShard(f.shard)
		if err != nil {
			return usageError{err}
		}
		if f.strategy == "dpor" {
			return usagef("--shard: dpor cannot be sharded (its traces depend on each other); shard random or pct")
		}
		opt.Shard = sh
	}
	if f.time > 0 {
		opt.Deadline = time.Now().Add(f.time)
	}
	ck, err := startCheckpoint(stderr, t, s, seed, budget, &opt, f)
	if err != nil {
		return err
	}
	// The handler goes in before any schedule runs: TestSIGINTPrintsPartial
	// takes a schedule record in the checkpoint as the sign that it is in.
	stopped, release := onSignals()
	defer release()
	opt.Stop = stopped
	clearBar := func() {}
	if file, ok := stderr.(*os.File); ok && term.IsTerminal(int(file.Fd())) {
		bar := progressbar.NewOptions(budget, progressbar.OptionSetWriter(stderr), progressbar.OptionSetDescription(f.strategy),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(),
			progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(100*time.Millisecond))
		opt.Progress = func(int) { _ = bar.Add(1) }
		// Clear the bar before anything is printed: a bar cleared after
		// the summary (a deferred Finish) left its last line on screen
		// when dpor stopped short of its budget.
		clearBar = func() { _ = bar.Clear(); _ = bar.Exit() }
	}
	sum, err := explore.Explore(t, s, seed, opt)
	clearBar()
	if ck != nil {
		if cerr := ck.close(); cerr != nil {
			fmt.Fprintf(stderr, "simctl: checkpoint %s: %v\n", quoteName(ck.path), cerr)
		}
	}
	var rerr resumeError
	if errors.As(err, &rerr) {
		return rerr.error
	}
	if err != nil {
		return usageError{fmt.Errorf("explore %s: %w", quoteName(name), err)}
	}
	interrupted := stopped()
	// The summary goes to stdout before any optional file is written: a
	// file that cannot be written (a full disk) must not cost the result.
	if f.shard != "" {
		// A shard's own summary means little: print the file merge needs.
		sf := explore.NewShardFile(sum, budget, f.outcomes, opt.Shard)
		if v, ok := t.Scenario.Variant(t.Variant); ok {
			sf.Expect = v.Expect // merge's exit status
		}
		if err := writeShardFile(stdout, sf, ck, opt.RecordsElsewhere); err != nil {
			return err
		}
	} else if f.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(sum); err != nil {
			return err
		}
	} else {
		writeExploreText(stdout, sum, f)
	}
	if ck != nil && ck.err == nil && !interrupted && !sum.Partial && ck.auto {
		_ = os.Remove(ck.path) // finished: the default checkpoint is not needed
	}
	if err := writeWitness(stderr, dash, sum.Witness, f.witness); err != nil {
		return err
	}
	if f.shard == "" {
		if err := writeExploreReport(t, sum, f, dash); err != nil {
			return err
		}
	}
	if sum.Partial && !interrupted && ck != nil {
		fmt.Fprintf(stderr, "simctl: --time ran out after %d of %d schedules; continue with --resume %s\n", sum.Schedules, sum.Planned, quoteName(ck.path))
	}
	if interrupted {
		if ck != nil {
			fmt.Fprintf(stderr, "simctl: interrupted after %d schedules; continue with --resume %s\n", sum.Schedules, quoteName(ck.path))
		} else {
			fmt.Fprintf(stderr, "simctl: interrupted after %d schedules (partial result)\n", sum.Schedules)
		}
		return errUnmet
	}
	if f.shard != "" || f.noExpect {
		return nil
	}
	if v, ok := t.Scenario.Variant(t.Variant); ok && !check.Meets(sum.Verdict, v.Expect) {
		return errUnmet
	}
	return nil
}

// asUsage marks errors of the explore package (bad input, wrapping
// [explore.ErrBadInput], or a scenario that cannot be built) for exit status 2.
func asUsage(err error) error { return usageError{err} }

func writeExploreText(w io.Writer, s *explore.Summary, f exploreFlags) {
	fmt.Fprintf(w, "explore %s, variant %s, strategy %s, seed %d\n", quoteName(s.Scenario), quoteName(s.Variant), s.Strategy, s.Seed)
	fmt.Fprintf(w, "  config: %s\n", s.Config.Summary())
	if len(s.Sets) > 0 {
		fmt.Fprintf(w, "  overrides: %s\n", quoteName(strings.Join(s.Sets, " ")))
	}
	if s.Elapsed > 0 {
		rate := float64(s.Schedules) / max(s.Elapsed.Seconds(), 1e-9)
		fmt.Fprintf(w, "schedules: %d in %.2fs (%.0f schedules/s)\n", s.Schedules, s.Elapsed.Seconds(), rate)
	} else {
		// merge: the shards ran elsewhere; no wall clock to divide by.
		fmt.Fprintf(w, "schedules: %d (merged; each shard's own run timed it)\n", s.Schedules)
	}
	if s.Complete != nil {
		blocked := ""
		if s.SleepBlocked != nil && *s.SleepBlocked > 0 {
			blocked = fmt.Sprintf("; cut short by sleep sets: %d", *s.SleepBlocked)
		}
		fmt.Fprintf(w, "traces: %d, complete: %v (reversible races found: %d%s)\n", *s.Traces, *s.Complete, *s.Races, blocked)
	}
	if s.Partial {
		fmt.Fprintf(w, "incomplete: %d of %d schedules (partial result)\n", s.Schedules, s.Planned)
	}
	fmt.Fprintf(w, "verdict: %s\n", s.Verdict)
	total := 0
	var parts []string
	kinds := make([]string, 0, len(s.Findings))
	for k := range s.Findings {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return check.Worse(kinds[i], kinds[j]) })
	for _, k := range kinds {
		total += s.Findings[k]
		parts = append(parts, fmt.Sprintf("%s in %s", k, plural(s.Findings[k], "schedule")))
	}
	if total == 0 {
		fmt.Fprintln(w, "findings: 0")
	} else {
		fmt.Fprintf(w, "findings: %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "distinct outcomes: %d\n", len(s.Outcomes))
	for i, o := range s.Outcomes {
		if i >= 20 && !f.outcomes {
			fmt.Fprintf(w, "  … %d more\n", len(s.Outcomes)-i)
			break
		}
		fmt.Fprintf(w, "  #%d  %d schedules  %s  (first: schedule %d, output hash %s)\n", i+1, o.Count, o.Verdict, o.First, o.Hash)
		for _, r := range o.Ranks {
			names := make([]string, 0, len(r.Outputs))
			for n := range r.Outputs {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				fmt.Fprintf(w, "      rank %d %s = %v\n", r.Rank, n, r.Outputs[n])
				for c, p := range r.Provenance[n] {
					fmt.Fprintf(w, "        [%d] %s\n", c, p)
				}
			}
		}
	}
	if s.Witness == nil {
		fmt.Fprintln(w, "witness: none (every schedule was ok)")
		return
	}
	x := s.Witness
	fmt.Fprintf(w, "witness: schedule %d of seed %d (its own seed %d), %s, trace %s, %d deviations from nominal", x.Schedule, s.Seed, x.Seed, x.Verdict, x.TraceHash, x.Deviations)
	if f.witness != "" {
		fmt.Fprintf(w, ", written to %s", quoteName(f.witness))
	}
	fmt.Fprintln(w)
	writeFindingSample(w, s.WitnessFindings, nil, "--format json")
	if s.WitnessFindingsTruncated {
		fmt.Fprintf(w, "  (%d findings in all; the witness keeps at most 32 of each kind, listed with --format json)\n", s.WitnessFindingsTotal)
	}
}

// writeWitness writes w to path (atomic.go), naming its scenario so that
// replay finds it from the witness's own directory (input.go).
func writeWitness(stderr, stdout io.Writer, w *explore.Witness, path string) error {
	if path == "" {
		return nil
	}
	if w == nil {
		fmt.Fprintf(stderr, "simctl: no finding, no witness written to %s\n", quoteName(path))
		return nil
	}
	c := *w
	if c.ScenarioSHA256 == "" {
		// What the scenario was: its hash, and a user's file itself, so
		// the witness travels (replay.go's witnessSource).
		if data, ok := scenarios.BuiltinFile(w.Scenario); ok {
			c.ScenarioSHA256 = sha256Hex(data)
		} else if data, err := readInput(w.Scenario); err == nil {
			c.ScenarioSHA256 = sha256Hex(data)
			if len(data) < explore.MaxEmbeddedScenario {
				c.ScenarioFile = string(data)
			}
		}
	}
	c.Scenario = witnessScenarioName(w.Scenario, path)
	data, err := c.Marshal()
	if err != nil {
		return err
	}
	if err := writeOutput(stdout, path, data); err != nil {
		return usagef("--witness: %w", err)
	}
	return nil
}

// startCheckpoint opens the checkpoint of this run, if it has one:
// --resume FILE (whose records opt.Resume reads as they are folded),
// --checkpoint FILE, or
// by default from checkpointThreshold planned schedules (random and pct
// only: dpor's traces depend on each other).
func startCheckpoint(stderr io.Writer, t *explore.Target, s explore.Strategy, seed uint64, budget int, opt *explore.Options, f exploreFlags) (*checkpointer, error) {
	_, independent := s.(explore.Independent)
	path, resume, auto := f.checkpoint, f.resume != "", false
	if resume {
		path = f.resume
	}
	planned := budget
	if opt.Shard.Count > 1 {
		planned = budget / opt.Shard.Count
	}
	h := explore.CheckpointHeader{Checkpoint: explore.CheckpointVersion, Budget: budget, Outcomes: f.outcomes, Shard: opt.Shard,
		Exploration: explore.Exploration{Scenario: t.Scenario.Name, Variant: t.Variant, Sets: append([]string{}, t.Sets...), Config: t.Config, Strategy: s.Name(), Seed: sim.Seed(seed)}}
	switch {
	case path == "" && independent && planned >= checkpointThreshold:
		path, auto = defaultCheckpointName(h.Exploration, budget, opt.Shard), true
	case path == "":
		return nil, nil
	case !independent:
		return nil, usagef("--checkpoint, --resume: strategy %s cannot resume (its traces depend on each other); checkpoint random or pct", s.Name())
	}
	ck, recs, err := openCheckpoint(path, h, resume)
	if err != nil {
		return nil, err
	}
	ck.auto, ck.stderr = auto, stderr
	if f.checkpointEvery > 0 {
		ck.every = f.checkpointEvery
	}
	opt.Resume = recs
	opt.Checkpoint = ck.add
	// A shard's records are read back from its checkpoint for its shard
	// file: none is held.
	opt.RecordsElsewhere = opt.Shard.Count > 0
	if auto {
		fmt.Fprintf(stderr, "simctl: checkpointing to %s (after a crash: --resume %s)\n", quoteName(path), quoteName(path))
	}
	return ck, nil
}

// checkWorkers refuses --workers whose worlds together would not fit in
// --max-memory: each worker of random and pct builds and runs a world of
// its own at the same time (dpor runs one), each about the configuration's
// estimate (issue 31: tp=256 layers=4 fit once and not four times).
func checkWorkers(workers int, strategy string, each int64) error {
	if workers <= 1 || strategy == "dpor" || each <= 0 {
		return nil
	}
	budget := scenarios.MemoryBudget
	fit := budget / each
	if int64(workers) <= fit {
		return nil
	}
	need := int64(1) << 62
	if each < need/int64(workers) {
		need = each * int64(workers)
	}
	return usagef("--workers %d: %d worlds of an estimated %s each would need %s; the limit is %s (--max-memory); lower --workers to %d, or lower tp, dp or layers",
		workers, workers, scenarios.FormatBytes(each), scenarios.FormatBytes(need), scenarios.FormatBytes(budget), max(fit, 1))
}
