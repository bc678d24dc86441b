package explore

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/collsim/collsim/check"
)

// naiveMerge is what Merge did before it folded records as they come: all
// records sorted by schedule and given to the merger that Explore uses, in
// order. It checks nothing.
func naiveMerge(files []*ShardFile) *Summary {
	var recs []*Record
	for _, f := range files {
		recs = append(recs, f.Records...)
	}
	slices.SortFunc(recs, func(a, b *Record) int { return a.Index - b.Index })
	f0 := files[0]
	sum := &Summary{Exploration: f0.Exploration, Verdict: check.OK, Findings: map[string]int{}}
	m := &merger{sum: sum, byHash: map[string]*Outcome{}, outcomes: f0.Outcomes}
	for _, r := range recs {
		m.add(r)
	}
	return sum
}

// TestPropMergeFoldsAsTheMergerDoes: shards of an exploration, each cut
// short or not, given in any order, merge record by record into the
// summary the in-order merger makes of all their records sorted — and,
// when none is cut, into the single machine's summary.
func TestPropMergeFoldsAsTheMergerDoes(t *testing.T) {
	// Several outcomes, and a race before the first corruption: the
	// witness moves.
	tg, err := NewTarget("aux-stream-lifetime", "buggy", nil)
	require.NoError(t, err)
	const budget = 30
	type key struct {
		n        int
		outcomes bool
	}
	shards := map[key][]*ShardFile{}
	single := map[bool]string{}
	for _, outcomes := range []bool{false, true} {
		s, err := New("pct", tg, 1)
		require.NoError(t, err)
		sum, err := Explore(tg, s, 1, Options{Budget: budget, Outcomes: outcomes})
		require.NoError(t, err)
		sum.Elapsed = 0
		single[outcomes] = summaryJSON(t, sum)
		for _, n := range []int{1, 2, 3, 7} {
			for i := range n {
				s, err := New("pct", tg, 1)
				require.NoError(t, err)
				sh := Shard{Index: i, Count: n}
				sum, err := Explore(tg, s, 1, Options{Budget: budget, Outcomes: outcomes, Shard: sh})
				require.NoError(t, err)
				shards[key{n, outcomes}] = append(shards[key{n, outcomes}], NewShardFile(sum, budget, outcomes, sh))
			}
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		k := key{rapid.SampledFrom([]int{1, 2, 3, 7}).Draw(rt, "n"), rapid.Bool().Draw(rt, "outcomes")}
		var files []*ShardFile
		cut := false
		for i, f := range shards[k] {
			g := *f
			keep := len(g.Records)
			if rapid.Bool().Draw(rt, fmt.Sprintf("cut %d", i)) {
				keep = rapid.IntRange(0, keep).Draw(rt, fmt.Sprintf("keep %d", i))
				g.Cut = true
				cut = cut || keep < len(g.Records)
			}
			g.Records = g.Records[:keep]
			files = append(files, &g)
		}
		order := rapid.Permutation(files).Draw(rt, "order")
		got, err := Merge(order)
		require.NoError(rt, err)
		want := naiveMerge(order)
		if cut {
			want.Partial, want.Planned = true, budget
		}
		require.Equal(rt, summaryJSON(rt, want), summaryJSON(rt, got))
		require.Equal(rt, want.Witness, got.Witness)
		if !cut {
			require.Equal(rt, single[k.outcomes], summaryJSON(rt, got))
		}
	})
}
