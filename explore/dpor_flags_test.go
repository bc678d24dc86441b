package explore

import (
	"fmt"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"github.com/collsim/collsim/ranks"
)

// genFlags generates a two-rank program whose kernels speak the device
// flag protocol (ranks/flags.go) over the symmetric mem chunks: flag
// stores into the peer's chunk, relaxed resets of the own, spinning waits
// on the own, and plain copies between them, on two streams.
func genFlags(t *rapid.T) richProgram {
	var p richProgram
	p.SMs = rapid.IntRange(0, 2).Draw(t, "sms")
	instr := rapid.Custom(func(t *rapid.T) tinyInstr {
		return tinyInstr{
			Op:      rapid.SampledFrom([]string{"copy", "fput", "fput", "fwait", "fwait", "freset"}).Draw(t, "op"),
			DstRank: rapid.IntRange(0, 1).Draw(t, "dstRank"), DstOut: rapid.Bool().Draw(t, "dstOut"),
			DstChunk: rapid.IntRange(0, 1).Draw(t, "dstChunk"),
			SrcRank:  rapid.IntRange(0, 1).Draw(t, "srcRank"), SrcChunk: rapid.IntRange(0, 1).Draw(t, "srcChunk"),
			Slot: rapid.IntRange(0, 1).Draw(t, "slot"),
		}
	})
	for r := range 2 {
		n := rapid.IntRange(1, 2).Draw(t, fmt.Sprintf("kernels%d", r))
		for range n {
			p.Ops[r] = append(p.Ops[r], richOp{Kind: ranks.Launch, Stream: rapid.IntRange(0, 1).Draw(t, "stream"), Kernel: richKernel{
				Instrs: rapid.SliceOfN(instr, 1, 3).Draw(t, "instrs"),
				Blocks: rapid.IntRange(0, 2).Draw(t, "blocks"),
				Spins:  rapid.Bool().Draw(t, "spins"),
			}})
		}
	}
	return p
}

// dporEveryOutcome is dporOutcomes keyed by every trace's own verdict: two
// traces with the same outputs may differ in verdict here (a wait that let
// a stale flag through orders nothing, so one of them races, or hangs),
// and Summary.Outcomes keeps one verdict per distinct output.
func dporEveryOutcome(t *Target, budget int) (map[outcomeKey]bool, *Summary) {
	got := map[outcomeKey]bool{}
	sum, err := Explore(t, &DPOR{}, 0, Options{Budget: budget, Checkpoint: func(r *Record) {
		got[outcomeKey{r.OutHash, r.Verdict}] = true
	}})
	if err != nil {
		panic(err)
	}
	return got, sum
}

// TestDPORFlagsMatchNaive: on programs built from flag stores, resets,
// spinning flag waits and copies, DPOR reaches exactly the verdicts and
// outcomes of the naive enumeration of every interleaving (hangs, races
// and the values a wait let through included) and says it is complete:
// a flag store is a write of its chunks and a satisfied wait a read of
// them in DPOR's dependency relation (explore/dpor.go).
func TestDPORFlagsMatchNaive(t *testing.T) {
	limit := scale(1500, 300)
	if testing.Short() {
		limit = 300
	}
	var checked, skipped atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		p := genFlags(rt)
		tg := &Target{Scenario: p.scenario(), Variant: "flags"}
		requireDPORMatchesNaive(rt, tg, limit, dporEveryOutcome, &skipped)
		checked.Add(1)
	})
	t.Logf("checked %d generated flag programs against the naive enumeration (%d too large to enumerate within %d runs)", checked.Load(), skipped.Load(), limit)
}
