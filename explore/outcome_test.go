package explore_test

import (
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/explore"
)

// TestOutcomesFollowTheVerdict: a program that marks no tensor as an output
// (testdata/two-stream-no-outputs.yaml: docs/examples/two-stream.yaml
// without its output marks, the aux kernel longer) is judged on every
// tensor it writes; its
// outcomes must then tell a corrupted schedule from a clean one. Schedules
// that share an outcome hash agree on whether they corrupt (corruption is
// a difference in exactly the values the hash covers), and the exploration
// finds more than one outcome. The wide noise (jitter=wide) gives this file
// both clean and corrupting schedules; the measured noise corrupts in all.
func TestOutcomesFollowTheVerdict(t *testing.T) {
	tg, err := explore.NewTargetFrom("testdata/two-stream-no-outputs.yaml", "overlapped", []string{"jitter=wide"}, os.ReadFile)
	require.NoError(t, err)
	s, err := explore.New("random", tg, 1)
	require.NoError(t, err)
	sum, err := explore.Explore(tg, s, 1, explore.Options{Budget: 120, Shard: explore.Shard{Index: 0, Count: 1}})
	require.NoError(t, err)
	require.Greater(t, sum.Findings[check.Corruption], 0, "some schedule corrupts")
	require.Less(t, sum.Findings[check.Corruption], sum.Schedules, "some schedule does not")
	corrupt := map[string]bool{}
	for _, r := range sum.Records {
		c := slices.Contains(r.Kinds, check.Corruption)
		if prev, ok := corrupt[r.OutHash]; ok {
			require.Equal(t, prev, c, "schedule %d: outcome %s holds corrupted and clean schedules", r.Index, r.OutHash)
		}
		corrupt[r.OutHash] = c
	}
	require.Greater(t, len(sum.Outcomes), 1)
}
