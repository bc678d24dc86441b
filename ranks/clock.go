package ranks

import (
	"slices"

	"github.com/collsim/collsim/mutant"
	"github.com/collsim/collsim/ranks/hb"
)

// VC is a vector clock over lanes ([hb.VC]).
type VC = hb.VC

// clockEntry is one lane's entry of a sparse clock.
type clockEntry = hb.Entry

// denseLanes is the largest world (in lanes) whose clocks are dense.
const denseLanes = hb.DenseLanes

// sharedLanes marks the lanes whose clock entries another lane can ever
// need: those that access memory (a buffer, or a caching-allocator block
// that several tensors alias, or one side of a signal pad or a FIFO) that
// some other lane also accesses.
//
// A clock entry for lane L is only ever read by a race check between an
// access of L and a later access of the same chunk by a lane M. When M is L
// the check reads M's own entry, which every clock keeps; so L's entry needs
// to travel to other lanes' clocks only when another lane touches memory L
// touches. Releases (task completion, signals, messages) carry shared
// entries only. This is the thread-local filter of dynamic race detectors,
// decided statically from the kernels' instructions: it loses no race and
// no happens-before edge a check can see, and it stops an all-to-all
// knowledge flood where nothing is shared. In a 512-rank NCCL ring, every
// buffer is touched by its own rank's kernel only (values travel in FIFO
// messages), so clocks stay one entry long instead of growing to 512 and
// the Θ(n³) join work disappears.
//
// The same walk marks each buffer in bufs private when at most one lane
// touches its storage: no two lanes can race on it, so its accesses skip
// the shadow-memory checks (the static form of a race detector's
// thread-local filter), recording only who wrote each chunk last.
func sharedLanes(progs []*Program, laneBase []int32, nl int32, bufs []*Buffer) []bool {

	var ix locIndex
	var owner []int32 // per location: the one lane touching it, or -1
	shared := make([]bool, nl)
	// One walk: a lane is shared when it touches a location another lane
	// touches too. Until a location's second lane comes, only its first
	// touched it; both are marked then, and every later one as it comes.
	walkLocations(progs, laneBase, func(k any, lane int32) {
		i, added := ix.index(k)
		switch {
		case added:
			owner = append(owner, lane)
		case owner[i] == lane:
		case owner[i] >= 0:
			shared[owner[i]], shared[lane] = true, true
			owner[i] = -1
		default:
			shared[lane] = true
		}
	})
	for _, b := range bufs {
		i, ok := ix.lookup(b.storage())
		b.private = !ok || owner[i] >= 0
	}
	return shared
}

// padSide and fifoSide are the locations sharedLanes counts for a signal
// pad (its puts or its waits) and a FIFO (its sends or its receives).
type padSide struct {
	p   *SignalPad
	put bool
}

// side returns p's put or wait side as a location: a pointer into p, so
// that a pass's map of locations boxes it without allocating.
func (p *SignalPad) side(put bool) *padSide {
	s := &p.sides[0]
	if !put {
		s = &p.sides[1]
	}
	if s.p == nil {
		s.p, s.put = p, put // a pad made without NewSignalPad or AllocSymmetric
	}
	return s
}

// side returns f's send or receive side as a location.
func (f *Fifo) side(send bool) *fifoSide {
	s := &f.sides[0]
	if !send {
		s = &f.sides[1]
	}
	if s.f == nil {
		s.f, s.send = f, send // a FIFO made without NewFifo
	}
	return s
}

type fifoSide struct {
	f    *Fifo
	send bool
}

// walkLocations calls f(k, lane) for every location a kernel launched on
// lane touches: k is a buffer's storage (Buffer.storage), a pad's put or
// wait side (padSide), or a FIFO's send or receive side (fifoSide). Runs of
// one location within a kernel are reported once; the order is the
// programs' (deterministic).
//
// A folded rank's kernels are the proto's renamed (fold.go): the proto
// kernel's locations are listed once (protoLocs) and renamed for each
// folded launch, instead of renaming every micro-op of every one. A
// location then comes once per kernel rather than once per run; both
// passes only collect which lanes touch which location.
func walkLocations(progs []*Program, laneBase []int32, f func(k any, lane int32)) {
	eachLocation(progs, laneBase, kernelLocations, func(r int, fold *fold, lane int32, l loc) {
		if k := l.at(fold, r); k != nil {
			f(k, lane)
		}
	})
}

// eachLocation calls f for every location list reports for every kernel
// launch in progs, in program order, with the launching rank, its fold
// (nil for a rank that runs its own program) and the lane. A folded
// rank's come from its proto kernel's list, made once (protoLocs), for f
// to rename; another rank's come as list reports them.
func eachLocation(progs []*Program, laneBase []int32, list func(*KernelSpec, *Instr, func(loc)), f func(r int, fold *fold, lane int32, l loc)) {
	var scratch Instr // the generated micro-ops, one at a time
	var protos protoLocs
	for r, p := range progs {
		if p == nil {
			continue
		}
		fold := p.fold
		if mutant.On(mutant.FoldPassesSeeProto) {
			fold = nil
		}
		for i := range p.Ops {
			op := &p.Ops[i]
			if op.Kind != Launch || op.Kernel == nil {
				continue
			}
			lane := laneBase[r] + int32(op.Stream)
			if fold == nil {
				list(op.Kernel, &scratch, func(l loc) { f(r, nil, lane, l) })
				continue
			}
			for _, l := range protos.of(op.Kernel, &scratch, list) {
				f(r, fold, lane, l)
			}
		}
	}
}

// kernelLocations calls f for the locations kernel k touches (see
// walkLocations). Runs of one location are reported once.
func kernelLocations(k *KernelSpec, scratch *Instr, f func(l loc)) {
	var last loc // consecutive instructions mostly touch one buffer
	emit := func(l loc) {
		if l != last {
			f(l)
			last = l
		}
	}
	visit := func(b *Buffer) {
		if b != nil {
			emit(loc{kind: locBuf, b: b})
		}
	}
	// Signal-pad slots and FIFOs are checked too (exec.go, checkSlot):
	// puts into a pad against puts, waits against waits, sends into a
	// FIFO against sends, receives against receives. Each side is a
	// location of its own.
	if k.listed(scratch, func(in *Instr) {
		for _, s := range in.Srcs {
			visit(s.Buf)
		}
		visit(in.Dst)
		switch in.Op {
		case OpPut:
			emit(loc{kind: locPut, p: in.Pad})
		case OpWait:
			emit(loc{kind: locWait, p: in.Pad})
		case OpSend:
			emit(loc{kind: locSend, q: in.Fifo})
		case OpRecv:
			emit(loc{kind: locRecv, q: in.Fifo})
		case OpRecvSend:
			emit(loc{kind: locRecv, q: in.Fifo})
			emit(loc{kind: locSend, q: in.Fwd})
		}
	}) {
		return
	}
	refs := k.Gen.Refs()
	for _, b := range refs.Buffers {
		visit(b)
	}
	for _, p := range refs.Pads { // which side is not said: both
		emit(loc{kind: locPut, p: p})
		emit(loc{kind: locWait, p: p})
	}
	for _, q := range refs.Fifos { // each side the rank is the end of
		emit(loc{kind: locSendEnd, q: q})
		emit(loc{kind: locRecvEnd, q: q})
	}
}

// loc is a location as a kernel names it: a buffer, a pad's put or wait
// side, a FIFO's send or receive side, or a FIFO's side whose end the
// launching rank is (a generator that lists only its references).
type loc struct {
	kind locKind
	b    *Buffer
	p    *SignalPad
	q    *Fifo
}

type locKind uint8

const (
	locBuf locKind = iota + 1
	locPut
	locWait
	locSend
	locRecv
	locSendEnd
	locRecvEnd
	locFlagPut  // flagLanes: a buffer stored into by a flag put
	locFlagWait // flagLanes: a buffer a flag wait polls
)

// at returns l's key for walkLocations, as rank r (whose renaming is f,
// nil for none) names it; nil when r is not the end a locSendEnd or
// locRecvEnd asks for.
func (l loc) at(f *fold, r int) any {
	b, p, q := l.b, l.p, l.q
	if f != nil {
		b, p, q = f.buf(b), f.pad(p), f.fifo(q)
	}
	switch l.kind {
	case locBuf:
		return b.storage()
	case locPut, locWait:
		return p.side(l.kind == locPut)
	case locSend, locRecv:
		return q.side(l.kind == locSend)
	case locSendEnd:
		if q.Src == r {
			return q.side(true)
		}
	case locRecvEnd:
		if q.Dst == r {
			return q.side(false)
		}
	}
	return nil
}

// protoLocs lists, once per proto kernel, the distinct locations it
// touches, in first-touch order.
type protoLocs struct {
	lists map[*KernelSpec][]loc
	seen  map[loc]bool // scratch: a long list's members
}

func (c *protoLocs) of(k *KernelSpec, scratch *Instr, list func(*KernelSpec, *Instr, func(loc))) []loc {
	if l, ok := c.lists[k]; ok {
		return l
	}
	if c.lists == nil {
		c.lists, c.seen = map[*KernelSpec][]loc{}, map[loc]bool{}
	}
	const short = 32 // scanning a short list beats hashing
	var l []loc
	clear(c.seen)
	list(k, scratch, func(x loc) {
		switch {
		case len(l) < short:
			if slices.Contains(l, x) {
				return
			}
		case len(l) == short:
			for _, y := range l {
				c.seen[y] = true
			}
			fallthrough
		default:
			if c.seen[x] {
				return
			}
			c.seen[x] = true
		}
		l = append(l, x)
	})
	c.lists[k] = l
	return l
}

// snapshot returns an immutable copy of lane's clock to hand to others (a
// completed task, a signal, a message) and starts a new epoch of the lane.
// A lane that neither accessed memory nor acquired anything since its last
// snapshot hands out that one again and keeps its epoch: nothing it did can
// tell the two apart, and the common case (event records, waits, a run of
// puts) then allocates nothing.
func (w *World) snapshot(lane int32) *VC {
	s, tick := w.snapshotTick(lane)
	if w.clockHist != nil {
		if s == hb.Empty {
			// The same empty clock, but one per release: the history
			// tells releases apart by identity (and one handed out again
			// is the same one).
			s = &VC{}
			if w.snap != nil && w.snap[lane] == hb.Empty {
				w.snap[lane] = s
			}
		}
		w.clockHist.Events = append(w.clockHist.Events, clockEvent{Kind: 'r', Lane: lane, Clock: s, Tick: tick})
		w.snapPool.Own(s) // the history keeps it for good
	}
	return s
}

// snapshotTick is snapshot, and whether the lane's epoch advanced.
func (w *World) snapshotTick(lane int32) (*VC, bool) {
	if !w.anyShared {
		return hb.Empty, false // no clock entry is of use to anybody
	}
	if !w.dirty[lane] && w.snap[lane] != nil {
		return w.snap[lane], false
	}
	var s *VC
	if v := w.vc[lane]; v.Dense() != nil {
		s = w.denseClone(v)
	} else {
		s = w.snapPool.Shared(v, w.shared)
	}
	if w.shared[lane] {
		// A new epoch, so that later accesses are told apart from those
		// the snapshot covers. An unshared lane's entry never leaves its
		// own clock, whose checks cover every one of its epochs anyway.
		w.vc[lane].Tick(lane)
	}
	w.snapPool.Own(s)
	w.snapPool.Disown(w.snap[lane], w.keepHistory)
	w.snap[lane], w.dirty[lane] = s, false
	return s, w.shared[lane]
}

// hb reports whether epoch e happens before the current point of the lane
// whose clock is cur (every race check is one such query).
func (w *World) hb(e epoch, cur *VC) bool {
	ok := e.none() || e.clock <= cur.Get(e.lane)
	if w.clockHist != nil && !e.none() {
		w.clockHist.query(w, cur, e, ok)
	}
	return ok
}

// clockHistory records a run's releases, acquires and happens-before
// queries (World.clockHist, set by tests only), so that a test can replay them
// on reference vector clocks of its own and compare every answer.
type clockHistory struct {
	Events []clockEvent
}

// clockEvent is one step of a clock history.
type clockEvent struct {
	Kind  byte  // 'r' release, 'a' acquire, 'q' query
	Lane  int32 // the releasing, acquiring or querying lane
	Clock *VC   // release, acquire: the clock handed over (its identity)
	Tick  bool  // release: the lane's epoch advanced after it
	// query: the epoch asked about (lane, clock) and the answer
	Of  int32
	At  uint32
	Yes bool
}

func (h *clockHistory) query(w *World, cur *VC, e epoch, ok bool) {
	m := slices.Index(w.vc, cur)
	h.Events = append(h.Events, clockEvent{Kind: 'q', Lane: int32(m), Of: e.lane, At: e.clock, Yes: ok})
}

// acquireVC joins o into lane's clock (a wait that consumed a signal, a
// message received, a dependency that finished).
func (w *World) acquireVC(lane int32, o *VC) {
	w.snapPool.CheckHeld(o)
	if w.clockHist != nil {
		w.clockHist.Events = append(w.clockHist.Events, clockEvent{Kind: 'a', Lane: lane, Clock: o})
	}
	if c := w.carry; c != nil && o != nil && len(o.Entries()) > 0 {
		// Only the entries this lane keeps (carry.go).
		w.carryBuf = c.Filter(lane, o.Entries(), w.carryBuf)
		w.vc[lane].JoinEntries(w.carryBuf)
	} else {
		w.vc[lane].Join(o)
	}
	w.dirty[lane] = true
}

// denseClone copies dense clock v into the world's clock slabs: a snapshot
// lives as long as the world, so carving it from a block saves the two
// allocations of a clone.
func (w *World) denseClone(v *VC) *VC {
	c := w.denseVC(len(v.Dense()))
	copy(c.Dense(), v.Dense())
	return c
}

// denseVC returns a zero dense clock of n lanes from the world's slabs.
func (w *World) denseVC(n int) *VC {
	if len(w.clockWords) < n {
		w.clockWords = w.mem.words.Get(64 * n)
	}
	d := w.clockWords[:n:n]
	w.clockWords = w.clockWords[n:]
	if len(w.clocks) == 0 {
		w.clocks = w.mem.clocks.Get(64)
	}
	c := &w.clocks[0]
	w.clocks = w.clocks[1:]
	c.SetDense(d)
	return c
}

// locIndex numbers the locations walkLocations reports, in first-seen
// order: a buffer by its id, through an array (a 4,096-rank world of 61
// layers has 2.3 M buffers, and a map of them cost more than the run's
// clocks), anything else (an allocator block, a pad's or FIFO's side)
// through a map.
type locIndex struct {
	byBuf []int32 // per buffer id: 1 + the location's index, 0: not seen
	other map[any]int32
	n     int32
}

// index returns k's index, numbering k if it is new (and then reports
// true).
func (x *locIndex) index(k any) (int32, bool) {
	if b, ok := k.(*Buffer); ok && b.id >= 0 {
		if int(b.id) >= len(x.byBuf) {
			x.byBuf = append(x.byBuf, make([]int32, int(b.id)+1-len(x.byBuf))...)
		}
		if i := x.byBuf[b.id]; i > 0 {
			return i - 1, false
		}
		x.n++
		x.byBuf[b.id] = x.n
		return x.n - 1, true
	}
	if x.other == nil {
		x.other = map[any]int32{}
	}
	if i, ok := x.other[k]; ok {
		return i, false
	}
	x.other[k] = x.n
	x.n++
	return x.n - 1, true
}

// lookup returns k's index, if k was numbered.
func (x *locIndex) lookup(k any) (int32, bool) {
	if b, ok := k.(*Buffer); ok && b.id >= 0 {
		if int(b.id) < len(x.byBuf) && x.byBuf[b.id] > 0 {
			return x.byBuf[b.id] - 1, true
		}
		return 0, false
	}
	i, ok := x.other[k]
	return i, ok
}

// locSet is a set of locations, numbered by a locIndex.
type locSet struct {
	ix locIndex
}

func (s *locSet) add(k any) { s.ix.index(k) }

func (s *locSet) has(k any) bool {
	_, ok := s.ix.lookup(k)
	return ok
}

// hbClocks is the world's happens-before state: a vector clock per lane
// (one lane per rank and stream), the snapshots handed out, which lanes
// share memory, and the carry filter (carry.go).
type hbClocks struct {
	laneBase  []int32 // first lane of each rank
	vc        []*VC   // per lane
	snap      []*VC   // per lane: the last snapshot handed out (immutable)
	dirty     []bool  // per lane: accessed or acquired since snap
	shared    []bool  // per lane: shares memory with another lane (clock.go)
	carry     *carry  // sparse clocks: which entries each lane keeps (carry.go)
	carryBuf  []clockEntry
	noCarry   bool          // FullClocks: every shared lane's entry travels everywhere
	clockHist *clockHistory // tests: the run's clock history (clock.go)
	snapPool  hb.Pool       // recycled snapshots (hb/recycle.go)
	anyShared bool          // some lane is shared
	sparse    bool          // tests: sparse clocks even in a small world
	noFilter  bool          // tests: every lane counts as shared
	// slabs that dense snapshots are carved from (clock.go)
	clocks     []VC
	clockWords []uint32
}
