package ranks

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRenamingMatchesMap: the fold check's renaming (a list while short,
// then a map) answers every record as a plain map does, before and after
// it outgrows the list.
func TestRenamingMatchesMap(t *testing.T) {
	var r renaming[int]
	oracle := map[int]int{}
	for i := range 3 * shortRenaming {
		for _, x := range []int{i, i / 2, i / 3} { // new, then seen, with right and wrong images
			for _, y := range []int{x + 100, x + 101} {
				want := same(oracle, x, y)
				require.Equal(t, want, r.same(x, y), "x=%d y=%d after %d", x, y, i)
			}
		}
		require.Equal(t, len(oracle) > shortRenaming, r.m != nil, "a map once the list is full")
	}
}
