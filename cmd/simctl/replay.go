package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/explore"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

func init() { register(newReplayCmd) }

type replayFlags struct {
	files   reportFiles // --trace, --html: the replayed (shrunk) witness
	shrink  bool
	out     string
	maxRuns int
	// allowPath lets the witness name a scenario file outside its own
	// directory (input.go).
	allowPath bool
	fineSteps bool      // --fine-steps (finesteps.go)
	stdout    io.Writer // takes the output named "-"
}

func newReplayCmd(stdout, stderr io.Writer) *cobra.Command {
	var f replayFlags
	cmd := &cobra.Command{
		Use:   "replay FILE",
		Short: "Replay a witness file bit for bit; --shrink reduces it to the fewest deviations from nominal",
		Long: `replay re-runs the schedule recorded in a witness file (written by
simctl run --witness or simctl explore --witness) and checks that it gives the same verdict and the
same trace hash. Exit status: 0 when it reproduces, 1 when it does not, 2 on
bad input.

With --shrink it then sets recorded choices back to nominal (0) while the
finding persists, writes the smaller witness (to --out, default FILE with
.min.json) and replays that one too.`,
		Example: `  simctl replay /tmp/w.json
  simctl replay /tmp/w.json --shrink --out /tmp/w.min.json
  simctl replay /tmp/w.min.json --html /tmp/r.html`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := checkOutputs("--out, --trace, --html:", []string{f.out, f.files.trace, f.files.html}, args); err != nil {
				return err
			}
			rep, err := dashOutputs("--out, --trace, --html:", stdout, stderr, f.out, f.files.trace, f.files.html)
			if err != nil {
				return err
			}
			f.files.stdout, f.stdout = stdout, stdout
			return runReplay(rep, args[0], f)
		},
	}
	cmd.Flags().BoolVar(&f.shrink, "shrink", false, "shrink the witness and write the smaller one")
	cmd.Flags().StringVar(&f.out, "out", "", "where --shrink writes (default: FILE with .min.json; -: standard output, the rest then to stderr)")
	cmd.Flags().IntVar(&f.maxRuns, "max-runs", 2000, "most schedules --shrink may run")
	cmd.Flags().StringVar(&f.files.trace, "trace", "", "write the replayed witness's Chrome trace-event timeline to `FILE` (with --shrink: the shrunk one)")
	cmd.Flags().StringVar(&f.files.html, "html", "", "write the replayed witness as a self-contained HTML report to `FILE`, its deviations from nominal listed (with --shrink: the shrunk one)")
	cmd.Flags().BoolVar(&f.allowPath, "allow-path", false, "let the witness name a scenario file outside the witness's own directory")
	addFineStepsFlag(cmd, &f.fineSteps)
	return cmd
}

func runReplay(stdout io.Writer, file string, f replayFlags) error {
	data, err := readFile(inputArg(file), "witness", maxWitnessBytes) // input.go
	if err != nil {
		return usagef("replay: %w", err)
	}
	w, err := explore.ParseWitness(data)
	if err != nil {
		return usagef("%s: %w", file, err)
	}
	if f.maxRuns < 1 {
		return usagef("--max-runs %d: want at least 1", f.maxRuns)
	}
	w.FineSteps = w.FineSteps || f.fineSteps
	read, note := witnessSource(file, w, f.allowPath)
	if note != "" {
		fmt.Fprintf(stdout, "%s\n", note)
	}
	t, err := w.TargetFrom(read)
	if err != nil {
		return usagef("%s: %w", file, err)
	}
	ok, devs, err := replayOne(stdout, t, w, file)
	if err != nil {
		return err
	}
	if !ok {
		return errReplay
	}
	if !f.shrink {
		return writeWitnessFiles(f.files, t, w, devs)
	}
	small, runs, err := explore.Shrink(t, w, f.maxRuns)
	if err != nil {
		return fmt.Errorf("shrink: %w", err)
	}
	out := f.out
	if out == "" {
		out = strings.TrimSuffix(file, ".json") + ".min.json"
	}
	enc, err := small.Marshal()
	if err != nil {
		return err
	}
	// The result first, then the file (atomic.go): a full disk costs the
	// file, not what was learnt.
	fmt.Fprintf(stdout, "shrunk in %d runs: %d → %d deviations from nominal, %d → %d recorded choices; written to %s\n",
		runs, w.Deviations, small.Deviations, len(w.Choices), len(small.Choices), quoteName(out))
	if err := writeOutput(f.stdout, out, enc); err != nil {
		return usagef("--out: %w", err)
	}
	ok, devs, err = replayOne(stdout, t, small, out)
	if err != nil {
		return err
	}
	if !ok {
		return errReplay
	}
	return writeWitnessFiles(f.files, t, small, devs)
}

var errReplay = fmt.Errorf("%w: the witness did not reproduce", errUnmet)

// replayOne replays w, reports whether it gave w's verdict and trace hash,
// and says what each deviation from nominal did.
func replayOne(stdout io.Writer, t *explore.Target, w *explore.Witness, file string) (bool, []explore.Deviation, error) {
	s, diverged, err := explore.Replay(t, w)
	if err != nil {
		return false, nil, usagef("%s: %w", file, err)
	}
	same := s.TraceHash == w.TraceHash && s.Verdict == w.Verdict
	fmt.Fprintf(stdout, "replay %s: %s variant %s (%s, %s schedule %d, %d choices, %d deviations)\n",
		quoteName(file), quoteName(w.Scenario), quoteName(w.Variant), w.Mode, w.Strategy, w.Schedule, len(w.Choices), w.Deviations)
	fmt.Fprintf(stdout, "  verdict %s (recorded %s), trace %s (recorded %s)", s.Verdict, w.Verdict, s.TraceHash, w.TraceHash)
	if diverged > 0 {
		fmt.Fprintf(stdout, ", %d choices diverged", diverged)
	}
	if same {
		fmt.Fprintln(stdout, ": reproduced")
	} else {
		fmt.Fprintln(stdout, ": NOT reproduced")
	}
	var cause *check.Cause
	if s.Has(check.Corruption) {
		mode := sim.Timed
		if w.Mode == "untimed" {
			mode = sim.Untimed
		}
		if cause, err = check.RootCause(t.Scenario.Program(t.Config, t.Sets), mode, &sim.Replay{Choices: w.Choices}); err != nil {
			return false, nil, err
		}
	}
	writeFindingSample(stdout, s.Findings, cause, "--html")
	if !same {
		return false, nil, nil
	}
	devs, err := explore.Explain(t, w)
	if err != nil {
		return false, nil, err
	}
	writeDeviations(stdout, devs)
	return true, devs, nil
}

// sha256Hex is the hex SHA-256 of data.
func sha256Hex(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// witnessSource returns how replay reads the scenario witness w names (a
// witness at path file), and a line to say first when what it finds is
// not what the schedule ran: a file that changed since (then the copy w
// holds, if any, is replayed) or one that is not where w says (a witness
// copied elsewhere: the copy it holds).
func witnessSource(file string, w *explore.Witness, allowPath bool) (scenarios.ReadFunc, string) {
	read := witnessScenarioReader(file, allowPath)
	if data, ok := scenarios.BuiltinFile(w.Scenario); ok {
		if w.ScenarioSHA256 != "" && sha256Hex(data) != w.ScenarioSHA256 {
			return read, fmt.Sprintf("note: built-in %s changed since the witness was written (it ran sha256 %.12s…, this simctl has %.12s…): the replay may differ",
				quoteName(w.Scenario), w.ScenarioSHA256, sha256Hex(data))
		}
		return read, ""
	}
	held := func(string) ([]byte, error) { return []byte(w.ScenarioFile), nil }
	data, err := read(w.Scenario)
	switch {
	case err != nil && w.ScenarioFile != "":
		return held, fmt.Sprintf("note: scenario file %s is not where the witness names it (%v): replaying the copy the witness holds", quoteName(w.Scenario), err)
	case err != nil || w.ScenarioSHA256 == "":
		return read, ""
	case sha256Hex(data) == w.ScenarioSHA256:
		return read, ""
	case w.ScenarioFile != "":
		return held, fmt.Sprintf("note: scenario file %s changed since the witness was written (it ran sha256 %.12s…, the file now has %.12s…): replaying the copy the witness holds",
			quoteName(w.Scenario), w.ScenarioSHA256, sha256Hex(data))
	}
	return read, fmt.Sprintf("note: scenario file %s changed since the witness was written (it ran sha256 %.12s…, the file now has %.12s…), and the witness holds no copy: the replay may not reproduce",
		quoteName(w.Scenario), w.ScenarioSHA256, sha256Hex(data))
}
