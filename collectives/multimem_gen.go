package collectives

import (
	"github.com/collsim/collsim/mutant"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// multimemGen generates rank i's multimem_all_reduce_kernel micro-ops, the
// same list multimemAllReduce writes out (its test oracle,
// TestMultimemGenMatchesList): a launch delay; the entry barrier
// (sync_remote_blocks: every block's puts, then every block's waits); per
// block, its ld_reduce into registers and a multimem.st into every rank's
// copy (or one delay when no chunk falls in the block's part); the exit
// barrier. A TP=8 × DP=128 world of 61 layers held 125 k of these kernels
// stored, 7 KB each, 0.9 GiB; generated, a kernel is a few hundred bytes.
type multimemGen struct {
	n, i, blocks int
	group        []int // world ranks, shared by the communicator's kernels
	bufs         []*ranks.Buffer
	pads         []*ranks.SignalPad
	regs         *ranks.Buffer // this rank's registers (a private buffer)
	lo, m        int           // this rank's slice of the chunks
	kstart, sig  sim.Time
	d            sim.Time // one block's part of the slice through NVLink
	exit         bool     // the exit barrier is there (mutant.BarrierNoExit drops it)
	// the ld_reduce micro-op handed out (its sources change by block)
	red     ranks.Instr
	redSrcs []ranks.Src
	// the multimem.st micro-op handed out, and its one source
	st    ranks.Instr
	stSrc [1]ranks.Src
	// the barrier micro-op handed out: a put or wait, of which only Op,
	// Phase, Pad, Slot and Peer change (every other field stays zero but
	// Dur, the signal latency)
	bar  ranks.Instr
	refs []*ranks.Buffer // what Refs lists (nil: made on each call)
	n0   int             // Len, counted once (an explorer asks at every choice)
}

// multimemGen is multimemAllReduce's kernel, generated: in g when it is
// not nil (a dropped kernel's, ranks.KernelStore), else a new one.
func (c *Comm) multimemGen(g *multimemGen, i int, call Call, ws *ranks.Symmetric, blocks int) *multimemGen {
	n := len(c.Group)
	hw := c.HW
	C := call.In.Chunks()
	if g == nil {
		g = new(multimemGen)
	}
	redSrcs, refs := g.redSrcs, g.refs
	*g = multimemGen{n: n, i: i, blocks: blocks, group: c.Group, bufs: ws.Bufs, pads: ws.Pads,
		regs: c.scratch(i, call.Name, "/regs", call.In), kstart: hw.KStart, sig: hw.SigLat / 4,
		exit: !mutant.On(mutant.BarrierNoExit)}
	g.lo, g.m = span(0, C, n, i)
	slice := call.In.Bytes / int64(n)
	g.d = ranks.Bytes(slice/int64(blocks), hw.NVLink)
	if cap(redSrcs) >= n {
		g.redSrcs = redSrcs[:n]
		clear(g.redSrcs)
	} else {
		g.redSrcs = make([]ranks.Src, n)
	}
	g.refs = append(append(refs[:0], g.regs), g.bufs...)
	g.n0 = g.count()
	return g
}

// Enumerable: the static passes read its micro-ops one by one.
func (g *multimemGen) Enumerable() {}

func (g *multimemGen) barrierLen() int { return 2 * g.blocks * g.n }

// blockLen is how many micro-ops block b's reduce takes.
func (g *multimemGen) blockLen(b int) int {
	if _, bm := span(g.lo, g.m, g.blocks, b); bm == 0 {
		return 1
	}
	return g.n + 1
}

func (g *multimemGen) Len() int { return g.n0 }

// count is Len: the launch delay, the barriers and every block's reduce.
func (g *multimemGen) count() int {
	l := 1 + g.barrierLen()
	for b := range g.blocks {
		l += g.blockLen(b)
	}
	if g.exit {
		l += g.barrierLen()
	}
	return l
}

func (g *multimemGen) At(pc int, in *ranks.Instr) *ranks.Instr {
	if pc == 0 {
		*in = ranks.Instr{Op: ranks.OpDelay, Phase: "launch", Dur: g.kstart}
		return in
	}
	pc--
	if pc < g.barrierLen() {
		return g.barrier(pc, "barrier-entry")
	}
	pc -= g.barrierLen()
	for b := range g.blocks {
		k := g.blockLen(b)
		if pc >= k {
			pc -= k
			continue
		}
		blo, bm := span(g.lo, g.m, g.blocks, b)
		switch {
		case bm == 0:
			*in = ranks.Instr{Op: ranks.OpDelay, Phase: "multimem.ld_reduce", Dur: 2 * g.d}
			return in
		case pc == 0:
			for p := range g.n {
				g.redSrcs[p] = ranks.Src{Buf: g.bufs[p], Lo: blo, Coef: 1}
			}
			g.red = ranks.Instr{Op: ranks.OpCompute, Phase: "multimem.ld_reduce", Dst: g.regs, DstLo: blo, N: bm, Srcs: g.redSrcs, Dur: g.d}
			return &g.red
		}
		p := g.i + pc - 1 // mod n: both terms are below n
		if p >= g.n {
			p -= g.n
		}
		g.stSrc[0] = ranks.Src{Buf: g.regs, Lo: blo, Coef: 1}
		g.st = ranks.Instr{Op: ranks.OpCompute, Phase: "multimem.st", Dst: g.bufs[p], DstLo: blo, N: bm, Srcs: g.stSrc[:]}
		if pc == g.n {
			g.st.Dur = g.d
		}
		return &g.st
	}
	return g.barrier(pc, "barrier-exit")
}

// barrier is micro-op k of syncRemoteBlocks: block b's put to thread t's
// rank for k < blocks·n, then block b's wait for it. It hands out g.bar,
// writing only the fields that differ between barrier micro-ops (a whole
// Instr written per micro-op was a tenth of a random tp8 schedule).
func (g *multimemGen) barrier(k int, phase string) *ranks.Instr {
	n := g.n
	put := k < g.blocks*n
	if !put {
		k -= g.blocks * n
	}
	// b, j = k/n, k%n without a division (a 64-bit divide was a third
	// of this function's time): k < blocks·n, and blocks is small
	b, j := 0, k
	for j >= n {
		j -= n
		b++
	}
	t := g.i + j
	if t >= n {
		t -= n
	}
	in := &g.bar
	if in.Dur != g.sig || in.Op != ranks.OpPut && in.Op != ranks.OpWait {
		*in = ranks.Instr{Dur: g.sig}
	}
	if in.Phase != phase {
		in.Phase = phase
	}
	if put {
		in.Op, in.Pad, in.Slot = ranks.OpPut, g.pads[t], b*n+g.i
	} else {
		in.Op, in.Pad, in.Slot = ranks.OpWait, g.pads[g.i], b*n+t
	}
	in.Peer = g.group[t]
	return in
}

// Refs lists regs and bufs: refs, made with the generator (a fold check
// asks for every rank's), or anew for a rebound copy.
func (g *multimemGen) Refs() ranks.Refs {
	bs := g.refs
	if bs == nil {
		bs = append(append(make([]*ranks.Buffer, 0, 1+len(g.bufs)), g.regs), g.bufs...)
	}
	return ranks.Refs{Buffers: bs, Pads: g.pads}
}

func (g *multimemGen) Rebind(m ranks.Rebinding) ranks.InstrGen {
	return g.RebindInto(m, nil)
}

// RebindInto is Rebind in old's storage when old is a multimemGen of the
// same shape (a retired folded task's: ranks.Rebinder).
func (g *multimemGen) RebindInto(m ranks.Rebinding, old ranks.InstrGen) ranks.InstrGen {
	c, ok := old.(*multimemGen)
	if !ok || c == g || len(c.bufs) != len(g.bufs) || len(c.pads) != len(g.pads) || len(c.redSrcs) != len(g.redSrcs) {
		c = &multimemGen{
			bufs:    make([]*ranks.Buffer, len(g.bufs)),
			pads:    make([]*ranks.SignalPad, len(g.pads)),
			redSrcs: make([]ranks.Src, len(g.redSrcs)),
		}
	}
	bufs, pads, srcs := c.bufs, c.pads, c.redSrcs
	*c = *g
	c.refs = nil // g's
	c.regs = m.Buffer(g.regs)
	c.bufs, c.pads = bufs, pads
	for p, b := range g.bufs {
		c.bufs[p] = m.Buffer(b)
	}
	for p, q := range g.pads {
		c.pads[p] = m.Pad(q)
	}
	clear(srcs)
	c.red, c.redSrcs, c.st, c.bar = ranks.Instr{}, srcs, ranks.Instr{}, ranks.Instr{}
	return c
}
