package main

import (
	"bytes"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/scenarios"
)

// A command starts at GOGC=400 and drops to 100 when it admits a
// configuration estimated large, and to 50 for one estimated huge, before
// building it; a smaller one after a larger one does not raise it again;
// GOGC in the environment wins.
func TestGCFollowsTheEstimate(t *testing.T) {
	saved := debug.SetGCPercent(100)
	defer debug.SetGCPercent(saved)
	defer func(p int) { gcChoice.pct = p }(gcChoice.pct)
	t.Setenv("GOGC", "")
	current := func() int { p := debug.SetGCPercent(-1); debug.SetGCPercent(p); return p }

	tuneGC()
	require.Equal(t, scenarios.SmallRunGCPercent, current())
	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"run", "tp8-shared-expert", "--variant", "fixed", "--set", "budget=0"}, &out, &errb), errb.String())
	require.Equal(t, scenarios.SmallRunGCPercent, current(), "a small run keeps 400")

	// The command installed the admission hook (memory.go): admitting a
	// large configuration lowers the target before anything is built.
	sc, _ := scenarios.Lookup("tp8-shared-expert")
	v, _ := sc.Variant("fixed")
	cfg, err := sc.VariantConfig(v, []string{"dp=64", "layers=61"})
	require.NoError(t, err)
	e := sc.Estimate(cfg)
	require.Equal(t, scenarios.LargeRunGCPercent, e.GCPercent)
	require.Equal(t, scenarios.LargeRunGCPercent, current(), "a large run collects at 100")
	gcForEstimate(sc.Estimate(sc.Base))
	require.Equal(t, scenarios.LargeRunGCPercent, current(), "never raised again")

	huge, err := sc.VariantConfig(v, []string{"dp=512", "layers=61"})
	require.NoError(t, err)
	require.Equal(t, scenarios.HugeRunGCPercent, current(), "a huge run collects at 50")
	gcForEstimate(e)
	gcForEstimate(sc.Estimate(sc.Base))
	require.Equal(t, scenarios.HugeRunGCPercent, current(), "never raised again")
	require.Equal(t, scenarios.HugeRunGCPercent, sc.Estimate(huge).GCPercent)

	defer func(b int64) { scenarios.MemoryBudget = b }(scenarios.MemoryBudget)
	t.Setenv("GOGC", "250")
	debug.SetGCPercent(250)
	tuneGC()
	gcForEstimate(e)
	require.Equal(t, 250, current(), "the environment's GOGC wins")
}
