package ranks

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/collsim/collsim/sim"
)

// TestSharedLanes: a lane is shared exactly when another lane touches the
// same memory (a buffer, or an allocator block that tensors alias), and a
// buffer is private exactly when no two lanes touch its memory.
func TestSharedLanes(t *testing.T) {
	w := NewWorld(2, Config{}, sim.NewEngine(sim.Timed, nil))
	x := w.Alloc(0, "x", 64, 1)
	y := w.Alloc(0, "y", 64, 1)
	z := w.Alloc(1, "z", 64, 1)
	k := func(name string, dst *Buffer, src *Buffer) *KernelSpec {
		return &KernelSpec{Name: name, Instrs: []Instr{{Op: OpCompute, Dst: dst, N: 1, Srcs: []Src{{Buf: src, Coef: 1}}}}}
	}
	progs := []*Program{
		{Streams: []string{"a", "b", "c"}, Ops: []HostOp{
			{Kind: Launch, Stream: 0, Kernel: k("a1", x, x)},
			{Kind: Launch, Stream: 1, Kernel: k("b1", y, x)}, // b reads x: a and b share
			{Kind: Launch, Stream: 2, Kernel: k("c1", y, y)}, // c writes y: b and c share
		}},
		{Streams: []string{"a"}, Ops: []HostOp{{Kind: Launch, Stream: 0, Kernel: k("d1", z, z)}}}, // z is rank 1's alone
	}
	u := w.Alloc(1, "u", 64, 1) // touched by no kernel
	require.Equal(t, []bool{true, true, true, false}, sharedLanes(progs, []int32{0, 3}, 4, w.bufs))
	for _, b := range []*Buffer{x, y} {
		require.False(t, b.private, "%s is touched by two lanes", b.Name)
	}
	require.True(t, z.private, "z is touched by one lane")
	require.True(t, u.private, "u is touched by none")
}

// TestPropSharedLaneFilterLosesNoRace: random multi-rank programs (local
// computes on two streams per rank, FIFO messages between ranks, event
// edges) report the same findings, counts and trace hash with the filter
// on (shared-lane clocks, private buffers unchecked) and with every lane's
// entry carried everywhere and every access checked, under random timed
// schedules. The filter only drops entries and checks that cannot matter.
func TestPropSharedLaneFilterLosesNoRace(t *testing.T) {
	racy, clean := 0, 0
	rapid.Check(t, func(t *rapid.T) {
		const nr, nb = 3, 3
		type kern struct {
			rank, stream int
			in           Instr
			recv         bool
		}
		var ks []kern
		n := rapid.IntRange(2, 12).Draw(t, "kernels")
		for range n {
			r := rapid.IntRange(0, nr-1).Draw(t, "rank")
			s := rapid.IntRange(0, 1).Draw(t, "stream")
			if rapid.IntRange(0, 2).Draw(t, "kind") == 0 {
				to := (r + 1 + rapid.IntRange(0, nr-2).Draw(t, "to")) % nr
				ks = append(ks, kern{rank: r, stream: s}, kern{rank: to, stream: rapid.IntRange(0, 1).Draw(t, "tstream"), recv: true})
				ks[len(ks)-2].in = Instr{Op: OpSend, Peer: to}
				ks[len(ks)-1].in = Instr{Op: OpRecv, Peer: r}
				continue
			}
			ks = append(ks, kern{rank: r, stream: s, in: Instr{Op: OpCompute}})
		}
		bufIdx := make([][2]int, len(ks)) // (src buffer, dst buffer) per kernel
		for i := range ks {
			bufIdx[i] = [2]int{rapid.IntRange(0, nb-1).Draw(t, "src"), rapid.IntRange(0, nb-1).Draw(t, "dst")}
		}
		edges := rapid.SliceOfN(rapid.IntRange(0, len(ks)-1), 0, 4).Draw(t, "edges") // kernel i records, i+1 of its rank waits
		seed := rapid.Uint64().Draw(t, "seed")

		run := func(filter, sparse bool) *Result {
			w := NewWorld(nr, Config{LaunchCost: 1000, EventCost: 200}, sim.NewEngine(sim.Timed, sim.NewRandom(seed, 300)))
			w.noFilter, w.sparse = !filter, sparse
			bufs := make([][]*Buffer, nr)
			for r := range nr {
				for b := range nb {
					x := w.Alloc(r, fmt.Sprintf("b%d", b), 64, 1)
					w.Init(x, func(int) uint64 { return uint64(1 + 10*r + b) })
					bufs[r] = append(bufs[r], x)
				}
			}
			fifos := map[[2]int]*Fifo{}
			fifo := func(a, b int) *Fifo {
				if fifos[[2]int{a, b}] == nil {
					fifos[[2]int{a, b}] = w.NewFifo(fmt.Sprintf("%d→%d", a, b), a, b, 64)
				}
				return fifos[[2]int{a, b}]
			}
			progs := make([]*Program, nr)
			for r := range progs {
				progs[r] = &Program{Streams: []string{"s0", "s1"}}
			}
			pending := make([][]int, nr) // events the rank's next kernel waits for
			for i, k := range ks {
				p := progs[k.rank]
				in := k.in
				src, dst := bufs[k.rank][bufIdx[i][0]], bufs[k.rank][bufIdx[i][1]]
				in.Dur, in.N = 1000, 1
				switch in.Op {
				case OpCompute:
					in.Dst, in.Srcs = dst, []Src{{Buf: src, Coef: 2}}
				case OpSend:
					in.Fifo, in.Srcs = fifo(k.rank, in.Peer), []Src{{Buf: src, Coef: 1}}
				case OpRecv:
					in.Fifo, in.Dst = fifo(in.Peer, k.rank), dst
				}
				for _, ev := range pending[k.rank] {
					p.Ops = append(p.Ops, HostOp{Kind: Wait, Stream: k.stream, Event: ev})
				}
				pending[k.rank] = nil
				p.Ops = append(p.Ops, HostOp{Kind: Launch, Stream: k.stream, Kernel: &KernelSpec{Name: fmt.Sprintf("k%d", i), Instrs: []Instr{in}}})
				for _, e := range edges {
					if e == i {
						p.Events = append(p.Events, fmt.Sprintf("e%d", i))
						p.Ops = append(p.Ops, HostOp{Kind: Record, Stream: k.stream, Event: len(p.Events) - 1})
						pending[k.rank] = append(pending[k.rank], len(p.Events)-1)
					}
				}
			}
			for r, p := range progs {
				w.SetProgram(r, p)
			}
			res, err := w.Run()
			require.NoError(t, err)
			return res
		}
		// Sparse clocks with and without the filter, and dense clocks
		// (which carry every entry), agree.
		on, off, dense := run(true, true), run(false, true), run(true, false)
		for _, r := range []*Result{off, dense} {
			require.Equal(t, r.Findings, on.Findings)
			require.Equal(t, r.Counts, on.Counts)
			require.Equal(t, r.TraceHash, on.TraceHash)
		}
		if on.Counts[KindRace] > 0 {
			racy++
		} else {
			clean++
		}
	})
	// The generator must exercise both outcomes, or the property says little.
	require.Positive(t, racy, "no generated program raced")
	require.Positive(t, clean, "every generated program raced")
}

// TestSharedLaneFilterKeepsTransitiveOrder: rank 0 writes x on stream a,
// sends to rank 1, rank 1 sends back, and rank 0 reads x on stream b after
// receiving. Rank 1 shares no memory, so its clock entries are dropped, but
// the order a-write → b-read runs through it and must survive: no race.
// Without the round trip the read races.
func TestSharedLaneFilterKeepsTransitiveOrder(t *testing.T) {
	for _, trip := range []bool{true, false} {
		t.Run(fmt.Sprintf("roundtrip=%v", trip), func(t *testing.T) {
			w := NewWorld(2, Config{LaunchCost: 100}, sim.NewEngine(sim.Timed, nil))
			w.sparse = true // the filter only drops entries of sparse clocks
			x := w.Alloc(0, "x", 64, 1)
			y := w.Alloc(0, "y", 64, 1)
			t1 := w.Alloc(1, "t", 64, 1)
			go01, back := w.NewFifo("0→1", 0, 1, 4), w.NewFifo("1→0", 1, 0, 4)
			launch := func(s int, in ...Instr) HostOp {
				return HostOp{Kind: Launch, Stream: s, Kernel: &KernelSpec{Name: fmt.Sprintf("k%d", len(in)), Instrs: in}}
			}
			write := Instr{Op: OpCompute, Dst: x, N: 1, Fresh: true, Dur: 5000}
			read := Instr{Op: OpCompute, Dst: y, N: 1, Srcs: []Src{{Buf: x, Coef: 1}}, Dur: 10}
			p0 := &Program{Streams: []string{"a", "b"}}
			p1 := &Program{Streams: []string{"main"}}
			if trip {
				p0.Ops = []HostOp{
					launch(0, write, Instr{Op: OpSend, Fifo: go01, N: 1, Srcs: []Src{{Buf: y, Coef: 1}}, Peer: 1}),
					launch(1, Instr{Op: OpRecv, Fifo: back, Dst: y, N: 1, Peer: 1}, read),
				}
				p1.Ops = []HostOp{launch(0,
					Instr{Op: OpRecv, Fifo: go01, Dst: t1, N: 1, Peer: 0},
					Instr{Op: OpSend, Fifo: back, N: 1, Srcs: []Src{{Buf: t1, Coef: 1}}, Peer: 0})}
			} else {
				p0.Ops = []HostOp{launch(0, write), launch(1, read)}
			}
			w.SetProgram(0, p0)
			w.SetProgram(1, p1)
			res, err := w.Run()
			require.NoError(t, err)
			require.False(t, w.shared[2], "rank 1's lane shares nothing")
			require.True(t, w.shared[0] && w.shared[1])
			if trip {
				require.Zero(t, res.Counts[KindRace], "%v", res.Findings)
			} else {
				require.Positive(t, res.Counts[KindRace])
			}
		})
	}
}

// LastWriter names the kernel that last wrote each chunk, whether the
// buffer is checked (shared), private, or a private allocator block's, and
// nothing for a chunk no kernel wrote.
func TestLastWriterByStorage(t *testing.T) {
	w := NewWorld(1, Config{}, sim.NewEngine(sim.Timed, nil))
	priv := w.Alloc(0, "priv", 64, 3)
	shared := w.Alloc(0, "shared", 64, 3)
	blk, err := w.NewAllocator(0, true).Malloc("blk", "a", 64, 3)
	require.NoError(t, err)
	k := func(name string, dst *Buffer, c int) HostOp {
		return HostOp{Kind: Launch, Stream: 0, Kernel: &KernelSpec{Name: name, Instrs: []Instr{{Op: OpCompute, Dst: dst, DstLo: c, N: 1, Fresh: true}}}}
	}
	read := HostOp{Kind: Launch, Stream: 1, Kernel: &KernelSpec{Name: "reader", Instrs: []Instr{{Op: OpCompute, Dst: shared, DstLo: 2, N: 1, Srcs: []Src{{Buf: shared, Coef: 1}}}}}}
	w.SetProgram(0, &Program{Streams: []string{"a", "b"}, Ops: []HostOp{
		k("p0", priv, 0), k("p1", priv, 1), k("s0", shared, 0), k("b1", blk, 1), k("p0again", priv, 0), read,
	}})
	_, err = w.Run()
	require.NoError(t, err)
	require.True(t, priv.private && blk.private && !shared.private)
	for _, c := range []struct {
		b     *Buffer
		chunk int
		want  string // "" for none
	}{{priv, 0, "p0again"}, {priv, 1, "p1"}, {priv, 2, ""}, {shared, 0, "s0"}, {shared, 2, "reader"}, {shared, 1, ""}, {blk, 1, "b1"}, {blk, 0, ""}} {
		ref, ok := w.LastWriter(c.b, c.chunk)
		require.Equal(t, c.want != "", ok, "%s[%d]", c.b.Name, c.chunk)
		require.Equal(t, c.want, ref.Name, "%s[%d]", c.b.Name, c.chunk)
	}
}
