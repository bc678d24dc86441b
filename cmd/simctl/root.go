package main

import (
	"fmt"
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
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.Example = rootExample
	addMemoryFlag(root) // memory.go: --max-memory
	root.SetOut(stdout)
	root.SetErr(stderr)
	for _, mk := range commands {
		root.AddCommand(mk(stdout, stderr))
	}
	for _, c := range root.Commands() {
		addScenarioCompletion(c)
		if c.ValidArgsFunction == nil && strings.Contains(c.Use, "NAME") {
			c.ValidArgsFunction = completeScenarios
		}
	}
	// simctl --version prints what simctl version prints.
	v := currentVersion()
	root.Version = v.Version
	root.SetVersionTemplate(fmt.Sprintf("simctl %s (%s, %s)\n", v.Version, v.Module, v.Go))
	return root
}

// commands are the subcommands; each file registers its own in init, so
// adding a command touches no other file.
var commands []func(stdout, stderr io.Writer) *cobra.Command

func register(mk func(stdout, stderr io.Writer) *cobra.Command) { commands = append(commands, mk) }
