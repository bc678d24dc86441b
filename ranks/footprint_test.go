package ranks_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// NextStep's Block (what DPOR reads to treat a spin as a no-op) predicts
// whether the step will block, for FIFO sends on a full connection, FIFO
// receives on an empty one, and signal waits, under many schedules.
func TestNextStepBlockPredictsBlocking(t *testing.T) {
	blocked := 0
	for seed := range uint64(40) {
		w := ranks.NewWorld(2, ranks.Config{LaunchCost: 100}, sim.NewEngine(sim.Untimed, sim.NewRandom(seed, 500)))
		x := w.Alloc(0, "x", 64, 1)
		y := w.Alloc(1, "y", 64, 1)
		w.Init(x, func(int) uint64 { return 7 })
		f := w.NewFifo("0→1", 0, 1, 1)
		pad := ranks.NewSignalPad("p", 0, 2)
		send := ranks.Instr{Op: ranks.OpSend, Fifo: f, N: 1, Srcs: []ranks.Src{{Buf: x, Coef: 1}}, Peer: 1}
		recv := ranks.Instr{Op: ranks.OpRecv, Fifo: f, Dst: y, N: 1, Peer: 0}
		w.SetProgram(0, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{{Kind: ranks.Launch, Kernel: &ranks.KernelSpec{Name: "tx",
			Instrs: []ranks.Instr{send, send, send, {Op: ranks.OpWait, Pad: pad, Slot: 1, Peer: 1}}}}}})
		w.SetProgram(1, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{{Kind: ranks.Launch, Kernel: &ranks.KernelSpec{Name: "rx",
			Instrs: []ranks.Instr{recv, recv, recv, {Op: ranks.OpPut, Pad: pad, Slot: 1, Peer: 0}}}}}})
		var prev *ranks.Step
		var prevActor int32
		w.Engine().SetObserver(func(it sim.Item, _ bool) {
			if prev != nil && prev.Kind == ranks.StepInstr {
				now := slices.Contains(w.Blocked(), prevActor)
				require.Equal(t, prev.Block, now, "seed %d: %s predicted block=%v", seed, prev.Instr.Op, prev.Block)
				if now {
					blocked++
				}
			}
			st := w.NextStep(it.Actor)
			require.Equal(t, st.Block, w.WouldBlock(it.Actor), "WouldBlock agrees with NextStep")
			prev, prevActor = &st, it.Actor
		})
		res, err := w.Run()
		require.NoError(t, err)
		require.False(t, res.Hung)
	}
	require.Positive(t, blocked, "no schedule blocked: the test checks nothing")
}
