package knobs

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks"
)

// The jitter knob picks the tables exploration draws durations from; eager
// worlds get the measured host issue costs.
func TestJitterKnobAndIssueCosts(t *testing.T) {
	for _, tt := range []struct {
		v         string
		ok        bool
		dev, host []int64
	}{
		{"wide", true, nil, nil},
		{"measured", true, ranks.MeasuredJitter, ranks.MeasuredHostJitter},
		{"measured:2", true, ranks.Widen(ranks.MeasuredJitter, 2), ranks.Widen(ranks.MeasuredHostJitter, 2)},
		{"measured:x", false, nil, nil},
		{"measured:-1", false, nil, nil},
		{"narrow", false, nil, nil},
	} {
		var c Config
		err := jitterKnob.set(&c, tt.v)
		if !tt.ok {
			require.ErrorIs(t, err, ErrBadKnob, tt.v)
			continue
		}
		require.NoError(t, err)
		hw, _ := ranks.ProfileFor("h200")
		wc := WorldConfig(c, hw, ranks.Config{Mode: ranks.Eager})
		require.Equal(t, tt.dev, wc.Jitter, tt.v)
		require.Equal(t, tt.host, wc.HostJitter, tt.v)
		require.Equal(t, ranks.MeasuredHost.EagerOp, wc.LaunchCost)
		require.Equal(t, ranks.MeasuredHost.EagerGEMM, wc.GEMMLaunchCost)
	}
	// A config that names no jitter explores with the hardware's measured
	// noise; wide noise is asked for on purpose.
	hw, _ := ranks.ProfileFor("h200")
	wc := WorldConfig(Config{}, hw, ranks.Config{Mode: ranks.Graph})
	require.Equal(t, ranks.MeasuredJitter, wc.Jitter, "default jitter")
	require.Equal(t, ranks.MeasuredHostJitter, wc.HostJitter, "default host jitter")
	w := ranks.Widen([]int64{1000, 900, 1100}, 3)
	require.Equal(t, []int64{1000, 700, 1300}, w)
	require.Equal(t, int64(50), ranks.Widen([]int64{100}, 2)[0], "never below ×0.05")
}
