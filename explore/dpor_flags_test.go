package explore

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// genFlags generates a two-rank program whose kernels speak the device
// flag protocol (ranks/flags.go) over the symmetric mem chunks: flag
// stores into the peer's chunk, relaxed resets of the own, spinning waits
// on the own (against a constant, or against a chunk of the own output),
// plain copies between them, and sends whose receives land in a polled
// chunk, on two streams.
func genFlags(t *rapid.T) richProgram {
	var p richProgram
	p.SMs = rapid.IntRange(0, 2).Draw(t, "sms")
	instr := rapid.Custom(func(t *rapid.T) tinyInstr {
		return tinyInstr{
			Op:      rapid.SampledFrom([]string{"copy", "fput", "fput", "fwait", "fwait", "freset", "fwaitv", "frecv", "send"}).Draw(t, "op"),
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
		gen := func(rt *rapid.T) *Target { return &Target{Scenario: genFlags(rt).scenario(), Variant: "flags"} }
		requireDPORMatchesNaive(rt, gen, limit, dporEveryOutcome, &skipped)
		checked.Add(1)
	})
	t.Logf("checked %d generated flag programs against the naive enumeration (%d too large to enumerate within %d runs)", checked.Load(), skipped.Load(), limit)
}

// TestDPORLostWakeupsMatchNaive: two programs in which a flag wait first
// finds its condition false and a later write that is no flag put makes
// it hold — an NCCL receive into the polled chunk, and a kernel's store
// into the tensor the wait compares against (the example). No
// interleaving hangs: the naive enumeration checks every hang it meets
// is real (treeChooser.lostWakeup), and DPOR reaches its outcomes.
func TestDPORLostWakeupsMatchNaive(t *testing.T) {
	launch := func(stream int, ins ...tinyInstr) richOp {
		return richOp{Kind: ranks.Launch, Stream: stream, Kernel: richKernel{Instrs: ins}}
	}
	type tc struct {
		name string
		p    richProgram
	}
	var cases []tc
	var recv richProgram
	recv.Ops[0] = []richOp{launch(0, tinyInstr{Op: "send"})}
	recv.Ops[1] = []richOp{launch(1, tinyInstr{Op: "freset", DstChunk: 1}, tinyInstr{Op: "frecv", DstChunk: 1}), launch(0, tinyInstr{Op: "fwait", DstChunk: 1})}
	cases = append(cases, tc{"receive into the polled chunk", recv})
	var against richProgram
	against.Ops[0] = []richOp{{Kind: ranks.Record, Stream: 0, Event: 0}}
	against.Ops[1] = []richOp{launch(1, tinyInstr{Op: "copy", DstOut: true, SrcRank: 1}), launch(0, tinyInstr{Op: "fwaitv"})}
	cases = append(cases, tc{"kernel store into the against tensor", against})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg := &Target{Scenario: c.p.scenario(), Variant: "flags"}
			want, runs, ok := naiveOutcomes(tg, 10000)
			require.True(t, ok)
			require.NotContains(t, verdicts(want), ranks.KindHang)
			got, sum := dporEveryOutcome(tg, runs)
			require.True(t, *sum.Complete)
			require.Equal(t, keys(want), keys(got))
		})
	}
}

// genWaitFirst generates one-rank flag programs whose serialized
// reference hangs: a kernel spins until a flag of its own holds a value,
// then copies into output chunk 0; a kernel issued after it, on the other
// stream, puts that value; and a third kernel, on either stream, copies
// into output chunk 0 too, or puts a flag (two unordered copies of
// different chunks make the schedules' outputs differ).
func genWaitFirst(t *rapid.T) richProgram {
	p := richProgram{SerialRef: true}
	chunk := rapid.IntRange(0, 1)
	wait := tinyInstr{Op: "fwaiteq", DstChunk: chunk.Draw(t, "waitChunk"), Slot: rapid.IntRange(0, 1).Draw(t, "waitSlot")}
	put := tinyInstr{Op: "fputown", DstChunk: wait.DstChunk, Slot: wait.Slot}
	s := rapid.IntRange(0, 1).Draw(t, "stream")
	third := tinyInstr{Op: "copy", DstOut: true, SrcChunk: chunk.Draw(t, "thirdSrc")}
	if rapid.IntRange(0, 3).Draw(t, "thirdPuts") == 0 {
		third = tinyInstr{Op: "fputown", DstChunk: chunk.Draw(t, "thirdChunk"), Slot: rapid.IntRange(0, 1).Draw(t, "thirdSlot")}
	}
	p.Ops[0] = []richOp{
		{Kind: ranks.Launch, Stream: s, Kernel: richKernel{Instrs: []tinyInstr{wait, {Op: "copy", DstOut: true, SrcChunk: chunk.Draw(t, "copySrc")}}, Spins: rapid.Bool().Draw(t, "spins")}},
		{Kind: ranks.Launch, Stream: 1 - s, Kernel: richKernel{Instrs: []tinyInstr{put}}},
		{Kind: ranks.Launch, Stream: rapid.IntRange(0, 1).Draw(t, "thirdStream"), Kernel: richKernel{Instrs: []tinyInstr{third}}},
	}
	return p
}

// TestNaiveReferenceHangStillCompares: on generated flag programs whose
// reference is serialized as a scenario file's is (each rank's ops on one
// stream, in program order: a wait issued before the put it needs hangs
// there), every interleaving of the naive enumeration is judged as the
// reference-hang rule says (check.Reference.nominalBaseline): where the
// serialized program hangs and the nominal schedule finishes, a run that
// finishes is corruption exactly when its outputs differ from the nominal
// schedule's, and no run is ok (the reference's hang is a finding of
// every run). DPOR reaches the same outcomes.
func TestNaiveReferenceHangStillCompares(t *testing.T) {
	limit := 4000 // a program of three kernels has about 3,400 interleavings
	var checked, refHung, differ atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		p := genWaitFirst(rt)
		tg := &Target{Scenario: p.scenario(), Variant: "flags"}
		ref, err := check.NewReference(tg.program())
		require.NoError(rt, err)
		tg.ref = ref // judged against its reference, as a scenario file's target is
		nom, err := tg.Run(sim.Timed, sim.Nominal{})
		require.NoError(rt, err)
		if !nom.Has(check.ReferenceHang) || nom.Verdict == check.Hang {
			rt.Skip("the serialized reference finishes, or the nominal schedule hangs too")
		}
		refHung.Add(1)
		want, runs, ok := naiveOutcomes(tg, limit)
		if !ok {
			rt.Skipf("naive enumeration too large (> %d runs)", runs-1)
		}
		outs := map[string]bool{}
		for k := range want {
			if k.verdict != check.Hang {
				outs[k.out] = true
			}
		}
		if len(outs) > 1 {
			differ.Add(1)
		}
		for k := range want {
			require.NotEqual(rt, check.OK, k.verdict, "a run with a hanging reference is never ok")
			if k.verdict == check.Hang {
				continue
			}
			require.Equal(rt, k.out != nom.OutHash, k.verdict == check.Corruption,
				"outcome %s/%s against the nominal schedule's outputs %s", k.out, k.verdict, nom.OutHash)
		}
		got, sum := dporEveryOutcome(tg, runs)
		require.True(rt, *sum.Complete)
		require.Equal(rt, keys(want), keys(got))
		checked.Add(1)
	})
	t.Logf("checked %d generated programs whose serialized reference hangs (%d such; %d whose schedules end with different outputs)", checked.Load(), refHung.Load(), differ.Load())
}
