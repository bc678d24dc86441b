package explore_test

import (
	"fmt"

	"github.com/collsim/collsim/explore"
)

// Exhaustive exploration of the fixed p2p-oneshot-probe: one class of
// interleavings, one outcome, (300, 3) on rank 0.
func ExampleExplore() {
	t, err := explore.NewTarget("p2p-oneshot-probe", "fixed", nil)
	if err != nil {
		panic(err)
	}
	s, err := explore.New("dpor", t, 1)
	if err != nil {
		panic(err)
	}
	sum, err := explore.Explore(t, s, 1, explore.Options{Budget: 1000, Outcomes: true})
	if err != nil {
		panic(err)
	}
	fmt.Println("traces:", *sum.Traces, "complete:", *sum.Complete, "verdict:", sum.Verdict)
	for _, o := range sum.Outcomes {
		r0 := o.Ranks[0].Outputs
		fmt.Println("rank 0: shared", r0["shared"], "routed", r0["routed"], "in", o.Count, "schedule(s)")
	}
	// Output:
	// traces: 1 complete: true verdict: ok
	// rank 0: shared [300] routed [3] in 1 schedule(s)
}

// A witness replays bit for bit.
func ExampleReplay() {
	t, _ := explore.NewTarget("p2p-oneshot-probe", "buggy", nil)
	s, _ := explore.New("pct", t, 7)
	sum, _ := explore.Explore(t, s, 7, explore.Options{Budget: 5})
	sc, diverged, _ := explore.Replay(t, sum.Witness)
	fmt.Println(sum.Witness.Verdict, sc.Verdict, sc.TraceHash == sum.Witness.TraceHash, diverged)
	// Output:
	// corruption corruption true 0
}
