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
			explore := func(after time.Duration) *Summary {
				s, err := New("random", tg, 1)
				require.NoError(t, err)
				sum, err := Explore(tg, s, 1, Options{Budget: c.budget, Workers: 2, Deadline: time.Now().Add(after), Outcomes: true})
				require.NoError(t, err)
				require.Less(t, sum.Schedules, c.budget)
				return sum
			}
			sum := explore(c.after)
			if c.after < 0 {
				require.Zero(t, sum.Schedules)
				return
			}
			// A loaded machine may finish no schedule before a short
			// deadline; a longer one then shows the prefix property.
			for after := c.after; sum.Schedules == 0 && after < time.Minute; {
				after *= 4
				sum = explore(after)
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
