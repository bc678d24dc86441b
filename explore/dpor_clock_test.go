package explore

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// referenceClocks computes every step's vector clock the slow way: step j
// happens before step i (j < i) when a chain of directly dependent steps
// leads from j to i, a step directly depending on an earlier one when they
// are of one actor or their footprints conflict (DPOR's own predicate,
// independent). A pseudo-step never ran, so nothing depends on it. Entry b
// of step i's clock is the largest local index of actor b's steps that
// happen before i (i's own for its actor), 0 if none; the row is width long.
func referenceClocks(steps []dstep, width int) [][]int32 {
	n := len(steps)
	before := make([][]bool, n) // before[i][j]: j happens before i
	out := make([][]int32, n)
	for i := range steps {
		before[i] = make([]bool, n)
		for j := range i {
			if steps[j].pseudo {
				continue
			}
			if steps[j].a == steps[i].a || !independent(steps[j].acc, steps[i].acc) {
				before[i][j] = true
				for k := range j {
					before[i][k] = before[i][k] || before[j][k]
				}
			}
		}
		c := make([]int32, width)
		for j := range i {
			if before[i][j] {
				c[steps[j].a] = max(c[steps[j].a], int32(steps[j].local))
			}
		}
		c[steps[i].a] = int32(steps[i].local)
		out[i] = c
	}
	return out
}

// TestDPORClocksAreHappensBefore: after every analysed execution (cut
// short or finished, its replayed prefix's clocks reused or not), each
// step's clock is exactly the transitive closure of same-actor and
// conflict edges (referenceClocks), on the fixed cases, the first
// programs of both generators' sweeps and the first traces of the
// headline's buggy placement at its smallest shape (many actors, rows
// that grow). DPOR stays sound with a clock that knows too little (a
// weaker happens-before only adds reversals), so the naive-enumeration
// tests cannot see such a bug: joining with min instead of max, or
// copying or joining fewer entries than the actors seen so far, fails
// this test.
func TestDPORClocksAreHappensBefore(t *testing.T) {
	check := func(t *testing.T, name string, tg *Target, budget int) {
		n, steps := 0, 0
		d := &DPOR{}
		d.analysed = func(st []dstep) {
			n++
			if len(st) == 0 {
				return
			}
			width := len(st[0].clock)
			want := referenceClocks(st, width)
			for i := range st {
				require.Len(t, st[i].clock, width, "%s: execution %d, step %d: clock row length", name, n, i)
				if !slices.Equal(st[i].clock, want[i]) {
					t.Fatalf("%s: execution %d, step %d (actor %d, local %d, pseudo %v): clock %v, happens-before says %v",
						name, n, i, st[i].a, st[i].local, st[i].pseudo, st[i].clock, want[i])
				}
			}
			steps += len(st)
		}
		_, err := Explore(tg, d, 0, Options{Budget: budget})
		require.NoError(t, err)
		require.Positive(t, n, "%s: no execution analysed", name)
		require.Positive(t, steps, "%s: no step checked", name)
		t.Logf("%s: %d executions, %d steps", name, n, steps)
	}
	for _, c := range fixedNaiveCases {
		check(t, c.name, c.prog(), 300)
	}
	for seed := range 30 {
		check(t, fmt.Sprintf("every choice, seed %d", seed), &Target{Scenario: rapid.Custom(genRich).Example(seed).scenario(), Variant: "rich"}, 100)
		check(t, fmt.Sprintf("flags, seed %d", seed), &Target{Scenario: rapid.Custom(genFlags).Example(seed).scenario(), Variant: "flags"}, 100)
	}
	tg, err := NewTarget("tp8-shared-expert", "buggy", []string{"tp=2", "strategy=multimem", "layers=1", "replays=1", "chunks=1"})
	require.NoError(t, err)
	check(t, "headline", tg, 50)
}
