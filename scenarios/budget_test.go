package scenarios

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// Every built-in variant, as shipped, fits the budget of a small machine:
// a fifth of a 2 GiB address-space limit (what --max-memory defaults to
// under ulimit -v 2GiB).
func TestBuiltinsFitASmallBudget(t *testing.T) {
	const small = (2 << 30) / 5
	for _, name := range Names() {
		sc, _ := Lookup(name)
		for _, v := range sc.Variants {
			cfg, err := sc.VariantConfig(v, nil)
			require.NoError(t, err, "%s/%s", name, v.Name)
			e := sc.Estimate(cfg)
			require.LessOrEqual(t, e.Bytes, int64(small), "%s/%s: %+v", name, v.Name, e)
		}
	}
}

// The estimate grows with every knob that multiplies the work, never
// overflows, and over the budget the error names the knob.
func TestPropEstimateMonotone(t *testing.T) {
	sc, ok := Lookup("tp8-shared-expert")
	require.True(t, ok)
	rapid.Check(t, func(rt *rapid.T) {
		cfg := sc.Base
		cfg.TP = rapid.IntRange(1, 1024).Draw(rt, "tp")
		cfg.DP = rapid.IntRange(1, 1024).Draw(rt, "dp")
		cfg.Layers = rapid.IntRange(1, 256).Draw(rt, "layers")
		cfg.Replays = rapid.IntRange(1, 64).Draw(rt, "replays")
		cfg.Chunks = rapid.IntRange(1, 64).Draw(rt, "chunks")
		e := sc.Estimate(cfg)
		require.Positive(rt, e.Bytes)
		require.Equal(rt, cfg.TP*cfg.DP, e.Ranks)
		knob := rapid.SampledFrom([]string{"tp", "dp", "layers", "replays", "chunks"}).Draw(rt, "knob")
		up := cfg
		switch knob {
		case "tp":
			up.TP *= 2
		case "dp":
			up.DP *= 2
		case "layers":
			up.Layers *= 2
		case "replays":
			up.Replays *= 2
		case "chunks":
			up.Chunks *= 2
		}
		u := sc.Estimate(up)
		require.GreaterOrEqual(rt, u.Bytes, e.Bytes, knob)
		require.GreaterOrEqual(rt, u.Tasks, e.Tasks, knob)
		if err := sc.CheckBudget(cfg); err != nil {
			require.ErrorIs(rt, err, ErrBudget)
			require.ErrorIs(rt, err, ErrBadKnob)
			require.Regexp(rt, `lower (tp|dp|layers|replays|chunks) \(now \d+\)`, err.Error())
		}
	})
}

// dp counts: a world of tp·dp ranks is estimated as such (validate said 64
// ranks where the world had 4096).
func TestEstimateCountsDP(t *testing.T) {
	sc, _ := Lookup("tp8-shared-expert")
	cfg := sc.Base
	one := sc.Estimate(cfg)
	cfg.DP = 64
	many := sc.Estimate(cfg)
	require.Equal(t, 64*one.Ranks, many.Ranks)
	require.Equal(t, 64*one.Tasks, many.Tasks)
	cfg.TP, cfg.DP, cfg.Layers = 1024, 4, 256
	err := sc.CheckBudget(cfg)
	require.ErrorIs(t, err, ErrBudget)
	require.ErrorContains(t, err, "4096 ranks")
	require.ErrorContains(t, err, "lower tp (now 1024)")
}

// A file's repeated blocks count in full: repeat-layers.yaml repeats its
// block `layers` times, so more layers estimate more tasks (through the
// repeats, not as a multiplier of the whole program), and enough of them
// is refused before anything is built.
func TestEstimateCountsRepeatedBlocks(t *testing.T) {
	data, err := os.ReadFile("testdata/ok/repeat-layers.yaml")
	require.NoError(t, err)
	sc, err := Load("repeat-layers.yaml", data)
	require.NoError(t, err)
	cfg, err := sc.VariantConfig(sc.Variants[0], nil)
	require.NoError(t, err)
	few := sc.Estimate(cfg)
	cfg.Layers *= 8
	many := sc.Estimate(cfg)
	require.Greater(t, many.Tasks, 4*few.Tasks, "8× the layers: 8× the repeated block's ops")
	defer func(b int64) { MemoryBudget = b }(MemoryBudget)
	MemoryBudget = few.Bytes
	_, err = sc.VariantConfig(sc.Variants[0], []string{fmt.Sprintf("layers=%d", cfg.Layers)})
	require.ErrorIs(t, err, ErrBudget)
}
