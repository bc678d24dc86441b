package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/collsim/collsim/perf"
)

func init() { register(newBenchCmd) }

func newBenchCmd(stdout, _ io.Writer) *cobra.Command {
	var format, svgDir string
	var o perf.Options
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the simulator's hot paths, each against a baseline from the same run",
		Long: `bench measures the engine loop against a bare google/btree push/pop of the
same events, explored tp8-shared-expert schedules per second, a 512-rank NCCL
ring all-reduce against the same ring in plain Go over the same queue and
against the machine's memory bandwidth (and again with a second stream
reading the input, so race detection runs on every access), a
1024-rank × 61-layer nominal schedule (CPU time and the process's peak RSS),
one layer at tp=256 with clocks that keep only the entries some check needs
against full vector clocks (clocks-vs-full-s), growth exponents of CPU time over a TP sweep and a layers sweep, and one DPOR
trace against one random schedule of tp8-shared-expert (time and bytes
allocated: dpor-trace-vs-random). --large adds tp1024-1layer-* and scale-4096x61-* and sweeps TP to 1024:
minutes of CPU and gigabytes. Times are CPU time (getrusage user+sys), so a
busy machine inflates them less than wall time. Ratios come from one run:
quote those. --svg DIR also writes the sweeps as plots (tp-sweep.svg,
layers-sweep.svg, layers-peak.svg): log-log, the measured points, their
least-squares fit and the slope the work itself grows with; the same
numbers always give the same bytes.`,
		Example: `  simctl bench  # not run: a minute of CPU; --quick is the smoke run
  simctl bench --large  # not run: many minutes of CPU and gigabytes of memory
  simctl bench --quick --format json
  simctl bench --quick --row engine-vs-btree --row ring512-ms --row tp-sweep-exponent
  simctl bench --quick --row tp-sweep-exponent --row layers-sweep-exponent --svg plots`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if format != "text" && format != "json" {
				return usagef("--format %q: want text or json", format)
			}
			rows, err := perf.Run(o)
			if err != nil {
				return err
			}
			if err := printBench(stdout, format, o, rows); err != nil {
				return err
			}
			if svgDir == "" {
				return nil
			}
			if err := os.MkdirAll(svgDir, 0o755); err != nil {
				return err
			}
			for _, f := range perf.Plots(rows) {
				if err := writeFileAtomic(filepath.Join(svgDir, f.Name), f.Data); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	cmd.Flags().BoolVar(&o.Quick, "quick", false, "small sizes (a smoke run, not a measurement)")
	cmd.Flags().BoolVar(&o.Large, "large", false, "add the rows that take minutes (tp1024-1layer-*, scale-4096x61-*) and sweep TP to 1024")
	cmd.Flags().StringArrayVar(&o.Rows, "row", nil, "run only these rows (repeatable)")
	cmd.Flags().StringVar(&svgDir, "svg", "", "also write the sweeps' plots (SVG) into this directory")
	return cmd
}

// printBench prints rows as a table with notes, or as JSON.
func printBench(stdout io.Writer, format string, o perf.Options, rows []perf.Row) error {
	if format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Rows []perf.Row `json:"rows"`
		}{rows})
	}
	fmt.Fprintf(stdout, "%-28s %14s %-12s %14s %8s\n", "row", "value", "unit", "baseline", "ratio")
	for _, r := range rows {
		base, ratio := "-", "-"
		if r.Baseline != nil {
			base = fmt.Sprintf("%.4g", *r.Baseline)
		}
		if r.Ratio != nil {
			ratio = fmt.Sprintf("%.3f", *r.Ratio)
		}
		fmt.Fprintf(stdout, "%-28s %14.4g %-12s %14s %8s\n", r.Name, r.Value, r.Unit, base, ratio)
	}
	for _, r := range rows {
		if r.Note != "" {
			fmt.Fprintf(stdout, "\n%s: %s", r.Name, r.Note)
		}
	}
	if !o.Large && len(o.Rows) == 0 {
		fmt.Fprintf(stdout, "\n(tp1024-1layer-* and scale-4096x61-* take minutes: add --large)")
	}
	fmt.Fprintln(stdout)
	return nil
}
