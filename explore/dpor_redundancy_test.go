package explore

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/collsim/collsim/ranks"
)

// traceClass is the Mazurkiewicz class of an execution under DPOR's
// dependence: for every resource, the order of its writes and the set of
// reads between consecutive writes, each step named by its actor and its
// index among the actor's steps. Two executions of one class run the same
// steps, and every pair of conflicting steps in the same order.
func traceClass(steps []dstep) string {
	type hist struct {
		seq   []string
		reads []string
	}
	res := map[int32]*hist{}
	local := map[ranks.ActorID]int{}
	flush := func(h *hist) {
		if len(h.reads) > 0 {
			slices.Sort(h.reads)
			h.seq = append(h.seq, "{"+strings.Join(h.reads, ",")+"}")
			h.reads = h.reads[:0]
		}
	}
	for _, st := range steps {
		local[st.actor]++
		id := fmt.Sprintf("%d.%d", st.actor, local[st.actor])
		for _, a := range st.acc {
			h := res[a.res]
			if h == nil {
				h = &hist{}
				res[a.res] = h
			}
			if a.write {
				flush(h)
				h.seq = append(h.seq, id)
			} else {
				h.reads = append(h.reads, id)
			}
		}
	}
	ids := make([]int32, 0, len(res))
	for k := range res {
		ids = append(ids, k)
	}
	slices.Sort(ids)
	var b strings.Builder
	for _, k := range ids {
		h := res[k]
		flush(h)
		fmt.Fprintf(&b, "%d:%s;", k, strings.Join(h.seq, " "))
	}
	return b.String()
}

// TestDPORNoRedundantFinishedTrace: sleep sets never let two executions
// of one class both run to their end, so the traces not cut short by
// their sleep sets are as many distinct classes (what the summary's
// sleep_blocked and docs/concepts.md count on: an optimal DPOR would run
// every one of them). Checked on the fixed cases, the first programs of
// both generators' sweeps and the headline's buggy placement at its
// smallest shape with one chunk (its first 2000 traces, barrier-heavy).
// Turning the sleep sets off fails it.
func TestDPORNoRedundantFinishedTrace(t *testing.T) {
	check := func(t *testing.T, name string, tg *Target, budget int) {
		seen := map[string]int{}
		n, finished := 0, 0
		d := &DPOR{}
		d.finished = func(steps []dstep) {
			finished++
			k := traceClass(steps)
			if prev, dup := seen[k]; dup {
				t.Fatalf("%s: execution %d finished in the class of execution %d", name, n+1, prev)
			}
			seen[k] = n + 1
		}
		_, err := Explore(tg, &countingDPOR{d, &n}, 0, Options{Budget: budget})
		require.NoError(t, err)
		require.Equal(t, n-d.SleepBlocked, finished, "%s: every execution is finished or cut short", name)
	}
	for _, c := range fixedNaiveCases {
		check(t, c.name, c.prog(), 20000)
	}
	for seed := range 30 {
		check(t, fmt.Sprintf("every choice, seed %d", seed), &Target{Scenario: rapid.Custom(genRich).Example(seed).scenario(), Variant: "rich"}, 300)
		check(t, fmt.Sprintf("flags, seed %d", seed), &Target{Scenario: rapid.Custom(genFlags).Example(seed).scenario(), Variant: "flags"}, 300)
	}
	tg, err := NewTarget("tp8-shared-expert", "buggy", []string{"tp=2", "strategy=multimem", "layers=1", "replays=1", "chunks=1"})
	require.NoError(t, err)
	check(t, "headline", tg, 2000)
}

// countingDPOR is a DPOR that counts its executions.
type countingDPOR struct {
	*DPOR
	n *int
}

func (c *countingDPOR) End(i int, s *Schedule) error {
	*c.n++
	return c.DPOR.End(i, s)
}
