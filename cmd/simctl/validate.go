package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func init() { register(newValidateCmd) }

func newValidateCmd(stdout, _ io.Writer) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "validate FILE|NAME...",
		Short: "Check scenario files without running them: syntax, keys, types, references, limits",
		Long: `validate loads each scenario file (or built-in) and checks it the way run does
before anything runs: YAML syntax, unknown keys, wrong types, undefined streams,
tensors, events and communicators, waits on events never recorded before them,
collectives whose communicator excludes the calling rank, limits, and each
variant's knob overrides. Every problem is reported as file:line:column with
what was expected. Exit status 0 when every file is valid, 2 otherwise.`,
		Example: `  simctl validate docs/examples/two-stream.yaml
  simctl show tp8-shared-expert --yaml > /tmp/my-tp8.yaml
  simctl validate /tmp/my-tp8.yaml --format json
  simctl validate tp8-shared-expert`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeScenarios,
		RunE: func(_ *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			return validateFiles(stdout, args, format)
		},
	}
	addFormatFlag(cmd, &format)
	return cmd
}

// validation is the JSON report of one validated file.
type validation struct {
	Scenario string            `json:"scenario"`
	Valid    bool              `json:"valid"`
	Name     string            `json:"name,omitempty"`
	Ranks    int               `json:"ranks,omitempty"`
	Variants int               `json:"variants,omitempty"`
	Errors   []validationError `json:"errors"`
}

type validationError struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Message string `json:"message"`
}

func validateFiles(stdout io.Writer, args []string, format string) error {
	var reps []validation
	// Every file's error, joined once at the end: wrapping the chain so
	// far in each new error formatted it again each time (3,000 missing
	// files: quadratic).
	var errs []error
	pal := paletteFor(stdout)
	for _, arg := range args {
		rep := validation{Scenario: arg, Errors: []validationError{}}
		sc, err := loadScenario(arg)
		if err != nil {
			errs = append(errs, err)
			for _, e := range scenarioErrors(err) {
				rep.Errors = append(rep.Errors, validationError{File: e.File, Line: e.Pos.Line, Column: e.Pos.Col, Message: e.Msg})
			}
		} else {
			rep.Valid, rep.Name, rep.Ranks, rep.Variants = true, sc.Name, sc.Base.TP, len(sc.Variants)
			if format == formatText {
				fmt.Fprintf(stdout, "%s: %s (scenario %s, %s, %s)\n", quoteName(arg), pal.Green("valid"), quoteName(sc.Name), plural(sc.Base.TP, "rank"), plural(len(sc.Variants), "variant"))
			}
		}
		reps = append(reps, rep)
	}
	if format == formatJSON {
		if err := writeJSON(stdout, reps); err != nil {
			return err
		}
	}
	if len(errs) == 1 {
		return errs[0]
	}
	if len(errs) > 0 {
		return usageError{errors.Join(errs...)}
	}
	return nil
}
