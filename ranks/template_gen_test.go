package ranks

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/sim"
)

// sendGen is a generated kernel for the test: n sends of x through f.
type sendGen struct {
	n int
	x *Buffer
	f *Fifo
	p *SignalPad
}

func (g *sendGen) Len() int { return g.n }
func (g *sendGen) At(pc int, in *Instr) *Instr {
	*in = Instr{Op: OpSend, Fifo: g.f, N: 1, Srcs: append(in.Srcs[:0], Src{Buf: g.x, Coef: 1}), Peer: g.f.Dst}
	return in
}
func (g *sendGen) Refs() Refs {
	return Refs{Buffers: []*Buffer{g.x}, Fifos: []*Fifo{g.f}, Pads: []*SignalPad{g.p}}
}
func (g *sendGen) Rebind(m Rebinding) InstrGen {
	return &sendGen{n: g.n, x: m.Buffer(g.x), f: m.Fifo(g.f), p: m.Pad(g.p)}
}

// A copy of a world with a generated kernel gets a generator bound to its
// own buffer, FIFO and pad (shared with the instruction-list kernel that
// uses the same FIFO), never the template's or another copy's.
func TestTemplateRebindsGenerators(t *testing.T) {
	w := NewWorld(2, Config{}, sim.NewEngine(sim.Timed, nil))
	x := w.Alloc(0, "x", 64, 1)
	y := w.Alloc(1, "y", 64, 1)
	f := w.NewFifo("0→1", 0, 1, 8)
	p := NewSignalPad("p", 0, 1)
	w.SetProgram(0, &Program{Streams: []string{"main"}, Ops: []HostOp{{Kind: Launch, Kernel: &KernelSpec{Name: "tx", Gen: &sendGen{n: 3, x: x, f: f, p: p}}}}})
	w.SetProgram(1, &Program{Streams: []string{"main"}, Ops: []HostOp{{Kind: Launch, Kernel: &KernelSpec{Name: "rx",
		Instrs: []Instr{{Op: OpRecv, Fifo: f, Dst: y, N: 1}, {Op: OpRecv, Fifo: f, Dst: y, N: 1}, {Op: OpRecv, Fifo: f, Dst: y, N: 1}}}}}})
	tm, err := NewTemplate(w)
	require.NoError(t, err)
	a, b := tm.Instantiate(sim.NewEngine(sim.Timed, nil)), tm.Instantiate(sim.NewEngine(sim.Timed, nil))
	for _, c := range []*World{a, b} {
		g := c.progs[0].Ops[0].Kernel.Gen.(*sendGen)
		require.Same(t, c.bufs[x.id], g.x)
		require.NotSame(t, f, g.f)
		require.NotSame(t, p, g.p)
		require.Same(t, c.fifoOf(c.progs[1].Ops[0].Kernel.Instrs[0].Fifo), g.f, "the receiver's FIFO")
		require.Same(t, &w.progs[1].Ops[0].Kernel.Instrs[0], &c.progs[1].Ops[0].Kernel.Instrs[0], "micro-ops are shared with the template")
		res, err := c.Run()
		require.NoError(t, err)
		require.False(t, res.Hung)
	}
	require.NotSame(t, a.progs[0].Ops[0].Kernel.Gen.(*sendGen).f, b.progs[0].Ops[0].Kernel.Gen.(*sendGen).f)
}
