package main

import "github.com/spf13/cobra"

// addFineStepsFlag adds --fine-steps to cmd, setting *on.
//
// A collective whose ranks' memory and connections nothing else can touch
// normally runs as one coarse computation on a nominal schedule
// (ranks/coarse.go): simctl run's and show's, and every reference run. An
// explored or replayed schedule records or replays its choices, so it
// never does. --fine-steps runs every call micro-op by micro-op; a witness
// records the flag (explore.Witness.FineSteps). Verdicts, findings, times
// and values are the same either way; the trace hash and step count
// differ where a call would have run coarse. It is the oracle the coarse
// path is checked against, offered on the command line to confirm a
// result without it.
func addFineStepsFlag(cmd *cobra.Command, on *bool) {
	cmd.Flags().BoolVar(on, "fine-steps", false, "run every collective micro-op by micro-op, one event each: no call whose memory and connections\nnothing else touches runs as one coarse step (only a nominal schedule takes those: run's, show's and the\nreferences'; explored and replayed schedules never do). Same verdicts, findings, times and values;\na different trace hash and step count where a call would have run coarse")
}
