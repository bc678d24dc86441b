package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/collsim/collsim/scenarios"
)

// loadScenario resolves a command's scenario argument — a built-in name or a
// scenario file path — for every command (run, show, validate, and the
// exploring ones). Bad input becomes a usage error (exit 2) whose message
// names file:line:column for each problem.
//
// An argument of "-" reads the scenario file from standard input.
func loadScenario(arg string) (*scenarios.Scenario, error) {
	sc, err := scenarios.Resolve(inputArg(arg), readInput)
	if err != nil {
		return nil, usageError{err}
	}
	return sc, nil
}

// rootExample is the examples section of `simctl --help`.
const rootExample = `  simctl list                                   # the built-in scenarios
  simctl run tp8-shared-expert                  # run a built-in's variants, with verdicts
  simctl run docs/examples/two-stream.yaml      # run your own scenario file
  simctl validate my.yaml                       # check a file without running it
  simctl show tp8-shared-expert --variant fixed # ASCII timeline of the nominal schedule
  simctl show tp8-shared-expert --yaml          # the built-in as a scenario file
  source <(simctl completion bash)              # shell completion`

// Output formats every command accepts with --format.
const (
	formatText = "text"
	formatJSON = "json"
)

// addFormatFlag adds --format text|json to cmd, with shell completion.
func addFormatFlag(cmd *cobra.Command, f *string) {
	cmd.Flags().StringVar(f, "format", formatText, "output format: text or json")
	_ = cmd.RegisterFlagCompletionFunc("format", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{formatText, formatJSON}, cobra.ShellCompDirectiveNoFileComp
	})
}

// checkFormat rejects an unknown --format value (exit 2).
func checkFormat(f string) error {
	if f != formatText && f != formatJSON {
		return usagef("--format %q: want text or json", f)
	}
	return nil
}

// writeJSON writes v as indented JSON, the one document a --format json
// command prints.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// palette colours text for a terminal. The zero palette writes plain text:
// it is what every writer that is not a terminal gets, and what NO_COLOR
// (any value) asks for.
type palette struct{ on bool }

// paletteFor returns a colouring palette when w is a terminal and NO_COLOR is
// unset.
func paletteFor(w io.Writer) palette {
	if _, set := os.LookupEnv("NO_COLOR"); set {
		return palette{}
	}
	if ew, ok := w.(*errWriter); ok { // run's stdout (main.go)
		w = ew.w
	}
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return palette{}
	}
	return palette{on: true}
}

func (p palette) paint(code, s string) string {
	if !p.on || s == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// Red, Green, Yellow, Bold and Dim colour s when the palette is on.
func (p palette) Red(s string) string    { return p.paint("31", s) }
func (p palette) Green(s string) string  { return p.paint("32", s) }
func (p palette) Yellow(s string) string { return p.paint("33", s) }
func (p palette) Bold(s string) string   { return p.paint("1", s) }
func (p palette) Dim(s string) string    { return p.paint("2", s) }

// Verdict colours a verdict: ok green, race yellow, anything worse red.
func (p palette) Verdict(v string) string {
	switch v {
	case "ok":
		return p.Green(v)
	case "race":
		return p.Yellow(v)
	}
	return p.Red(v)
}

// completeScenarios completes a scenario argument: the built-in names, or
// files.
func completeScenarios(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return scenarios.Names(), cobra.ShellCompDirectiveDefault
}

// scenarioErrors flattens a loader error into its positioned errors, for
// JSON output.
func scenarioErrors(err error) []*scenarios.Error {
	var list scenarios.ErrorList
	if errors.As(err, &list) {
		return list
	}
	var one *scenarios.Error
	if errors.As(err, &one) {
		return []*scenarios.Error{one}
	}
	return []*scenarios.Error{{Msg: fmt.Sprint(err)}}
}
