package check_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// TestRunMixesRandomAndPCT: RunVariant's schedules alternate seeded random
// timing (odd) and PCT (even), so a hang that only an untimed adversarial
// order shows is found by a plain run: symm-two-streams-one-group buggy
// without rank skew, where random timing (every schedule of a 60-schedule
// random budget) leaves the spinning kernels in one order on every rank.
// The witness re-runs from the report alone, to the same trace.
func TestRunMixesRandomAndPCT(t *testing.T) {
	for i := 1; i <= 4; i++ {
		strat, mode, _, seed := check.MixedSchedule(1, i, 10)
		require.Equal(t, check.ScheduleSeed(1, i), seed)
		if i%2 == 1 {
			require.Equal(t, check.StrategyRandom, strat)
			require.Equal(t, sim.Timed, mode)
		} else {
			require.Equal(t, check.StrategyPCT, strat)
			require.Equal(t, sim.Untimed, mode)
		}
	}

	sc, ok := scenarios.Lookup("symm-two-streams-one-group")
	require.True(t, ok)
	v, ok := sc.Variant("buggy")
	require.True(t, ok)
	rep, err := check.RunVariant(sc, v, check.Options{Extra: []string{"skew_ns=0", "budget=20"}})
	require.NoError(t, err)
	require.Equal(t, check.Hang, rep.Verdict, "nominal: %s", rep.NominalResult)
	require.Equal(t, check.StrategyPCT, rep.WitnessStrategy)
	require.Positive(t, rep.PCTSteps)

	// The witness replays from what the report says.
	cfg, err := sc.VariantConfig(v, []string{"skew_ns=0", "budget=20"})
	require.NoError(t, err)
	ref, err := check.NewReference(sc.Program(cfg, nil))
	require.NoError(t, err)
	mode, ch := rep.WitnessChooser()
	o, err := check.RunSchedule(sc.Program(cfg, nil), ref, mode, ch)
	require.NoError(t, err)
	require.Equal(t, rep.WitnessHash, o.TraceHash)
	require.Equal(t, check.Hang, o.Verdict)
}
