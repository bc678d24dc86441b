package scenarios_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// collFile is a four-rank scenario file whose one program runs ops. Tensor
// x (2 chunks) holds 10·rank + c + 1 in chunk c, big (8 chunks)
// 100·rank + c + 1; out2 has 2 chunks and out8 8.
func collFile(ops string) string {
	return `name: coll
ranks: 4
hardware: sm90
chunks: 2
knobs: {budget: 0}
communicators: [{name: world, ranks: all}]
tensors:
  - {name: x, bytes: 8192, init_per_rank: [[1, 2], [11, 12], [21, 22], [31, 32]]}
  - {name: big, bytes: 32768, chunks: 8, init_per_rank: [[1, 2, 3, 4, 5, 6, 7, 8], [101, 102, 103, 104, 105, 106, 107, 108], [201, 202, 203, 204, 205, 206, 207, 208], [301, 302, 303, 304, 305, 306, 307, 308]]}
  - {name: out2, bytes: 8192, output: true}
  - {name: out8, bytes: 32768, chunks: 8, output: true}
programs:
  - ranks: all
    ops:
` + ops + `variants:
  - {name: base, expect: ok}
`
}

// collFileEvenOdd is collFile with one program for the even ranks and
// another for the odd ones: a ring of sends and receives where every rank
// sends first hangs in the connections' setup (collectives/sendrecv.go), so
// the odd ranks receive first.
func collFileEvenOdd(even, odd string) string {
	f := collFile(even)
	return strings.Replace(f, "  - ranks: all\n    ops:\n"+even,
		"  - ranks: [0, 2]\n    ops:\n"+even+"  - ranks: [1, 3]\n    ops:\n"+odd, 1)
}

// outputs runs sc's first variant on the nominal schedule and returns each
// rank's output tensors' chunk values by tensor name.
func outputs(t *testing.T, sc *scenarios.Scenario) []map[string][]uint64 {
	t.Helper()
	cfg, err := sc.VariantConfig(sc.Variants[0], nil)
	require.NoError(t, err)
	b, err := sc.Build(cfg, scenarios.BuildOptions{}, sim.NewEngine(sim.Timed, sim.Nominal{}))
	require.NoError(t, err)
	res, err := b.World.Run()
	require.NoError(t, err)
	require.Empty(t, res.Findings)
	out := make([]map[string][]uint64, len(b.Compare))
	for r, bufs := range b.Compare {
		out[r] = map[string][]uint64{}
		for _, buf := range bufs {
			for _, v := range buf.Vals {
				out[r][buf.Name] = append(out[r][buf.Name], v.N)
			}
		}
	}
	return out
}

// TestProgramCollectives runs every collective of the family, and send and
// receive, written in a file, with each strategy that implements it, and
// checks each rank's output chunk by chunk against the collective's
// definition (collectives/family.go): the file form must reach the engine's
// collective, not merely agree with its own serialized reference.
func TestProgramCollectives(t *testing.T) {
	x := func(r, c int) uint64 { return uint64(10*r + c + 1) }
	big := func(r, c int) uint64 { return uint64(100*r + c + 1) }
	const n, B = 4, 2
	tests := []struct {
		name   string
		op     string   // one op line, %s is the strategy
		odd    string   // the odd ranks' op lines, where they differ
		strats []string // strategies to run it with
		tensor string
		want   func(r, c int) uint64
	}{
		{"allreduce", "{allreduce: ar, comm: world, in: x, out: out2, strategy: %s}", "",
			[]string{"nccl", "nccl-tree", "multimem", "p2p-oneshot", "multimem-twoshot", "p2p-twoshot"}, "out2",
			func(_, c int) uint64 { return x(0, c) + x(1, c) + x(2, c) + x(3, c) }},
		{"allreduce-blocks", "{allreduce: ar, comm: world, in: x, out: out2, strategy: %s, blocks: 2}", "",
			[]string{"multimem", "p2p-oneshot"}, "out2",
			func(_, c int) uint64 { return x(0, c) + x(1, c) + x(2, c) + x(3, c) }},
		{"allgather", "{allgather: ag, comm: world, in: x, out: out8, strategy: %s}", "",
			[]string{"nccl", "multimem", "p2p-oneshot"}, "out8",
			func(_, c int) uint64 { return x(c/B, c%B) }},
		{"reducescatter", "{reducescatter: rs, comm: world, in: big, out: out2, strategy: %s}", "",
			[]string{"nccl", "multimem", "p2p-oneshot"}, "out2",
			func(r, c int) uint64 { return big(0, r*B+c) + big(1, r*B+c) + big(2, r*B+c) + big(3, r*B+c) }},
		{"alltoall", "{alltoall: a2a, comm: world, in: big, out: out8, strategy: %s}", "",
			[]string{"nccl", "p2p-oneshot"}, "out8",
			func(r, c int) uint64 { return big(c/B, r*B+c%B) }},
		{"broadcast", "{broadcast: bc, comm: world, in: x, out: out2, root: 2, strategy: %s}", "",
			[]string{"nccl", "multimem", "p2p-oneshot"}, "out2",
			func(_, c int) uint64 { return x(2, c) }},
		{"sendrecv", "{send: ring, comm: world, in: x, peer: next}\n      - {recv: ring, comm: world, out: out2, peer: prev}%.0s",
			"      - {recv: ring, comm: world, out: out2, peer: prev}\n      - {send: ring, comm: world, in: x, peer: next}\n",
			[]string{"nccl"}, "out2",
			func(r, c int) uint64 { return x((r+n-1)%n, c) }},
	}
	for _, tt := range tests {
		for _, st := range tt.strats {
			t.Run(tt.name+"/"+st, func(t *testing.T) {
				src := collFile("      - " + fmt.Sprintf(tt.op, st) + "\n")
				if tt.odd != "" {
					src = collFileEvenOdd("      - "+fmt.Sprintf(tt.op, st)+"\n", tt.odd)
				}
				sc, err := scenarios.Load("coll.yaml", []byte(src))
				require.NoError(t, err, src)
				got := outputs(t, sc)
				for r := range n {
					vals := got[r][tt.tensor]
					require.NotEmpty(t, vals, "rank %d has no %s", r, tt.tensor)
					for c, v := range vals {
						require.Equal(t, tt.want(r, c), v, "rank %d %s chunk %d", r, tt.tensor, c)
					}
				}
				rep, err := check.RunVariant(sc, sc.Variants[0], check.Options{Extra: []string{"budget=2"}})
				require.NoError(t, err)
				require.Equal(t, "ok", rep.Verdict, "%v", rep.Findings)
			})
		}
	}
}

// TestSendRecvMismatch: a send matched by a receive of another name is
// consumed anyway (NCCL matches by order on the connection), and ghost data
// names the mismatch.
func TestSendRecvMismatch(t *testing.T) {
	src := collFileEvenOdd(`      - {send: a, comm: world, in: x, peer: next}
      - {recv: b, comm: world, out: out2, peer: prev}
`, `      - {recv: b, comm: world, out: out2, peer: prev}
      - {send: a, comm: world, in: x, peer: next}
`)
	sc, err := scenarios.Load("coll.yaml", []byte(src))
	require.NoError(t, err)
	rep, err := check.RunVariant(sc, sc.Variants[0], check.Options{Extra: []string{"budget=0"}})
	require.NoError(t, err)
	require.Equal(t, ranks.KindMismatch, rep.Verdict, "%v", rep.Findings)
}

// TestPadSignatureMismatch: one symmetric-memory all-reduce called with
// 4096 B on rank 0 and 8192 B on rank 1 is one collective instance (same
// name, same sequence number), so the ghost instance check passes; only
// the calls' signatures, carried with every signal-pad put, tell them
// apart: each rank's wait consumes a put of a call of another size, a
// mismatch naming the pad (ranks/exec.go, OpWait).
func TestPadSignatureMismatch(t *testing.T) {
	for _, st := range []string{"p2p-oneshot", "multimem"} {
		t.Run(st, func(t *testing.T) {
			src := strings.ReplaceAll(`name: oneshot-size-mismatch
ranks: 2
hardware: h100
knobs: {budget: 0}
tensors:
  - {name: small, bytes: 4096, chunks: 2, init: [1, 2]}
  - {name: big, bytes: 8192, chunks: 2, init: [3, 4]}
  - {name: small_out, bytes: 4096, chunks: 2}
  - {name: big_out, bytes: 8192, chunks: 2}
communicators:
  - {name: world, ranks: all}
programs:
  - ranks: 0
    ops:
      - {allreduce: ar, comm: world, in: small, out: small_out, strategy: STRAT}
  - ranks: 1
    ops:
      - {allreduce: ar, comm: world, in: big, out: big_out, strategy: STRAT}
variants:
  - {name: base, expect: mismatch}
`, "STRAT", st)
			sc, err := scenarios.Load("sig.yaml", []byte(src))
			require.NoError(t, err)
			rep, err := check.RunVariant(sc, sc.Variants[0], check.Options{})
			require.NoError(t, err)
			require.Equal(t, ranks.KindMismatch, rep.Verdict, "%v", rep.Findings)
			require.Contains(t, rep.Findings[0].Message, "(allreduce count=4096B)")
			require.Contains(t, rep.Findings[0].Message, "(allreduce count=8192B)")
			require.Contains(t, rep.Findings[0].Message, "through signal pad")
		})
	}
}
