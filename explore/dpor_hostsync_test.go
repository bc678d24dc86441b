package explore

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks"
)

// TestDPORHostSyncMatchesNaive: programs where a rank's host blocks in a
// host sync (cudaStreamSynchronize, cudaDeviceSynchronize) and issues more
// work after it, while the other rank's kernels race with the work before
// and after the sync. DPOR must reach exactly the outcomes of the naive
// enumeration, and there must be more than one (the races are real). The
// sync's completion is what enables the host's next issue (dpor.go,
// accessesInto, StepIssue; ranks/hostsync.go).
func TestDPORHostSyncMatchesNaive(t *testing.T) {
	copyTo := func(dstRank, dstChunk, srcRank, srcChunk int, out bool) tinyInstr {
		return tinyInstr{Op: "copy", DstRank: dstRank, DstChunk: dstChunk, DstOut: out, SrcRank: srcRank, SrcChunk: srcChunk}
	}
	launch := func(stream int, in ...tinyInstr) richOp {
		return richOp{Kind: ranks.Launch, Stream: stream, Kernel: richKernel{Instrs: in}}
	}
	// Rank 1 overwrites rank 0's mem chunk 1, then chunk 0, while rank 0
	// reads chunk 0 before its sync and chunk 1 after it (in the last case
	// rank 1 syncs between its writes instead).
	racer := []richOp{launch(0, copyTo(0, 1, 1, 0, false), copyTo(0, 0, 1, 1, false))}
	cases := []struct {
		name string
		ops  [2][]richOp
	}{
		{"stream sync", [2][]richOp{
			{launch(1, copyTo(0, 0, 0, 0, true)), {Kind: ranks.Sync, Stream: 1}, launch(0, copyTo(0, 1, 0, 1, true))},
			racer,
		}},
		{"device sync", [2][]richOp{
			{launch(1, copyTo(0, 0, 0, 0, true)), {Kind: ranks.Sync, Stream: -1}, launch(1, copyTo(0, 1, 0, 1, true))},
			racer,
		}},
		{"the writer syncs", [2][]richOp{
			{launch(0, copyTo(0, 0, 0, 0, true), copyTo(0, 1, 0, 1, true))},
			{launch(0, copyTo(0, 1, 1, 0, false)), {Kind: ranks.Sync, Stream: 0}, launch(0, copyTo(0, 0, 1, 1, false))},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := richProgram{Ops: c.ops}
			tg := &Target{Scenario: p.scenario(), Variant: "rich"}
			want, runs, ok := naiveOutcomes(tg, 10000)
			require.True(t, ok, "naive enumeration within 10000 runs")
			require.Greater(t, len(want), 1, "the program races: more than one outcome")
			got, sum := dporOutcomes(tg, runs)
			require.True(t, *sum.Complete, "dpor must finish within %d traces", runs)
			require.Equal(t, keys(want), keys(got), "dpor (%d traces) vs naive (%d runs)", sum.Schedules, runs)
			t.Logf("%d outcomes; dpor %d traces, naive %d runs", len(want), sum.Schedules, runs)
		})
	}
}
