package explore

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// fixedNaiveCase is a hand-written program whose DPOR outcome set must equal
// the naive enumeration's: each pins one piece of DPOR's machinery (a
// race kind it must reverse, a sleep-set rule), with no generator and no
// seed in the way, so that breaking that piece fails it every time.
type fixedNaiveCase struct {
	name string
	prog func() *Target
	// outcomes the naive enumeration reaches (a sanity check that the
	// case still exercises what it is for)
	outcomes int
}

func tinyTarget(p tinyProgram) func() *Target {
	return func() *Target {
		if p.Replays == 0 {
			p.Replays = 1
		}
		return &Target{Scenario: p.scenario(), Variant: "tiny"}
	}
}

func richTarget(p richProgram) func() *Target {
	return func() *Target { return &Target{Scenario: p.scenario(), Variant: "rich"} }
}

func launch(stream int, k richKernel) richOp {
	return richOp{Kind: ranks.Launch, Stream: stream, Kernel: k}
}

var fixedNaiveCases = []fixedNaiveCase{
	{
		// Two waiters on rank 1's slot 0 (one kernel per stream) and one
		// put into it: whichever waiter consumes the flag runs its copy,
		// the other spins forever. The two waits race on the slot (a
		// wait/wait race): DPOR must reverse it to reach the other hang.
		name: "wait-wait race on a slot",
		prog: tinyTarget(tinyProgram{Kernels: [2][]tinyKernel{
			{{Stream: 0, Instrs: []tinyInstr{{Op: "put", Slot: 0}}}},
			{
				{Stream: 0, Instrs: []tinyInstr{{Op: "wait", Slot: 0}, {Op: "copy", DstOut: true, DstChunk: 0, SrcRank: 1}}},
				{Stream: 1, Instrs: []tinyInstr{{Op: "wait", Slot: 0}, {Op: "copy", DstOut: true, DstChunk: 1, SrcRank: 1}}},
			},
		}}),
		outcomes: 2,
	},
	{
		// Rank 1 copies into rank 0's mem chunk 1, then stores a flag into
		// it (one stream: in that order); rank 0 spins until chunk 1 holds
		// 1 or more. Its read of chunk 1 is ordered after the copy only
		// when it comes after the flag store (ok); before, it races with
		// the copy (race). The orders that reach both put rank 0's wait
		// to sleep behind a sibling and need a read/write conflict to
		// wake it: mutants dpor-sleep-rw-independent and
		// dpor-sleep-missed-wakeup lose the race verdict.
		name: "a write wakes a sleeping read",
		prog: richTarget(richProgram{Ops: [2][]richOp{
			{launch(0, richKernel{Instrs: []tinyInstr{{Op: "fwait", DstChunk: 1}}})},
			{
				launch(0, richKernel{Spins: true, Instrs: []tinyInstr{{Op: "copy", DstRank: 0, DstChunk: 1, SrcRank: 0, SrcChunk: 0}}}),
				launch(0, richKernel{Spins: true, Instrs: []tinyInstr{{Op: "fput", DstChunk: 1}}}),
			},
		}}),
		outcomes: 2,
	},
	{
		// Rank 0 copies twice into its own mem chunk 0 and then from
		// rank 1's chunk 1 into its output; rank 1 copies rank 0's chunk 0
		// into its chunk 1. Rank 1's copy reads chunk 0 before, between or
		// after rank 0's writes of it, and rank 0's last copy reads chunk
		// 1 before or after rank 1's write: four outputs. One of them is
		// reached only by waking a sleeping actor when a conflicting step
		// runs (mutants dpor-sleep-missed-wakeup and
		// dpor-sleep-rw-independent lose it).
		name: "a conflicting step wakes a sleeper",
		prog: richTarget(richProgram{Ops: [2][]richOp{
			{launch(0, richKernel{Instrs: []tinyInstr{
				{Op: "copy", DstRank: 0, DstChunk: 0, SrcRank: 0, SrcChunk: 0},
				{Op: "copy", DstRank: 0, DstChunk: 0, SrcRank: 0, SrcChunk: 0},
				{Op: "copy", DstOut: true, DstChunk: 0, SrcRank: 1, SrcChunk: 1},
			}})},
			{launch(0, richKernel{Instrs: []tinyInstr{{Op: "copy", DstRank: 1, DstChunk: 1, SrcRank: 0, SrcChunk: 0}}})},
		}}),
		outcomes: 4,
	},
}

// TestDPORFixedMatchNaive: on each fixed case DPOR finishes complete with
// exactly the naive enumeration's verdicts and outcomes.
func TestDPORFixedMatchNaive(t *testing.T) {
	for _, c := range fixedNaiveCases {
		t.Run(c.name, func(t *testing.T) {
			tg := c.prog()
			want, runs, ok := naiveOutcomes(tg, 20000)
			require.True(t, ok, "naive enumeration within 20000 runs")
			require.Len(t, want, c.outcomes, "naive outcomes: %v", keys(want))
			got, sum := dporEveryOutcome(tg, runs)
			require.True(t, *sum.Complete, "dpor must finish within %d traces", runs)
			require.Equal(t, keys(want), keys(got), "dpor (%d traces) vs naive (%d runs)", sum.Schedules, runs)
		})
	}
}

// TestDPORNaiveSweep checks DPOR against the naive enumeration on a fixed
// sweep of generated programs, in CI as everywhere: the programs are the
// generators' examples for seeds 0, 1, 2, … (rapid's Generator.Example),
// so every run checks the same ones, whatever rapid's random seed; those
// whose enumeration exceeds the limit are passed over, until sweepPrograms
// of each generator have been checked. The rapid properties
// (TestDPORNaiveEveryChoice, TestDPORFlagsMatchNaive,
// TestDPORMatchesNaiveEnumeration) search further, from random seeds.
func TestDPORNaiveSweep(t *testing.T) {
	const sweepPrograms = 100
	gens := []struct {
		name string
		gen  func(int) *Target
		dpor func(*Target, int) (map[outcomeKey]bool, *Summary)
	}{
		{"every choice", func(seed int) *Target {
			return &Target{Scenario: rapid.Custom(genRich).Example(seed).scenario(), Variant: "rich"}
		}, dporOutcomes},
		{"flags", func(seed int) *Target {
			return &Target{Scenario: rapid.Custom(genFlags).Example(seed).scenario(), Variant: "flags"}
		}, dporEveryOutcome},
	}
	limit := 200
	for _, g := range gens {
		t.Run(g.name, func(t *testing.T) {
			checked, seed, wide := 0, 0, 0
			for ; checked < sweepPrograms; seed++ {
				require.Less(t, seed, 20*sweepPrograms, "too few programs within the limit")
				tg := g.gen(seed)
				if w := firstPathWidth(tg); w > 4*limit {
					wide++
					continue
				}
				want, runs, ok := naiveOutcomes(tg, limit)
				if !ok {
					continue
				}
				got, sum := g.dpor(tg, runs)
				require.True(t, *sum.Complete, "seed %d: dpor must finish within %d traces", seed, runs)
				require.Equal(t, verdicts(want), verdicts(got), "seed %d: verdict sets: dpor (%d traces) vs naive (%d runs)", seed, sum.Schedules, runs)
				require.Equal(t, keys(want), keys(got), "seed %d: outcome sets: dpor (%d traces) vs naive (%d runs)", seed, sum.Schedules, runs)
				require.LessOrEqual(t, sum.Schedules, runs)
				checked++
			}
			t.Logf("checked %d programs (seeds 0–%d; %d passed over by their first path, the rest exceed %d naive runs)", checked, seed-1, wide, limit)
		})
	}
}

// firstPathWidth is the product of the option counts along tg's first
// untimed run, capped: a cheap guess at its tree's size, to pass over
// programs far too large to enumerate without running them.
func firstPathWidth(tg *Target) int {
	c := &treeChooser{}
	if _, err := tg.Run(sim.Untimed, c); err != nil {
		panic(err)
	}
	p := 1
	for _, w := range c.widths {
		p = min(p*w, 1<<30)
	}
	return p
}
