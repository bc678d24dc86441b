package collectives

import (
	"fmt"

	"github.com/collsim/collsim/mutant"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// Workspace says whether all-reduce calls on one communicator share one
// symmetric workspace and signal pad (as TensorRT-LLM's cached instance does)
// or each call gets its own.
type Workspace string

const (
	SharedWorkspace  Workspace = "shared"
	PerCallWorkspace Workspace = "per-call"
)

// Comm is a communicator: a group of world ranks with its NCCL connections
// and its symmetric workspace.
type Comm struct {
	Name      string
	Group     []int
	Workspace Workspace
	HW        ranks.Profile
	// ImplicitOrder is NCCL_LAUNCH_ORDER_IMPLICIT (NCCL ≥ 2.26): kernels of
	// every communicator with the option run in host program order on a GPU,
	// not only those of one communicator (usage/communicators.rst). NCCL
	// makes the next launch wait on the GPU's launchOrder strong stream
	// (src/enqueue.cc ncclLaunchPrepare, "userStream[0] waits on per-device
	// (context) launchOrder"), which ncclLaunchFinish advances to either the
	// kernel's completion (ncclImplicitOrderSerial) or, with CUDA runtime
	// and driver ≥ 12.3 and not capturing under a driver < 12.9, to its
	// launch-completion event (ncclImplicitOrderLaunch:
	// CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT in ncclLaunchKernel; see
	// getImplicitOrder). ImplicitOrder alone is the serial mode: the next
	// kernel waits for the previous one to complete; ImplicitLaunch is the
	// launch mode, where a kernel waits only for the previous one to start,
	// so with co-resident kernels ([Comm.Coresident]) host orders that
	// differ across ranks can complete where the serial mode hangs. NCCL's
	// documentation calls such orders the user's error either way ("users
	// must ensure the order of host-side launches matches for all
	// devices").
	ImplicitOrder bool
	// ImplicitLaunch is ImplicitOrder's launch mode (CUDA ≥ 12.3): a kernel
	// waits for the previous one of the GPU to start, not to complete
	// ([ranks.KernelSpec.OrderLaunch]). It applies only with Coresident:
	// where one NCCL kernel runs at a time per GPU, waiting for the
	// previous one to start is waiting for it to finish, the serial mode.
	ImplicitLaunch bool
	// GraphUnordered limits the communicator's launch order to one capture
	// context: the eager launches keep it, so do the kernels of one graph,
	// and nothing orders graphs captured apart
	// ([ranks.KernelSpec.OrderPerContext]). That is RCCL's graph path:
	// GRAPH_MIXING_SUPPORT defaults to 0 there (rccl
	// src/misc/strongstream.cc l.111 at commit 0cbce2a; NVIDIA's default is
	// 1, env.rst), so a captured graph's first NCCL node does not wait on
	// the strong stream's serialEvent that orders graph launches
	// (ncclStrongStreamAcquire l.171-177: the wait node only when mixing),
	// while within the graph a persistent plan's launch stream still waits
	// on the device stream's tip (src/enqueue.cc ncclLaunchPrepare
	// l.1376-1382). NCCL itself orders captured kernels of one communicator
	// within a graph (the capture stream of the strong stream) and across
	// graphs (serialEvent), unless NCCL_GRAPH_STREAM_ORDERING=0 hands that
	// to the application (env.rst). With [Comm.Coresident] the kernels of
	// graphs captured apart can then be resident together on a GPU, and
	// they race on the communicator's connections ([Comm.sharedConns]):
	// rocm/rccl #2179, graphs sharing one communicator replayed from four
	// streams, deadlock.
	GraphUnordered bool
	// Coresident lets NCCL kernels of this communicator run on a GPU while
	// another communicator's do, when the SMs hold both (the nccl-coresident
	// knob). Off, every NCCL kernel of the GPU shares one exclusive slot:
	// CUDA guarantees no forward progress between kernels of different
	// streams, so a spinning NCCL kernel may keep another from starting
	// (NVIDIA/nccl #574: "CUDA gives no forward progress guarantees";
	// usage/communicators.rst: before NCCL 2.26 the operations of every
	// communicator had to be in one global order "otherwise deadlocks could
	// ensue"). On, a GPU runs them together, as NCCL ≥ 2.26 with CUDA ≥ 12.3
	// lets implicitly ordered communicators do ("permits parallel execution
	// of the two communicator's kernels", usage/communicators.rst). Kernels
	// of one communicator run together only where the library leaves them
	// unordered ([Comm.GraphUnordered]); elsewhere NCCL serializes them on
	// its strong stream (src/enqueue.cc ncclLaunchPrepare).
	Coresident bool
	// WorkspaceChunks and PadSlots size the symmetric workspace and signal
	// pad when set before the first call (defaults: the tensor chunk count
	// and one block's slots); all-gather and all-to-all need group size ×
	// chunks, kernels with B blocks B × group size slots.
	WorkspaceChunks, PadSlots int
	// StreamGuard is PyTorch's GroupStreamGuard (symm_mem/GroupStreamGuard.cpp,
	// PR #195947): a signal-pad kernel of the group issued on a stream other
	// than the previous one's waits for the previous one, so the group's pad
	// kernels run in host issue order on each rank. Nothing else is ordered:
	// TensorRT-LLM's copies in and out of the workspace are not pad kernels
	// (multimem.go). See [Comm.Launches].
	StreamGuard bool
	// FusedMultimem models a MULTIMEM all-reduce as one kernel (copy-in,
	// barrier, ld_reduce into the output, barrier), as this simulator did
	// before it followed TensorRT-LLM's three kernels (multimem.go). It is
	// kept as the comparison that shows what the split changes.
	FusedMultimem bool

	w       *ranks.World
	shared  *ranks.Symmetric
	perCall map[string]*ranks.Symmetric
	// the one-shot reduce's sources, per workspace (every rank's are the
	// same: oneShot)
	reduceSrcs map[*ranks.Symmetric][]ranks.Src
	fifos      map[[2]int]*ranks.Fifo
	p2p        map[[2]int]*ranks.Fifo // point-to-point connections (sendrecv.go)
	// p2pConn is each point-to-point connection's setup handshake, by
	// (from, to) world rank, and which of its two sides have been built
	// (sendrecv.go).
	p2pConn map[[2]int]*p2pSetup
	chunks  int
	segLo   []int // ring segment bounds (ring)

	scratches map[scratchKey]*scratches // per-call private buffers (family.go)
	splits    map[string]*splitNames    // per split all-reduce call (multimem.go)
}

// NCCLSteps is the number of slots of one NCCL connection (NCCL_STEPS).
const NCCLSteps = 8

// NewComm returns a communicator over group in w. chunks is the value-chunk
// count of the tensors it reduces (the workspace is sized to match).
func NewComm(w *ranks.World, name string, group []int, ws Workspace, hw ranks.Profile, chunks int) *Comm {
	return &Comm{Name: name, Group: append([]int(nil), group...), Workspace: ws, HW: hw, w: w,
		perCall: map[string]*ranks.Symmetric{}, fifos: map[[2]int]*ranks.Fifo{}, chunks: chunks}
}

// Size is the number of ranks in the group.
func (c *Comm) Size() int { return len(c.Group) }

func (c *Comm) index(rank int) int {
	for i, r := range c.Group {
		if r == rank {
			return i
		}
	}
	return -1
}

// padSlots is the slot count of a new signal pad: PadSlots, at least one
// block's, and room for the largest multimem_all_reduce_ grid where that
// fits PyTorch's 512 slots (multimem.go).
func (c *Comm) padSlots() int {
	n := len(c.Group)
	s := max(n, c.PadSlots)
	if MultimemMaxBlocks*n <= PadSlots {
		s = max(s, MultimemMaxBlocks*n)
	}
	return s
}

// workspace returns the symmetric buffer a call uses.
func (c *Comm) workspace(call string) *ranks.Symmetric {
	if c.Workspace == PerCallWorkspace {
		s, ok := c.perCall[call]
		if !ok {
			s = c.w.AllocSymmetric(c.Name+".ws."+call, c.Group, 0, max(c.chunks, c.WorkspaceChunks), c.padSlots())
			c.perCall[call] = s
		}
		return s
	}
	if c.shared == nil {
		c.shared = c.w.AllocSymmetric(c.Name+".ws", c.Group, 0, max(c.chunks, c.WorkspaceChunks), c.padSlots())
	}
	if mutant.On(mutant.PadNotShared) { // the workspace shared, a pad per call
		s, ok := c.perCall[call]
		if !ok {
			s = &ranks.Symmetric{Name: c.shared.Name, Group: c.shared.Group, Bufs: c.shared.Bufs}
			for k, r := range c.Group {
				s.Pads = append(s.Pads, ranks.NewSignalPad(c.shared.Name+"/"+call, r, len(c.shared.Pads[k].Slots)))
			}
			c.perCall[call] = s
		}
		return s
	}
	return c.shared
}

func (c *Comm) fifo(from, to int) *ranks.Fifo {
	k := [2]int{from, to}
	f, ok := c.fifos[k]
	if !ok {
		f = c.newFifo(fmt.Sprintf("%s:%d→%d", c.Name, from, to), from, to)
		c.fifos[k] = f
	}
	return f
}

// AllReduce returns rank's kernel for the all-reduce call named call (the same
// name on every rank) of in into out with strategy s (already resolved).
func (c *Comm) AllReduce(rank int, call string, s Strategy, in, out *ranks.Buffer) (*ranks.KernelSpec, error) {
	i := c.index(rank)
	if i < 0 {
		return nil, fmt.Errorf("all-reduce %q: rank %d is not in communicator %q %v", call, rank, c.Name, c.Group)
	}
	if in.Chunks() != c.chunks || out.Chunks() != c.chunks {
		return nil, fmt.Errorf("all-reduce %q: tensors have %d/%d chunks, communicator %q expects %d", call, in.Chunks(), out.Chunks(), c.Name, c.chunks)
	}
	// One ring, one block (the model's NCCL uses one channel); a one-shot
	// kernel synchronizes block 0 only. Both spin on their peers.
	k := &ranks.KernelSpec{Name: call, Coll: call, Kind: "allreduce/" + string(s), GroupSize: len(c.Group),
		Sig: Call{Op: AllReduce, In: in}.Sig(), Blocks: 1, Spins: true}
	switch s {
	case NCCL:
		k.Gen = c.ring(i, in, out)
		c.order(k)
	case Multimem, P2POneShot:
		k.Gen = c.oneShot(i, call, s, in, out)
	case NCCLTree, MultimemTwoShot, P2PTwoShot:
		return c.Collective(rank, Call{Name: call, Op: AllReduce, Strategy: s, In: in, Out: out})
	default:
		return nil, fmt.Errorf("all-reduce %q: strategy %q is not concrete", call, s)
	}
	return k, nil
}

// barrier is PyTorch's sync_remote_blocks for one block: put a flag into slot
// blockIdx·ws + rank of every peer's pad, then wait for slot blockIdx·ws + peer
// of one's own from every peer (CUDASymmetricMemory-inl.h).
func (c *Comm) barrier(out []ranks.Instr, i int, ws *ranks.Symmetric, phase string) []ranks.Instr {
	n := len(c.Group)
	const block = 0
	for d := 1; d < n; d++ {
		p := (i + d) % n
		out = append(out, ranks.Instr{Op: ranks.OpPut, Phase: phase, Pad: ws.Pads[p], Slot: block*n + i, Dur: c.HW.SigLat / 4, Peer: c.Group[p]})
	}
	for d := 1; d < n; d++ {
		p := (i + d) % n
		out = append(out, ranks.Instr{Op: ranks.OpWait, Phase: phase, Pad: ws.Pads[i], Slot: block*n + p, Dur: c.HW.SigLat / 4, Peer: c.Group[p]})
	}
	return out
}

// oneShot: copy the input into this rank's copy of the workspace; barrier;
// reduce every rank's copy (multicast ld_reduce, or P2P loads of each peer's
// copy) into the output; barrier, so the workspace can be reused.
// Sources: torch symm_mem one_shot_all_reduce / multimem_one_shot_all_reduce
// (CUDASymmetricMemoryOps.cu); TensorRT-LLM SymmetricMemoryAllReduce.forward
// (buffer[:n].copy_(inp) before the kernel).
//
// Its 4n-2 micro-ops (2n without the exit barrier) are generated on demand
// (oneShotGen): a TP=8 × DP=128 world of 61 layers stored 125 k of these
// kernels, 3.8 KB each, half a gigabyte. oneShotList is the stored form,
// the generator's test oracle.
func (c *Comm) oneShot(i int, call string, s Strategy, in, out *ranks.Buffer) *oneShotGen {
	ws := c.workspace(call)
	n := len(c.Group)
	hw := c.HW
	g := &oneShotGen{n: n, i: i, chunks: c.chunks, group: c.Group, in: in, out: out, bufs: ws.Bufs, pads: ws.Pads,
		copyDur: hw.KStart + ranks.Bytes(in.Bytes, hw.HBM), sigDur: hw.SigLat / 4,
		phase: "ld_reduce", redDur: ranks.Bytes(in.Bytes, hw.NVLink) + ranks.Bytes(in.Bytes, hw.HBM),
		exit: !mutant.On(mutant.BarrierNoExit)}
	if s == P2POneShot {
		g.phase, g.redDur = "p2p-reduce", ranks.Bytes(in.Bytes*int64(n-1), hw.NVLink)+ranks.Bytes(in.Bytes, hw.HBM)
	}
	// Every rank of the call reduces the same sources: one list per
	// workspace, shared.
	if c.reduceSrcs == nil {
		c.reduceSrcs = map[*ranks.Symmetric][]ranks.Src{}
	}
	srcs, ok := c.reduceSrcs[ws]
	if !ok {
		srcs = make([]ranks.Src, n)
		for p := range n {
			srcs[p] = ranks.Src{Buf: ws.Bufs[p], Coef: 1}
		}
		c.reduceSrcs[ws] = srcs
	}
	g.shape(srcs)
	return g
}

// oneShotList is oneShot's micro-ops as a stored list, built the way the
// kernel was before it was generated: the oracle TestOneShotGenMatchesList
// compares the generator with.
func (c *Comm) oneShotList(i int, call string, s Strategy, in, out *ranks.Buffer) []ranks.Instr {
	ws := c.workspace(call)
	n := len(c.Group)
	C := c.chunks
	hw := c.HW
	prog := make([]ranks.Instr, 0, 2+4*(n-1)) // copy-in, 2 barriers, reduce
	prog = append(prog, ranks.Instr{Op: ranks.OpCompute, Phase: "copy-in", Dst: ws.Bufs[i], N: C,
		Srcs: []ranks.Src{{Buf: in, Coef: 1}}, Dur: hw.KStart + ranks.Bytes(in.Bytes, hw.HBM)})
	prog = c.barrier(prog, i, ws, "barrier-entry")
	srcs := make([]ranks.Src, n)
	for p := range n {
		srcs[p] = ranks.Src{Buf: ws.Bufs[p], Coef: 1}
	}
	phase, dur := "ld_reduce", ranks.Bytes(in.Bytes, hw.NVLink)+ranks.Bytes(in.Bytes, hw.HBM)
	if s == P2POneShot {
		phase, dur = "p2p-reduce", ranks.Bytes(in.Bytes*int64(n-1), hw.NVLink)+ranks.Bytes(in.Bytes, hw.HBM)
	}
	prog = append(prog, ranks.Instr{Op: ranks.OpCompute, Phase: phase, Dst: out, N: C, Srcs: srcs, Dur: dur})
	if mutant.On(mutant.BarrierNoExit) {
		return prog
	}
	prog = c.barrier(prog, i, ws, "barrier-exit")
	return prog
}

// oneShotGen generates rank i's one-shot all-reduce micro-ops: 0 copies
// the input into the workspace; 1 … n-1 put the entry barrier's flag into
// each peer's pad (peers i+1, i+2, … mod n), n … 2n-2 wait for each peer's
// flag in this rank's pad; 2n-1 reduces every rank's workspace copy into
// the output; then the exit barrier's n-1 puts and n-1 waits, the same way
// (barrier: sync_remote_blocks for block 0).
type oneShotGen struct {
	n, i, chunks    int
	group           []int // world ranks, shared by the communicator's kernels
	in, out         *ranks.Buffer
	bufs            []*ranks.Buffer    // the workspace's copies, per group index
	pads            []*ranks.SignalPad // the workspace's pads, per group index
	copyDur, sigDur sim.Time
	redDur          sim.Time
	phase           string // of the reduce: ld_reduce or p2p-reduce
	exit            bool   // the exit barrier is there (mutant.BarrierNoExit drops it)
	reduce          ranks.Instr
}

func (g *oneShotGen) shape(srcs []ranks.Src) {
	g.reduce = ranks.Instr{Op: ranks.OpCompute, Phase: g.phase, Dst: g.out, N: g.chunks, Srcs: srcs, Dur: g.redDur}
}

func (g *oneShotGen) Len() int {
	if g.exit {
		return 4*g.n - 2
	}
	return 2 * g.n
}

// Enumerable: the static passes read its micro-ops one by one (a few per
// peer), so they see exactly which pad sides and buffers each touches.
func (g *oneShotGen) Enumerable() {}

func (g *oneShotGen) At(pc int, in *ranks.Instr) *ranks.Instr {
	n := g.n
	switch {
	case pc == 0:
		*in = ranks.Instr{Op: ranks.OpCompute, Phase: "copy-in", Dst: g.bufs[g.i], N: g.chunks,
			Srcs: append(in.Srcs[:0], ranks.Src{Buf: g.in, Coef: 1}), Dur: g.copyDur}
		return in
	case pc == 2*n-1:
		return &g.reduce
	}
	phase, k := "barrier-entry", pc-1 // k: the step within the barrier, 0 … 2n-3
	if pc >= 2*n {
		phase, k = "barrier-exit", pc-2*n
	}
	if k < n-1 {
		p := (g.i + k + 1) % n
		*in = ranks.Instr{Op: ranks.OpPut, Phase: phase, Pad: g.pads[p], Slot: g.i, Dur: g.sigDur, Peer: g.group[p]}
		return in
	}
	p := (g.i + k - (n - 1) + 1) % n
	*in = ranks.Instr{Op: ranks.OpWait, Phase: phase, Pad: g.pads[g.i], Slot: p, Dur: g.sigDur, Peer: g.group[p]}
	return in
}

func (g *oneShotGen) Refs() ranks.Refs {
	bs := make([]*ranks.Buffer, 0, 2+len(g.bufs))
	bs = append(append(bs, g.in, g.out), g.bufs...)
	return ranks.Refs{Buffers: bs, Pads: g.pads}
}

func (g *oneShotGen) Rebind(m ranks.Rebinding) ranks.InstrGen {
	c := *g
	c.in, c.out = m.Buffer(g.in), m.Buffer(g.out)
	c.bufs = make([]*ranks.Buffer, len(g.bufs))
	srcs := make([]ranks.Src, len(g.bufs))
	for p, b := range g.bufs {
		c.bufs[p] = m.Buffer(b)
		srcs[p] = ranks.Src{Buf: c.bufs[p], Coef: 1}
	}
	c.pads = make([]*ranks.SignalPad, len(g.pads))
	for p, q := range g.pads {
		c.pads[p] = m.Pad(q)
	}
	c.shape(srcs)
	return &c
}

// ring is NCCL's ring all-reduce, the primitives of runRing (all_reduce.h)
// on the input and output buffers (there is no copy-in: the reduce-scatter
// reads the input where it is, and only complete segments reach the
// output): send one input segment to the next rank, n-1 fused
// receive-reduce-send steps (the last also stores the fully reduced
// segment, recvReduceCopySend), n-2 fused receive-copy-send steps, and a
// final receive, each through a bounded FIFO connection. Its 2n-1 micro-ops
// differ only in segment offsets, so they are generated on demand. The
// first carries the kernel's start latency.
func (c *Comm) ring(i int, in, out *ranks.Buffer) ranks.InstrGen {
	n := len(c.Group)
	hw := c.HW
	next, prev := (i+1)%n, (i-1+n)%n
	if len(c.segLo) != n+1 {
		c.segLo = make([]int, n+1) // segment s is chunks [segLo[s], segLo[s+1])
		for s := range c.segLo {
			c.segLo[s] = s * c.chunks / n
		}
	}
	g := &ringGen{n: n, i: i, chunks: c.chunks, in: in, out: out, segLo: c.segLo,
		peerNext: c.Group[next], peerPrev: c.Group[prev],
		copyDur:  hw.KStart + ranks.Bytes(in.Bytes, hw.HBM),
		startDur: hw.KStart,
		stepDur:  hw.StepLat + ranks.Bytes(in.Bytes/int64(n), hw.NVLink)}
	if c.chunks%n == 0 {
		g.per = c.chunks / n
	}
	if n > 1 {
		g.sendF = c.fifo(c.Group[i], c.Group[next])
		g.recvF = c.fifo(c.Group[prev], c.Group[i])
	}
	g.shape()
	return g
}

// ringGen generates rank i's ring all-reduce micro-ops.
type ringGen struct {
	n, i, chunks       int
	in, out            *ranks.Buffer
	sendF, recvF       *ranks.Fifo
	peerNext, peerPrev int
	copyDur, stepDur   sim.Time // a one-rank copy; a ring step
	startDur           sim.Time // the kernel's start latency
	// The shapes of the two steps that make up nearly all of the ring
	// (recvReduceSend and recvCopySend): At hands them out with only the
	// segment changed (see ranks.InstrGen.At).
	reduce, gather ranks.Instr
	reduceSrc      [1]ranks.Src
	segLo          []int // shared by the communicator's ranks
	per            int   // chunks per segment when they divide evenly, else 0
}

// Ring describes the micro-ops At hands out, so that the world may run
// the whole ring as one computation when nothing else can touch its memory
// and connections (ranks/coarse.go).
func (g *ringGen) Ring() ranks.RingShape {
	return ranks.RingShape{Pos: g.i, N: g.n, In: g.in, Out: g.out, Send: g.sendF, Recv: g.recvF,
		SegLo: g.segLo, StartDur: g.startDur, StepDur: g.stepDur}
}

func (g *ringGen) Refs() ranks.Refs {
	r := ranks.Refs{Buffers: []*ranks.Buffer{g.in, g.out}}
	if g.n > 1 {
		r.Fifos = []*ranks.Fifo{g.sendF, g.recvF}
	}
	return r
}

func (g *ringGen) Rebind(m ranks.Rebinding) ranks.InstrGen {
	c := *g
	c.in, c.out = m.Buffer(g.in), m.Buffer(g.out)
	if g.n > 1 {
		c.sendF, c.recvF = m.Fifo(g.sendF), m.Fifo(g.recvF)
	}
	c.shape()
	return &c
}

// shape sets the recvReduceSend and recvCopySend shapes from g's buffers
// and connections.
func (g *ringGen) shape() {
	g.reduceSrc = [1]ranks.Src{{Buf: g.in, Coef: 1}}
	g.reduce = ranks.Instr{Op: ranks.OpRecvSend, Phase: "reduce-scatter", Fifo: g.recvF, Fwd: g.sendF,
		Srcs: g.reduceSrc[:], Dur: g.stepDur, Peer: g.peerPrev}
	g.gather = ranks.Instr{Op: ranks.OpRecvSend, Phase: "all-gather", Fifo: g.recvF, Fwd: g.sendF, Dst: g.out,
		Dur: g.stepDur, Peer: g.peerPrev}
}

func (g *ringGen) Len() int {
	if g.n == 1 {
		return 1
	}
	return 2*g.n - 1
}

// seg is ring segment s's chunk range, for -n <= s < 2n.
func (g *ringGen) seg(s int) (lo, cnt int) {
	if s < 0 {
		s += g.n
	} else if s >= g.n {
		s -= g.n
	}
	if g.per > 0 {
		return s * g.per, g.per // no table lookup: at 512 ranks its lines fall out of cache
	}
	return g.segLo[s], g.segLo[s+1] - g.segLo[s]
}

// At is micro-op pc, NCCL's runRing for rank i of n: 0 sends input segment
// i (send); 1 … n-2 receive segment i-pc, add the input's and forward the
// sum, keeping nothing (recvReduceSend); n-1 does the same for segment i+1
// and stores the fully reduced segment in the output (recvReduceCopySend);
// n … 2n-3 receive the reduced segment i-(pc-n), store it and forward it
// (recvCopySend); 2n-2 receives the last one (recv). With one rank the
// all-reduce is a copy.
func (g *ringGen) At(pc int, in *ranks.Instr) *ranks.Instr {
	n := g.n
	switch {
	case n == 1:
		*in = ranks.Instr{Op: ranks.OpCompute, Phase: "copy", Dst: g.out, N: g.chunks, Srcs: append(in.Srcs[:0], ranks.Src{Buf: g.in, Coef: 1}), Dur: g.copyDur}
		return in
	case pc == 0:
		lo, cnt := g.seg(g.i)
		*in = ranks.Instr{Op: ranks.OpSend, Phase: "reduce-scatter", Fifo: g.sendF, N: cnt, Srcs: append(in.Srcs[:0], ranks.Src{Buf: g.in, Lo: lo, Coef: 1}),
			Dur: g.startDur, Peer: g.peerNext}
		return in
	case pc < n:
		lo, cnt := g.seg(g.i - pc)
		r := &g.reduce
		r.DstLo, r.N, g.reduceSrc[0].Lo = lo, cnt, lo
		if pc < n-1 {
			return r
		}
		// recvReduceCopySend: the same step, storing the complete segment.
		copyShape(in, r).Dst = g.out
		return in
	default:
		lo, cnt := g.seg(g.i - (pc - n))
		r := &g.gather
		r.DstLo, r.N = lo, cnt
		if pc < 2*n-2 {
			return r
		}
		// recv: the last reduced segment, forwarded no further.
		copyShape(in, r)
		in.Op, in.Fwd = ranks.OpRecv, nil
		return in
	}
}

// copyShape sets *in to shape r, keeping in's own Srcs array (r's belongs
// to the generator), and returns in.
func copyShape(in, r *ranks.Instr) *ranks.Instr {
	srcs := append(in.Srcs[:0], r.Srcs...)
	*in = *r
	in.Srcs = srcs
	return in
}
