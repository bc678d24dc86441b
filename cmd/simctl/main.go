// Command simctl runs collsim scenarios: it reproduces cross-stream
// collective races from first principles and shows whether a schedule fix
// holds.
//
//	simctl run tp8-shared-expert
//
// Exit status: 0 when every variant meets its expected verdict, 1 when one
// does not, 2 on bad input or usage.
//
// About 3,700 lines, over the project's 3,000-line line for a package: a
// command is one package in Go, and its files are one subcommand each
// (run.go, explore.go, show.go, replay.go, import.go, merge, validate,
// bench) plus the shared care of its edges (input.go: reading files
// safely; checkpoint.go; output and memory limits). Every model concern
// lives in the library packages it calls; none of these files is longer
// than about 450 lines.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// usageError marks errors that exit with status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// unmetError marks a run whose verdicts did not meet expectations (exit 1).
var errUnmet = errors.New("some variants did not meet their expected verdict")

func main() {
	fewerMallocArenas() // memory_linux.go: before any thread mallocs
	tuneGC()            // gc.go
	watchdogOn = true   // memory.go
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	out := &errWriter{w: stdout}
	cmd := newRoot(out, stderr)
	cmd.SetArgs(args)
	err := cmd.Execute()
	if out.err != nil && (err == nil || errors.Is(err, errUnmet)) {
		// A result that did not reach its reader is no result (a full
		// disk, a closed pipe): exit 2, whatever the verdict.
		err = usageError{fmt.Errorf("writing the output: %w", out.err)}
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUnmet):
		return 1
	default:
		var ue usageError
		if errors.As(err, &ue) || isCobraUsage(err) {
			fmt.Fprintln(stderr, "simctl:", escapeControls(err.Error(), true))
			return 2
		}
		fmt.Fprintln(stderr, "simctl:", escapeControls(err.Error(), true))
		return 2
	}
}

// errWriter keeps the first error of the writes to w and drops the rest:
// commands print with fmt.Fprint*, which return errors nobody checks, and
// run reads err once the command is done.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	if err != nil {
		e.err = err
	}
	return n, err
}
