package ranks

import (
	"reflect"
	"slices"

	"github.com/collsim/collsim/mutant"
)

// Folding: ranks that run the same program over memory of their own.
//
// A data-parallel world is many copies of one group: at TP=8 × DP=512 each
// of the 512 groups launches the same kernels, in the same order, on its own
// tensors, workspaces and signal pads. Kept as built, every rank holds its
// own kernels and micro-ops for every layer: at 4,096 ranks × 61 layers
// that is most of the run's memory, and it grows with ranks × layers
// although only a few distinct programs exist.
//
// [World.Fold] drops a rank's program in favour of another rank's (its
// proto) when the two are the same up to a renaming of the memory they
// name: every buffer, signal pad, FIFO and awaited peer rank the proto's
// kernels name maps to one of the folded rank's, consistently; every order
// and exclusive key (a communicator's, one per replica) to one of its own,
// one to one; and everything else (op kinds, streams, events, host gaps,
// kernel names, calls, signatures, loads, micro-op kinds, offsets,
// durations, coefficients) is equal. Fold
// checks this itself, micro-op by micro-op, and keeps the rank's own
// program when it does not hold; a builder only says which ranks to try.
//
// A folded rank's program shares the proto's host ops. Its kernels are made
// when something needs them, one at a time ([Program.kernel]): a task gets
// its own when it is made and drops it when it retires, and the static
// passes (which lanes share memory, which entries clocks carry, which
// tensors a replay writes, which collective steps may run coarse) see each
// folded kernel through the renaming. Every micro-op a folded rank executes
// is its original one, so a folded world runs exactly as the unfolded one
// (TestFoldRunsAsUnfolded checks trace hashes, findings and every value).
// What a world keeps then grows with the distinct programs, not with the
// ranks.

// fold is how a folded rank renames its proto's memory.
type fold struct {
	proto  int
	bufs   *[]*Buffer // the world's buffers, by id
	ranges []idRange  // proto buffer ids → the rank's, sorted by lo
	pads   map[*SignalPad]*SignalPad
	fifos  map[*Fifo]*Fifo
	peers  map[int]int
	// pads and fifos as short lists, scanned before the maps
	peerList [][2]int
	padList  []pair[SignalPad]
	fifoList []pair[Fifo]
	keys     map[string]string // order and exclusive keys (one-to-one)
	rebind   Rebinding         // f's renaming, made once (taskOpIn)
}

// idRange maps the proto's buffer ids in [lo, hi) to id + delta.
type idRange struct {
	lo, hi, delta int32
}

func (f *fold) buf(b *Buffer) *Buffer {
	if b == nil {
		return nil
	}
	rs, id := f.ranges, b.id
	lo, hi := 0, len(rs)-1
	for lo < hi { // the first range that ends after id
		mid := int(uint(lo+hi) >> 1)
		if rs[mid].hi > id {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return (*f.bufs)[id+rs[lo].delta]
}

func (f *fold) pad(p *SignalPad) *SignalPad {
	if p == nil {
		return nil
	}
	for _, x := range f.padList {
		if x.from == p {
			return x.to
		}
	}
	return f.pads[p]
}

func (f *fold) fifo(q *Fifo) *Fifo {
	if q == nil {
		return nil
	}
	for _, x := range f.fifoList {
		if x.from == q {
			return x.to
		}
	}
	return f.fifos[q]
}

// pair is one renamed pad or FIFO.
type pair[T any] struct{ from, to *T }

func (f *fold) peer(r int) int {
	if r < 0 {
		return r
	}
	for _, x := range f.peerList {
		if x[0] == r {
			return x[1]
		}
	}
	return f.peers[r]
}

// rename writes in, renamed, to out; srcs is out's sources' storage.
func (f *fold) rename(in, out *Instr, srcs *[]Src) {
	s := (*srcs)[:0]
	for _, x := range in.Srcs {
		x.Buf = f.buf(x.Buf)
		s = append(s, x)
	}
	*srcs = s
	*out = *in
	out.Srcs = s
	out.Dst = f.buf(in.Dst)
	out.Pad = f.pad(in.Pad)
	out.Fifo = f.fifo(in.Fifo)
	out.Fwd = f.fifo(in.Fwd)
	if in.Op == OpWait {
		out.Peer = f.peer(in.Peer)
	}
}

// foldGen generates a folded rank's micro-ops: the proto kernel's (stored
// or generated), renamed one at a time as they are read. Nothing is
// allocated per micro-op or per kernel but the foldGen itself.
type foldGen struct {
	k    *KernelSpec // the proto's
	f    *fold
	tmp  Instr // the proto's generated micro-op
	srcs []Src // the last micro-op's sources
}

// foldGenEnum is a foldGen over a kernel whose micro-ops can be listed.
type foldGenEnum struct{ *foldGen }

func (foldGenEnum) Enumerable() {}

func (g *foldGen) Len() int { return g.k.Len() }

func (g *foldGen) At(pc int, scratch *Instr) *Instr {
	g.f.rename(g.k.At(pc, &g.tmp), scratch, &g.srcs)
	return scratch
}

func (g *foldGen) Refs() Refs {
	if g.k.Gen == nil {
		return Refs{} // a stored kernel's micro-ops are listed (foldGenEnum)
	}
	return g.k.Gen.Refs().rebound(g.f.rebinding())
}

// rebinding is f as a [Rebinding].
func (f *fold) rebinding() Rebinding { return Rebinding{Buffer: f.buf, Fifo: f.fifo, Pad: f.pad} }

// rebound returns r with every buffer, FIFO and pad replaced by m's.
func (r Refs) rebound(m Rebinding) Refs {
	var out Refs
	for _, b := range r.Buffers {
		out.Buffers = append(out.Buffers, m.Buffer(b))
	}
	for _, q := range r.Fifos {
		out.Fifos = append(out.Fifos, m.Fifo(q))
	}
	for _, p := range r.Pads {
		out.Pads = append(out.Pads, m.Pad(p))
	}
	return out
}

// Rebind renames after folding. (A template's copy runs a folded rank's
// proto kernels as they are, NewTemplate, so a copy never asks; this keeps
// the generator whole.)
func (g *foldGen) Rebind(m Rebinding) InstrGen { return &reboundGen{g: g, m: m} }

// reboundGen is a generator whose micro-ops are g's, rebound by m.
type reboundGen struct {
	g    InstrGen
	m    Rebinding
	tmp  Instr
	srcs []Src
}

func (r *reboundGen) Len() int { return r.g.Len() }

func (r *reboundGen) At(pc int, scratch *Instr) *Instr {
	in := r.g.At(pc, &r.tmp)
	s := r.srcs[:0]
	for _, x := range in.Srcs {
		if x.Buf != nil {
			x.Buf = r.m.Buffer(x.Buf)
		}
		s = append(s, x)
	}
	r.srcs = s
	*scratch = *in
	scratch.Srcs = s
	if in.Dst != nil {
		scratch.Dst = r.m.Buffer(in.Dst)
	}
	if in.Pad != nil {
		scratch.Pad = r.m.Pad(in.Pad)
	}
	if in.Fifo != nil {
		scratch.Fifo = r.m.Fifo(in.Fifo)
	}
	if in.Fwd != nil {
		scratch.Fwd = r.m.Fifo(in.Fwd)
	}
	return scratch
}

func (r *reboundGen) Refs() Refs { return r.g.Refs().rebound(r.m) }

func (r *reboundGen) Rebind(m Rebinding) InstrGen { return &reboundGen{g: r, m: m} }

// peerGen is a proto's generator rebound to a folded rank's memory
// ([InstrGen.Rebind], once per task: a collective's generator names the
// same few pads and buffers at every one of its many micro-ops, and
// renaming them micro-op by micro-op cost more than the copy); peerGen
// renames the peer a signal wait names, which Rebind does not.
type peerGen struct {
	InstrGen
	f *fold
}

// peerGenEnum is a peerGen over an [Enumerable] generator.
type peerGenEnum struct{ *peerGen }

func (peerGenEnum) Enumerable() {}

func (g *peerGen) At(pc int, scratch *Instr) *Instr {
	in := g.InstrGen.At(pc, scratch)
	if in.Op != OpWait || in.Peer < 0 {
		return in
	}
	if in != scratch {
		*scratch = *in // the generator's own: not to be written
	}
	scratch.Peer = g.f.peer(in.Peer)
	return scratch
}

func (g *peerGen) Rebind(m Rebinding) InstrGen {
	return &peerGen{InstrGen: g.InstrGen.Rebind(m), f: g.f}
}

// foldedOp is a folded rank's host op with its kernel, made in one piece.
type foldedOp struct {
	op HostOp
	k  KernelSpec
	g  foldGen
	pg peerGen // a generated kernel's, rebound (taskOpIn)
}

// set makes fo op as a folded rank runs it: a copy whose kernel's
// micro-ops are the proto's, renamed by f (a generated kernel is never a
// CoarseRing then: a folded rank's collectives run micro-op by micro-op).
func (fo *foldedOp) set(op *HostOp, f *fold) *HostOp {
	k := op.Kernel
	srcs, pg := fo.g.srcs, fo.pg // storage for the next uses (taskOpIn)
	*fo = foldedOp{op: *op, k: *k, pg: pg}
	fo.op.Kernel, fo.op.fo = &fo.k, fo
	if k.OrderKey != "" {
		fo.k.OrderKey = f.keys[k.OrderKey]
	}
	if k.Exclusive != "" {
		fo.k.Exclusive = f.keys[k.Exclusive]
	}
	fo.g = foldGen{k: k, f: f, srcs: srcs}
	fo.k.Instrs, fo.k.Gen = nil, &fo.g
	if _, ok := k.Gen.(Enumerable); ok || k.Gen == nil {
		fo.k.Gen = foldGenEnum{&fo.g}
	}
	return &fo.op
}

// taskOp returns op i as a task of rank p runs it: a pointer into the
// program, or for a folded rank a copy of its own with the kernel renamed:
// a stored kernel's micro-ops as they are read, a generator rebound once.
func (p *Program) taskOp(i int) *HostOp { return p.taskOpIn(i, new(foldedOp)) }

// taskOpIn is taskOp making a folded op in fo (a retired task's, World.make).
func (p *Program) taskOpIn(i int, fo *foldedOp) *HostOp {
	op := &p.Ops[i]
	if p.fold == nil || op.Kernel == nil || mutant.On(mutant.FoldTasksRunProto) {
		return op
	}
	prev := fo.pg.InstrGen // the retired task's rebound generator, if any
	fo.set(op, p.fold)
	if k, f := op.Kernel, p.fold; k.Gen != nil {
		var rg InstrGen
		if r, ok := k.Gen.(Rebinder); ok && prev != nil {
			rg = r.RebindInto(f.rebind, prev)
		} else {
			rg = k.Gen.Rebind(f.rebind)
		}
		fo.pg = peerGen{InstrGen: rg, f: f}
		g := &fo.pg
		fo.k.Gen = g
		if _, ok := k.Gen.(Enumerable); ok {
			fo.k.Gen = peerGenEnum{g}
		}
	}
	return &fo.op
}

// kernel returns op i's kernel as rank p runs it: the op's own, or for a
// folded rank a new kernel whose micro-ops are the proto's renamed (a pass
// over many ops uses an [opView] instead).
func (p *Program) kernel(i int) *KernelSpec { return p.taskOp(i).Kernel }

// opView shows a static pass each launch's kernel as its rank runs it,
// reusing one folded kernel for every folded op: the pass must not keep
// it past the next call.
type opView struct{ fo foldedOp }

func (v *opView) kernel(p *Program, i int) *KernelSpec {
	op := &p.Ops[i]
	if p.fold == nil || op.Kernel == nil || mutant.On(mutant.FoldPassesSeeProto) {
		return op.Kernel
	}
	return v.fo.set(op, p.fold).Kernel
}

// Folded reports whether rank runs another rank's program (World.Fold),
// and which.
func (w *World) Folded(rank int) (proto int, ok bool) {
	if p := w.progs[rank]; p != nil && p.fold != nil {
		return p.fold.proto, true
	}
	return rank, false
}

// NoFold makes Fold keep every rank's own program (tests: the unfolded
// world that a folded one must run exactly as).
func (w *World) NoFold() { w.noFold = true }

// Fold makes rank run proto's program over its own memory, when rank's
// program (set with SetProgram) is proto's up to a consistent renaming of
// buffers, signal pads, FIFOs and peer ranks (see the comment at the top of
// fold.go), and reports whether it did. proto must not itself be folded.
// Call it after both programs are set and before Run; rank's own kernels
// are then no longer referenced by the world.
func (w *World) Fold(rank, proto int) bool {
	if w.noFold || w.ran || rank == proto || rank < 0 || proto < 0 || rank >= w.N || proto >= w.N {
		return false
	}
	p, q := w.progs[proto], w.progs[rank]
	if p == nil || q == nil || p.fold != nil || q.fold != nil || p.allocatesAtRunTime() || q.allocatesAtRunTime() {
		return false
	}
	// Buffers are renamed through an array by the proto's buffer id (a
	// rank names hundreds, at every micro-op), kept by the world between
	// calls and cleared of what this call wrote.
	if len(w.foldTo) < len(w.bufs) {
		// Twice as long: a builder allocates buffers between calls.
		w.foldTo = make([]int32, 2*len(w.bufs))
	}
	m := matcher{bufs: w.bufs, to: w.foldTo, seen: w.foldSeen[:0]}
	ok := m.programs(p, q)
	var ranges []idRange
	if ok {
		ranges = m.ranges()
	}
	for _, x := range m.seen {
		w.foldTo[x] = 0
	}
	w.foldSeen = m.seen
	if !ok {
		return false
	}
	f := &fold{proto: proto, bufs: &w.bufs, pads: m.pads.m, fifos: m.fifos.m, peers: m.peers.m, keys: m.keys}
	f.padList = make([]pair[SignalPad], len(m.pads.list))
	for i, x := range m.pads.list {
		f.padList[i] = pair[SignalPad]{x.x, x.y}
	}
	f.fifoList = make([]pair[Fifo], len(m.fifos.list))
	for i, x := range m.fifos.list {
		f.fifoList[i] = pair[Fifo]{x.x, x.y}
	}
	f.peerList = make([][2]int, len(m.peers.list))
	for i, x := range m.peers.list {
		f.peerList[i] = [2]int{x.x, x.y}
	}
	f.ranges = ranges
	f.rebind = f.rebinding()
	w.progs[rank] = &Program{Streams: p.Streams, Events: p.Events, Ops: p.Ops, fold: f}
	return true
}

// matcher builds the renaming from a proto's program to a rank's, and
// checks that it is one.
type matcher struct {
	bufs  []*Buffer // the world's, by id
	to    []int32   // per proto buffer id: 1 + its image's id (0: none yet)
	seen  []int32   // the proto buffer ids given an image
	pads  renaming[*SignalPad]
	fifos renaming[*Fifo]
	peers renaming[int]
	keys  map[string]string // and back: one-to-one
	back  map[string]string
	a, b  Instr // micro-ops generated, and their sources' storage
	aSrcs []Src
	bSrcs []Src
}

// renaming is a map the matcher builds: a list while it is short (a
// group's pads and peers: one per rank), which a lookup scans faster than
// it hashes, and a map beyond.
type renaming[K comparable] struct {
	list []renamed[K] // each x once
	m    map[K]K      // when list would be longer than shortRenaming
}

type renamed[K comparable] struct{ x, y K }

const shortRenaming = 16

// same records x → y in r, and reports whether r had no other image for x.
func (r *renaming[K]) same(x, y K) bool {
	if r.m != nil {
		return same(r.m, x, y)
	}
	for _, p := range r.list {
		if p.x == x {
			return p.y == y
		}
	}
	if len(r.list) < shortRenaming {
		if r.list == nil {
			r.list = make([]renamed[K], 0, shortRenaming/2)
		}
		r.list = append(r.list, renamed[K]{x, y})
		return true
	}
	r.m = make(map[K]K, 2*shortRenaming)
	for _, p := range r.list {
		r.m[p.x] = p.y
	}
	r.list = nil
	r.m[x] = y
	return true
}

// same records x → y in m, and reports whether m had no other image for x.
func same[T comparable](m map[T]T, x, y T) bool {
	if z, ok := m[x]; ok {
		return z == y
	}
	m[x] = y
	return true
}

func (m *matcher) buf(x, y *Buffer) bool {
	if x == nil || y == nil {
		return x == y
	}
	if !m.own(x) || !m.own(y) {
		return false // not the world's: no id to rename by
	}
	if t := m.to[x.id]; t > 0 {
		return t-1 == y.id
	}
	m.to[x.id] = y.id + 1
	m.seen = append(m.seen, x.id)
	return true
}

// own reports whether b is the world's buffer at its id.
func (m *matcher) own(b *Buffer) bool { return int(b.id) < len(m.bufs) && m.bufs[b.id] == b }

func (m *matcher) pad(x, y *SignalPad) bool {
	if x == nil || y == nil {
		return x == y
	}
	return m.pads.same(x, y)
}

func (m *matcher) fifo(x, y *Fifo) bool {
	if x == nil || y == nil {
		return x == y
	}
	return m.fifos.same(x, y)
}

// key records the renaming of a rank-local key (an order key, an
// exclusive key: the communicator's name, one per replica) and reports
// whether it is one-to-one: the kernels that share a key on the proto share
// one on the rank, and no others.
func (m *matcher) key(x, y string) bool {
	if x == "" || y == "" {
		return x == y
	}
	if m.keys == nil {
		m.keys, m.back = map[string]string{}, map[string]string{}
	}
	return same(m.keys, x, y) && same(m.back, y, x)
}

func (m *matcher) peer(x, y int) bool {
	if x < 0 || y < 0 {
		return x == y
	}
	return m.peers.same(x, y)
}

func (m *matcher) programs(p, q *Program) bool {
	if !slices.Equal(p.Streams, q.Streams) || !slices.Equal(p.Events, q.Events) || len(p.Ops) != len(q.Ops) {
		return false
	}
	for i := range p.Ops {
		a, b := &p.Ops[i], &q.Ops[i]
		if a.Kind != b.Kind || a.Stream != b.Stream || a.Event != b.Event || a.Host != b.Host || a.GraphNode != b.GraphNode {
			return false
		}
		if (a.Kernel == nil) != (b.Kernel == nil) || (a.Kernel != nil && !m.kernels(a.Kernel, b.Kernel)) {
			return false
		}
	}
	return true
}

func (m *matcher) kernels(x, y *KernelSpec) bool {
	if x.Name != y.Name || x.Coll != y.Coll || !m.key(x.OrderKey, y.OrderKey) || x.OrderPerContext != y.OrderPerContext || x.OrderLaunch != y.OrderLaunch || x.StepConns != y.StepConns ||
		x.Kind != y.Kind || x.Sig != y.Sig || x.GroupSize != y.GroupSize || !m.key(x.Exclusive, y.Exclusive) ||
		x.Blocks != y.Blocks || x.Spins != y.Spins || !slices.Equal(x.Loads, y.Loads) ||
		(x.Gen == nil) != (y.Gen == nil) || x.Len() != y.Len() {
		return false
	}
	if x.Gen != nil {
		if reflect.TypeOf(x.Gen) != reflect.TypeOf(y.Gen) {
			return false
		}
		rx, ry := x.Gen.Refs(), y.Gen.Refs()
		if len(rx.Buffers) != len(ry.Buffers) || len(rx.Pads) != len(ry.Pads) || len(rx.Fifos) != len(ry.Fifos) {
			return false
		}
		for i := range rx.Buffers {
			if !m.buf(rx.Buffers[i], ry.Buffers[i]) {
				return false
			}
		}
		for i := range rx.Pads {
			if !m.pad(rx.Pads[i], ry.Pads[i]) {
				return false
			}
		}
		for i := range rx.Fifos {
			if !m.fifo(rx.Fifos[i], ry.Fifos[i]) {
				return false
			}
		}
	}
	for pc := range x.Len() {
		// A generator may append to its scratch's sources: they keep
		// their storage from one micro-op to the next.
		m.a.Srcs, m.b.Srcs = m.aSrcs[:0], m.bSrcs[:0]
		a, b := x.At(pc, &m.a), y.At(pc, &m.b)
		m.aSrcs, m.bSrcs = m.a.Srcs, m.b.Srcs
		if !m.instrs(a, b) {
			return false
		}
	}
	return true
}

func (m *matcher) instrs(a, b *Instr) bool {
	if a.Op != b.Op || a.Cmp != b.Cmp || a.Phase != b.Phase || a.Dur != b.Dur || a.DstLo != b.DstLo || a.N != b.N ||
		a.Fresh != b.Fresh || a.Slot != b.Slot || len(a.Srcs) != len(b.Srcs) || (a.Ix == nil) != (b.Ix == nil) || (a.Ix != nil && *a.Ix != *b.Ix) {
		return false
	}
	for i := range a.Srcs {
		x, y := a.Srcs[i], b.Srcs[i]
		if x.Lo != y.Lo || x.Coef != y.Coef || !m.buf(x.Buf, y.Buf) {
			return false
		}
	}
	// Peer is read for signal waits only (hang analysis); elsewhere it
	// is whatever the kernel's maker left there.
	return m.buf(a.Dst, b.Dst) && m.pad(a.Pad, b.Pad) && m.fifo(a.Fifo, b.Fifo) && m.fifo(a.Fwd, b.Fwd) && (a.Op != OpWait || m.peer(a.Peer, b.Peer))
}

// ranges compresses the buffer renaming into runs of proto ids with one id
// delta each (sorting seen).
func (m *matcher) ranges() []idRange {
	slices.Sort(m.seen)
	var out []idRange
	for _, x := range m.seen {
		d := m.to[x] - 1 - x
		if n := len(out); n > 0 && out[n-1].delta == d {
			out[n-1].hi = x + 1
			continue
		}
		out = append(out, idRange{lo: x, hi: x + 1, delta: d})
	}
	return out
}

// speedState is the speed machinery's state: folded ranks, a template's
// copies, and retirement of finished tasks (retire.go).
type speedState struct {
	// keepHistory: retire nothing (KeepHistory; retire.go)
	keepHistory bool
	noFold      bool      // NoFold: Fold keeps every rank's program (fold.go)
	foldTo      []int32   // Fold's renaming of buffers by id, zero between calls
	foldSeen    []int32   // the ids Fold set in foldTo (storage between calls)
	lz          lazyTasks // graph mode: tasks made when they become ready (retire.go)
	// a template's copy: its pads and FIFOs by id (the shared micro-ops
	// name the template's; see bufOf, padOf, fifoOf)
	tPads  []*SignalPad
	tFifos []*Fifo
	isCopy bool
}
