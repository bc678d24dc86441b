package ranks

import (
	"fmt"
	"slices"

	"github.com/collsim/collsim/mutant"
	"github.com/collsim/collsim/sim"
)

// HostOpKind is what the host thread does at one step of its program.
type HostOpKind uint8

const (
	// Launch enqueues Kernel on Stream.
	Launch HostOpKind = iota
	// Record records Event on Stream (cudaEventRecord): the event then
	// covers everything issued to Stream before it. Re-recording overwrites.
	Record
	// Wait makes Stream wait for Event (cudaStreamWaitEvent). It binds to the
	// most recent Record of Event issued before it, at issue time; a wait on
	// an event never recorded is a no-op, as in CUDA.
	Wait
	// Sync blocks the host thread until everything issued to Stream before
	// it has finished (cudaStreamSynchronize; a tensor's .item()). With
	// Stream -1 it waits for every stream (cudaDeviceSynchronize). It cannot
	// be captured. See hostsync.go.
	Sync
)

func (k HostOpKind) String() string {
	switch k {
	case Launch:
		return "launch"
	case Record:
		return "record"
	case Wait:
		return "wait"
	case Sync:
		return "sync"
	}
	return "hostop?"
}

// KernelSpec is a kernel: a name and its per-rank micro-program.
type KernelSpec struct {
	Name   string
	Instrs []Instr
	// Gen, when set, generates the instructions on demand instead of Instrs
	// listing them (leave Instrs nil). A 512-rank ring all-reduce has 2,045
	// micro-ops per rank that differ only in segment offsets; generating
	// them keeps a large world from holding a million instruction structs.
	// Read a kernel's instructions through [KernelSpec.Len] and
	// [KernelSpec.At], or [KernelSpec.Expand].
	Gen InstrGen
	// Coll is set for a collective call: the instance name that ghost data
	// carries ("L0.shared_ar"). Calls with the same name on different ranks
	// are the same collective.
	Coll string
	// OrderKey, when set, orders this kernel after the previous kernel with the
	// same key on this rank in host issue order, whatever the stream — NCCL's
	// per-communicator strong stream (src/enqueue.cc ncclLaunchPrepare).
	OrderKey string
	// OrderLaunch makes the OrderKey edge wait for the previous kernel of
	// the key to start, not to complete: this kernel becomes ready no
	// earlier than that one did (it inherits that kernel's dependencies).
	// NCCL_LAUNCH_ORDER_IMPLICIT's launch mode, CUDA ≥ 12.3: the next
	// launch waits on the previous kernel's launch-completion event
	// (NCCL src/enqueue.cc ncclLaunchFinish and ncclLaunchKernel,
	// CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT). A front end sets it
	// only where kernels of different keys may be resident together;
	// otherwise starting is completing's worst case.
	OrderLaunch bool
	// OrderPerContext limits OrderKey to one capture context: the eager
	// launches are one, each replay of a graph captured apart another, and
	// no edge joins two (PyTorch's GroupStreamGuard keeps one frontier per
	// capture context, and a replay runs none of its host code; RCCL's
	// graph path orders a communicator's kernels within a graph and not
	// across graphs, rocm/rccl #2179). A front end that issues a replay's
	// nodes itself gives them a key of their own
	// (scenarios/format/spec_graphs.go).
	OrderPerContext bool
	// StepConns is set for a kernel whose connections may be stepped
	// ([Fifo.Stepped]): after its first micro-op it has loaded the step
	// counter of every end of a stepped connection it uses on its rank, as
	// NCCL's primitives do when they set up (stepconn.go).
	StepConns bool
	// Kind is a free-form label for reports ("gemm", "allreduce/multimem").
	Kind string
	// Sig is the call's signature as peers see it (op and count); ghost
	// data carries it with the instance, so calls that differ at the same
	// sequence number are a mismatch even when their names agree.
	Sig string
	// GroupSize is the size of the collective's communicator (0: unknown).
	// A collective kernel with GroupSize > 1 that completes without touching
	// a peer (no signal, FIFO message or peer memory access) is reported as
	// dropped.
	GroupSize int
	// Exclusive, when set, keeps this kernel from running on its rank while
	// another kernel with the same key runs there, whatever the streams:
	// CUDA does not guarantee that kernels of different streams are
	// co-resident, so the model takes the worst case.
	Exclusive string
	// Blocks is the number of thread blocks the kernel's grid needs resident
	// at once (NCCL: one per channel; a symmetric one-shot or two-shot
	// kernel: its grid; a user kernel: the file's blocks: key). 0 means it
	// fits anywhere: the kernel never waits for SMs (see residency.go).
	Blocks int
	// Spins is set for a kernel that waits on its peers while holding its
	// SMs (a collective polling a flag or FIFO): it keeps its blocks
	// resident until it completes, so a kernel queued behind it for SMs
	// waits for its peers too.
	Spins bool
	// Loads, when set, gives each micro-op's load on its GPU (share.go): the
	// SMs its grid fills and the bytes it moves alone; a zero Load takes no
	// share. Nil derives one from Kind and the micro-op's duration.
	Loads []Load
}

// InstrGen generates a kernel's instructions.
type InstrGen interface {
	// Len is the number of instructions.
	Len() int
	// At returns instruction pc (0 <= pc < Len): either scratch, set to it
	// (At may reuse the slices already in *scratch, so the caller owns
	// scratch and must not share it), or one of the generator's own, which
	// the caller must not modify and which is valid until the generator's
	// next At. A generator that keeps its few instruction shapes and
	// changes only their offsets saves a world writing every field of
	// every micro-op into its scratch.
	At(pc int, scratch *Instr) *Instr
	// Refs lists every buffer, FIFO and signal pad the instructions use.
	Refs() Refs
	// Rebind returns a copy of the generator whose instructions use the
	// buffers, FIFOs and pads m gives for its own: the generator of a copied
	// world ([Template]).
	Rebind(m Rebinding) InstrGen
}

// Rebinder is an [InstrGen] that can rebind into a generator its Rebind
// made earlier (a retired folded task's), reusing that one's storage
// instead of allocating: RebindInto(m, old) is Rebind(m), in old when it
// can be. The caller must hold no other reference to old.
type Rebinder interface {
	RebindInto(m Rebinding, old InstrGen) InstrGen
}

// Enumerable marks an [InstrGen] whose micro-ops are few enough for the
// static passes (which lanes share memory, which tensors a replay writes)
// to generate one by one: they then see exactly which buffer each micro-op
// reads or writes and which side of a pad it touches, as for a stored
// kernel, instead of the over-approximation of [InstrGen.Refs] (every
// buffer written, both sides of every pad). A one-shot all-reduce is a few
// micro-ops per peer; a ring's 2n-1 per rank, n² in all, are not listed.
type Enumerable interface {
	InstrGen
	Enumerable()
}

// listed calls f with each of k's micro-ops, stored or generated (into
// scratch, the caller's, reused for every kernel of a pass), and reports
// whether it could: false for a generator that is not [Enumerable], whose
// [InstrGen.Refs] the caller reads instead. f must not keep the micro-op.
func (k *KernelSpec) listed(scratch *Instr, f func(in *Instr)) bool {
	if k.Gen == nil {
		for i := range k.Instrs {
			f(&k.Instrs[i])
		}
		return true
	}
	if _, ok := k.Gen.(Enumerable); !ok {
		return false
	}
	for pc := range k.Gen.Len() {
		f(k.Gen.At(pc, scratch))
	}
	return true
}

// Refs are the memory and connections a generated kernel uses.
type Refs struct {
	Buffers []*Buffer
	Fifos   []*Fifo
	Pads    []*SignalPad
}

// Rebinding maps a world's buffers, FIFOs and pads to another world's.
type Rebinding struct {
	Buffer func(*Buffer) *Buffer
	Fifo   func(*Fifo) *Fifo
	Pad    func(*SignalPad) *SignalPad
}

// Len is the number of instructions of k.
func (k *KernelSpec) Len() int {
	if k.Gen != nil {
		return k.Gen.Len()
	}
	return len(k.Instrs)
}

// At returns instruction pc of k: a pointer into Instrs, or scratch filled
// in by the generator.
func (k *KernelSpec) At(pc int, scratch *Instr) *Instr {
	if k.Gen != nil {
		return k.Gen.At(pc, scratch)
	}
	return &k.Instrs[pc]
}

// own returns an instruction the caller may keep: in, or a copy of it
// with its own sources when it is a generator's (see [InstrGen.At]).
func own(in, scratch *Instr) *Instr {
	if in != scratch {
		*scratch = *in
		scratch.Srcs = append([]Src(nil), in.Srcs...)
	}
	return scratch
}

// Expand returns k's instructions as a list (generated ones are copied out).
func (k *KernelSpec) Expand() []Instr {
	if k.Gen == nil {
		return k.Instrs
	}
	out := make([]Instr, k.Gen.Len())
	for i := range out {
		own(k.Gen.At(i, &out[i]), &out[i])
	}
	return out
}

// HostOp is one step of a rank's host program.
type HostOp struct {
	Kind   HostOpKind
	Stream int
	Event  int
	Kernel *KernelSpec
	// Host, when positive, is the host time between the previous op's issue
	// (or the return of the sync before it) and this op's issue, in place of
	// the profile's launch or event cost: the gap a profiler trace recorded
	// (importer/). Eager mode only; a graph replay has no host gaps.
	Host sim.Time
	// GraphNode marks an op of a replayed graph that a program issues
	// itself (the program form's replay): a kernel node starts
	// Config.GraphGap after the node it depends on, as in graph mode.
	GraphNode bool
	// Mem lists the calls into the rank's caching allocator the host makes
	// at run time just before issuing this op (eager mode; dynalloc.go).
	Mem []MemCall
	// FreeEvent marks a Record that a free with record_stream uses made
	// (insert_events): a malloc queries whether it is complete.
	FreeEvent bool

	fo *foldedOp // a folded rank's copy of an op: where it lives, to be reused (fold.go)
}

// Program is one rank's host program: streams (index 0 is the stream the
// program starts on, the capture origin in graph mode), events, and the ops in
// host issue order.
type Program struct {
	Streams []string
	Events  []string
	Ops     []HostOp

	fold *fold // a folded rank's renaming of its proto's memory (fold.go)
}

// Mode is how a program is executed.
type Mode uint8

const (
	// Eager: the host issues every op, paying a launch cost for each.
	Eager Mode = iota
	// Graph: the program is captured once into a CUDA graph (stream order and
	// event edges become a DAG) and the graph is replayed; a node starts as
	// soon as its predecessors finish, and replays run back to back.
	Graph
)

func (m Mode) String() string {
	if m == Graph {
		return "graph"
	}
	return "eager"
}

// node is one op of a lowered program: what the host issues, with the
// dependencies stream order, events and order keys give it.
type node struct {
	op     int // index into Program.Ops
	stream int
	deps   []int32
}

// CaptureError is a program that cannot be captured into a CUDA graph.
type CaptureError struct {
	Rank int
	Msg  string
}

func (e *CaptureError) Error() string { return fmt.Sprintf("rank %d: capture: %s", e.Rank, e.Msg) }

// lower turns the host program into a DAG of nodes, applying CUDA's issue-time
// rules: stream order, event binding to the most recent record, order keys.
// With capture it first applies the capture rules ([CheckCapture]).
func lower(rank int, p *Program, capture bool) ([]node, error) {
	if capture {
		if v := CheckCapture(p); v != nil {
			return nil, captureError(rank, p, v)
		}
	}
	nodes := make([]node, 0, len(p.Ops))
	tail := make([]int32, len(p.Streams)) // last node per stream
	for i := range tail {
		tail[i] = -1
	}
	lastRecord := make([]int32, len(p.Events))
	for i := range lastRecord {
		lastRecord[i] = -1
	}
	orderTail := map[string]int32{}
	lastSync := int32(-1) // ops issued after a host sync are ordered after it
	for i, op := range p.Ops {
		if op.Kind == Sync {
			id, err := lowerSync(rank, p, i, tail, lastSync, &nodes)
			if err != nil {
				return nil, err
			}
			lastSync = id
			continue
		}
		if op.Stream < 0 || op.Stream >= len(p.Streams) {
			return nil, fmt.Errorf("rank %d op %d: stream %d out of range", rank, i, op.Stream)
		}
		if (op.Kind == Record || op.Kind == Wait) && (op.Event < 0 || op.Event >= len(p.Events)) {
			return nil, fmt.Errorf("rank %d op %d: event %d out of range", rank, i, op.Event)
		}
		n := node{op: i, stream: op.Stream}
		if lastSync >= 0 {
			n.deps = append(n.deps, lastSync)
		}
		if t := tail[op.Stream]; t >= 0 {
			n.deps = append(n.deps, t)
		}
		switch op.Kind {
		case Wait:
			if r := lastRecord[op.Event]; r >= 0 {
				n.deps = append(n.deps, r)
			}
		case Launch:
			if k := op.Kernel.OrderKey; k != "" {
				if t, ok := orderTail[k]; ok {
					if op.Kernel.OrderLaunch {
						for _, d := range nodes[t].deps {
							if !slices.Contains(n.deps, d) {
								n.deps = append(n.deps, d)
							}
						}
					} else {
						n.deps = append(n.deps, t)
					}
				}
				orderTail[k] = int32(len(nodes))
			}
		}
		id := int32(len(nodes))
		nodes = append(nodes, n)
		tail[op.Stream] = id
		if op.Kind == Record && (lastRecord[op.Event] < 0 || !mutant.On(mutant.EventWaitFirstRecord)) {
			lastRecord[op.Event] = id
		}
	}
	return nodes, nil
}
