package ranks

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/sim"
)

// A released copy's memory serves the template's next copy, and a
// released world refuses to run or format messages again.
func TestReleaseRecyclesMemory(t *testing.T) {
	w := NewWorld(2, Config{}, sim.NewEngine(sim.Timed, nil))
	x := w.Alloc(0, "x", 64, 4)
	y := w.Alloc(1, "y", 64, 4)
	f := w.NewFifo("0→1", 0, 1, 8)
	w.SetProgram(0, &Program{Streams: []string{"main"}, Ops: []HostOp{{Kind: Launch, Kernel: &KernelSpec{Name: "tx",
		Instrs: []Instr{{Op: OpSend, Fifo: f, N: 4, Srcs: []Src{{Buf: x, Coef: 1}}}}}}}})
	w.SetProgram(1, &Program{Streams: []string{"main"}, Ops: []HostOp{{Kind: Launch, Kernel: &KernelSpec{Name: "rx",
		Instrs: []Instr{{Op: OpRecv, Fifo: f, Dst: y, N: 4}}}}}})
	tm, err := NewTemplate(w)
	require.NoError(t, err)
	a := tm.Instantiate(sim.NewEngine(sim.Timed, nil))
	ra, err := a.Run()
	require.NoError(t, err)
	mem, task0 := a.mem, a.tasks[0]
	a.Release()
	a.Release() // twice is harmless
	require.Nil(t, a.mem)
	require.PanicsWithValue(t, "ranks: World.FormatMessages called after Release", func() { a.FormatMessages(nil) })

	b := tm.Instantiate(sim.NewEngine(sim.Timed, nil))
	require.Same(t, mem, b.mem, "the next copy runs in the released memory")
	rb, err := b.Run()
	require.NoError(t, err)
	require.Same(t, task0, b.tasks[0], "its first task is carved where the released world's was")
	require.Equal(t, ra.TraceHash, rb.TraceHash)

	// A world not made by a template has nowhere to return its memory.
	w2 := NewWorld(1, Config{}, sim.NewEngine(sim.Timed, nil))
	w2.Release()
	require.PanicsWithValue(t, "ranks: World.Run called after Release", func() { _, _ = w2.Run() })
}
