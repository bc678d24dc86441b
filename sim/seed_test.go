package sim_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/collsim/collsim/sim"
)

// A seed above 2^53 survives a reader that holds numbers as float64: JSON
// has it as a string. Old files (a bare number) still read.
func TestSeedJSON(t *testing.T) {
	big := sim.Seed(18446744073709551557)
	b, err := json.Marshal(big)
	require.NoError(t, err)
	require.Equal(t, `"18446744073709551557"`, string(b))
	var anyv any
	require.NoError(t, json.Unmarshal(b, &anyv))
	require.Equal(t, "18446744073709551557", anyv, "a float64 reader sees the exact digits")
	for _, in := range []string{`"18446744073709551557"`, `18446744073709551557`, ` 18446744073709551557 `} {
		var s sim.Seed
		require.NoError(t, json.Unmarshal([]byte(in), &s), in)
		require.Equal(t, big, s)
	}
	for _, in := range []string{`"-1"`, `-1`, `1.5`, `"x"`, `"18446744073709551616"`, `true`} {
		var s sim.Seed
		require.Error(t, json.Unmarshal([]byte(in), &s), in)
	}
	rapid.Check(t, func(t *rapid.T) {
		s := sim.Seed(rapid.Uint64().Draw(t, "seed"))
		b, err := json.Marshal(s)
		require.NoError(t, err)
		var got sim.Seed
		require.NoError(t, json.Unmarshal(b, &got))
		require.Equal(t, s, got)
	})
}
