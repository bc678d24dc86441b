package check_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
)

// TestCorruptionSaysLogicBugOrRace: a wrong output is reported as
// corruption either way, and the report says which: the same wrong value
// in every schedule with no race in any is a logic bug (here a weight of
// 3 where 2 is expected), named with the op that wrote it; a wrong value
// in only some schedules, beside a race, depends on the schedule.
func TestCorruptionSaysLogicBugOrRace(t *testing.T) {
	expect := &check.References{Expected: []check.Expected{{Tensor: "y", Rank: 0, Values: []uint64{2, 4}}}}
	tests := []struct {
		name  string
		p     check.Program
		logic bool
		every bool
		race  bool
		says  string
	}{
		{"logic bug", scale{w: 3, refs: expect}, true, true, false, `a logic bug in what the program computes (its value last written by "scale"), not a race`},
		{"race", waitsForLater{}, false, false, true, "it depends on the schedule"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := check.RunVariant(one{tt.p, 20}, check.Variant{Name: "v"}, check.Options{})
			require.NoError(t, err)
			require.Equal(t, check.Corruption, rep.Verdict, "%v", rep.Findings)
			c := rep.Corruption
			require.NotNil(t, c)
			require.Equal(t, tt.logic, c.LogicBug)
			require.Equal(t, tt.every, c.EverySchedule)
			require.Equal(t, tt.race, c.Race)
			require.Equal(t, rep.Schedules, c.Of)
			for _, f := range rep.Findings {
				if f.Kind == check.Corruption {
					require.Contains(t, f.Message, tt.says)
				}
			}
		})
	}
	rep, err := check.RunVariant(one{scale{w: 2, refs: expect}, 2}, check.Variant{Name: "v"}, check.Options{})
	require.NoError(t, err)
	require.Nil(t, rep.Corruption, "no corruption, nothing to say")
}
