package ranks_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

func newWorld(n int, timeline bool) *ranks.World {
	return ranks.NewWorld(n, ranks.Config{Mode: ranks.Eager, LaunchCost: 1000, EventCost: 100, Timeline: timeline}, sim.NewEngine(sim.Timed, nil))
}

func launch(stream int, k *ranks.KernelSpec) ranks.HostOp {
	return ranks.HostOp{Kind: ranks.Launch, Stream: stream, Kernel: k}
}

// A synthetic wait-for cycle: each rank waits for a signal the other only
// sends after its own wait.
func TestHangNamesSyntheticCycle(t *testing.T) {
	w := newWorld(2, false)
	s := w.AllocSymmetric("pad", []int{0, 1}, 0, 1, 2)
	for r := range 2 {
		peer := 1 - r
		k := &ranks.KernelSpec{Name: []string{"A", "B"}[r], Coll: []string{"A", "B"}[r], Instrs: []ranks.Instr{
			{Op: ranks.OpWait, Pad: s.Pads[r], Slot: peer, Peer: peer, Dur: 10},
			{Op: ranks.OpPut, Pad: s.Pads[peer], Slot: r, Peer: peer, Dur: 10},
		}}
		w.SetProgram(r, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{launch(0, k)}})
	}
	res, err := w.Run()
	require.NoError(t, err)
	require.True(t, res.Hung)
	f := res.Findings[len(res.Findings)-1]
	require.Equal(t, ranks.KindHang, f.Kind)
	require.Contains(t, f.Message, "wait-for cycle: rank 0 main: A blocked on wait_signal on own pad \"pad\" slot 1 (for rank 1) → rank 1 main: B blocked on wait_signal")
	require.Equal(t, []int{0, 1}, f.Ranks)
}

// Kernels with the same Exclusive key never overlap on a rank, whatever
// their streams; different keys do.
func TestExclusiveSerializesAcrossStreams(t *testing.T) {
	for _, tc := range []struct {
		keys    [2]string
		overlap bool
	}{{[2]string{"nccl", "nccl"}, false}, {[2]string{"nccl", ""}, true}, {[2]string{"a", "b"}, true}} {
		w := newWorld(1, true)
		var ops []ranks.HostOp
		for i, key := range tc.keys {
			ops = append(ops, launch(i, &ranks.KernelSpec{Name: key + "k", Exclusive: key, Instrs: []ranks.Instr{{Op: ranks.OpDelay, Dur: 50000}}}))
		}
		w.SetProgram(0, &ranks.Program{Streams: []string{"s1", "s2"}, Ops: ops})
		res, err := w.Run()
		require.NoError(t, err)
		require.Empty(t, res.Findings)
		sp := w.Spans()
		require.Len(t, sp, 2)
		overlap := sp[0].Start < sp[1].End && sp[1].Start < sp[0].End
		require.Equal(t, tc.overlap, overlap, "keys %v", tc.keys)
	}
}

// A collective kernel that completes without touching a peer is dropped;
// one that signals a peer is not; one with no group size is not judged.
func TestDroppedCollective(t *testing.T) {
	for _, tc := range []struct {
		name    string
		group   int
		talk    bool
		dropped bool
	}{{"silent", 2, false, true}, {"talks", 2, true, false}, {"unknown-group", 0, false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(2, false)
			s := w.AllocSymmetric("pad", []int{0, 1}, 0, 1, 2)
			for r := range 2 {
				in := w.Alloc(r, "in", 64, 1)
				out := w.Alloc(r, "out", 64, 1)
				k := &ranks.KernelSpec{Name: "eng", Coll: "ar", GroupSize: tc.group, Instrs: []ranks.Instr{
					{Op: ranks.OpCompute, Dst: out, N: 1, Srcs: []ranks.Src{{Buf: in, Coef: 1}}}}}
				if tc.talk {
					k.Instrs = append(k.Instrs, ranks.Instr{Op: ranks.OpPut, Pad: s.Pads[1-r], Slot: r, Peer: 1 - r},
						ranks.Instr{Op: ranks.OpWait, Pad: s.Pads[r], Slot: 1 - r, Peer: 1 - r})
				}
				w.SetProgram(r, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{launch(0, k)}})
			}
			res, err := w.Run()
			require.NoError(t, err)
			if !tc.dropped {
				require.Empty(t, res.Findings)
				return
			}
			require.Len(t, res.Findings, 1)
			require.Equal(t, ranks.KindDropped, res.Findings[0].Kind)
			require.Equal(t, []int{0, 1}, res.Findings[0].Ranks)
			require.Contains(t, res.Findings[0].Message, "on ranks 0, 1")
		})
	}
}

// Ghost data carries the call's signature: same name, different count at
// the same sequence number is a mismatch.
func TestSignatureMismatch(t *testing.T) {
	w := newWorld(2, false)
	f := w.NewFifo("c:0→1", 0, 1, 8)
	in := w.Alloc(0, "in", 64, 1)
	out := w.Alloc(1, "out", 64, 1)
	w.SetProgram(0, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{launch(0, &ranks.KernelSpec{Name: "X", Coll: "X", Sig: "allreduce count=64B",
		Instrs: []ranks.Instr{{Op: ranks.OpSend, Fifo: f, N: 1, Srcs: []ranks.Src{{Buf: in, Coef: 1}}, Peer: 1}}})}})
	w.SetProgram(1, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{launch(0, &ranks.KernelSpec{Name: "X", Coll: "X", Sig: "allreduce count=256B",
		Instrs: []ranks.Instr{{Op: ranks.OpRecv, Fifo: f, Dst: out, N: 1, Peer: 0}}})}})
	res, err := w.Run()
	require.NoError(t, err)
	require.Len(t, res.Findings, 1)
	require.Equal(t, ranks.KindMismatch, res.Findings[0].Kind)
	require.Contains(t, res.Findings[0].Message, "(allreduce count=256B) consumed data of X from rank 0 stream main (allreduce count=64B)")
	require.Contains(t, res.Findings[0].Message, "differ at the same sequence number")
}
