package ranks

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/collsim/collsim/sim"
)

// foldRun builds p's programs in groups copies, each over memory of its
// own, folds every copy onto the first unless fold is false, and runs it.
func foldRun(t require.TestingT, p carryProg, groups int, sparse, independent, fold bool) (*World, *Result, int) {
	w := p.world(groups)
	w.sparse = sparse
	w.SetIndependentReplays(independent)
	if !fold {
		w.NoFold()
	}
	folded := 0
	for g := range groups {
		for r, pr := range p.programs(w, g) {
			w.SetProgram(g*p.ranks+r, pr)
			if g > 0 && w.Fold(g*p.ranks+r, r) {
				folded++
			}
		}
	}
	res, err := w.Run()
	require.NoError(t, err)
	return w, res, folded
}

// TestPropFoldRunsAsUnfolded: generated programs (computes on own and peer
// memory, messages, forwarded messages, signals, flags, events, host
// syncs; eager or a replayed graph) copied into two or three groups of
// ranks, each over memory of its own, run the same with every copy folded
// onto the first group (World.Fold) as each with its own program, under
// random schedules, with dense clocks and with sparse ones (the carry
// filter), replays on the same inputs or each on its own: the same trace hash, steps, findings with their messages,
// counts, and final value of every buffer.
func TestPropFoldRunsAsUnfolded(t *testing.T) {
	var folded, racy int
	rapid.Check(t, func(t *rapid.T) {
		p := drawCarryProg(t)
		groups := rapid.IntRange(2, 3).Draw(t, "groups")
		sparse := rapid.Bool().Draw(t, "sparse")
		independent := p.graph && rapid.Bool().Draw(t, "independent")
		wf, on, n := foldRun(t, p, groups, sparse, independent, true)
		wu, off, _ := foldRun(t, p, groups, sparse, independent, false)
		require.Equal(t, (groups-1)*p.ranks, n, "every copy folds")
		folded += n
		require.Equal(t, off.TraceHash, on.TraceHash)
		require.Equal(t, off.Steps, on.Steps)
		require.Equal(t, off.Hung, on.Hung)
		require.Equal(t, off.Findings, on.Findings)
		require.Equal(t, off.Counts, on.Counts)
		for i, b := range wu.Buffers() {
			for c := range b.Vals {
				require.Equal(t, b.Vals[c].N, wf.Buffers()[i].Vals[c].N, "buffer %s of rank %d, chunk %d", b.Name, b.Rank, c)
			}
		}
		if on.Counts[KindRace] > 0 {
			racy++
		}
	})
	require.Positive(t, folded)
	require.Positive(t, racy, "no generated program raced")
}

// foldPair is two ranks' programs over memory of their own, for Fold.
type foldPair struct {
	w    *World
	a, b [3]*Buffer // rank 0's and rank 1's
	pad  [2]*SignalPad
	fifo [2]*Fifo
}

func newFoldPair() *foldPair {
	f := &foldPair{w: NewWorld(4, Config{}, sim.NewEngine(sim.Timed, nil))}
	for i := range 3 {
		f.a[i] = f.w.Alloc(0, fmt.Sprintf("x%d", i), 64, 2)
		f.b[i] = f.w.Alloc(1, fmt.Sprintf("x%d", i), 64, 2)
	}
	s := f.w.AllocSymmetric("s", []int{0, 1}, 64, 1, 4)
	f.pad = [2]*SignalPad{s.Pads[0], s.Pads[1]}
	f.fifo = [2]*Fifo{f.w.NewFifo("0→2", 0, 2, 2), f.w.NewFifo("1→3", 1, 3, 2)}
	return f
}

// prog is a program of one kernel of ins on stream "main".
func prog(ins ...Instr) *Program {
	return &Program{Streams: []string{"main"}, Ops: []HostOp{{Kind: Launch, Kernel: &KernelSpec{Name: "k", Instrs: ins}}}}
}

// TestFold: Fold takes a rank's program only when it is the proto's up to
// one consistent renaming of memory, and the folded rank then runs its own
// micro-ops.
func TestFold(t *testing.T) {
	compute := func(dst, src *Buffer, coef int64) Instr {
		return Instr{Op: OpCompute, Dst: dst, N: 2, Srcs: []Src{{Buf: src, Coef: coef}}, Dur: 10}
	}
	for _, tc := range []struct {
		name string
		make func(f *foldPair) (proto, rank *Program)
		ok   bool
	}{
		{"the same kernel over own memory", func(f *foldPair) (*Program, *Program) {
			return prog(compute(f.a[0], f.a[1], 3)), prog(compute(f.b[0], f.b[1], 3))
		}, true},
		{"a coefficient differs", func(f *foldPair) (*Program, *Program) {
			return prog(compute(f.a[0], f.a[1], 3)), prog(compute(f.b[0], f.b[1], 4))
		}, false},
		{"one buffer twice against two", func(f *foldPair) (*Program, *Program) {
			return prog(compute(f.a[0], f.a[0], 3)), prog(compute(f.b[0], f.b[1], 3))
		}, false},
		{"two buffers against one twice", func(f *foldPair) (*Program, *Program) {
			return prog(compute(f.a[0], f.a[1], 3), compute(f.a[2], f.a[0], 1)), prog(compute(f.b[0], f.b[1], 3), compute(f.b[2], f.b[1], 1))
		}, false},
		{"a chunk range differs", func(f *foldPair) (*Program, *Program) {
			in := compute(f.b[0], f.b[1], 3)
			in.DstLo, in.N = 1, 1
			return prog(compute(f.a[0], f.a[1], 3)), prog(in)
		}, false},
		{"signals and messages renamed", func(f *foldPair) (*Program, *Program) {
			return prog(Instr{Op: OpPut, Pad: f.pad[0], Slot: 1}, Instr{Op: OpWait, Pad: f.pad[0], Slot: 1, Peer: 2}, Instr{Op: OpSend, Fifo: f.fifo[0], N: 1, Srcs: []Src{{Buf: f.a[0], Coef: 1}}}),
				prog(Instr{Op: OpPut, Pad: f.pad[1], Slot: 1}, Instr{Op: OpWait, Pad: f.pad[1], Slot: 1, Peer: 3}, Instr{Op: OpSend, Fifo: f.fifo[1], N: 1, Srcs: []Src{{Buf: f.b[0], Coef: 1}}})
		}, true},
		{"a wait's peer renamed two ways", func(f *foldPair) (*Program, *Program) {
			return prog(Instr{Op: OpWait, Pad: f.pad[0], Slot: 1, Peer: 2}, Instr{Op: OpWait, Pad: f.pad[0], Slot: 2, Peer: 2}),
				prog(Instr{Op: OpWait, Pad: f.pad[1], Slot: 1, Peer: 3}, Instr{Op: OpWait, Pad: f.pad[1], Slot: 2, Peer: 2})
		}, false},
		{"a slot differs", func(f *foldPair) (*Program, *Program) {
			return prog(Instr{Op: OpPut, Pad: f.pad[0], Slot: 1}), prog(Instr{Op: OpPut, Pad: f.pad[1], Slot: 2})
		}, false},
		{"another stream", func(f *foldPair) (*Program, *Program) {
			q := prog(compute(f.b[0], f.b[1], 3))
			q.Streams = []string{"aux"}
			return prog(compute(f.a[0], f.a[1], 3)), q
		}, false},
		{"another kernel name", func(f *foldPair) (*Program, *Program) {
			q := prog(compute(f.b[0], f.b[1], 3))
			q.Ops[0].Kernel.Name = "k2"
			return prog(compute(f.a[0], f.a[1], 3)), q
		}, false},
		{"one op more", func(f *foldPair) (*Program, *Program) {
			q := prog(compute(f.b[0], f.b[1], 3))
			q.Ops = append(q.Ops, HostOp{Kind: Record})
			q.Events = []string{"e"}
			return prog(compute(f.a[0], f.a[1], 3)), q
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFoldPair()
			p, q := tc.make(f)
			f.w.SetProgram(0, p)
			f.w.SetProgram(1, q)
			require.Equal(t, tc.ok, f.w.Fold(1, 0))
			proto, folded := f.w.Folded(1)
			require.Equal(t, tc.ok, folded)
			if !tc.ok {
				require.Same(t, q, f.w.progs[1], "a rank that does not fold keeps its program")
				return
			}
			require.Equal(t, 0, proto)
			// The folded rank's micro-ops are its own, renamed from the
			// proto's.
			k := f.w.progs[1].kernel(0)
			want := q.Ops[0].Kernel.Instrs
			require.Equal(t, len(want), k.Len())
			var scratch Instr
			for pc := range want {
				got := *k.At(pc, &scratch)
				if len(got.Srcs) == 0 {
					got.Srcs = nil
				}
				require.Equal(t, want[pc], got, "micro-op %d", pc)
			}
		})
	}
	f := newFoldPair()
	f.w.SetProgram(0, prog(compute(f.a[0], f.a[1], 3)))
	f.w.SetProgram(1, prog(compute(f.b[0], f.b[1], 3)))
	f.w.NoFold()
	require.False(t, f.w.Fold(1, 0), "NoFold keeps every program")
}
