package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/collsim/collsim/scenarios"
)

// Shell completion for the flags every scenario command shares: --variant
// completes the variants of the scenario already on the command line,
// --set completes knob keys and then the values of enumerated knobs, and
// --format completes text and json.

// completeVariants completes --variant from the scenario argument (a
// built-in or a file); comma-separated lists complete their last element.
func completeVariants(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 0 || args[0] == "-" {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	sc, err := scenarios.Resolve(args[0], readInput)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	prefix := ""
	if i := strings.LastIndex(toComplete, ","); i >= 0 {
		prefix = toComplete[:i+1]
	}
	var out []string
	for _, v := range sc.Variants {
		out = append(out, prefix+v.Name+"\t"+v.Expect)
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeSets completes --set: "key=" for every knob, then, after the "=",
// the values of an enumerated knob.
func completeSets(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if key, _, ok := strings.Cut(toComplete, "="); ok {
		var out []string
		for _, v := range scenarios.KnobValues(key) {
			out = append(out, key+"="+v)
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, k := range scenarios.KnobKeys() {
		out = append(out, k+"=")
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}

// addScenarioCompletion registers the completions of --variant, --set and
// --format on cmd, for those of them it has.
func addScenarioCompletion(cmd *cobra.Command) {
	if cmd.Flags().Lookup("variant") != nil {
		_ = cmd.RegisterFlagCompletionFunc("variant", completeVariants)
	}
	if cmd.Flags().Lookup("set") != nil {
		_ = cmd.RegisterFlagCompletionFunc("set", completeSets)
	}
	if cmd.Flags().Lookup("format") != nil {
		_ = cmd.RegisterFlagCompletionFunc("format", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return []string{formatText, formatJSON}, cobra.ShellCompDirectiveNoFileComp
		})
	}
}
