package main

import (
	"bytes"
	"io"

	"github.com/spf13/cobra"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/report"
	"github.com/collsim/collsim/scenarios"
)

// reportFiles are the --trace and --html outputs of a command.
type reportFiles struct {
	trace string
	html  string
	// stdout takes the file named "-" (dashOutputs).
	stdout io.Writer
}

func (o *reportFiles) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.trace, "trace", "", "write a Chrome trace-event JSON timeline to `FILE` (open it in ui.perfetto.dev or chrome://tracing):\none process per rank and variant, one thread per stream plus the host; each variant's traced\nschedule is its witness when exploration found something worse than nominal, else nominal\n(-: standard output, the summary then to stderr)")
	cmd.Flags().StringVar(&o.html, "html", "", "write a self-contained HTML report to `FILE`: variants side by side, per-rank stream lanes,\nthe racing pair and mis-consumed signals highlighted, expected vs observed values\n(-: standard output, the summary then to stderr)")
}

// write re-runs each variant's traced schedule with the timeline on and
// writes the requested files.
func (o *reportFiles) write(sc *scenarios.Scenario, vrs []*check.VariantReport) error {
	if o.trace == "" && o.html == "" {
		return nil
	}
	d, err := report.Build(sc, vrs)
	if err != nil {
		return err
	}
	return o.writeData(d)
}

// writeData writes d to the requested files.
func (o *reportFiles) writeData(d *report.Data) error {
	for _, out := range []struct {
		path  string
		write func(*bytes.Buffer, *report.Data) error
	}{
		{o.trace, func(b *bytes.Buffer, d *report.Data) error { return report.WriteTrace(b, d) }},
		{o.html, func(b *bytes.Buffer, d *report.Data) error { return report.WriteHTML(b, d) }},
	} {
		if out.path == "" {
			continue
		}
		var b bytes.Buffer
		if err := out.write(&b, d); err != nil {
			return err
		}
		if err := writeOutput(o.stdout, out.path, b.Bytes()); err != nil { // atomic.go
			return usagef("%v", err)
		}
	}
	return nil
}
