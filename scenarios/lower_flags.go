package scenarios

import (
	"fmt"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/mutant"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios/format"
	"github.com/collsim/collsim/sim"
)

// Lowering device-side flags and peer memory (format/spec_flags.go): the
// fault of a peer access a register op has not mapped, now or at a replay.

// mapping tracks, on one rank, which allocations with registration: op it
// has mapped. A whole program captured into one graph (mode: graph, no
// capture blocks) is mapped by a register anywhere in it, for every replay
// (vLLM registers a graph's buffers when its capture ends, before any
// replay). Otherwise a register maps from its place in host order on: an
// eager kernel touching an unmapped peer copy faults where it is issued,
// and a kernel captured in a capture block resolves its peer addresses at
// each replay (the graph holds the addresses the registration fills in), so
// a replay issued before the register faults and one after it does not.
type mapping struct {
	graph  bool
	mapped map[string]bool
	// capturing: the kernels being lowered are captured into a block's
	// graph; their peer accesses wait in pending for each replay.
	capturing bool
	pending   map[*ranks.KernelSpec][]peerAccess
}

// peerAccess is a captured kernel's access of a peer's copy.
type peerAccess struct {
	alloc string
	buf   *ranks.Buffer
}

func (s lower) newMapping(cfg Config, ops []OpSpec) *mapping {
	captures := false
	for _, op := range ops {
		captures = captures || op.Kind == format.OpCaptureBegin || op.Kind == OpReplay
	}
	m := &mapping{graph: cfg.Mode == "graph" && !captures, mapped: map[string]bool{}, pending: map[*ranks.KernelSpec][]peerAccess{}}
	if m.graph {
		for _, op := range ops {
			if op.Kind == OpRegister {
				m.mapped[op.Name] = true
			}
		}
	}
	return m
}

// reaches reports whether rank r may touch the copy of alloc on rank p.
func (s lower) reaches(m *mapping, alloc string, r, p int) bool {
	if p == r {
		return true
	}
	sy := s.Symmetric(alloc)
	return sy == nil || sy.Registration != RegisterOp || m.mapped[alloc] || mutant.On(mutant.RegistrationIgnored)
}

// check adds to k, which touches alloc's copy buf on world rank p from rank
// r, the fault of an unmapped access: now, or (captured) at each replay.
func (s lower) check(m *mapping, k *ranks.KernelSpec, alloc string, buf *ranks.Buffer, r, p int) {
	switch {
	case m.capturing && p != r && s.Symmetric(alloc) != nil && s.Symmetric(alloc).Registration == RegisterOp:
		m.pending[k] = append(m.pending[k], peerAccess{alloc, buf})
	case !s.reaches(m, alloc, r, p):
		k.Instrs = append(k.Instrs, fault(buf, m.unmappedWhy(alloc)))
	}
}

// atReplay is captured kernel k as a replay issued now runs it: with the
// faults of the peer copies not mapped by then.
func (m *mapping) atReplay(k *ranks.KernelSpec) *ranks.KernelSpec {
	var faults []ranks.Instr
	for _, a := range m.pending[k] {
		if !m.mapped[a.alloc] {
			faults = append(faults, fault(a.buf, fmt.Sprintf("the graph was replayed before a register of %q filled in its peer addresses", a.alloc)))
		}
	}
	if len(faults) == 0 || mutant.On(mutant.RegistrationIgnored) {
		return k
	}
	kc := *k
	kc.Instrs = append(faults, k.Instrs...)
	return &kc
}

// fault is the micro-op of rank r touching buf, which it never mapped.
func fault(buf *ranks.Buffer, why string) ranks.Instr {
	return ranks.Instr{Op: ranks.OpFault, Phase: why, Dst: buf, Peer: buf.Rank}
}

// unmappedWhy says why a copy is not mapped, for the finding.
func (m *mapping) unmappedWhy(alloc string) string {
	if m.graph {
		return fmt.Sprintf("no register of %q in the captured program: the graph's peer addresses were never filled in", alloc)
	}
	return fmt.Sprintf("not registered: no register of %q issued before this op", alloc)
}

// symmBuf is the copy of alloc on world rank p.
func symmBuf(symms map[string]*collectives.SymmAlloc, alloc string, p int) *ranks.Buffer {
	a := symms[alloc]
	return a.Sym.Bufs[a.Sym.Index(p)]
}

// lowerFlagOp builds a flag op's kernel on rank r.
func (s lower) lowerFlagOp(cfg Config, hw ranks.Profile, op *OpSpec, r int, bufs map[string]*ranks.Buffer,
	symms map[string]*collectives.SymmAlloc, m *mapping) (*ranks.KernelSpec, error) {
	f := op.Flag
	lo, n, err := s.FlagRegion(cfg, op, r)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", op.Kind, op.Name, err)
	}
	dur := sim.Time(op.TimeNs)
	if dur == 0 {
		dur = hw.KStart
	}
	k := &ranks.KernelSpec{Name: op.Name, Kind: "flag/" + string(op.Kind), Blocks: op.Blocks, Spins: op.Kind == OpAwait}
	var targets []*ranks.Buffer
	if x, ok := bufs[f.Flag]; ok && s.Symmetric(f.Flag) == nil {
		targets = []*ranks.Buffer{x}
	} else {
		group, _ := s.FlagGroup(cfg, f.Flag)
		peer := f.Peer
		if op.Kind != OpPut {
			peer = ""
		}
		ps, err := format.PeerRanks(peer, r, group)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", op.Kind, op.Name, err)
		}
		for _, p := range ps {
			b := symmBuf(symms, f.Flag, p)
			s.check(m, k, f.Flag, b, r, p)
			targets = append(targets, b)
		}
	}
	if len(targets) == 0 {
		return nil, fmt.Errorf("%s %q: undefined flag buffer %q", op.Kind, op.Name, f.Flag)
	}
	var ix *ranks.IxShift
	if counter, slots, ok, _ := format.CounterSlot(f.At); ok {
		in, err := indexLoad(bufs, counter, slots, r)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", op.Kind, op.Name, err)
		}
		k.Instrs = append(k.Instrs, in)
		ix = &ranks.IxShift{Stride: n, Dst: true}
	}
	for _, b := range targets {
		in := ranks.Instr{Phase: string(op.Kind), Dst: b, DstLo: lo, N: n, Slot: int(f.Value), Peer: -1, Dur: dur / sim.Time(len(targets)), Ix: ix}
		switch op.Kind {
		case OpPut, OpReset:
			in.Op, in.Fresh = ranks.OpFlagPut, op.Kind == OpReset
			in.Peer = b.Rank
			if f.From != "" {
				src, ok := bufs[f.From]
				if !ok {
					return nil, fmt.Errorf("rank %d: undefined tensor %q", r, f.From)
				}
				in.Srcs = []ranks.Src{{Buf: src, Coef: 1}}
			}
		case OpAwait:
			in.Op = ranks.OpFlagWait
			in.Cmp, _ = ranks.ParseFlagCmp(cmpOr(f.Until))
			if f.Against != "" {
				src, ok := bufs[f.Against]
				if !ok {
					return nil, fmt.Errorf("rank %d: undefined tensor %q", r, f.Against)
				}
				in.Srcs = []ranks.Src{{Buf: src, Coef: 1}}
			}
		}
		k.Instrs = append(k.Instrs, in)
	}
	return k, nil
}

// indexLoad is the micro-op with which a kernel whose slot comes from a
// device counter loads it when it starts: the first chunk of the rank's
// tensor counter, modulo slots (ranks.OpIndex).
func indexLoad(bufs map[string]*ranks.Buffer, counter string, slots, r int) (ranks.Instr, error) {
	c, ok := bufs[counter]
	if !ok {
		return ranks.Instr{}, fmt.Errorf("rank %d: undefined tensor %q", r, counter)
	}
	return ranks.Instr{Op: ranks.OpIndex, Phase: "load slot index", Srcs: []ranks.Src{{Buf: c, Coef: 1}}, N: 1, Slot: slots, Peer: -1}, nil
}

func cmpOr(s string) string {
	if s == "" {
		return "eq"
	}
	return s
}

// lowerRefKernel builds a kernel that reads or writes symmetric
// allocations: each written region gets weight × reads[0] + reads[1] + …
// (an entry with @all or [all] stands for each copy or slot in turn), chunk
// by chunk over the kernel's width.
func (s lower) lowerRefKernel(cfg Config, hw ranks.Profile, op *OpSpec, r int, bufs map[string]*ranks.Buffer,
	symms map[string]*collectives.SymmAlloc, m *mapping, written map[string]bool) (*ranks.KernelSpec, error) {
	width, err := s.KernelWidth(cfg, op)
	if err != nil {
		return nil, fmt.Errorf("kernel %q: %w", op.Name, err)
	}
	k := &ranks.KernelSpec{Name: op.Name, Kind: "kernel", Blocks: op.Blocks, Spins: op.Spin}
	var moved int64
	faulted := map[*ranks.Buffer]bool{}
	var load *ranks.Instr // the counter slot's index load (one counter per kernel: validated)
	var moves []bool      // per source or output resolved: whether it moves with the slot
	resolve := func(entry string) ([]ranks.Src, error) {
		regs, err := s.RefRegions(cfg, op, entry, r, bufs)
		if err != nil {
			return nil, fmt.Errorf("kernel %q %q: %w", op.Name, entry, err)
		}
		if regs == nil {
			b, ok := bufs[entry]
			if !ok {
				return nil, fmt.Errorf("rank %d: undefined tensor %q", r, entry)
			}
			if b.Chunks() < width {
				return nil, fmt.Errorf("kernel %q: tensor %q has %d chunks and the kernel computes %d", op.Name, entry, b.Chunks(), width)
			}
			moved += b.Bytes
			moves = append(moves, false)
			return []ranks.Src{{Buf: b, Coef: 1}}, nil
		}
		var out []ranks.Src
		for _, g := range regs {
			b := symmBuf(symms, g.Alloc, g.Rank)
			if !faulted[b] {
				faulted[b] = true
				s.check(m, k, g.Alloc, b, r, g.Rank)
			}
			out = append(out, ranks.Src{Buf: b, Lo: g.Lo, Coef: 1})
			moves = append(moves, g.Counter != "")
			if g.Counter != "" && load == nil {
				in, err := indexLoad(bufs, g.Counter, g.Slots, r)
				if err != nil {
					return nil, fmt.Errorf("kernel %q %q: %w", op.Name, entry, err)
				}
				load = &in
			}
		}
		return out, nil
	}
	var srcs []ranks.Src
	for _, name := range op.Reads {
		x, err := resolve(name)
		if err != nil {
			return nil, err
		}
		srcs = append(srcs, x...)
	}
	if len(srcs) > 0 {
		c := op.Weight
		if len(op.Weights) > 0 {
			if r >= len(op.Weights) {
				return nil, fmt.Errorf("%w: kernel %q: weight lists %d ranks; rank %d has none", ErrBadKnob, op.Name, len(op.Weights), r)
			}
			c = op.Weights[r]
		}
		if c == 0 {
			c = s.KernelWeight(op.Name, r)
		}
		srcs[0].Coef = c
	}
	srcMoves := moves
	moves = nil
	var outs []ranks.Src
	for _, name := range op.Writes {
		x, err := resolve(name)
		if err != nil {
			return nil, err
		}
		if _, ok := s.ParseMemRef(name); !ok {
			written[name] = true
		}
		outs = append(outs, x...)
	}
	total := sim.Time(op.TimeNs)
	if total == 0 {
		total = hw.KStart + ranks.Bytes(moved, hw.HBM)
	}
	if load != nil {
		if len(srcs) > 64 {
			return nil, fmt.Errorf("kernel %q: %d sources with a counter slot; at most 64", op.Name, len(srcs))
		}
		k.Instrs = append(k.Instrs, *load)
	}
	for i, o := range outs {
		in := ranks.Instr{Op: ranks.OpCompute, Phase: "compute", Dst: o.Buf, DstLo: o.Lo, N: width, Srcs: srcs, Fresh: true,
			Dur: total / sim.Time(len(outs))}
		if load != nil {
			in.Ix = &ranks.IxShift{Stride: width, Dst: moves[i]}
			for j, mv := range srcMoves {
				if mv {
					in.Ix.Srcs |= 1 << j
				}
			}
		}
		k.Instrs = append(k.Instrs, in)
	}
	return k, nil
}
