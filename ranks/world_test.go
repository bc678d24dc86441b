package ranks_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// rig builds one-rank (or n-rank) worlds from host ops over named buffers.
type rig struct {
	w    *ranks.World
	bufs map[string]*ranks.Buffer
}

func newRig(t *testing.T, n int, mode ranks.Mode, replays int, names ...string) *rig {
	t.Helper()
	w := ranks.NewWorld(n, ranks.Config{Mode: mode, Replays: replays, LaunchCost: 4000, EventCost: 1000, Timeline: true}, sim.NewEngine(sim.Timed, nil))
	r := &rig{w: w, bufs: map[string]*ranks.Buffer{}}
	for _, name := range names {
		b := w.Alloc(0, name, 1024, 1)
		w.Init(b, func(int) uint64 { return 1 })
		r.bufs[name] = b
	}
	return r
}

// kernel writes dst from srcs (a computation) and takes dur.
func (r *rig) kernel(name string, stream int, dur sim.Time, dst string, srcs ...string) ranks.HostOp {
	in := ranks.Instr{Op: ranks.OpCompute, Dst: r.bufs[dst], N: 1, Fresh: true, Dur: dur}
	for _, s := range srcs {
		in.Srcs = append(in.Srcs, ranks.Src{Buf: r.bufs[s], Coef: 1})
	}
	return ranks.HostOp{Kind: ranks.Launch, Stream: stream, Kernel: &ranks.KernelSpec{Name: name, Instrs: []ranks.Instr{in}}}
}

func record(stream, ev int) ranks.HostOp {
	return ranks.HostOp{Kind: ranks.Record, Stream: stream, Event: ev}
}
func wait(stream, ev int) ranks.HostOp {
	return ranks.HostOp{Kind: ranks.Wait, Stream: stream, Event: ev}
}

func kinds(fs []ranks.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Kind)
	}
	return out
}

func racesOn(fs []ranks.Finding, buf string) int {
	n := 0
	for _, f := range fs {
		if f.Kind == ranks.KindRace && strings.Contains(f.Resource, `"`+buf+`"`) {
			n++
		}
	}
	return n
}

const A, B = 0, 1 // streams
const E = 0       // event

func TestEventSemantics(t *testing.T) {
	tests := []struct {
		name   string
		ops    func(r *rig) []ranks.HostOp
		racesX int // races on x (written before the first record)
		racesY int // races on y (written between the records)
	}{
		{
			name: "wait binds to the record issued before it",
			ops: func(r *rig) []ranks.HostOp {
				return []ranks.HostOp{r.kernel("k1", A, 5000, "x"), record(A, E), wait(B, E), r.kernel("k2", A, 5000, "y"), record(A, E), r.kernel("k3", B, 1000, "z", "x", "y")}
			},
			racesX: 0, racesY: 1,
		},
		{
			name: "re-recording before the wait moves what it covers",
			ops: func(r *rig) []ranks.HostOp {
				return []ranks.HostOp{r.kernel("k1", A, 5000, "x"), record(A, E), r.kernel("k2", A, 5000, "y"), record(A, E), wait(B, E), r.kernel("k3", B, 1000, "z", "x", "y")}
			},
		},
		{
			name: "a wait on an event never recorded is a no-op",
			ops: func(r *rig) []ranks.HostOp {
				return []ranks.HostOp{wait(B, E), r.kernel("k1", A, 5000, "x"), r.kernel("k2", A, 5000, "y"), r.kernel("k3", B, 1000, "z", "x", "y")}
			},
			racesX: 1, racesY: 1,
		},
		{
			name: "same stream needs no event",
			ops: func(r *rig) []ranks.HostOp {
				return []ranks.HostOp{r.kernel("k1", A, 5000, "x"), r.kernel("k2", A, 5000, "y"), r.kernel("k3", A, 1000, "z", "x", "y")}
			},
		},
	}
	for _, tc := range tests {
		for _, mode := range []ranks.Mode{ranks.Eager, ranks.Graph} {
			t.Run(tc.name+"/"+mode.String(), func(t *testing.T) {
				r := newRig(t, 1, mode, 1, "x", "y", "z")
				ops := tc.ops(r)
				usesB := false
				for _, op := range ops {
					usesB = usesB || op.Stream == B
				}
				if mode == ranks.Graph && usesB {
					// join B back into A so the capture is legal
					ops = append(ops, ranks.HostOp{Kind: ranks.Record, Stream: B, Event: 1}, wait(A, 1))
				}
				r.w.SetProgram(0, &ranks.Program{Streams: []string{"A", "B"}, Events: []string{"e", "join"}, Ops: ops})
				res, err := r.w.Run()
				if mode == ranks.Graph && tc.name == "a wait on an event never recorded is a no-op" {
					// B never joins the capture before its kernel: a capture error.
					var ce *ranks.CaptureError
					require.ErrorAs(t, err, &ce)
					return
				}
				require.NoError(t, err)
				require.Equal(t, tc.racesX, racesOn(res.Findings, "x"), "races on x: %v", res.Findings)
				require.Equal(t, tc.racesY, racesOn(res.Findings, "y"), "races on y: %v", res.Findings)
			})
		}
	}
}

func TestCaptureErrors(t *testing.T) {
	tests := []struct {
		name string
		ops  func(r *rig) []ranks.HostOp
		want string
	}{
		{"unjoined fork", func(r *rig) []ranks.HostOp {
			return []ranks.HostOp{record(A, E), wait(B, E), r.kernel("side", B, 1000, "x")}
		}, "unjoined"},
		{"stream never joined", func(r *rig) []ranks.HostOp {
			return []ranks.HostOp{r.kernel("side", B, 1000, "x")}
		}, "never joined the capture"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 1, ranks.Graph, 1, "x")
			r.w.SetProgram(0, &ranks.Program{Streams: []string{"A", "B"}, Events: []string{"e"}, Ops: tc.ops(r)})
			_, err := r.w.Run()
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func spansByName(w *ranks.World) map[string][]ranks.Span {
	out := map[string][]ranks.Span{}
	for _, s := range w.Spans() {
		out[s.Name] = append(out[s.Name], s)
	}
	return out
}

func TestGraphReplay(t *testing.T) {
	r := newRig(t, 1, ranks.Graph, 3, "x", "y", "z")
	r.w.SetProgram(0, &ranks.Program{Streams: []string{"A", "B"}, Events: []string{"fork", "join"}, Ops: []ranks.HostOp{
		record(A, 0), wait(B, 0),
		r.kernel("left", A, 10000, "x"),
		r.kernel("right", B, 10000, "y"),
		record(B, 1), wait(A, 1),
		r.kernel("merge", A, 1000, "z", "x", "y"),
	}})
	res, err := r.w.Run()
	require.NoError(t, err)
	require.Empty(t, res.Findings)
	sp := spansByName(r.w)
	require.Len(t, sp["merge"], 3)
	for i := range 3 {
		l, rt := sp["left"][i], sp["right"][i]
		require.Equal(t, l.Start, rt.Start, "replay %d: independent branches start together (no launch gaps)", i)
		require.GreaterOrEqual(t, sp["merge"][i].Start, max(l.End, rt.End), "a node starts when its predecessors are done")
		if i > 0 {
			require.GreaterOrEqual(t, l.Start, sp["merge"][i-1].End, "replay %d runs after replay %d", i, i-1)
		}
	}
	// Eager: the same program pays a launch per op, so the branches start apart.
	e := newRig(t, 1, ranks.Eager, 1, "x", "y", "z")
	e.w.SetProgram(0, &ranks.Program{Streams: []string{"A", "B"}, Events: []string{"fork", "join"}, Ops: []ranks.HostOp{
		record(A, 0), wait(B, 0), e.kernel("left", A, 10000, "x"), e.kernel("right", B, 10000, "y"), record(B, 1), wait(A, 1), e.kernel("merge", A, 1000, "z", "x", "y"),
	}})
	_, err = e.w.Run()
	require.NoError(t, err)
	es := spansByName(e.w)
	require.Greater(t, es["right"][0].Start, es["left"][0].Start)
}

func TestSignalHangHasCycle(t *testing.T) {
	w := ranks.NewWorld(2, ranks.Config{Mode: ranks.Eager, LaunchCost: 1000}, sim.NewEngine(sim.Timed, nil))
	s := w.AllocSymmetric("ws", []int{0, 1}, 64, 1, 2)
	for r := range 2 {
		peer := 1 - r
		k := &ranks.KernelSpec{Name: "waiter", Coll: "waiter", Instrs: []ranks.Instr{{Op: ranks.OpWait, Pad: s.Pads[r], Slot: peer, Peer: peer}}}
		w.SetProgram(r, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{{Kind: ranks.Launch, Kernel: k}}})
	}
	res, err := w.Run()
	require.NoError(t, err)
	require.True(t, res.Hung)
	require.Equal(t, []string{ranks.KindHang}, kinds(res.Findings))
	require.Contains(t, res.Findings[0].Message, "wait-for cycle")
	require.Equal(t, []int{0, 1}, res.Findings[0].Ranks)
}

func TestSignalReleaseAcquireOrders(t *testing.T) {
	// Rank 0 writes its buffer then puts a signal to rank 1; rank 1 waits and
	// reads rank 0's copy: ordered. Without the signal: a race.
	for _, withSignal := range []bool{true, false} {
		w := ranks.NewWorld(2, ranks.Config{Mode: ranks.Eager, LaunchCost: 1000}, sim.NewEngine(sim.Timed, nil))
		s := w.AllocSymmetric("ws", []int{0, 1}, 64, 1, 2)
		out := w.Alloc(1, "out", 64, 1)
		src := w.Alloc(0, "src", 64, 1)
		w.Init(src, func(int) uint64 { return 5 })
		p0 := []ranks.Instr{{Op: ranks.OpCompute, Dst: s.Bufs[0], N: 1, Srcs: []ranks.Src{{Buf: src, Coef: 1}}, Dur: 100}}
		p1 := []ranks.Instr{{Op: ranks.OpDelay, Dur: 5000}, {Op: ranks.OpCompute, Dst: out, N: 1, Srcs: []ranks.Src{{Buf: s.Bufs[0], Coef: 1}}, Dur: 100}}
		if withSignal {
			p0 = append(p0, ranks.Instr{Op: ranks.OpPut, Pad: s.Pads[1], Slot: 0, Peer: 1})
			p1 = append([]ranks.Instr{{Op: ranks.OpWait, Pad: s.Pads[1], Slot: 0, Peer: 0}}, p1...)
		}
		w.SetProgram(0, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{{Kind: ranks.Launch, Kernel: &ranks.KernelSpec{Name: "producer", Coll: "c", Instrs: p0}}}})
		w.SetProgram(1, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{{Kind: ranks.Launch, Kernel: &ranks.KernelSpec{Name: "consumer", Coll: "c", Instrs: p1}}}})
		res, err := w.Run()
		require.NoError(t, err)
		require.Equal(t, uint64(5), out.Vals[0].N, "the value arrives either way (timing)")
		if withSignal {
			require.Empty(t, res.Findings)
		} else {
			require.Equal(t, []string{ranks.KindRace}, kinds(res.Findings), "latent race: right value, no ordering")
		}
	}
}
