package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/collsim/collsim/importer"
	"github.com/collsim/collsim/scenarios"
	"github.com/spf13/cobra"
)

func init() { register(newImportCmd) }

func newImportCmd(stdout, stderr io.Writer) *cobra.Command {
	var o importer.Options
	var out string
	lim := importer.DefaultLimits
	maxBytes := &sizeFlag{&lim.MaxBytes}
	maxToken := &sizeFlag{&lim.MaxToken}
	maxRecord := &sizeFlag{&lim.MaxRecord}
	cmd := &cobra.Command{
		Use:   "import TRACE... [flags]",
		Short: "Turn PyTorch profiler traces (one per rank) into a scenario file",
		Long: `import reads PyTorch profiler traces (Kineto / Chrome JSON, one per rank, rank 0
first; .json.gz too) and writes the step they recorded as a scenario file in the
program form (docs/scenario-format.md): kernels on the streams they ran on with
their recorded durations, the host gaps between launches, event records and
waits, syncs, all-reduces from record_param_comms, and a CUDA-graph replay as a
graph-mode program. With --et (torch.profiler.ExecutionTraceObserver output,
one per trace) each kernel reads and writes the tensors its operator names;
tensors are memory blocks, so a block freed and handed out again is one tensor
written by both. Record traces with
torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True) and
profile_memory=True. What the importer had to guess is in the file's
description and on stderr. See docs/from-trace.md.

The step imported is the first record_function annotation named --step (default:
ProfilerStep#N, else "step"; the whole trace when there is none).
Exit status 0 when the file was written, 2 on unreadable input
(file:line:column: event N: what was wrong).`,
		Example: `  simctl import validation/traces/a_eager.json --et validation/traces/a_eager.et.json -o a.yaml
  simctl import rank0.json.gz rank1.json.gz --step ProfilerStep#3 -o step3.yaml  # not run: your own traces`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.PickStep = cmd.Flags().Changed("step-index")
			if err := checkOutputs("-o", []string{out}, append(append([]string{}, args...), o.ET...)); err != nil {
				return err
			}
			traces, spool, err := spoolStdin(args, lim.MaxBytes)
			if err != nil {
				return err
			}
			defer spool.remove()
			o.Traces = traces
			o.Limits = lim
			if lim.MaxEvents < 1 || lim.MaxKept < 1 {
				return usagef("--max-events %d --max-kept %d: want at least 1", lim.MaxEvents, lim.MaxKept)
			}
			res, err := importer.Import(o)
			if err != nil {
				// Unreadable or unusable input: exit 2.
				return usageError{spool.rename(err)}
			}
			for i := range res.Ranks {
				if res.Ranks[i].File == spool.path {
					res.Ranks[i].File = "-"
				}
			}
			// The summary goes to stdout when the file goes elsewhere.
			sum := stdout
			if out == "" || out == "-" {
				_, err = stdout.Write(res.YAML)
				sum = stderr
			} else {
				err = writeFileAtomic(out, res.YAML)
			}
			if err != nil {
				return err
			}
			for r, rk := range res.Ranks {
				fmt.Fprintf(sum, "rank %d: %s: %s, %d kernels on %d streams, %d waits, %d syncs, %d collectives; recorded step time %s\n",
					r, rk.File, rk.Mode, rk.Kernels, len(rk.Streams), rk.Waits, rk.Syncs, rk.Collectives, fmtNs(rk.StepNs))
				for _, n := range rk.Notes {
					fmt.Fprintf(sum, "  note: %s\n", n)
				}
			}
			if out != "" && out != "-" {
				fmt.Fprintf(sum, "wrote %s (scenario %s)\n", out, res.Spec.Name)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "write the scenario file here (default: stdout)")
	f.StringArrayVar(&o.ET, "et", nil, "execution trace of the next trace, in trace order (repeatable)")
	f.StringVar(&o.Step, "step", "", "record_function annotation around the step to import (default: ProfilerStep#N, else \"step\")")
	f.IntVar(&o.StepIndex, "step-index", 0, "import only this occurrence of the step annotation (0: the first; default: a name repeated on one thread, as in a loop, from its first occurrence to its last)")
	f.StringVar(&o.Name, "name", "", "scenario name (default: the first trace's file name)")
	f.BoolVar(&o.FlightRecorder, "flight-recorder", false, "the files are Flight Recorder dumps (JSON form, one per rank): import each rank's collectives in issue order, to replay a hang")
	f.Var(maxBytes, "max-trace-bytes", "the most (decompressed) bytes read from one file")
	f.Var(maxToken, "max-token-bytes", "the longest string or number read")
	f.Var(maxRecord, "max-record-bytes", "the largest event, node, entry or top-level value read whole")
	f.IntVar(&lim.MaxEvents, "max-events", lim.MaxEvents, "the most events (nodes, entries) read from one file")
	f.IntVar(&lim.MaxKept, "max-kept", lim.MaxKept, "the most records of one kind kept for the step (annotations, operators, memory events, device activities, graph captures, threads)")
	return cmd
}

// sizeFlag is a byte count given as a size (64MiB, 8GiB).
type sizeFlag struct{ n *int64 }

func (s *sizeFlag) String() string { return scenarios.FormatBytes(*s.n) }
func (s *sizeFlag) Type() string   { return "size" }
func (s *sizeFlag) Set(v string) error {
	n, err := parseSize(v)
	if err != nil || n < 1 {
		return fmt.Errorf("want a positive size, such as 64MiB or 8GiB")
	}
	*s.n = n
	return nil
}

// stdinSpool is standard input copied to a file: the importer reads a
// trace three times (window, host side, device side), which a pipe cannot
// give. Its name is stdin.json, so the scenario and the summary say
// "stdin"; errors say "-".
type stdinSpool struct{ dir, path string }

// spoolStdin replaces a "-" among args by a file holding standard input
// (at most limit bytes; a gzip is read as gzip, whatever the name).
func spoolStdin(args []string, limit int64) ([]string, *stdinSpool, error) {
	sp := &stdinSpool{}
	out := append([]string{}, args...)
	for i, a := range out {
		if a != "-" {
			continue
		}
		if sp.path != "" {
			return nil, sp, usagef("standard input (-) given twice")
		}
		dir, err := os.MkdirTemp("", "simctl-import-")
		if err != nil {
			return nil, sp, err
		}
		sp.dir, sp.path = dir, filepath.Join(dir, "stdin.json")
		f, err := os.Create(sp.path)
		if err != nil {
			return nil, sp, err
		}
		n, err := io.Copy(f, io.LimitReader(stdin, limit+1))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, sp, fmt.Errorf("reading standard input: %w", err)
		}
		if n > limit {
			return nil, sp, usagef("-: standard input is larger than %s; raise --max-trace-bytes to read it", scenarios.FormatBytes(limit))
		}
		out[i] = sp.path
	}
	return out, sp, nil
}

// rename says "-" where err names the spooled file.
func (s *stdinSpool) rename(err error) error {
	if s == nil || s.path == "" || err == nil {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), s.path, "-"))
}

func (s *stdinSpool) remove() {
	if s != nil && s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}
