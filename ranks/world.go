package ranks

import (
	"fmt"
	"slices"

	"github.com/collsim/collsim/mutant"
	"github.com/collsim/collsim/ranks/findings"
	"github.com/collsim/collsim/ranks/hb"
	"github.com/collsim/collsim/sim"
)

// Config is how a world executes its programs.
type Config struct {
	Mode    Mode
	Replays int // graph mode: how many times the graph is replayed (≥1)
	// LaunchCost is the host time to issue one kernel (eager) or one graph.
	LaunchCost sim.Time
	// EventCost is the host time to issue an event record or wait.
	EventCost sim.Time
	// MaxFindings caps findings kept per kind (0 means 32).
	MaxFindings int
	// Timeline records a Span per task (see World.Spans).
	Timeline bool
	// SMs is each GPU's streaming multiprocessors for residency
	// (residency.go); 0 does not count them.
	SMs int
	// GEMMLaunchCost, when set, is the host time to issue a GEMM kernel in
	// eager mode (a PyTorch matmul costs the host about twice an
	// elementwise op: ranks/gpu/hw.go HostCosts).
	GEMMLaunchCost sim.Time
	// WaitCost, when set, is the host time to issue an event wait (else
	// EventCost).
	WaitCost sim.Time
	// Jitter and HostJitter, when set, are the duration multipliers (per
	// mille, [0] = 1000, nominal) offered to the chooser for device
	// durations and for host issue costs (ranks/gpu/hw.go MeasuredJitter); nil
	// offers the wide default table.
	Jitter, HostJitter []int64
	// FineSteps runs every micro-op as an event of its own: no collective
	// runs as one coarse computation where nothing can interleave with it
	// (coarse.go). Results are the same either way but for the trace hash
	// and the step count; this is the oracle the coarse path is checked
	// against, and a way to look at every step.
	FineSteps bool
	// Share, when set, makes concurrent kernels on one GPU share its SMs
	// and bandwidth (share.go); nil runs every kernel at its own speed.
	Share *Share
	// GraphGap is the device's gap between a graph node's end and the start
	// of a node that depends on it, in a replayed graph (graph mode).
	GraphGap sim.Time
}

// Jitter multipliers (per mille) offered to the chooser for each duration
// when the config names none; index 0 is nominal.
var jitterPerMille = []int64{1000, 250, 500, 750, 1250, 1500, 2000, 3000, 5000}

// Skew offsets offered for each rank's host start; index 0 is nominal.
var skewSteps = [...]sim.Time{0, 500, 1000, 2000, 4000, 8000, 16000, 32000}

// World is every rank's GPU, its memory and its programs, executed on one
// deterministic engine. Build it with [NewWorld], allocate memory, set each
// rank's program, then [World.Run] it once.
type World struct {
	cfg   Config
	eng   *sim.Engine
	N     int
	Srcs  Sources
	progs []*Program
	// the caching allocators that run at run time (dynalloc.go): the
	// memory their tensors share, and each rank's allocator in the run
	dynStores map[int]*dynStore
	dyn       []*dynAlloc
	// each running task's steps on the stepped connections it uses
	// (stepconn.go), written back at its completion; stepConns is
	// NextStep's scratch for them
	conns     map[int32][]connCursor
	stepConns []*Fifo
	stepSeen  []*Fifo
	// each running kernel's slot index, loaded by its OpIndex
	// (slotindex.go)
	slotIx map[int32]int64
	bufs   []*Buffer
	calls  []string // interned collective instance names
	plan   *plan    // lowered programs and interned calls (Run), shared by a template's copies

	// Each concern's state, in the concern's own type and file; the world
	// composes them (their fields are the world's, by embedding). The order
	// keeps what every micro-op reads (clocks, the executing op, slabs,
	// tasks) in the first lines.
	hbClocks         // happens-before: lanes' vector clocks, carry filter, snapshots (clock.go)
	execScratch      // the micro-op being executed (exec.go)
	nominal     bool // the chooser is sim.Nominal: no jitter
	speedState       // folding, templates, retirement (fold.go, template.go, retire.go)
	memSlabs         // where tasks, values, buffers and clocks are carved from (arena.go)

	tasks []*task
	hosts []host

	findingState            // findings, their caps, de-duplication and messages (findmsg.go)
	runRecord               // what the run did: its span, history and timeline (timeline.go)
	replayState             // per-replay inputs and replay snapshots (replays.go)
	gpuShares               // SM residency, exclusive pools, bandwidth sharing (residency.go, share.go)
	flags        *flagState // device-side flags (flags.go); nil until the first flag op
	rlog         *readLog   // LogReads (readlog.go)
	coarseState             // coarse collective steps (coarse.go)
}

type taskState uint8

const (
	pending taskState = iota
	running
	blocked
	done
)

type task struct {
	// What every micro-op step reads comes first: the first 64 bytes, one
	// cache line (a task is 256 bytes, and slabs of them are line-aligned).
	id       int32
	lane     int32
	genLen   int32
	state    taskState
	talked   bool // touched a peer: signal, FIFO or peer memory
	blockGen bool // blocked on its generated micro-op pc (blockIn is nil)
	blockFwd bool // an OpRecvSend blocked on its full Fwd, not its empty Fifo
	pc       int
	gen      InstrGen // a generated kernel's generator once it started, and its length
	inst     Instance
	blockIn  *Instr // the micro-op t is blocked on (reason formatted lazily)
	op       *HostOp

	sig string // the kernel's Sig: ghost data for its collective call

	rank   int
	stream int
	replay int32
	node   int32 // index of the lowered node (-1: a replay's join task)

	deps       []int32
	waiting    int // deps not yet done
	dependents []int32
	issued     bool
	sharing    bool  // its micro-op runs in its GPU's share (share.go)
	coarse     uint8 // coarseNo, coarseCand, coarseParked or coarseDone (coarse.go)

	blockWho []blockRef // for hang analysis
	start    sim.Time
	end      sim.Time
	done     *VC
	phases   []Phase
	heldBy   int32 // waiting for residency: 1 + the pool it waits on (0: none; residency.go)
	nameID   int32 // 1 + interned (op, stream) name, 0: not yet (exec.go)
	streamID int32 // 1 + interned stream name, 0: not yet (exec.go)
	// users is how many tasks are still to acquire done: those not yet
	// started among the ones whose dependencies name t, made or still to be
	// made (retire.go). At 0, done is dropped.
	users int32
}

type blockRef struct {
	rank int
}

type host struct {
	nodes []node
	next  int // next node to issue (eager) or next replay (graph)
	base  []int32
	// graph mode: task ids of the previous replay's nodes
	prevJoin int32
	syncing  int32 // the sync task blocking the host thread, or -1 (hostsync.go)
	// acq: record tasks of deferred frees whose completion a malloc saw
	// (dynalloc.go); every task issued afterwards depends on them. acqAt[s]:
	// how many of them stream s's tasks depend on already.
	acq   []int32
	acqAt []int
}

// NewWorld returns a world of n ranks.
func NewWorld(n int, cfg Config, eng *sim.Engine) *World {
	if cfg.Replays < 1 {
		cfg.Replays = 1
	}
	if cfg.MaxFindings == 0 {
		cfg.MaxFindings = 32
	}
	w := &World{
		cfg: cfg, eng: eng, N: n,
		progs:        make([]*Program, n),
		memSlabs:     memSlabs{mem: new(arena)},
		findingState: findingState{log: findings.NewLog(cfg.MaxFindings)},
	}
	w.Srcs.bufs, w.Srcs.provs = &w.bufs, &w.provTab
	return w
}

// Engine returns the world's engine.
func (w *World) Engine() *sim.Engine { return w.eng }

// Alloc allocates a tensor of the given size and value chunks on rank.
func (w *World) Alloc(rank int, name string, bytes int64, chunks int) *Buffer {
	if chunks > maxChunks {
		panic(fmt.Sprintf("ranks: buffer %q has %d chunks; at most %d", name, chunks, maxChunks))
	}
	if len(w.bufMem) == 0 {
		w.bufMem = w.mem.bufs.Get(256) // a DP=512 world allocates half a million
	}
	b := &w.bufMem[0] // zero
	w.bufMem = w.bufMem[1:]
	b.Name, b.Rank, b.Bytes, b.id = name, rank, bytes, int32(len(w.bufs))
	b.Vals = w.chunkMem(chunks) // shadows come at Run (allocShadows)
	if len(w.bufs) == cap(w.bufs) {
		// Doubling: append grows a long slice by a quarter, copying
		// millions of pointers ten times over for a large world.
		w.bufs = slices.Grow(w.bufs, max(len(w.bufs), 256))
	}
	w.bufs = append(w.bufs, b)
	return b
}

// chunkMem returns n fresh value chunks, carved from world-sized blocks (a
// 512-rank ring allocates 1,024 buffers).
func (w *World) chunkMem(n int) []Value {
	if n > len(w.valMem) {
		w.valMem = w.mem.vals.Get(max(n, 4096))
	}
	v := w.valMem[:n:n]
	w.valMem = w.valMem[n:]
	return v
}

// allocShadows gives every checked buffer (not private) its zero shadows,
// when the run starts and privacy is known: a private buffer's would never
// be read.
func (w *World) allocShadows() {
	n := 0
	for _, b := range w.bufs {
		if b.sh == nil && !b.private {
			n += len(b.Vals)
		}
	}
	sh := w.mem.shadows.Get(n)
	for _, b := range w.bufs {
		if b.sh == nil && !b.private {
			k := len(b.Vals)
			b.sh, sh = sh[:k:k], sh[k:]
		}
	}
}

// AllocSymmetric allocates a symmetric buffer on every rank of group, with a
// signal pad of padSlots slots per rank.
func (w *World) AllocSymmetric(name string, group []int, bytes int64, chunks, padSlots int) *Symmetric {
	s := &Symmetric{Name: name, Group: append([]int(nil), group...)}
	for _, r := range group {
		b := w.Alloc(r, name, bytes, chunks)
		b.Sym = s
		s.Bufs = append(s.Bufs, b)
		s.Pads = append(s.Pads, NewSignalPad(name, r, padSlots))
	}
	return s
}

// NewFifo returns a connection from src to dst with cap message slots.
func (w *World) NewFifo(name string, src, dst, cap int) *Fifo {
	f := &Fifo{Name: name, Src: src, Dst: dst, Cap: cap}
	f.side(true)
	f.side(false)
	return f
}

// Init sets every chunk of b to a fresh source with value f(chunk).
func (w *World) Init(b *Buffer, f func(chunk int) uint64) {
	for c := range b.Vals {
		b.Vals[c] = Value{N: f(c) % Modulus, P: w.leaf(w.srcOf(b, c))}
	}
	b.inited = true
}

func (w *World) srcOf(b *Buffer, c int) SourceID { return sourceOf(b, c) }

// SetProgram sets rank's host program.
func (w *World) SetProgram(rank int, p *Program) { w.progs[rank] = p }

// Program returns rank's host program (nil before SetProgram).
func (w *World) Program(rank int) *Program { return w.progs[rank] }

// Buffers returns every allocated buffer in allocation order.
func (w *World) Buffers() []*Buffer { return w.bufs }

// Result is what a run produced.
type Result struct {
	Findings  []Finding
	Counts    map[string]int // findings per kind before the cap
	Steps     uint64
	TraceHash string
	Start     sim.Time // first host issue
	End       sim.Time // last task completion
	StepTime  sim.Time // (End-Start) / replays
	Hung      bool
}

// Run executes every rank's program to completion (or to a hang) and returns
// the result. A capture error is returned as an error: it is a property of the
// program, not of the schedule.
func (w *World) Run() (*Result, error) {
	if w.ran {
		panic("ranks: World.Run called twice")
	}
	if w.mem == nil {
		panic("ranks: World.Run called after Release")
	}
	w.raceSeen.Alloc, w.raceDedupe.Alloc = w.mem.races.Get, w.mem.dedupes.Get
	w.ran = true
	for r, p := range w.progs {
		if p == nil {
			w.progs[r] = &Program{Streams: []string{"main"}}
		}
	}
	var nl int32
	w.laneBase, nl = laneLayout(w.progs)
	w.vc = make([]*VC, nl)
	w.snap = make([]*VC, nl)
	w.dirty = make([]bool, nl)
	for i := range w.vc {
		if nl <= denseLanes && !w.sparse {
			w.vc[i] = w.denseVC(int(nl))
			w.vc[i].Dense()[i] = 1
		} else {
			w.vc[i] = hb.New(int32(i))
		}
	}
	switch {
	case w.noFilter:
		w.shared = make([]bool, nl)
		for i := range w.shared {
			w.shared[i] = true
		}
		for _, b := range w.bufs {
			b.private = false
		}
	case w.shared == nil: // a template's copy has it already (and its buffers' marks)
		w.shared = sharedLanes(w.progs, w.laneBase, nl, w.bufs)
	}
	w.allocShadows()
	w.setupReplayInputs()
	w.initResidency()
	w.timed = w.eng.Mode() == sim.Timed
	if w.cfg.Share != nil {
		w.gpus = make([]gpuShare, w.N)
	}
	for _, s := range w.shared {
		w.anyShared = w.anyShared || s
	}
	_, w.nominal = w.eng.Chooser().(sim.Nominal)
	if w.plan == nil { // a template's copy shares the template's
		pl, err := makePlan(w.progs, w.cfg.Mode == Graph)
		if err != nil {
			return nil, err
		}
		w.plan = pl
	}
	w.calls = w.plan.calls
	if w.carry == nil && !w.noFilter && !w.noCarry && (nl > denseLanes || w.sparse) {
		w.carry = carryLanes(w.progs, w.laneBase, nl, w.plan.nodes, w.cfg.Mode == Graph)
	}
	w.coarseOp = w.coarsePlan()
	w.hosts = make([]host, w.N)
	tasks := 0 // how many the run will make: every node, once per replay, and a join per replay
	for r := range w.progs {
		w.hosts[r] = host{nodes: w.plan.nodes[r], prevJoin: -1, syncing: -1}
		tasks += len(w.plan.nodes[r])
	}
	if w.cfg.Mode == Graph {
		tasks = (tasks + w.N) * w.cfg.Replays
	}
	w.tasks = w.mem.taskPtrs.Get(tasks)[:0]
	w.lz.on = w.cfg.Mode == Graph && !w.keepHistory && !w.cfg.Timeline
	if w.lz.on {
		w.lz.first = make([]int32, w.N*w.cfg.Replays)
		w.lz.prev = make([]int32, w.N*w.cfg.Replays)
		w.lz.waiting, w.lz.retired = make([]int32, 0, tasks), make([]bool, 0, tasks)
		w.lz.who = make([]retiredWho, 0, tasks)
		w.lz.launchFirst, w.lz.launchSlot = make([]int32, 0, w.N*w.cfg.Replays), make([]int32, 0, w.N*w.cfg.Replays)
	}
	// Host threads start, each with a chosen skew.
	w.start = -1
	for r := range w.hosts {
		skew := skewSteps[w.eng.Chooser().Choose(sim.DecSkew, len(skewSteps))]
		if mutant.On(mutant.RankSkewOff) {
			skew = 0
		}
		w.eng.Schedule(skew, uint64(r), int32(r))
	}
	for {
		for {
			it, ok := w.eng.Next()
			if !ok {
				break
			}
			if int(it.Actor) < w.N {
				w.stepHost(int(it.Actor))
			} else {
				t := w.tasks[int(it.Actor)-w.N]
				if t == nil {
					panic("ranks: a step of a retired or unmade task")
				}
				w.stepTask(t)
			}
		}
		if !w.coarseUnpark() {
			break
		}
	}
	w.coarseFixFlows()
	res := &Result{Steps: w.eng.Steps(), Start: max(w.start, 0), End: w.end, Counts: w.log.Counts}
	w.makeAll() // hang analysis reads every task that did not finish
	if hang := w.hangFinding(); hang != nil {
		res.Hung = true
		w.report(*hang)
	}
	if !w.deferMsgs {
		w.formatPending()
	}
	res.Findings = w.log.List
	res.TraceHash = w.eng.TraceHash()
	res.StepTime = res.End - res.Start
	if w.cfg.Mode == Graph {
		// Eager issues the program once; a graph is replayed Replays times.
		res.StepTime /= sim.Time(w.cfg.Replays)
	}
	return res, nil
}

func (w *World) jitter(d sim.Time) sim.Time { return w.jitterBy(d, w.cfg.Jitter) }

// hostJitter is jitter for a host issue cost.
func (w *World) hostJitter(d sim.Time) sim.Time {
	if w.cfg.HostJitter != nil {
		return w.jitterBy(d, w.cfg.HostJitter)
	}
	return w.jitter(d)
}

func (w *World) jitterBy(d sim.Time, table []int64) sim.Time {
	if w.nominal {
		return d // Nominal picks option 0, ×1000‰, and draws nothing
	}
	if len(table) == 0 {
		table = jitterPerMille
	}
	i := w.eng.Chooser().Choose(sim.DecJitter, len(table))
	return d * sim.Time(table[i]) / 1000
}

// stepHost issues the next op (eager) or the next graph replay.
func (w *World) stepHost(r int) {
	h := &w.hosts[r]
	p := w.progs[r]
	now := w.eng.Now()
	if w.start < 0 || now < w.start {
		w.start = now
	}
	if w.cfg.Mode == Eager {
		if h.next >= len(h.nodes) {
			return
		}
		n := h.nodes[h.next]
		if h.next == 0 {
			h.base = w.int32s(len(h.nodes))[:len(h.nodes)]
		}
		if mem := p.Ops[n.op].Mem; len(mem) > 0 {
			w.runMem(r, mem) // the allocator calls made before this op (dynalloc.go)
		}
		t := w.newTask(r, h.next, n, p, 0, h.base)
		h.base[h.next] = t.id
		h.next++
		w.issue(t)
		w.noteIssue(t)
		if w.hostBlocks(t) {
			return // resumed by the sync task's completion (hostsync.go)
		}
		cost := w.cfg.EventCost
		switch op := &p.Ops[n.op]; {
		case op.Kind == Launch && w.cfg.GEMMLaunchCost > 0 && op.Kernel.isGEMM():
			cost = w.cfg.GEMMLaunchCost
		case op.Kind == Launch:
			cost = w.cfg.LaunchCost
		case op.Kind == Wait && w.cfg.WaitCost > 0:
			cost = w.cfg.WaitCost
		}
		if h.next < len(h.nodes) {
			w.eng.Schedule(now+w.hostJitter(w.hostGap(r, cost)), uint64(r), int32(r))
		}
		return
	}
	// Graph mode: one launch instantiates every node of the graph; it runs
	// behind the previous replay (cudaGraphLaunch ordering).
	if h.next >= w.cfg.Replays {
		return
	}
	replay := int32(h.next)
	h.next++
	if w.lz.on {
		w.launchLazy(r, replay)
		if h.next < w.cfg.Replays {
			w.eng.Schedule(now+w.hostJitter(w.cfg.LaunchCost), uint64(r), int32(r))
		}
		return
	}
	// The replay's tasks take the next ids in node order.
	first := int32(len(w.tasks))
	base := w.int32s(len(h.nodes))[:len(h.nodes)]
	for i := range base {
		base[i] = first + int32(i)
	}
	for i, n := range h.nodes {
		t := w.newTask(r, i, n, p, replay, base)
		if len(n.deps) == 0 && h.prevJoin >= 0 {
			w.addDep(t, h.prevJoin)
		}
	}
	ts := w.tasks[first:]
	// A join task completes when the whole replay has.
	join := w.allocTask(task{id: int32(len(w.tasks)), rank: r, stream: 0, lane: w.laneBase[r], replay: replay, node: -1, inst: Instance{Call: -1}})
	if h.next < w.cfg.Replays {
		join.users = w.plan.roots[r] // the next replay's first nodes wait for it
	}
	w.tasks = append(w.tasks, join)
	for _, t := range ts {
		w.addDep(join, t.id)
	}
	h.prevJoin = join.id
	w.noteLaunch(r, replay)
	for _, t := range ts {
		w.issue(t)
	}
	w.issue(join)
	if h.next < w.cfg.Replays {
		w.eng.Schedule(now+w.hostJitter(w.cfg.LaunchCost), uint64(r), int32(r))
	}
}

// hostGap is the host time before rank r issues its next op: the op's
// recorded gap when it has one (HostOp.Host), else def.
func (w *World) hostGap(r int, def sim.Time) sim.Time {
	h := &w.hosts[r]
	if h.next < len(h.nodes) {
		if g := w.progs[r].Ops[h.nodes[h.next].op].Host; g > 0 {
			return g
		}
	}
	return def
}

func (w *World) newTask(r, i int, n node, p *Program, replay int32, base []int32) *task {
	op := p.taskOp(n.op)
	t := w.allocTask(task{id: int32(len(w.tasks)), rank: r, stream: n.stream, lane: w.laneBase[r] + int32(n.stream), op: op, replay: replay, node: int32(n.op), inst: Instance{Call: -1, Replay: replay},
		users: w.plan.users[r][i]})
	if op.Kernel != nil {
		t.sig = op.Kernel.Sig
	}
	t.inst.Call = w.plan.opCall[r][n.op]
	if w.coarseOp != nil && w.coarseOp[r] != nil && w.coarseOp[r][n.op] {
		t.coarse = coarseCand
	}
	w.tasks = append(w.tasks, t)
	t.deps = w.int32s(len(n.deps))
	for _, d := range n.deps {
		w.addDep(t, base[d])
	}
	if op.FreeEvent {
		t.users = 1 << 30 // a malloc may acquire it at any later point (dynalloc.go)
	}
	if h := &w.hosts[r]; len(h.acq) > 0 && w.cfg.Mode == Eager {
		if h.acqAt == nil {
			h.acqAt = make([]int, len(p.Streams))
		}
		for _, id := range h.acq[h.acqAt[n.stream]:] {
			w.addDep(t, id)
		}
		h.acqAt[n.stream] = len(h.acq)
	}
	return t
}

// epochs returns an empty slice with room for n epochs, carved from a
// slab: a chunk's readers beyond the first (checkRead). A full list is
// moved to a new one twice its size (moreReader), so neighbours are never
// overwritten.
func (w *World) epochs(n int) []epoch {
	if len(w.epochSlab) < n {
		w.epochSlab = w.mem.epochs.Get(max(n, 3*128))
	}
	s := w.epochSlab[:0:n]
	w.epochSlab = w.epochSlab[n:]
	return s
}

// moreReader appends e to a chunk's extra readers, with room for three at
// first.
func (w *World) moreReader(more []epoch, e epoch) []epoch {
	if len(more) == cap(more) {
		m := w.epochs(max(3, 2*cap(more)))
		more = append(m, more...)
	}
	return append(more, e)
}

// int32s returns an empty slice with room for n, carved from a slab (a
// task's dependencies and dependents: a run makes hundreds of tiny lists).
// Appending past n reallocates, so neighbours are never overwritten.
func (w *World) int32s(n int) []int32 {
	if n < len(w.i32Free) {
		if f := w.i32Free[n]; len(f) > 0 {
			s := f[len(f)-1]
			w.i32Free[n] = f[:len(f)-1]
			return s
		}
	}
	if n > len(w.i32Slab) {
		w.i32Slab = w.mem.i32.Get(max(n, 1024))
	}
	s := w.i32Slab[:0:n]
	w.i32Slab = w.i32Slab[n:]
	return s
}

// allocTask returns a new task t, allocated with others in a slab (a run
// makes hundreds; one allocation each was a large part of its allocations).
func (w *World) allocTask(t task) *task {
	if len(w.taskSlab) == 0 {
		w.taskSlab = w.mem.tasks.Get(64)
	}
	p := &w.taskSlab[0]
	*p = t
	w.taskSlab = w.taskSlab[1:]
	return p
}

func (w *World) addDep(t *task, dep int32) {
	t.deps = w.appendI32(t.deps, dep)
	d := w.tasks[dep]
	if d.state == done && w.isJoin(t) && !w.keepHistory {
		w.accumulate(t, d) // (a join's dependencies are never done yet: made with it)
	}
	if d.state != done {
		t.waiting++
		d.dependents = w.appendI32(d.dependents, t.id)
	}
}

// appendI32 appends x to s; a full s moves to the int32 slab, with room
// for twice as many (at least two), instead of to the heap. The lists it
// grows (dependencies, dependents, waiters) are a world's and live as long.
// freeI32 takes back a list int32s or appendI32 made that nothing
// references any more (a retired task's dependencies and dependents,
// retire.go): the next list of its capacity reuses it, so a long run keeps
// lists for the tasks alive, not for every task it ran.
func (w *World) freeI32(s []int32) {
	n := cap(s)
	if n == 0 || n > maxFreeI32 {
		return
	}
	if n >= len(w.i32Free) {
		w.i32Free = append(w.i32Free, make([][][]int32, n+1-len(w.i32Free))...)
	}
	w.i32Free[n] = append(w.i32Free[n], s[:0])
}

// maxFreeI32 is the longest list freeI32 keeps (a replay's join depends on
// every node of its rank's graph: a thousand for 61 layers).
const maxFreeI32 = 1 << 14

func (w *World) appendI32(s []int32, x int32) []int32 {
	if len(s) == cap(s) {
		s = append(w.int32s(max(2, 2*cap(s))), s...)
	}
	return append(s, x)
}

func (w *World) issue(t *task) {
	t.issued = true
	if t.waiting == 0 {
		w.eng.Schedule(w.eng.Now(), w.key(t), int32(w.N)+t.id)
	}
}

func (w *World) key(t *task) uint64 { return uint64(w.N) + uint64(t.id) }

// stepTask runs a task's next micro-op, and the ones after it for as long as
// the engine says the task would be the next actor anyway.
func (w *World) stepTask(t *task) {
	for w.stepTaskOnce(t) {
	}
}

// stepTaskOnce runs a task's next micro-op. It returns true when the task's
// next step is due before anything else and may run at once.
func (w *World) stepTaskOnce(t *task) bool {
	now := w.eng.Now()
	if t.sharing {
		w.shareEnd(t) // its micro-op is done: the others speed up
	}
	if t.state == pending {
		if !w.acquire(t) {
			return false
		}
		t.state = running
		t.start = now
		w.acquireDeps(t)
		if w.startsAlone(t) {
			// Becoming resident took a contended pool: under an
			// explorer that is a step of its own (residency.go).
			w.eng.Schedule(now, w.key(t), int32(w.N)+t.id)
			return false
		}
	}
	if t.coarse == coarseCand {
		w.coarseArrive(t, now)
		return false
	}
	in := w.instr(t)
	if in == nil {
		w.complete(t)
		return false
	}
	w.notePhase(t, in, now)
	if !w.exec(t, in) {
		t.state = blocked
		return false
	}
	if t.pc == 0 && t.op.Kernel.StepConns {
		w.connLoad(t)
	}
	t.state = running
	if t.blockIn != nil || t.blockGen {
		t.blockIn, t.blockGen = nil, false
		t.blockWho = t.blockWho[:0]
	}
	ld, loaded := w.loadOf(t, in)
	t.pc++
	w.eng.Mix2(uint64(t.id), uint64(t.pc))
	d := w.jitter(in.Dur)
	if loaded {
		w.shareStart(t, ld, d, in.Dur)
		return false
	}
	at, key, actor := now+d, w.key(t), int32(w.N)+t.id
	if w.eng.Continue(at, key, actor) {
		return true
	}
	w.eng.Schedule(at, key, actor)
	return false
}

// bufOf, padOf and fifoOf resolve what a micro-op names to this world's
// own: a template's copy runs the template's micro-ops (never written), so
// they name the template's buffers, pads and FIFOs, which the copy has at
// the same ids. In any other world they are the identity.
func (w *World) bufOf(b *Buffer) *Buffer {
	if !w.isCopy {
		return b
	}
	return w.bufs[b.id]
}

func (w *World) padOf(p *SignalPad) *SignalPad {
	if w.tPads == nil || p.id == 0 {
		return p
	}
	return w.tPads[p.id-1]
}

func (w *World) fifoOf(f *Fifo) *Fifo {
	if w.tFifos == nil || f.id == 0 {
		return f
	}
	return w.tFifos[f.id-1]
}

// plan is what a run derives from the programs alone, before it starts:
// each rank's lowered DAG and each op's interned collective call. It is
// read-only, so a template's copies share one (NewTemplate).
type plan struct {
	nodes  [][]node  // per rank
	opCall [][]int32 // per rank and op: the interned call, or -1
	calls  []string  // interned call names, in rank-then-program order
	// per rank and op: a kernel launch's (kernel, stream) name as an id in
	// 1..names (0: not a launch), for race dedupe keys (World.taskNameID)
	opName [][]int32
	names  int32
	// per rank and node: how many of the rank's nodes depend on it; per
	// rank: how many nodes depend on none (a replay's first). A task's
	// users start there (retire.go).
	users [][]int32
	roots []int32
	// per rank and node: the nodes that depend on it, in node order (a
	// node twice if it names it twice); what a lazily made task tells as
	// it completes (retire.go)
	rdeps [][][]int32
	// per rank and op: the launch may run coarse (coarse.go's static
	// decision; nil: none), once coarseSet
	coarse    [][]bool
	coarseSet bool
}

func makePlan(progs []*Program, capture bool) (*plan, error) {
	pl := &plan{nodes: make([][]node, len(progs)), opCall: make([][]int32, len(progs)), opName: make([][]int32, len(progs))}
	callID, nameID := map[string]int32{}, map[string]int32{}
	progs = slices.Clone(progs)
	for r, p := range progs {
		if p == nil {
			progs[r] = &Program{Streams: []string{"main"}} // as Run makes it
			p = progs[r]
		}
		if f := p.fold; f != nil && pl.opCall[f.proto] != nil {
			pl.opCall[r], pl.opName[r] = pl.opCall[f.proto], pl.opName[f.proto] // the same ops
			continue
		}
		pl.opCall[r] = make([]int32, len(p.Ops))
		pl.opName[r] = make([]int32, len(p.Ops))
		for i, op := range p.Ops {
			pl.opCall[r][i] = -1
			if op.Kind == Launch && op.Stream >= 0 && op.Stream < len(p.Streams) {
				key := op.Kernel.Name + "\x00" + p.Streams[op.Stream]
				id, ok := nameID[key]
				if !ok {
					id = int32(len(nameID)) + 1
					nameID[key] = id
				}
				pl.opName[r][i] = id
			}
			if op.Kind == Launch && op.Kernel.Coll != "" {
				id, ok := callID[op.Kernel.Coll]
				if !ok {
					id = int32(len(pl.calls))
					callID[op.Kernel.Coll] = id
					pl.calls = append(pl.calls, op.Kernel.Coll)
				}
				pl.opCall[r][i] = id
			}
		}
	}
	for r, p := range progs {
		if f := p.fold; f != nil && pl.nodes[f.proto] != nil {
			// A folded rank's program is its proto's host ops: the same
			// DAG, which no run writes.
			pl.nodes[r] = pl.nodes[f.proto]
			continue
		}
		nodes, err := lower(r, p, capture)
		if err != nil {
			return nil, err
		}
		pl.nodes[r] = nodes
	}
	pl.users, pl.roots, pl.rdeps = make([][]int32, len(progs)), make([]int32, len(progs)), make([][][]int32, len(progs))
	for r, nodes := range pl.nodes {
		if f := progs[r].fold; f != nil && pl.users[f.proto] != nil {
			pl.users[r], pl.rdeps[r], pl.roots[r] = pl.users[f.proto], pl.rdeps[f.proto], pl.roots[f.proto]
			continue
		}
		pl.users[r] = make([]int32, len(nodes))
		pl.rdeps[r] = make([][]int32, len(nodes))
		for k, n := range nodes {
			for _, d := range n.deps {
				pl.users[r][d]++
				pl.rdeps[r][d] = append(pl.rdeps[r][d], int32(k))
			}
			if len(n.deps) == 0 {
				pl.roots[r]++
			}
		}
	}
	pl.names = int32(len(nameID))
	return pl, nil
}

// laneLayout numbers the lanes, one per (rank, stream): each rank's first
// lane and the count. A rank without a program has one stream.
func laneLayout(progs []*Program) ([]int32, int32) {
	base := make([]int32, len(progs))
	nl := int32(0)
	for r, p := range progs {
		base[r] = nl
		if p == nil {
			nl++
			continue
		}
		nl += int32(len(p.Streams))
	}
	return base, nl
}

// instr returns t's current micro-op, or nil when it has run them all. A
// generated micro-op is made in the world's one scratch instruction, valid
// until the next call: one micro-op executes at a time, and a blocked task
// makes its micro-op again when it resumes.
func (w *World) instr(t *task) *Instr {
	if t.gen == nil {
		if t.op == nil || t.op.Kind != Launch {
			return nil
		}
		k := t.op.Kernel
		if k.Gen == nil {
			if t.pc >= len(k.Instrs) {
				return nil
			}
			return &k.Instrs[t.pc]
		}
		t.gen, t.genLen = k.Gen, int32(k.Gen.Len())
	}
	// A generated kernel under way: its generator is at hand.
	if t.pc >= int(t.genLen) {
		return nil
	}
	return t.gen.At(t.pc, &w.scratch)
}

func (w *World) complete(t *task) {
	w.connWriteBack(t)
	if w.slotIx != nil {
		delete(w.slotIx, t.id)
	}
	t.state = done
	t.end = w.eng.Now()
	if t.end > w.end {
		w.end = t.end
	}
	if t.node < 0 && t.op == nil && w.cfg.Mode == Graph && (w.rin != nil || w.snaps != nil) {
		w.replayDone(t) // a replay's join: every node of the replay is done
	}
	t.done = w.snapshot(t.lane)
	w.snapPool.Own(t.done)
	w.retireDone(t)
	w.recordSpan(t)
	w.release(t)
	w.checkDropped(t)
	w.hostSyncDone(t)
	if w.lz.on {
		w.completeLazy(t)
		return
	}
	for _, id := range t.dependents {
		d := w.tasks[id]
		d.waiting--
		if d.waiting == 0 && d.issued {
			w.eng.Schedule(w.readyAt(d), w.key(d), int32(w.N)+d.id)
		}
	}
}

// readyAt is when task d, whose last dependency just completed, starts.
func (w *World) readyAt(d *task) sim.Time {
	at := w.eng.Now()
	if d.op != nil && d.op.Kind == Launch && (w.cfg.Mode == Graph || d.op.GraphNode) {
		// a replayed graph starts a kernel node this long after
		// the node it depends on ends (measured: 0.55 µs on the
		// H200 against 1.4 µs between launches on a stream)
		at += w.cfg.GraphGap
	}
	return at
}

func (w *World) wake(ws *[]int32) {
	if len(*ws) > 0 {
		w.wakeAll(ws)
	}
}

func (w *World) wakeAll(ws *[]int32) {
	for _, id := range *ws {
		t := w.tasks[id]
		if t.state == blocked {
			t.state = running
			w.eng.Schedule(w.eng.Now(), w.key(t), int32(w.N)+id)
		}
	}
	*ws = (*ws)[:0]
}

// taskName is task id's name in reports: its kernel, a sync, an event
// op or a replay's join.
func (w *World) taskName(id int32) string {
	t := w.nameView(id)
	if t.op == nil {
		return fmt.Sprintf("replay %d", t.replay)
	}
	if t.op.Kind == Launch {
		return t.op.Kernel.Name
	}
	if t.op.Kind == Sync {
		return w.syncName(t)
	}
	return fmt.Sprintf("%s(%s)", t.op.Kind, w.progs[t.rank].Events[t.op.Event])
}

func (w *World) streamName(id int32) string {
	t := w.nameView(id)
	return w.progs[t.rank].Streams[t.stream]
}

// nameView is what taskName and streamName read of task id: the live task,
// or for a retired one its rank, stream, replay and op in w's scratch task,
// the op as the program holds it. A folded rank's task runs a copy of the
// op whose kernel differs only in what it runs (its micro-ops, generator,
// order and exclusive keys renamed, fold.go), never in the kind, name,
// stream or event a name is made of, so the stand-in w.task builds (with
// that copy, and a generator rebound) is not needed here: a race report
// names a retired task on every first race of a pair. Valid until the
// next call.
func (w *World) nameView(id int32) *task {
	if t := w.tasks[id]; t != nil {
		return t
	}
	in := w.identOf(id)
	r := int(in.rank)
	g := &w.nameScratch
	*g = task{id: id, rank: r, replay: in.replay, node: -1, state: done, inst: Instance{Call: -1}}
	if in.node >= 0 {
		n := w.plan.nodes[r][in.node]
		g.stream, g.op, g.node = n.stream, &w.progs[r].Ops[n.op], int32(n.op)
	}
	return g
}

func (w *World) callName(inst Instance) string {
	if inst.Call < 0 {
		return "?"
	}
	s := w.calls[inst.Call]
	if w.cfg.Mode == Graph && w.cfg.Replays > 1 {
		s += fmt.Sprintf(" (replay %d)", inst.Replay)
	}
	return s
}
