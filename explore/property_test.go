package explore

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/sim"
)

// scale shrinks the generated sizes under the race detector (see
// race_test.go) so that CI stays within its time budget.
func scale(normal, underRace int) int {
	if raceEnabled {
		return underRace
	}
	return normal
}

func summaryJSON(t require.TestingT, s *Summary) string {
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return string(b)
}

// TestPropSameScheduleSameTrace is property (a): the same scenario and
// schedule give the same trace hash and outputs — run twice from the seed,
// and replayed from the recorded choices; and an exploration's summary does
// not depend on the number of workers.
func TestPropSameScheduleSameTrace(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		name := rapid.SampledFrom([]string{"tp8-shared-expert", "p2p-oneshot-probe"}).Draw(rt, "scenario")
		variant := rapid.SampledFrom([]string{"buggy", "fixed"}).Draw(rt, "variant")
		tp := rapid.SampledFrom([]int{2, 4, 8}).Draw(rt, "tp")
		strat := rapid.SampledFrom([]string{"random", "pct"}).Draw(rt, "strategy")
		seed := rapid.Uint64().Draw(rt, "seed")
		tg, err := NewTarget(name, variant, []string{fmt.Sprint("tp=", tp), "layers=1"})
		require.NoError(rt, err)
		s, err := New(strat, tg, seed)
		require.NoError(rt, err)
		i := rapid.IntRange(0, 50).Draw(rt, "schedule")
		ch1, _, _ := s.Begin(i)
		a, err := tg.Run(s.Mode(), ch1)
		require.NoError(rt, err)
		ch2, _, _ := s.Begin(i)
		b, err := tg.Run(s.Mode(), ch2)
		require.NoError(rt, err)
		require.Equal(rt, a.TraceHash, b.TraceHash)
		require.Equal(rt, a.OutHash, b.OutHash)
		w := newWitness(tg, s, a)
		c, diverged, err := Replay(tg, w)
		require.NoError(rt, err)
		require.Zero(rt, diverged)
		require.Equal(rt, a.TraceHash, c.TraceHash, "replay of the recorded choices")
		require.Equal(rt, a.Verdict, c.Verdict)

		budget := scale(6, 3)
		one, err := Explore(tg, s, seed, Options{Budget: budget, Workers: 1, Outcomes: true})
		require.NoError(rt, err)
		three, err := Explore(tg, s, seed, Options{Budget: budget, Workers: 3, Outcomes: true})
		require.NoError(rt, err)
		require.Equal(rt, summaryJSON(rt, one), summaryJSON(rt, three), "summary independent of workers")
	})
}

// TestPropFixedPlacementNeverFails is property (b): for generated MoE graphs
// the fixed placements never give a race or a disagreement with the
// reference, in any schedule any exploration strategy tries.
func TestPropFixedPlacementNeverFails(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		sets := []string{
			fmt.Sprint("layers=", rapid.IntRange(1, scale(4, 2)).Draw(rt, "layers")),
			fmt.Sprint("tp=", rapid.SampledFrom([]int{2, 4, 6, 8}).Draw(rt, "tp")),
			"arch=" + rapid.SampledFrom([]string{"sm90", "sm100"}).Draw(rt, "arch"),
			"shared=" + rapid.SampledFrom([]string{"none", "trailing", "mid"}).Draw(rt, "shared"),
			"order=" + rapid.SampledFrom([]string{"shared-first", "routed-first"}).Draw(rt, "order"),
			"strategy=" + rapid.SampledFrom([]string{"auto", "nccl", "multimem", "p2p-oneshot"}).Draw(rt, "collective"),
			"placement=" + rapid.SampledFrom([]string{"fixed", "fixed-overlap"}).Draw(rt, "placement"),
			"mode=" + rapid.SampledFrom([]string{"graph", "eager"}).Draw(rt, "mode"),
			"replays=1",
		}
		tg, err := NewTarget("tp8-shared-expert", "fixed", sets)
		require.NoError(rt, err)
		strat := rapid.SampledFrom(Names).Draw(rt, "explore")
		s, err := New(strat, tg, rapid.Uint64().Draw(rt, "seed"))
		require.NoError(rt, err)
		sum, err := Explore(tg, s, 0, Options{Budget: scale(4, 2)})
		require.NoError(rt, err)
		require.Equal(rt, check.OK, sum.Verdict, "%v: %v", sets, sum.WitnessFindings)
		require.Len(rt, sum.Outcomes, 1, "one outcome")
	})
}

// TestPropBuggyPlacementIsCaught is property (c): the buggy placement, with
// the shared collective (trailing or mid-branch) left on the aux stream over a
// shared MULTIMEM or P2P workspace, is reported as a race by the nominal run
// (no false negative), and PCT finds corruption within its budget.
//
// The shared branch is issued first: issued after the routed all-reduce,
// begin_aux records main_event behind it, so the aux collective is ordered
// after the main one and there is correctly nothing to find.
func TestPropBuggyPlacementIsCaught(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		sets := []string{
			fmt.Sprint("layers=", rapid.IntRange(1, 2).Draw(rt, "layers")),
			fmt.Sprint("tp=", rapid.SampledFrom([]int{2, 4, 6, 8}).Draw(rt, "tp")),
			"arch=" + rapid.SampledFrom([]string{"sm90", "sm100"}).Draw(rt, "arch"),
			"strategy=" + rapid.SampledFrom([]string{"multimem", "p2p-oneshot"}).Draw(rt, "collective"),
			"shared=" + rapid.SampledFrom([]string{"trailing", "mid"}).Draw(rt, "shared"),
			"order=shared-first", "placement=buggy", "workspace=shared",
		}
		tg, err := NewTarget("tp8-shared-expert", "buggy", sets)
		require.NoError(rt, err)
		nom, err := tg.Run(sim.Timed, sim.Nominal{})
		require.NoError(rt, err)
		require.True(rt, nom.Has(check.Race), "nominal run of %v reports no race: %v", sets, nom.Findings)
		s, err := New("pct", tg, rapid.Uint64().Draw(rt, "seed"))
		require.NoError(rt, err)
		sum, err := Explore(tg, s, 0, Options{Budget: 30})
		require.NoError(rt, err)
		require.Positive(rt, sum.Findings[check.Corruption], "pct found no corruption in %v", sets)
	})
}
