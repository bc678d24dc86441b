package ranks_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// Residency: rank 0 launches A on s1, which spins until rank 1's C signals
// it, then B on s2, which signals C. C waits for B before it signals A. A is
// issued first, so it becomes resident first; whether B can join it depends
// on the SMs left and on B's grid. When B cannot, A holds the SMs B needs
// while it waits for C, which waits for B: a hang through residency.
func TestResidencySpinningKernelHoldsSMs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sms     int
		aBlocks int
		bBlocks int
		bSpins  bool
		hang    bool
	}{
		{"room-for-both", 2, 1, 1, true, false},
		{"one-sm", 1, 1, 1, true, true},
		{"b-grid-too-big", 4, 3, 2, true, true},
		{"b-grid-clamped-to-gpu-still-too-big", 4, 3, 9, true, true},
		{"b-not-spinning-runs-in-waves", 4, 3, 9, false, false},
		{"b-not-spinning-but-no-sm-free", 3, 3, 1, false, true},
		{"sms-not-counted", 0, 3, 9, true, false},
		{"a-fits-anywhere", 1, 0, 1, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := ranks.NewWorld(2, ranks.Config{Mode: ranks.Eager, LaunchCost: 1000, EventCost: 100, SMs: tc.sms}, sim.NewEngine(sim.Timed, nil))
			s := w.AllocSymmetric("pad", []int{0, 1}, 0, 1, 4)
			a := &ranks.KernelSpec{Name: "A", Blocks: tc.aBlocks, Spins: true, Instrs: []ranks.Instr{{Op: ranks.OpWait, Pad: s.Pads[0], Slot: 0, Peer: 1, Dur: 10}}}
			b := &ranks.KernelSpec{Name: "B", Blocks: tc.bBlocks, Spins: tc.bSpins, Instrs: []ranks.Instr{{Op: ranks.OpPut, Pad: s.Pads[1], Slot: 1, Peer: 1, Dur: 10}}}
			c := &ranks.KernelSpec{Name: "C", Blocks: 1, Spins: true, Instrs: []ranks.Instr{
				{Op: ranks.OpWait, Pad: s.Pads[1], Slot: 1, Peer: 0, Dur: 10},
				{Op: ranks.OpPut, Pad: s.Pads[0], Slot: 0, Peer: 0, Dur: 10}}}
			w.SetProgram(0, &ranks.Program{Streams: []string{"s1", "s2"}, Ops: []ranks.HostOp{launch(0, a), launch(1, b)}})
			w.SetProgram(1, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{launch(0, c)}})
			res, err := w.Run()
			require.NoError(t, err)
			require.Equal(t, tc.hang, res.Hung, "%v", res.Findings)
			if tc.hang {
				msg := res.Findings[len(res.Findings)-1].Message
				require.Contains(t, msg, "B waits for the GPU: needs")
				require.Contains(t, msg, "held by A")
			}
		})
	}
}

// Freed SMs go to a waiting kernel: with one SM, three spinning kernels of
// three streams run one after another, each starting when the previous one
// completes, and none overlaps another.
func TestResidencyReleaseWakesWaiters(t *testing.T) {
	w := ranks.NewWorld(1, ranks.Config{Mode: ranks.Eager, LaunchCost: 100, EventCost: 100, SMs: 1, Timeline: true}, sim.NewEngine(sim.Timed, nil))
	var ops []ranks.HostOp
	for i, n := range []string{"x", "y", "z"} {
		ops = append(ops, launch(i, &ranks.KernelSpec{Name: n, Blocks: 1, Spins: true, Instrs: []ranks.Instr{{Op: ranks.OpDelay, Dur: 5000}}}))
	}
	w.SetProgram(0, &ranks.Program{Streams: []string{"a", "b", "c"}, Ops: ops})
	res, err := w.Run()
	require.NoError(t, err)
	require.False(t, res.Hung)
	sp := w.Spans()
	require.Len(t, sp, 3)
	for i := range sp {
		for j := range i {
			require.False(t, sp[i].Start < sp[j].End && sp[j].Start < sp[i].End, "%s and %s overlap", sp[i].Name, sp[j].Name)
		}
	}
}

// Launch order: two kernels with one order key on two streams run one
// after the other, eager or captured (NCCL's strong stream); with
// OrderPerContext too when both are in one graph (RCCL's graph path orders
// a communicator's kernels within a graph, not across graphs: the
// scenarios' TestRCCLGraphsSharedConnections).
func TestOrderKeyUnderCapture(t *testing.T) {
	for _, tc := range []struct {
		mode       ranks.Mode
		perContext bool
		overlap    bool
	}{{ranks.Eager, false, false}, {ranks.Graph, false, false}, {ranks.Eager, true, false}, {ranks.Graph, true, false}} {
		w := ranks.NewWorld(1, ranks.Config{Mode: tc.mode, Replays: 1, LaunchCost: 100, EventCost: 100, Timeline: true}, sim.NewEngine(sim.Timed, nil))
		k := func(name string) *ranks.KernelSpec {
			return &ranks.KernelSpec{Name: name, OrderKey: "nccl:c", OrderPerContext: tc.perContext, Instrs: []ranks.Instr{{Op: ranks.OpDelay, Dur: 50000}}}
		}
		w.SetProgram(0, &ranks.Program{Streams: []string{"s1", "s2"}, Events: []string{"fork", "join"}, Ops: []ranks.HostOp{
			{Kind: ranks.Record, Stream: 0, Event: 0}, {Kind: ranks.Wait, Stream: 1, Event: 0},
			launch(0, k("a")), launch(1, k("b")),
			{Kind: ranks.Record, Stream: 1, Event: 1}, {Kind: ranks.Wait, Stream: 0, Event: 1}}})
		res, err := w.Run()
		require.NoError(t, err)
		require.False(t, res.Hung)
		var a, b ranks.Span
		for _, s := range w.Spans() {
			switch s.Name {
			case "a":
				a = s
			case "b":
				b = s
			}
		}
		overlap := a.Start < b.End && b.Start < a.End
		require.Equal(t, tc.overlap, overlap, "mode %v per-context %v", tc.mode, tc.perContext)
	}
}
