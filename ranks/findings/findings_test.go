package findings_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks/findings"
)

// Every finding is counted; at most Max of each kind are kept, in the
// order reported; kinds are capped apart.
func TestLogCapsEachKind(t *testing.T) {
	l := findings.NewLog(2)
	for i, k := range []string{"race", "race", "hang", "race", "race", "hang"} {
		kept := l.Add(findings.Finding{Kind: k, Message: string(rune('a' + i))})
		require.Equal(t, k == "hang" || i < 2, kept, "report %d", i)
	}
	require.Equal(t, map[string]int{"race": 4, "hang": 2}, l.Counts)
	var got string
	for _, f := range l.List {
		got += f.Message
	}
	require.Equal(t, "abcf", got)
	require.True(t, l.Full("race"))
	require.True(t, l.Full("hang"))
	require.False(t, l.Full("mismatch"))
}

// A key is new once.
func TestLogFirst(t *testing.T) {
	var l findings.Log
	k := findings.Key{Kind: "sigmismatch", A: "ar#1", B: "sum/8", X: "sum/16", Res: "signal"}
	require.True(t, l.First(k))
	require.False(t, l.First(k))
	require.True(t, l.First(findings.Key{Kind: "sigmismatch", A: "ar#2"}))
}

// A group is counted once, however often it is reported; past the cap it
// is counted and remembered, never kept.
func TestLogGroups(t *testing.T) {
	l := findings.NewLog(1)
	_, seen := l.Group("k1")
	require.False(t, seen)
	l.AddGroup("k1", findings.Finding{Kind: "dropped", Ranks: []int{0}})
	f, seen := l.Group("k1")
	require.True(t, seen)
	f.Ranks = append(f.Ranks, 1)
	require.Equal(t, []int{0, 1}, l.List[0].Ranks)

	l.AddGroup("k2", findings.Finding{Kind: "dropped", Ranks: []int{0}})
	f, seen = l.Group("k2")
	require.True(t, seen)
	require.Nil(t, f)
	require.Equal(t, 2, l.Counts["dropped"])
	require.Len(t, l.List, 1)
}
