package explore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A deadline stops parallel exploration: schedules handed out before it are
// run and merged in order (a prefix of the schedule space), nothing after;
// one already past hands out none. Neither case may hang.
func TestParallelDeadline(t *testing.T) {
	tg, err := NewTarget("tp8-shared-expert", "fixed", []string{"layers=1"})
	require.NoError(t, err)
	for _, c := range []struct {
		name   string
		after  time.Duration
		budget int
	}{
		{"past", -time.Second, 1000},
		{"midway", 500 * time.Millisecond, 1_000_000},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := New("random", tg, 1)
			require.NoError(t, err)
			sum, err := Explore(tg, s, 1, Options{Budget: c.budget, Workers: 2, Deadline: time.Now().Add(c.after), Outcomes: true})
			require.NoError(t, err)
			require.Less(t, sum.Schedules, c.budget)
			if c.after < 0 {
				require.Zero(t, sum.Schedules)
				return
			}
			require.Positive(t, sum.Schedules)
			// The merged schedules are exactly the first ones: the same
			// number without a deadline gives the same summary.
			s2, err := New("random", tg, 1)
			require.NoError(t, err)
			full, err := Explore(tg, s2, 1, Options{Budget: sum.Schedules, Workers: 1, Outcomes: true})
			require.NoError(t, err)
			require.True(t, sum.Partial, "a run cut by its deadline says so")
			require.Equal(t, c.budget, sum.Planned)
			full.Elapsed, sum.Elapsed = 0, 0
			sum.Partial, sum.Planned = false, 0
			require.Equal(t, summaryJSON(t, full), summaryJSON(t, sum))
		})
	}
}
