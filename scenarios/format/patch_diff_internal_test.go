package format

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestDiffOpsApplies: for any base program and any target made of some of
// its ops (some changed), in any order, with new ops among them, the patch
// DiffOps writes turns the base into the target exactly (DiffOps checks
// that itself and fails otherwise), and only the ops outside a longest
// common order move.
func TestDiffOpsApplies(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 12).Draw(rt, "ops")
		var base []OpSpec
		for i := range n {
			base = append(base, OpSpec{Kind: OpKernel, Name: fmt.Sprintf("k%d", i), Writes: []string{"x"}, Stream: "main"})
		}
		var ops []OpSpec
		for i, op := range base {
			if rapid.Bool().Draw(rt, fmt.Sprintf("keep%d", i)) {
				if rapid.IntRange(0, 3).Draw(rt, fmt.Sprintf("change%d", i)) == 0 {
					op.Stream = "aux"
				}
				ops = append(ops, op)
			}
		}
		for i := range rapid.IntRange(0, 4).Draw(rt, "new") {
			ops = append(ops, OpSpec{Kind: OpWait, Name: "e", ID: fmt.Sprintf("w%d", i), Stream: "main"})
		}
		if len(ops) == 0 {
			return
		}
		perm := rapid.Permutation(ops).Draw(rt, "order")
		if !slices.ContainsFunc(perm, func(op OpSpec) bool { return op.Kind == OpKernel }) {
			return // nothing of the base left to place the first op against
		}
		steps, err := DiffOps(base, perm)
		require.NoError(rt, err)
		moved := 0
		for _, st := range steps {
			if st.Verb == "move" {
				moved++
			}
		}
		var common []int
		for _, op := range base {
			if i := slices.IndexFunc(perm, func(x OpSpec) bool { return opRef(&x) == opRef(&op) }); i >= 0 {
				common = append(common, i)
			}
		}
		require.Equal(rt, len(common)-len(longestIncreasing(common)), moved, "only the ops outside a longest common order move")
	})
}

// TestLongestIncreasing against the naive enumeration of subsequences.
func TestLongestIncreasing(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		xs := rapid.Permutation(rapid.SliceOfNDistinct(rapid.IntRange(0, 50), 0, 10, rapid.ID).Draw(rt, "set")).Draw(rt, "xs")
		got := longestIncreasing(xs)
		best := 0
		for mask := range 1 << len(xs) {
			var sub []int
			for i, x := range xs {
				if mask&(1<<i) != 0 {
					sub = append(sub, x)
				}
			}
			if slices.IsSorted(sub) {
				best = max(best, len(sub))
			}
		}
		require.Len(rt, got, best)
		require.True(rt, slices.IsSorted(got))
		last := -1
		for _, x := range got { // a subsequence of xs
			i := slices.Index(xs, x)
			require.Greater(rt, i, last)
			last = i
		}
	})
}
