package main

import (
	"io"
	"strings"

	"github.com/spf13/cobra"
)

func isCobraUsage(err error) bool {
	s := err.Error()
	return strings.Contains(s, "unknown flag") || strings.Contains(s, "unknown command") || strings.Contains(s, "accepts")
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "simctl",
		Short:         "Deterministic multi-rank collective simulator",
		Long:          "simctl runs collsim scenarios: N ranks, their CUDA streams and graphs, NCCL and symmetric-memory collectives,\nand checks every schedule it tries for cross-stream collective races, corruption, mismatches and hangs.",
		Example: `  simctl list                                   # the built-in scenarios
  simctl run tp8-shared-expert                  # run a built-in's variants, with verdicts
  simctl run docs/examples/two-stream.yaml      # run your own scenario file
  simctl validate my.yaml                       # check a file without running it
  simctl show tp8-shared-expert --variant fixed # ASCII timeline of the nominal schedule
  simctl show tp8-shared-expert --yaml          # the built-in as a scenario file
  source <(simctl completion bash)              # shell completion`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	for _, mk := range commands {
		root.AddCommand(mk(stdout, stderr))
	}
	return root
}

// commands are the subcommands; each file registers its own in init, so
// adding a command touches no other file.
var commands []func(stdout, stderr io.Writer) *cobra.Command

func register(mk func(stdout, stderr io.Writer) *cobra.Command) { commands = append(commands, mk) }
