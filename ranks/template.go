package ranks

import (
	"errors"
	"fmt"

	"github.com/collsim/collsim/ranks/findings"
	"github.com/collsim/collsim/sim"
)

// Template is a built world that never runs, from which identical fresh
// worlds are made ([Template.Instantiate]) for the schedules of one config.
// Exploring a config runs the same program thousands of times, and building
// it (the op graph, lowering, collective kernels, names and signatures)
// costs about as much as a quarter of the run; an instance copies the
// template's memory, signal pads, FIFOs and programs in a few slab
// allocations instead.
//
// An instance shares nothing that a run mutates with the template or with
// other instances: buffers, value chunks and their shadows, signal pads,
// FIFOs, symmetric buffers and kernels are all
// new. Only what no run ever writes is shared: names, stream and event
// lists, groups, value provenance (immutable), allocator logs, blocks and
// address overlaps, and the
// kernels' micro-ops, which name the template's buffers, pads and FIFOs;
// the instance resolves those to its own by id as it runs (World.bufOf,
// padOf, fifoOf), and generated kernels are rebound. A world kept by an
// earlier schedule (an outcome to explain later) is therefore never touched
// by a later one, until its owner releases it ([World.Release]): then its
// slabs serve the next copy.
//
// A template is read-only once made, but for its pool of released memory;
// Instantiate and Release may be called from several goroutines at once.
type Template struct {
	w *World

	pads          []*SignalPad
	fifos         []*Fifo
	syms          []*Symmetric
	kernels       []*KernelSpec
	bufSym        []int32              // per buffer: index into syms, or -1
	symPads       [][]int32            // per symmetric buffer: its pads, as indexes into pads
	fifoIx        map[*Fifo]int32      // read-only once made
	padIx         map[*SignalPad]int32 // read-only once made
	shared        []bool               // sharedLanes, read-only
	carry         *carry               // carryLanes (sparse clocks), read-only
	opKernel      [][]int32            // per rank and op: index into kernels, or -1
	plan          *plan                // lowered once for every copy (nil: each lowers, and reports the error)
	res           *residency           // the programs' pools before any run (initResidency copies them)
	nVals, nSlots int
	slotRes       [][]int32 // per pad and slot: its race-resource id (slotResIDs), read-only
	arenas        arenas    // released copies' memory, for the next copies (arena.go)
	replayCls     []uint8   // replayClasses, read-only (nil: fewer than two replays)
}

// ErrNotTemplate is returned by [NewTemplate] for a world it cannot copy
// faithfully; the caller builds each world afresh instead.
var ErrNotTemplate = errors.New("ranks: world cannot serve as a template")

// NewTemplate makes a template of w, a world that has been built (memory
// allocated and initialised, programs set) and has not run. w must not be
// used afterwards except through the template.
func NewTemplate(w *World) (*Template, error) {
	if w.ran {
		return nil, fmt.Errorf("%w: it has already run", ErrNotTemplate)
	}
	t := &Template{w: w, bufSym: make([]int32, len(w.bufs))}
	padIx := map[*SignalPad]int32{}
	pad := func(p *SignalPad) int32 {
		if p == nil {
			return -1
		}
		i, ok := padIx[p]
		if !ok {
			i = int32(len(t.pads))
			padIx[p] = i
			t.pads = append(t.pads, p)
			t.nSlots += len(p.Slots)
		}
		return i
	}
	own := func(b *Buffer) bool { return b == nil || (int(b.id) < len(w.bufs) && w.bufs[b.id] == b) }
	symIx := map[*Symmetric]int32{}
	for i, b := range w.bufs {
		if int(b.id) != i {
			return nil, fmt.Errorf("%w: buffer %q is not at its id", ErrNotTemplate, b.Name)
		}
		t.bufSym[i] = -1
		if s := b.Sym; s != nil {
			j, ok := symIx[s]
			if !ok {
				j = int32(len(t.syms))
				symIx[s] = j
				t.syms = append(t.syms, s)
				ps := make([]int32, len(s.Pads))
				for k, p := range s.Pads {
					ps[k] = pad(p)
				}
				t.symPads = append(t.symPads, ps)
				for _, sb := range s.Bufs {
					if !own(sb) {
						return nil, fmt.Errorf("%w: symmetric buffer %q has a copy outside the world", ErrNotTemplate, s.Name)
					}
				}
			}
			t.bufSym[i] = j
		}
		t.nVals += len(b.Vals)
	}
	fifoIx := map[*Fifo]int32{}
	fifo := func(f *Fifo) {
		if _, ok := fifoIx[f]; f != nil && !ok {
			fifoIx[f] = int32(len(t.fifos))
			t.fifos = append(t.fifos, f)
		}
	}
	kernIx := map[*KernelSpec]int32{}
	t.opKernel = make([][]int32, len(w.progs))
	for r, p := range w.progs {
		if p == nil {
			continue
		}
		if f := p.fold; f != nil {
			// A folded rank runs its proto's kernels, the template's, in
			// every copy: the fold renames them to the template's memory
			// and the copy resolves that to its own, as for a stored
			// micro-op (World.bufOf, padOf, fifoOf). Its pads and FIFOs
			// must have ids for that.
			for _, op := range p.Ops {
				k := op.Kernel
				if k == nil {
					continue
				}
				for _, in := range k.Instrs {
					pad(f.pad(in.Pad))
					fifo(f.fifo(in.Fifo))
					fifo(f.fifo(in.Fwd))
				}
				if k.Gen != nil {
					refs := k.Gen.Refs()
					for _, q := range refs.Fifos {
						fifo(f.fifo(q))
					}
					for _, x := range refs.Pads {
						pad(f.pad(x))
					}
				}
			}
			continue
		}
		ks := make([]int32, len(p.Ops))
		for j, op := range p.Ops {
			ks[j] = -1
			k := op.Kernel
			if k == nil {
				continue
			}
			ki, ok := kernIx[k]
			if !ok {
				ki = int32(len(t.kernels))
				kernIx[k] = ki
				t.kernels = append(t.kernels, k)
				if k.Gen != nil {
					refs := k.Gen.Refs()
					for _, b := range refs.Buffers {
						if !own(b) {
							return nil, fmt.Errorf("%w: kernel %q uses a buffer outside the world", ErrNotTemplate, k.Name)
						}
					}
					for _, f := range refs.Fifos {
						fifo(f)
					}
					for _, p := range refs.Pads {
						pad(p)
					}
				}
				for _, in := range k.Instrs {
					if !own(in.Dst) {
						return nil, fmt.Errorf("%w: kernel %q writes a buffer outside the world", ErrNotTemplate, k.Name)
					}
					for _, s := range in.Srcs {
						if !own(s.Buf) {
							return nil, fmt.Errorf("%w: kernel %q reads a buffer outside the world", ErrNotTemplate, k.Name)
						}
					}
					pad(in.Pad)
					fifo(in.Fifo)
					fifo(in.Fwd)
				}
			}
			ks[j] = ki
		}
		t.opKernel[r] = ks
	}
	t.fifoIx, t.padIx = fifoIx, padIx
	// A copy shares the template's instructions, which name the template's
	// pads and FIFOs: the copy resolves them by these ids (World.padOf).
	for i, p := range t.pads {
		p.id = int32(i + 1)
	}
	t.slotRes = slotResIDs(t.pads)
	for i, f := range t.fifos {
		f.id = int32(i + 1)
	}
	base, nl := laneLayout(w.progs)
	t.shared = sharedLanes(w.progs, base, nl, w.bufs) // the same for every copy, which copies the buffers' marks
	t.plan, _ = makePlan(w.progs, w.cfg.Mode == Graph)
	if t.plan != nil && nl > denseLanes && !w.sparse && !w.noFilter && !w.noCarry {
		t.carry = carryLanes(w.progs, base, nl, t.plan.nodes, w.cfg.Mode == Graph)
	}
	if t.plan != nil { // decided once here: copies run concurrently and share the plan
		t.plan.coarse, t.plan.coarseSet = coarseStatic(w.progs, base, t.shared), true
	}
	t.res = residencyOf(w) // copies get its pools fresh, and share the rest
	if w.cfg.Replays >= 2 {
		t.replayCls = w.replayClasses() // decided once here: the copies share it
	}
	return t, nil
}

// Instantiate returns a new world, ready to run on eng, that is a copy of
// the template's: the same configuration, memory contents, buffer ids and
// programs, with nothing a run mutates in common with any other world.
func (t *Template) Instantiate(eng *sim.Engine) *World {
	w := t.w
	nw := &World{
		cfg: w.cfg, eng: eng, N: w.N,
		progs:        make([]*Program, len(w.progs)),
		plan:         t.plan,
		replayState:  replayState{inputReplay: w.inputReplay, explicitIn: w.explicitIn, deriveInputs: w.deriveInputs},
		findingState: findingState{log: findings.NewLog(w.cfg.MaxFindings), slotRes: t.slotRes},
		hbClocks:     hbClocks{shared: t.shared, carry: t.carry},
		memSlabs:     memSlabs{mem: t.arenas.get(), tmpl: t},
	}
	// The template's provenance nodes (its initial values') are shared,
	// read-only: the copy's own nodes go in chunks of its own after them.
	nw.provTab.chunks = w.provTab.chunks[:len(w.provTab.chunks):len(w.provTab.chunks)]
	nw.provTab.lists = w.provTab.lists[:len(w.provTab.lists):len(w.provTab.lists)]
	nw.Srcs.bufs, nw.Srcs.provs = &nw.bufs, &nw.provTab

	// Memory: buffers, then what they point to.
	bufs := nw.mem.bufs.Get(len(w.bufs))
	vals := nw.mem.vals.Get(t.nVals)
	nw.bufs = make([]*Buffer, len(w.bufs))
	for i, b := range w.bufs {
		nb := &bufs[i]
		*nb = *b
		nb.lastW = nil
		n := len(b.Vals)
		nb.Vals, nb.sh = vals[:n:n], nil // shadows come at Run
		copy(nb.Vals, b.Vals)
		vals = vals[n:]
		nw.bufs[i] = nb
	}
	pads := make([]SignalPad, len(t.pads))
	slots := nw.mem.slots.Get(t.nSlots)
	for i, p := range t.pads {
		n := len(p.Slots)
		pads[i] = SignalPad{Name: p.Name, Rank: p.Rank, Slots: slots[:n:n]}
		pads[i].side(true)
		pads[i].side(false)
		slots = slots[n:]
	}
	syms := make([]Symmetric, len(t.syms))
	for i, s := range t.syms {
		ns := &syms[i]
		ns.Name, ns.Group = s.Name, s.Group
		ns.Bufs = make([]*Buffer, len(s.Bufs))
		for k, b := range s.Bufs {
			ns.Bufs[k] = nw.bufs[b.id]
		}
		ns.Pads = make([]*SignalPad, len(s.Pads))
		for k, p := range t.symPads[i] {
			ns.Pads[k] = &pads[p]
		}
	}
	for i, j := range t.bufSym {
		if j >= 0 {
			bufs[i].Sym = &syms[j]
		}
	}
	fifos := make([]Fifo, len(t.fifos))
	for i, f := range t.fifos {
		fifos[i] = Fifo{Name: f.Name, Src: f.Src, Dst: f.Dst, Cap: f.Cap, Stepped: f.Stepped}
		fifos[i].side(true)
		fifos[i].side(false)
	}

	// Programs: the kernels share the template's micro-ops, which are never
	// written; a run resolves the buffers, pads and FIFOs they name to its
	// own (World.bufOf, padOf, fifoOf). Generated kernels are rebound.
	// Unzeroed: a recycled slab holds the kernels of the copy that last
	// used this arena, released, whose generators the rebinding below
	// reuses (every field is written before anything reads it).
	ks := nw.mem.kernels.GetUnzeroed(len(t.kernels))
	nw.tPads = make([]*SignalPad, len(pads))
	for i := range pads {
		nw.tPads[i] = &pads[i]
	}
	nw.tFifos = make([]*Fifo, len(fifos))
	for i := range fifos {
		nw.tFifos[i] = &fifos[i]
		fifos[i].id = int32(i + 1)
	}
	for i := range pads {
		pads[i].id = int32(i + 1)
	}
	nw.isCopy = true
	m := Rebinding{
		Buffer: func(b *Buffer) *Buffer { return nw.bufs[b.id] },
		Fifo:   func(f *Fifo) *Fifo { return &fifos[t.fifoIx[f]] },
		Pad:    func(p *SignalPad) *SignalPad { return &pads[t.padIx[p]] },
	}
	for i, k := range t.kernels {
		old := ks[i].Gen // the released copy's generator of kernel i, or nil
		ks[i] = *k
		if k.Gen != nil {
			if r, ok := k.Gen.(Rebinder); ok && old != nil {
				ks[i].Gen = r.RebindInto(m, old)
			} else {
				ks[i].Gen = k.Gen.Rebind(m)
			}
		}
	}
	for r, p := range w.progs {
		if p == nil {
			continue
		}
		if p.fold != nil { // the template's own, read-only (see NewTemplate)
			nw.progs[r] = &Program{Streams: p.Streams, Events: p.Events, Ops: p.Ops, fold: p.fold}
			continue
		}
		np := &Program{Streams: p.Streams, Events: p.Events, Ops: nw.mem.ops.Get(len(p.Ops))}
		copy(np.Ops, p.Ops)
		for j, ki := range t.opKernel[r] {
			if ki >= 0 {
				np.Ops[j].Kernel = &ks[ki]
			}
		}
		nw.progs[r] = np
	}
	return nw
}

// Buffer returns w's buffer with the same id as b, a buffer of the world w
// was instantiated from (or of w itself).
func (w *World) Buffer(b *Buffer) *Buffer { return w.bufs[b.id] }
