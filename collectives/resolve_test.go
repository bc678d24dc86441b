package collectives_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
)

func TestResolveOp(t *testing.T) {
	b200, h100 := ranks.Profiles["b200"], ranks.Profiles["h100"]
	const MiB = 1 << 20
	for _, tc := range []struct {
		op    collectives.Op
		s     collectives.Strategy
		hw    ranks.Profile
		n     int
		bytes int64
		want  collectives.Strategy
		why   string
	}{
		{collectives.AllReduce, collectives.Auto, b200, 8, MiB, collectives.Multimem, "TP=8 on SM100: MULTIMEM"},
		{collectives.AllReduce, collectives.Auto, b200, 4, 64 << 10, collectives.NCCLTree, "TP=4 on SM100: NCCL; 64 KiB: tree's 2·2 latencies beat ring's 2·3 (4288 < 6108 ns)"},
		{collectives.AllReduce, collectives.Auto, b200, 4, MiB, collectives.NCCL, "1 MiB: ring 7746 ns, tree 8660 ns"},
		{collectives.AllReduce, collectives.Auto, b200, 4, 256 * MiB, collectives.NCCL, "large: ring's 2(n−1)/n·S/β beats tree's 2·depth·S/β"},
		{collectives.AllGather, collectives.Auto, h100, 8, MiB, collectives.NCCL, "only the ring implements all-gather"},
		{collectives.AllToAll, collectives.Auto, h100, 8, MiB, collectives.NCCL, "only the ring (p2p) implements all-to-all"},
		{collectives.AllReduce, collectives.P2PTwoShot, b200, 8, MiB, collectives.P2PTwoShot, "concrete strategies stay"},
	} {
		require.Equal(t, tc.want, collectives.ResolveOp(tc.op, tc.s, tc.hw, tc.n, tc.bytes), tc.why)
	}
}
