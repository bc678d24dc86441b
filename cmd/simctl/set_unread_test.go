package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSetUnreadKnob: `--set` of a knob the scenario's form does not read is
// bad input (exit 2) in run, explore and show, and the message names the
// knob, the form and the knobs the form reads.
func TestSetUnreadKnob(t *testing.T) {
	const want = `knob "placement" is not read by scenario symm-pad-aliasing's form (programs), so it would change nothing; knobs it reads: arch, budget, chunks, jitter, mode, nccl-coresident, nccl-order, pad, replays, seed, sms, strategy, symm-guard, tp, workspace`
	for _, cmd := range []string{"run", "explore", "show"} {
		t.Run(cmd, func(t *testing.T) {
			code, stdout, stderr := simctl(t, cmd, "symm-pad-aliasing", "--set", "placement=buggy")
			require.Equal(t, 2, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			require.Contains(t, stderr, "placement=buggy: "+want)
		})
	}
	t.Run("a read knob runs", func(t *testing.T) {
		code, stdout, stderr := simctl(t, "show", "symm-pad-aliasing", "--set", "seed=3")
		require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	})
}
