package collectives_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// Worked examples on the B200 profile: HBM 8 TB/s, NVLink 900 GB/s,
// α = 1000 ns, a signal operation 200 ns, kernel start 1500 ns. Bytes are
// truncated to whole nanoseconds per transfer.
func TestCostWorkedExamples(t *testing.T) {
	const MiB = 1 << 20
	for _, tc := range []struct {
		op     collectives.Op
		s      collectives.Strategy
		n      int
		bytes  int64
		blocks int
		want   sim.Time
		how    string
	}{
		{collectives.AllReduce, collectives.NCCL, 8, MiB, 1, 17661, "1500 + 131 copy + 2·7·(1000 + 145 for 128 KiB)"},
		{collectives.AllReduce, collectives.NCCLTree, 8, MiB, 1, 14621, "1500 + 131 + 2·depth 3·(1000 + 1165)"},
		{collectives.AllReduce, collectives.Multimem, 8, MiB, 1, 8527, "1500 + 131 + 2 barriers·14·200 + 1165 ld_reduce + 131"},
		{collectives.AllReduce, collectives.MultimemTwoShot, 8, MiB, 1, 10452, "1500 + 131 + 3·2800 + 2·145 + 131"},
		{collectives.AllGather, collectives.P2POneShot, 4, 256 << 10, 2, 7205, "1500 + 32 + 2 barriers·(2·3·2)·200 + 873 for 3 peers' 256 KiB"},
		{collectives.AllGather, collectives.NCCL, 4, 4 * MiB, 1, 18992, "1500 + 524 + 3·(1000 + 8 pieces·582)"},
		{collectives.AllToAll, collectives.NCCL, 4, MiB, 1, 5405, "1500 + 32 self copy + 3·(1000 + 291)"},
		{collectives.Broadcast, collectives.NCCL, 4, MiB, 1, 7959, "1500 + 131 + (4+2−2)·(1000 + 582), 2 pieces pipelined"},
		{collectives.ReduceScatter, collectives.NCCL, 4, MiB, 1, 5536, "1500 + 131 + 3·1291 + 32 copy-out"},
	} {
		t.Run(fmt.Sprintf("%s/%s", tc.op, tc.s), func(t *testing.T) {
			got, err := collectives.Cost(tc.op, tc.s, tc.n, tc.bytes, tc.blocks, ranks.Profiles["b200"])
			require.NoError(t, err)
			require.Equal(t, tc.want, got, tc.how)
		})
	}
	_, err := collectives.Cost(collectives.AllToAll, collectives.Multimem, 4, MiB, 1, ranks.Profiles["b200"])
	require.ErrorContains(t, err, "does not implement")
}

// The formula is what the micro-programs take on an idle machine: one call,
// nominal schedule, every rank starting together.
func TestCostMatchesSimulation(t *testing.T) {
	for _, op := range collectives.Ops {
		for _, s := range collectives.Strategies {
			if !collectives.Supports(op, s) {
				continue
			}
			for _, n := range []int{2, 5, 8} {
				for _, blockBytes := range []int64{64 << 10, 3 << 20} {
					fc := famCase{op: op, s: s, n: n, groups: [][]int{iota(0, n, 1)}, B: 1, bytes: blockBytes, calls: 1, root: 0, blocks: 2}
					t.Run(fmt.Sprintf("%s/%s/n=%d/%d", op, s, n, blockBytes), func(t *testing.T) {
						outs, res := runFamily(t, fc, nil)
						checkIdeal(t, fc, outs, res)
						in := blockBytes * int64(inChunks(op, n, 1))
						want, err := collectives.Cost(op, s, n, in, 2, ranks.Profiles["b200"])
						require.NoError(t, err)
						require.Equal(t, want, res.End-res.Start)
					})
				}
			}
		}
	}
}
