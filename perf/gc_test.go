package perf

import (
	"fmt"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/scenarios"
)

// A scale row measures under the collector's target simctl run picks for
// its configuration (scenarios.Estimate's GCPercent), says so in its peak
// row's note, and restores the target it found.
func TestScaleRowCollectsAsSimctlWould(t *testing.T) {
	t.Setenv("GOGC", "")
	saved := debug.SetGCPercent(123)
	defer debug.SetGCPercent(saved)
	sets := []string{"dp=2", "layers=2"}
	sc, _ := scenarios.Lookup("tp8-shared-expert")
	v, _ := sc.Variant("fixed")
	cfg, err := sc.VariantConfig(v, sets)
	require.NoError(t, err)
	want := sc.Estimate(cfg).GCPercent
	_, err = scaleRow("gc-test-s", sets)
	require.NoError(t, err)
	require.Contains(t, lastPeak.Note, fmt.Sprintf("GOGC=%d,", want))
	require.Equal(t, 123, debug.SetGCPercent(123), "restored")

	restore := collectAt(scenarios.HugeRunGCPercent)
	require.Equal(t, scenarios.HugeRunGCPercent, debug.SetGCPercent(scenarios.HugeRunGCPercent))
	restore()
	require.Equal(t, 123, debug.SetGCPercent(123))
}
