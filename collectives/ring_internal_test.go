package collectives

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// ringList is the ring all-reduce written out as a list, primitive by
// primitive as NCCL's runRing issues them (all_reduce.h): the reference the
// generator must reproduce instruction for instruction.
func ringList(c *Comm, i int, in, out *ranks.Buffer) []ranks.Instr {
	n := len(c.Group)
	C := c.chunks
	hw := c.HW
	next, prev := (i+1)%n, (i-1+n)%n
	seg := func(s int) (lo, cnt int) {
		s = ((s % n) + n) % n
		lo = s * C / n
		return lo, (s+1)*C/n - lo
	}
	step := hw.StepLat + ranks.Bytes(in.Bytes/int64(n), hw.NVLink)
	if n == 1 {
		return []ranks.Instr{{Op: ranks.OpCompute, Phase: "copy", Dst: out, N: C, Srcs: []ranks.Src{{Buf: in, Coef: 1}},
			Dur: hw.KStart + ranks.Bytes(in.Bytes, hw.HBM)}}
	}
	sendF, recvF := c.fifo(c.Group[i], c.Group[next]), c.fifo(c.Group[prev], c.Group[i])
	// send: this rank's own input segment starts round the ring
	lo, cnt := seg(i)
	prog := []ranks.Instr{{Op: ranks.OpSend, Phase: "reduce-scatter", Fifo: sendF, N: cnt, Srcs: []ranks.Src{{Buf: in, Lo: lo, Coef: 1}},
		Dur: hw.KStart, Peer: c.Group[next]}}
	// recvReduceSend ×(n-2): receive segment i-1-k, add this rank's input,
	// pass the sum on and keep nothing
	for k := 0; k < n-2; k++ {
		lo, cnt := seg(i - 1 - k)
		prog = append(prog, ranks.Instr{Op: ranks.OpRecvSend, Phase: "reduce-scatter", Fifo: recvF, Fwd: sendF, DstLo: lo, N: cnt,
			Srcs: []ranks.Src{{Buf: in, Lo: lo, Coef: 1}}, Dur: step, Peer: c.Group[prev]})
	}
	// recvReduceCopySend: the same for segment i+1, which is now complete
	// and is stored in the output
	lo, cnt = seg(i + 1)
	prog = append(prog, ranks.Instr{Op: ranks.OpRecvSend, Phase: "reduce-scatter", Fifo: recvF, Fwd: sendF, Dst: out, DstLo: lo, N: cnt,
		Srcs: []ranks.Src{{Buf: in, Lo: lo, Coef: 1}}, Dur: step, Peer: c.Group[prev]})
	// recvCopySend ×(n-2), then recv: the reduced segments go round
	for k := 0; k < n-1; k++ {
		lo, cnt := seg(i - k)
		in := ranks.Instr{Op: ranks.OpRecvSend, Phase: "all-gather", Fifo: recvF, Fwd: sendF, Dst: out, DstLo: lo, N: cnt, Dur: step, Peer: c.Group[prev]}
		if k == n-2 {
			in.Op, in.Fwd = ranks.OpRecv, nil
		}
		prog = append(prog, in)
	}
	return prog
}

// The generated ring equals the written-out one for every rank of rings of
// 1 to 9 ranks with more, as many and fewer chunks than ranks, whether the
// scratch instruction is fresh or reused (its Srcs slice is recycled), and
// the list Expand copies out stays as it was while the generator goes on.
func TestRingGenMatchesList(t *testing.T) {
	for n := 1; n <= 9; n++ {
		for _, chunks := range []int{1, n, 3 * n} {
			t.Run(fmt.Sprintf("n=%d/chunks=%d", n, chunks), func(t *testing.T) {
				w := ranks.NewWorld(n+1, ranks.Config{}, sim.NewEngine(sim.Timed, nil))
				group := make([]int, n)
				for r := range group {
					group[r] = (r*5 + 1) % (n + 1) // not the identity
				}
				c := NewComm(w, "g", group, SharedWorkspace, ranks.Profiles["h100"], chunks)
				for i := range n {
					in := w.Alloc(group[i], "in", 4096, chunks)
					out := w.Alloc(group[i], "out", 4096, chunks)
					want := ringList(c, i, in, out)
					k := &ranks.KernelSpec{Gen: c.ring(i, in, out)}
					require.Equal(t, len(want), k.Len())
					var reused ranks.Instr
					// No sources and an empty list of them are the same micro-op.
					norm := func(in ranks.Instr) ranks.Instr {
						if len(in.Srcs) == 0 {
							in.Srcs = nil
						}
						return in
					}
					for pc := range want {
						require.Equal(t, want[pc], norm(*k.At(pc, new(ranks.Instr))), "pc %d", pc)
						require.Equal(t, want[pc], norm(*k.At(pc, &reused)), "pc %d (reused scratch)", pc)
					}
					got := k.Expand()
					for i := range got {
						got[i] = norm(got[i])
					}
					require.Equal(t, want, got)
					// The generator hands out its own shapes: what Expand
					// returned is a copy, unchanged by later micro-ops.
					for pc := range want {
						k.At(pc, &reused)
					}
					require.Equal(t, want, got, "Expand's list after the generator moved on")
				}
			})
		}
	}
}
