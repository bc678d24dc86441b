package ranks

import (
	"fmt"

	"github.com/collsim/collsim/sim"
)

// epoch is one access: lane at its clock, by task. Clocks start at 1, so
// the zero epoch is no access (and happens before everything): fresh
// memory's shadows need no initialising.
type epoch struct {
	lane  int32
	clock uint32
	task  int32
}

var noEpoch epoch

func (e epoch) none() bool { return e.clock == 0 }

// shadow is one chunk's race-detection state: the last write and the reads
// since, at most one per lane. The first read is kept inline (most chunks
// have one reader between writes), the others in more.
type shadow struct {
	w    epoch
	r0   epoch // noEpoch: no read since the write
	more int32 // 1 + the index of further readers' epochs in World.mores (0: none)
}

// Buffer is a tensor on one rank, or one rank's copy of a symmetric buffer.
// It has a byte size (for cost and strategy choice) and a few value chunks
// (for values and race tracking).
type Buffer struct {
	// What every access reads comes first: the first 64 bytes, one cache
	// line (a Buffer is 128 bytes, whose allocations start lines).
	Vals    []Value
	id      int32
	private bool // one lane at most touches its storage: no race checks (sharedLanes)
	Output  bool // compared against the reference
	inited  bool // set by World.Init: a candidate per-replay input (replays.go)
	polled  bool // a flag wait has watched it: every write wakes its waiters (flags.go)
	// lastW[c] is 1 + the task that last wrote chunk c of a private buffer
	// that is not an allocator block's (its shadows stay untouched: four
	// bytes a chunk keep consecutive chunks on one cache line).
	lastW []int32
	// Block is non-nil for a tensor from a caching [Allocator]. For a
	// tensor whose block the allocator picks at run time (dynalloc.go) it
	// is a stand-in with no allocator block until the malloc.
	Block *Block

	sh    []shadow
	Name  string
	Rank  int
	Bytes int64
	Sym   *Symmetric // non-nil for a copy of a symmetric buffer
}

// aliasRef is one chunk of another buffer (by id, resolved in the world
// that runs: World.bufs).
type aliasRef struct {
	buf, chunk int32
}

// storage identifies the memory b's chunks live in: its caching-allocator
// segment (whose tensors may overlap one another) or the buffer itself.
func (b *Buffer) storage() any {
	if b.Block != nil {
		if b.Block.dyn != nil {
			return b.Block.dyn
		}
		return b.Block.Seg
	}
	return b
}

// Chunks is the number of value chunks.
func (b *Buffer) Chunks() int { return len(b.Vals) }

// ChunkBytes is the byte size covered by one value chunk.
func (b *Buffer) ChunkBytes() int64 { return b.Bytes / int64(max(1, len(b.Vals))) }

// Describe names the buffer for reports ("rank 3 symmetric workspace ar_ws").
func (b *Buffer) Describe() string {
	if b.Sym != nil {
		return fmt.Sprintf("rank %d's copy of symmetric buffer %q", b.Rank, b.Name)
	}
	if b.Block != nil && b.Block.Block != nil {
		return fmt.Sprintf("rank %d tensor %q (%s)", b.Rank, b.Name, b.Block.Describe())
	}
	return fmt.Sprintf("rank %d tensor %q", b.Rank, b.Name)
}

// Symmetric is a buffer that exists on every rank of a group at the same
// offset, with a signal pad per rank. Kernels read or write a peer's copy
// (P2P), ld_reduce across copies (multicast), or store to all.
type Symmetric struct {
	Name  string
	Group []int     // world ranks, in group order
	Bufs  []*Buffer // Bufs[i] lives on Group[i]
	Pads  []*SignalPad
}

// Index returns the group position of world rank r, or -1.
func (s *Symmetric) Index(r int) int {
	for i, g := range s.Group {
		if g == r {
			return i
		}
	}
	return -1
}

// SignalPad is one rank's array of signal slots (uint32 flags), with the
// PyTorch protocol: put = CAS 0→1 on the peer's slot, spinning while it is
// still set; wait = CAS 1→0 on one's own slot. Each slot also carries, as ghost
// data, the collective instance that set it.
type SignalPad struct {
	Name  string
	Rank  int
	Slots []sigSlot

	id int32 // 1 + index among a template's pads (0: none; see World.padOf)

	sides [2]padSide // its put and wait sides as locations (clock.go), boxed without allocating
}

type sigSlot struct {
	val     uint32
	inst    Instance
	by      int32 // task that set it
	vc      *VC   // release clock of the put
	sig     string
	waiters []int32
	// Race-detection state (exec.go, checkPut/checkWait): the last put and
	// the last wait that succeeded on the slot.
	put, wait epoch
}

// Instance identifies one dynamic collective call: which call (interned name)
// in which graph replay. Ghost data compares instances across ranks.
type Instance struct {
	Call   int32
	Replay int32
}

// Fifo is an NCCL-style connection from one rank to a peer: a bounded queue of
// messages (NCCL_STEPS slots), each tagged with the instance that sent it.
type Fifo struct {
	Name     string
	Src, Dst int
	Cap      int
	q        []msg // a ring: q[head], q[head+1], … (mod len) are in flight, oldest first
	head, n  int
	waiters  []int32
	// Race-detection state (exec.go, checkFifo): the last send and the last
	// receive, and how many of each so far (which slot the next one uses).
	send, recv    epoch
	nSent, nRecvd int

	id int32 // 1 + index among a template's FIFOs (0: none; see World.fifoOf)

	sides [2]fifoSide // its send and receive sides as locations (clock.go)

	// Stepped makes the connection's state explicit, as NCCL and RCCL keep
	// it in device memory (stepconn.go): a step counter at each end, read
	// by a kernel when it starts using the connection and written back when
	// it completes, slots indexed by step, and the tail and head the two
	// ends store. A queue is that connection when one kernel at a time uses
	// each end; two kernels at once do not share a queue, they race on the
	// counters. Set before the first send.
	Stepped bool
	stepped
}

func (f *Fifo) inFlight() int { return f.n }

// push appends m. The ring has Cap slots (a send spins while they are all
// taken), so it is allocated once and never grows in a run.
func (f *Fifo) push(m msg) { *f.slot() = m }

// slot appends a message and returns its slot for the caller to fill in
// whole (it may hold a stale message until then; see pop).
func (f *Fifo) slot() *msg {
	if f.n == len(f.q) {
		q := make([]msg, max(2*len(f.q), f.Cap, 1))
		for i := range f.n {
			q[i] = f.q[(f.head+i)%len(f.q)]
		}
		f.q, f.head = q, 0
	}
	i := f.head + f.n
	if i >= len(f.q) {
		i -= len(f.q)
	}
	f.n++
	return &f.q[i]
}

// pop removes the oldest message and returns its slot, which stays intact
// until the next slot call on f (the ring keeps at most Cap stale messages).
func (f *Fifo) pop() *msg {
	m := &f.q[f.head]
	f.n--
	if f.head++; f.head == len(f.q) {
		f.head = 0
	}
	return m
}

type msg struct {
	inst Instance
	by   int32
	one  Value    // the payload when it is one chunk (vals is nil then)
	vals *[]Value // the payload of several chunks (a pointer: a message is 64 bytes, one cache line)
	vc   *VC
	sig  string
}

// val returns chunk i of the payload.
func (m *msg) val(i int) Value {
	if m.vals == nil {
		if i == 0 {
			return m.one
		}
		return Value{}
	}
	if vs := *m.vals; i < len(vs) {
		return vs[i]
	}
	return Value{}
}

// payload gives m room for n chunks: one is inline, more go in vals.
func (m *msg) payload(n int) {
	if n != 1 {
		vs := make([]Value, n)
		m.vals = &vs
	}
}

// set stores chunk i of the payload.
func (m *msg) set(i int, v Value) {
	if m.vals == nil {
		m.one = v
	} else {
		(*m.vals)[i] = v
	}
}

// Src is one operand of a micro-op: Coef × Buf[Lo : Lo+n].
type Src struct {
	Buf  *Buffer
	Lo   int
	Coef int64
}

// InstrOp is the kind of a device micro-op.
type InstrOp uint8

const (
	// OpCompute: Dst[DstLo+i] = Σ Coef·Src[Lo+i] for i < N. With Fresh the
	// result is a new source (a computation); otherwise provenance propagates
	// (a copy or a reduction).
	OpCompute InstrOp = iota
	// OpPut: CAS 0→1 on Pad.Slots[Slot] (Pad is the peer's); spins while set.
	OpPut
	// OpWait: CAS 1→0 on Pad.Slots[Slot] (Pad is one's own); spins while clear.
	OpWait
	// OpSend: push Srcs (N chunks) into Fifo; spins while the FIFO is full.
	OpSend
	// OpRecv: pop a message from Fifo; Dst[DstLo+i] = msg[i] + Σ Srcs[i].
	OpRecv
	// OpDelay only takes time.
	OpDelay
	// OpRecvSend is NCCL's fused ring step (recvReduceSend,
	// recvReduceCopySend, recvCopySend): pop a message from Fifo; compute
	// msg[i] + Σ Srcs[i]; store it in Dst[DstLo+i] unless Dst is nil
	// (recvReduceSend keeps nothing); push the N results into Fwd. It spins
	// while Fifo is empty or Fwd is full. The forwarded values come from
	// registers: Dst is written, not read back.
	OpRecvSend
	// OpFlagPut: an atomic store of the value Slot (or of Srcs[0]'s N
	// chunks) into Dst[DstLo : DstLo+N], with release unless Fresh
	// (flags.go).
	OpFlagPut
	// OpFlagWait: spin until every chunk of Dst[DstLo : DstLo+N] compares
	// true with Slot under Cmp; acquire the stores it observed (flags.go).
	OpFlagWait
	// OpFault: an access to Dst, a buffer the rank never mapped: an
	// illegal memory access (KindInvalidAccess; Phase says why).
	OpFault
	// OpIndex loads the kernel's slot index from device memory: a plain
	// read of chunk Srcs[0].Lo of Srcs[0].Buf (a counter), whose value
	// modulo Slot shifts the regions of the kernel's later micro-ops that
	// carry an Ix (slotindex.go). N is 1.
	OpIndex
)

var instrOpNames = [...]string{"compute", "put", "wait", "send", "recv", "delay", "recv+send", "flag-put", "flag-wait", "fault", "index"}

func (o InstrOp) String() string { return instrOpNames[o] }

// Instr is one device micro-op of a kernel. Its effects happen when it
// executes; the kernel's next micro-op runs Dur later.
type Instr struct {
	Op InstrOp
	// Cmp is a flag wait's comparison (flags.go); it fills padding after Op.
	Cmp   FlagCmp
	Phase string // label for timelines ("copy-in", "barrier", "ld_reduce")
	Dur   sim.Time
	Dst   *Buffer
	DstLo int
	N     int
	Srcs  []Src
	Fresh bool
	Pad   *SignalPad
	Slot  int // a pad slot; a flag op's value
	Fifo  *Fifo
	Fwd   *Fifo // where an OpRecvSend forwards its results
	// Peer is the world rank a put or wait is addressed to or expects, for
	// hang analysis (-1 when unknown).
	Peer int
	// Ix, when set, moves the micro-op's regions by the slot index its
	// kernel's OpIndex loaded (slotindex.go).
	Ix *IxShift
}
