package collectives

import (
	"fmt"
	"unique"

	"github.com/collsim/collsim/mutant"
	"github.com/collsim/collsim/ranks"
)

// Op is a collective operation.
type Op string

// The collective family. Shapes are in value chunks; n is the communicator
// size and B a per-rank block:
//
//	all-reduce      in B,   out B   out = Σ_r in_r
//	all-gather      in B,   out n·B out[j·B:] = in_j
//	reduce-scatter  in n·B, out B   out_i = Σ_r in_r[i·B:]
//	all-to-all      in n·B, out n·B out_i[j·B:] = in_j[i·B:] (all_to_all_single)
//	broadcast       in B,   out B   out = in_root
const (
	AllReduce     Op = "allreduce"
	AllGather     Op = "allgather"
	ReduceScatter Op = "reducescatter"
	AllToAll      Op = "alltoall"
	Broadcast     Op = "broadcast"
)

// Ops lists the collective family in a fixed order.
var Ops = []Op{AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast}

// More concrete strategies besides [NCCL] (ring), [Multimem] and [P2POneShot].
const (
	// NCCLTree is NCCL's tree all-reduce: reduce up a binary tree, broadcast
	// down. NCCL implements the tree only for all-reduce (src/graph/tuning.cc
	// gives every other collective ring, NVLS or CollNet only); NCCL uses a
	// double binary tree over nodes, modelled here as one binary tree of ranks.
	NCCLTree Strategy = "nccl-tree"
	// MultimemTwoShot is the symmetric-memory two-shot all-reduce with
	// multicast: each rank reduces its slice with multimem.ld_reduce and
	// stores it to every rank with multimem.st (torch
	// multimem_all_reduce_, CUDASymmetricMemoryOps.cu).
	MultimemTwoShot Strategy = "multimem-twoshot"
	// P2PTwoShot is the two-shot all-reduce without multicast: reduce one's
	// slice from every peer's copy, store it into every peer's copy (torch
	// two_shot_all_reduce_).
	P2PTwoShot Strategy = "p2p-twoshot"
)

// Strategies lists every concrete strategy in a fixed order.
var Strategies = []Strategy{NCCL, NCCLTree, Multimem, P2POneShot, MultimemTwoShot, P2PTwoShot}

// Supports reports whether strategy s implements op. NCCL rings implement
// every op; the tree only all-reduce; multicast cannot express all-to-all
// (every rank sends different data to every peer); two-shot is an
// all-reduce algorithm (reduce-scatter then all-gather).
func Supports(op Op, s Strategy) bool {
	switch s {
	case NCCL, P2POneShot:
		return true
	case Multimem:
		return op != AllToAll
	case NCCLTree, MultimemTwoShot, P2PTwoShot:
		return op == AllReduce
	}
	return false
}

// ParseOp parses a collective name.
func ParseOp(s string) (Op, error) {
	for _, o := range Ops {
		if string(o) == s {
			return o, nil
		}
	}
	return "", fmt.Errorf("unknown collective %q (want allreduce, allgather, reducescatter, alltoall or broadcast)", s)
}

// Call is one rank's side of one collective call.
type Call struct {
	// Name is the instance name, the same on every rank: ghost data carries
	// it, so consuming another call's data is a mismatch.
	Name     string
	Op       Op
	Strategy Strategy // concrete (see [Resolve])
	In, Out  *ranks.Buffer
	// Root is the group index of the broadcast root.
	Root int
	// Blocks is the grid size of a symmetric-memory kernel (0 means 1):
	// block b uses signal-pad slots b·n + rank (sync_remote_blocks in
	// torch's CUDASymmetricMemory-inl.h), so two kernels with different grid
	// sizes on one pad leave slots unpaired.
	Blocks int
}

// Sig is the call's signature as NCCL's peers would see it: op and count.
// Ghost data carries it so that calls that differ at the same sequence
// number are reported as a mismatch (NCCL usage/collectives.rst: every
// rank must call with the same count and datatype).
//
// Equal signatures share one string (unique.Make), so the check a receive
// or a wait makes on every message is a pointer comparison.
func (c Call) Sig() string {
	return unique.Make(fmt.Sprintf("%s count=%dB", c.Op, c.In.Bytes)).Value()
}

// Collective returns rank's kernel for call. Every algorithm only moves and
// sums data through the memory model; nothing here decides an outcome.
func (c *Comm) Collective(rank int, call Call) (*ranks.KernelSpec, error) {
	i := c.index(rank)
	if i < 0 {
		return nil, fmt.Errorf("%s %q: rank %d is not in communicator %q %v", call.Op, call.Name, rank, c.Name, c.Group)
	}
	if call.In == nil || call.Out == nil {
		return nil, fmt.Errorf("%s %q: missing input or output tensor", call.Op, call.Name)
	}
	n := len(c.Group)
	ci, co := call.In.Chunks(), call.Out.Chunks()
	switch call.Op {
	case AllReduce, Broadcast:
		if ci != co {
			return nil, fmt.Errorf("%s %q: input has %d chunks, output %d; want equal", call.Op, call.Name, ci, co)
		}
	case AllGather:
		if co != n*ci {
			return nil, fmt.Errorf("all-gather %q: output has %d chunks; want %d (group size %d × input %d)", call.Name, co, n*ci, n, ci)
		}
	case ReduceScatter:
		if ci != n*co {
			return nil, fmt.Errorf("reduce-scatter %q: input has %d chunks; want %d (group size %d × output %d)", call.Name, ci, n*co, n, co)
		}
	case AllToAll:
		if ci != co || ci%n != 0 {
			return nil, fmt.Errorf("all-to-all %q: input %d and output %d chunks; want equal and divisible by group size %d", call.Name, ci, co, n)
		}
	default:
		return nil, fmt.Errorf("collective %q: unknown op %q", call.Name, call.Op)
	}
	if call.Op == Broadcast && (call.Root < 0 || call.Root >= n) {
		return nil, fmt.Errorf("broadcast %q: root %d out of range [0, %d)", call.Name, call.Root, n)
	}
	if !Supports(call.Op, call.Strategy) {
		return nil, fmt.Errorf("%s %q: strategy %q does not implement %s (see collectives.Supports)", call.Op, call.Name, call.Strategy, call.Op)
	}
	blocks := max(call.Blocks, 1)
	// Every collective kernel spins on its peers while resident, with one
	// block per channel (NCCL: src/enqueue.cc launches nChannels blocks;
	// PyTorch's symmetric-memory kernels: one block per channel of the
	// grid, blockIdx naming its signal slots). See ranks/residency.go.
	k := &ranks.KernelSpec{Name: call.Name, Coll: call.Name, Kind: string(call.Op) + "/" + string(call.Strategy), Sig: call.Sig(), GroupSize: n,
		Blocks: blocks, Spins: true}
	switch call.Strategy {
	case NCCL, NCCLTree:
		c.order(k)
		if call.Strategy == NCCLTree {
			k.Instrs = c.treeAllReduce(i, call)
		} else {
			k.Instrs = c.ringFamily(i, call)
		}
	default:
		ws := c.workspace(call.Name)
		need := ci
		if call.Op != AllReduce && call.Op != Broadcast {
			need = max(ci, co)
		}
		if ws.Bufs[0].Chunks() < need {
			return nil, fmt.Errorf("%s %q: symmetric workspace of %q has %d chunks, the call needs %d (set Comm.WorkspaceChunks before the first call)", call.Op, call.Name, c.Name, ws.Bufs[0].Chunks(), need)
		}
		if len(ws.Pads[0].Slots) < blocks*n {
			return nil, fmt.Errorf("%s %q: signal pad of %q has %d slots, %d blocks × %d ranks need %d (set Comm.PadSlots before the first call)", call.Op, call.Name, c.Name, len(ws.Pads[0].Slots), blocks, n, blocks*n)
		}
		k.Instrs = c.symmetric(i, call, ws, blocks)
	}
	return k, nil
}

// order sets k's NCCL ordering: its order key, whether the key holds
// across CUDA graphs, whether it waits for the previous kernel's start or
// completion, and its exclusive slot.
func (c *Comm) order(k *ranks.KernelSpec) {
	k.OrderKey, k.OrderPerContext = c.orderKey(), c.GraphUnordered
	k.OrderLaunch = c.ImplicitOrder && c.ImplicitLaunch && c.Coresident
	k.Exclusive = c.exclusive()
	k.StepConns = c.sharedConns()
}

// exclusive is the [ranks.KernelSpec.Exclusive] key of the communicator's
// NCCL kernels: one slot per GPU ([NCCLExclusive]), or with
// [Comm.Coresident] one slot per communicator on the GPU, or none where
// the library leaves some of its kernels unordered ([Comm.sharedConns]):
// nothing but the order key keeps two of them apart, and where it does
// not, the GPU runs both.
func (c *Comm) exclusive() string {
	switch {
	case c.sharedConns():
		return ""
	case c.Coresident:
		return NCCLExclusive + ":" + c.Name
	}
	return NCCLExclusive
}

// sharedConns reports whether two kernels of the communicator can be
// resident on one GPU at once: RCCL's graph path ([Comm.GraphUnordered])
// on a GPU that runs NCCL kernels together ([Comm.Coresident]). Its
// connections then keep their state as the library does, step counters
// read at a kernel's start and written back at its end
// ([ranks.Fifo.Stepped], ranks/stepconn.go), which the two race on.
func (c *Comm) sharedConns() bool { return c.GraphUnordered && c.Coresident }

// newFifo is a connection of the communicator from world rank from to to.
func (c *Comm) newFifo(name string, from, to int) *ranks.Fifo {
	f := c.w.NewFifo(name, from, to, NCCLSteps)
	f.Stepped = c.sharedConns()
	return f
}

// NCCLExclusive is the [ranks.KernelSpec.Exclusive] key of NCCL kernels: CUDA
// does not guarantee that kernels of different streams are co-resident, and
// an NCCL kernel spins on its peers for its whole run, so the model takes the
// worst case: one NCCL kernel at a time per GPU. NCCL's documentation on
// using several communicators concurrently (usage/communicators.rst) warns
// that this is how inconsistent cross-communicator orders deadlock.
const NCCLExclusive = "nccl-kernel"

// orderKey is the NCCL ordering domain of the communicator: its own strong
// stream (src/enqueue.cc ncclLaunchPrepare: the launch stream waits on
// comm->sharedRes->deviceStream, and ncclLaunchFinish advances
// deviceStream to the kernel's finishedEvent, so each kernel of the
// communicator waits for the previous one to complete, whatever user
// stream either was issued on), or, with ImplicitOrder
// (NCCL_LAUNCH_ORDER_IMPLICIT, NCCL ≥ 2.26), one domain for every
// communicator of the GPU, ordered by host program order (the serial mode:
// see [Comm.ImplicitOrder]).
func (c *Comm) orderKey() string {
	if c.ImplicitOrder {
		return "nccl:implicit"
	}
	return "nccl:" + c.Name
}

// slotBytes is the payload of one NCCL connection slot: NCCL_BUFFSIZE
// (4 MiB by default, src/include/comm.h DEFAULT_BUFFSIZE) split over
// NCCL_STEPS slots. A transfer larger than a slot is sent in pieces.
const slotBytes = 4 << 20 / NCCLSteps

// pieces is how many slot-sized messages carry bytes (at least one).
func pieces(bytes int64) int {
	return int(max(1, (bytes+slotBytes-1)/slotBytes))
}

// span splits [lo, lo+cnt) into k nearly equal parts and returns part j.
func span(lo, cnt, k, j int) (int, int) {
	if k == 1 { // the same values without two divisions (a one-block kernel's every micro-op asks)
		return lo + j*cnt, cnt
	}
	a := lo + j*cnt/k
	b := lo + (j+1)*cnt/k
	return a, b - a
}

// xfer is one direction pair of a step: the connection to send on (to a
// peer) and the one to receive on (from a peer), and the step's payload.
type xfer struct {
	send, recv *ranks.Fifo
	to, from   int
	bytes      int64 // payload of the whole step
}

// step is one ring step in pieces: send sn chunks of src from slo to the
// next rank and receive rn chunks into dst at dlo from the previous one,
// adding acc's chunks when acc is set. The pieces alternate, send j then
// receive j, as NCCL's primitives do: runRing loops over chunks of
// ALLGATHER_CHUNKSTEPS (or ALLREDUCE_CHUNKSTEPS) = NCCL_STEPS/2 slots, each
// iteration sending its slots and then receiving the peer's
// (src/device/all_gather.h, all_reduce.h; src/include/collectives.h), so no
// rank ever posts more sends than its connection has slots before it
// receives. Sending every piece first deadlocks every ring whose step has
// more pieces than the connection has slots (NCCLSteps): each rank's send
// blocks on a full FIFO whose reader is blocked the same way. Each piece's
// receive takes its transfer time, the first piece also the step latency α.
// sn < 0 receives only; rn < 0 sends only.
func (c *Comm) step(x xfer, phase string, src *ranks.Buffer, slo, sn int, dst *ranks.Buffer, dlo, rn int, acc *ranks.Buffer) []ranks.Instr {
	p := pieces(x.bytes)
	var out []ranks.Instr
	for j := range p {
		if sn >= 0 {
			lo, m := span(0, sn, p, j)
			out = append(out, ranks.Instr{Op: ranks.OpSend, Phase: phase, Fifo: x.send, N: m, Srcs: []ranks.Src{{Buf: src, Lo: slo + lo, Coef: 1}}, Peer: x.to})
		}
		if rn >= 0 {
			lo, m := span(0, rn, p, j)
			d := ranks.Bytes(x.bytes/int64(p), c.HW.NVLink)
			if j == 0 {
				d += c.HW.StepLat
			}
			in := ranks.Instr{Op: ranks.OpRecv, Phase: phase, Fifo: x.recv, Dst: dst, DstLo: dlo + lo, N: m, Dur: d, Peer: x.from}
			if acc != nil {
				in.Srcs = []ranks.Src{{Buf: acc, Lo: dlo + lo, Coef: 1}}
			}
			out = append(out, in)
		}
	}
	return out
}

func (c *Comm) copyIn(dst *ranks.Buffer, dlo int, src *ranks.Buffer, slo, n int, bytes int64, phase string) ranks.Instr {
	return ranks.Instr{Op: ranks.OpCompute, Phase: phase, Dst: dst, DstLo: dlo, N: n, Srcs: []ranks.Src{{Buf: src, Lo: slo, Coef: 1}}, Dur: ranks.Bytes(bytes, c.HW.HBM)}
}

// ringFamily is NCCL's ring algorithm for every op (src/device/all_reduce.h,
// all_gather.h, reduce_scatter.h, broadcast.h; all-to-all is grouped
// send/recv with every peer, src/device/sendrecv.h). Each step sends to the
// next rank and receives from the previous one through bounded FIFO
// connections; a step larger than a connection slot goes in pieces.
func (c *Comm) ringFamily(i int, call Call) []ranks.Instr {
	n := len(c.Group)
	hw := c.HW
	in, out := call.In, call.Out
	next, prev := (i+1)%n, (i-1+n)%n
	ring := xfer{send: c.fifo(c.Group[i], c.Group[next]), recv: c.fifo(c.Group[prev], c.Group[i]), to: c.Group[next], from: c.Group[prev]}
	start := ranks.Instr{Op: ranks.OpDelay, Phase: "launch", Dur: hw.KStart}
	prog := []ranks.Instr{start}
	mod := func(s int) int { return ((s % n) + n) % n }
	switch call.Op {
	case AllReduce:
		C := in.Chunks()
		seg := func(s int) (int, int) { return span(0, C, n, mod(s)) }
		prog = append(prog, c.copyIn(out, 0, in, 0, C, in.Bytes, "copy-in"))
		ring.bytes = in.Bytes / int64(n)
		for k := 0; k < n-1; k++ {
			slo, sn := seg(i - k)
			rlo, rn := seg(i - k - 1)
			prog = append(prog, c.step(ring, "reduce-scatter", out, slo, sn, out, rlo, rn, out)...)
		}
		for k := 0; k < n-1; k++ {
			slo, sn := seg(i + 1 - k)
			rlo, rn := seg(i - k)
			prog = append(prog, c.step(ring, "all-gather", out, slo, sn, out, rlo, rn, nil)...)
		}
	case AllGather:
		B := in.Chunks()
		ring.bytes = in.Bytes
		prog = append(prog, c.copyIn(out, i*B, in, 0, B, in.Bytes, "copy-in"))
		for k := 0; k < n-1; k++ {
			s, r := mod(i-k), mod(i-k-1)
			prog = append(prog, c.step(ring, "all-gather", out, s*B, B, out, r*B, B, nil)...)
		}
	case ReduceScatter:
		B := out.Chunks()
		ring.bytes = in.Bytes / int64(n)
		// Accumulate in a private scratch copy of the input; rank i ends
		// owning block i.
		acc := c.scratch(i, call.Name, "", in)
		prog = append(prog, c.copyIn(acc, 0, in, 0, in.Chunks(), in.Bytes, "copy-in"))
		for k := 0; k < n-1; k++ {
			s, r := mod(i-k-1), mod(i-k-2)
			prog = append(prog, c.step(ring, "reduce-scatter", acc, s*B, B, acc, r*B, B, acc)...)
		}
		prog = append(prog, c.copyIn(out, 0, acc, i*B, B, out.Bytes, "copy-out"))
	case AllToAll:
		B := in.Chunks() / n
		bb := in.Bytes / int64(n)
		prog = append(prog, c.copyIn(out, i*B, in, i*B, B, bb, "copy-self"))
		// Round d sends to rank i+d and receives from rank i-d, piece by
		// piece: NCCL runs the grouped sends and receives of every peer
		// concurrently (src/device/sendrecv.h, a send and a receive warp
		// group per peer), so none waits for all its sends to drain first.
		for d := 1; d < n; d++ {
			to, from := (i+d)%n, (i-d+n)%n
			x := xfer{send: c.fifo(c.Group[i], c.Group[to]), to: c.Group[to], recv: c.fifo(c.Group[from], c.Group[i]), from: c.Group[from], bytes: bb}
			for _, in := range c.step(x, "send", in, to*B, B, out, from*B, B, nil) {
				if in.Op == ranks.OpRecv {
					in.Phase = "recv"
				}
				prog = append(prog, in)
			}
		}
	case Broadcast:
		B := in.Chunks()
		ring.bytes = in.Bytes
		pos := mod(i - call.Root) // distance from the root along the ring
		if pos == 0 {
			prog = append(prog, c.copyIn(out, 0, in, 0, B, in.Bytes, "copy-in"))
		}
		// Per piece: receive from prev (unless root), forward to next
		// (unless next is the root): the pipeline NCCL's broadcast runs.
		p := pieces(in.Bytes)
		for j := range p {
			lo, m := span(0, B, p, j)
			if pos != 0 {
				d := ranks.Bytes(in.Bytes/int64(p), hw.NVLink) + hw.StepLat
				prog = append(prog, ranks.Instr{Op: ranks.OpRecv, Phase: "broadcast", Fifo: ring.recv, Dst: out, DstLo: lo, N: m, Dur: d, Peer: ring.from})
			}
			if pos != n-1 {
				prog = append(prog, ranks.Instr{Op: ranks.OpSend, Phase: "broadcast", Fifo: ring.send, N: m, Srcs: []ranks.Src{{Buf: out, Lo: lo, Coef: 1}}, Peer: ring.to})
			}
		}
	}
	return prog
}

// scratch is a private per-call buffer on group index i shaped like like,
// named for call and suffix.
func (c *Comm) scratch(i int, call, suffix string, like *ranks.Buffer) *ranks.Buffer {
	key := scratchKey{call, suffix}
	s, ok := c.scratches[key]
	if !ok {
		if c.scratches == nil {
			c.scratches = map[scratchKey]*scratches{}
		}
		s = &scratches{name: c.Name + ".scratch." + call + suffix, bufs: make([]*ranks.Buffer, len(c.Group))}
		c.scratches[key] = s
	}
	if s.bufs[i] == nil {
		s.bufs[i] = c.w.Alloc(c.Group[i], s.name, like.Bytes, like.Chunks())
	}
	return s.bufs[i]
}

// scratchKey names a call's scratch buffers on a communicator.
type scratchKey struct{ call, suffix string }

// scratches are a call's scratch buffers, by group index, and their name.
type scratches struct {
	name string
	bufs []*ranks.Buffer
}

// treeDepth is the depth of the binary tree over n ranks (heap layout).
func treeDepth(n int) int {
	d := 0
	for (1<<(d+1))-1 < n {
		d++
	}
	return d
}

// treeAllReduce: the binary tree in heap layout (parent (v-1)/2, children
// 2v+1 and 2v+2). Reduce: receive each child's partial sum and add it, then
// send the sum to the parent. Broadcast: receive the total from the parent,
// send it to the children. The two children's transfers use separate links
// and overlap, so a level costs one transfer (NCCL src/device/all_reduce.h
// runTreeUpDown).
func (c *Comm) treeAllReduce(i int, call Call) []ranks.Instr {
	n := len(c.Group)
	in, out := call.In, call.Out
	C := in.Chunks()
	hw := c.HW
	prog := []ranks.Instr{{Op: ranks.OpDelay, Phase: "launch", Dur: hw.KStart}, c.copyIn(out, 0, in, 0, C, in.Bytes, "copy-in")}
	var kids []int
	for _, k := range []int{2*i + 1, 2*i + 2} {
		if k < n {
			kids = append(kids, k)
		}
	}
	parent := (i - 1) / 2
	link := func(a, b int) *ranks.Fifo { return c.fifo(c.Group[a], c.Group[b]) }
	d := hw.StepLat + ranks.Bytes(in.Bytes, hw.NVLink)
	for j, k := range kids {
		in := ranks.Instr{Op: ranks.OpRecv, Phase: "reduce-up", Fifo: link(k, i), Dst: out, N: C, Srcs: []ranks.Src{{Buf: out, Coef: 1}}, Peer: c.Group[k]}
		if j == len(kids)-1 {
			in.Dur = d
		}
		prog = append(prog, in)
	}
	if i > 0 {
		prog = append(prog,
			ranks.Instr{Op: ranks.OpSend, Phase: "reduce-up", Fifo: link(i, parent), N: C, Srcs: []ranks.Src{{Buf: out, Coef: 1}}, Peer: c.Group[parent]},
			ranks.Instr{Op: ranks.OpRecv, Phase: "broadcast-down", Fifo: link(parent, i), Dst: out, N: C, Dur: d, Peer: c.Group[parent]})
	}
	for _, k := range kids {
		prog = append(prog, ranks.Instr{Op: ranks.OpSend, Phase: "broadcast-down", Fifo: link(i, k), N: C, Srcs: []ranks.Src{{Buf: out, Coef: 1}}, Peer: c.Group[k]})
	}
	return prog
}

// barrierBlocks is sync_remote_blocks for a grid of blocks: every block puts
// a flag into slot b·n + i of every peer's pad, then waits for slot b·n + p
// of its own pad from every peer (torch CUDASymmetricMemory-inl.h). Blocks
// run concurrently on hardware; the model issues every block's puts before
// any block's waits, one legal interleaving that never adds a wait.
func (c *Comm) barrierBlocks(i int, ws *ranks.Symmetric, blocks int, phase string) []ranks.Instr {
	n := len(c.Group)
	var out []ranks.Instr
	for b := range blocks {
		for d := 1; d < n; d++ {
			p := (i + d) % n
			out = append(out, ranks.Instr{Op: ranks.OpPut, Phase: phase, Pad: ws.Pads[p], Slot: b*n + i, Dur: c.HW.SigLat / 4, Peer: c.Group[p]})
		}
	}
	for b := range blocks {
		for d := 1; d < n; d++ {
			p := (i + d) % n
			out = append(out, ranks.Instr{Op: ranks.OpWait, Phase: phase, Pad: ws.Pads[i], Slot: b*n + p, Dur: c.HW.SigLat / 4, Peer: c.Group[p]})
		}
	}
	return out
}

// symmetric builds the symmetric-memory kernels: stage data in the
// workspace, barrier, move it with P2P loads/stores or multicast
// (multimem.ld_reduce / multimem.st), barrier so the workspace can be
// reused. Sources: torch symm_mem CUDASymmetricMemoryOps.cu
// (one_shot_all_reduce, two_shot_all_reduce_, multimem_all_reduce_,
// multimem_one_shot_all_reduce, multimem_all_gather) and TensorRT-LLM's
// SymmetricMemoryAllReduce (copy into the buffer before the kernel).
func (c *Comm) symmetric(i int, call Call, ws *ranks.Symmetric, blocks int) []ranks.Instr {
	n := len(c.Group)
	hw := c.HW
	in, out := call.In, call.Out
	mine := ws.Bufs[i]
	mc := call.Strategy == Multimem || call.Strategy == MultimemTwoShot
	// Time of one P2P/multicast pass over b bytes that touches peers copies.
	remote := func(b int64, copies int) int64 {
		if mc {
			return b
		}
		return b * int64(copies)
	}
	prog := []ranks.Instr{{Op: ranks.OpDelay, Phase: "launch", Dur: hw.KStart}}
	all := func(lo int) []ranks.Src {
		s := make([]ranks.Src, n)
		for p := range n {
			s[p] = ranks.Src{Buf: ws.Bufs[p], Lo: lo, Coef: 1}
		}
		return s
	}
	switch call.Op {
	case AllReduce:
		C := in.Chunks()
		prog = append(prog, c.copyIn(mine, 0, in, 0, C, in.Bytes, "copy-in"))
		prog = append(prog, c.barrierBlocks(i, ws, blocks, "barrier-entry")...)
		if call.Strategy == MultimemTwoShot || call.Strategy == P2PTwoShot {
			// Reduce my slice from every copy, store it into every copy.
			lo, m := span(0, C, n, i)
			slice := in.Bytes / int64(n)
			prog = append(prog, ranks.Instr{Op: ranks.OpCompute, Phase: "reduce-slice", Dst: out, DstLo: lo, N: m, Srcs: all(lo),
				Dur: ranks.Bytes(remote(slice, n-1), hw.NVLink)})
			for d := range n {
				p := (i + d) % n
				prog = append(prog, ranks.Instr{Op: ranks.OpCompute, Phase: "store-slice", Dst: ws.Bufs[p], DstLo: lo, N: m, Srcs: []ranks.Src{{Buf: out, Lo: lo, Coef: 1}}})
			}
			prog[len(prog)-1].Dur = ranks.Bytes(remote(slice, n-1), hw.NVLink)
			prog = append(prog, c.barrierBlocks(i, ws, blocks, "barrier-mid")...)
			prog = append(prog, c.copyIn(out, 0, mine, 0, C, in.Bytes, "copy-out"))
		} else {
			prog = append(prog, ranks.Instr{Op: ranks.OpCompute, Phase: "reduce", Dst: out, N: C, Srcs: all(0),
				Dur: ranks.Bytes(remote(in.Bytes, n-1), hw.NVLink) + ranks.Bytes(in.Bytes, hw.HBM)})
		}
	case AllGather:
		B := in.Chunks()
		if mc {
			// multimem.st: my block lands in every copy at once.
			for d := range n {
				p := (i + d) % n
				prog = append(prog, ranks.Instr{Op: ranks.OpCompute, Phase: "multimem-st", Dst: ws.Bufs[p], DstLo: i * B, N: B, Srcs: []ranks.Src{{Buf: in, Coef: 1}}})
			}
			prog[len(prog)-1].Dur = ranks.Bytes(in.Bytes, hw.NVLink)
			prog = append(prog, c.barrierBlocks(i, ws, blocks, "barrier-entry")...)
			prog = append(prog, c.copyIn(out, 0, mine, 0, n*B, out.Bytes, "copy-out"))
		} else {
			prog = append(prog, c.copyIn(mine, i*B, in, 0, B, in.Bytes, "copy-in"))
			prog = append(prog, c.barrierBlocks(i, ws, blocks, "barrier-entry")...)
			for d := range n {
				p := (i + d) % n
				prog = append(prog, ranks.Instr{Op: ranks.OpCompute, Phase: "p2p-load", Dst: out, DstLo: p * B, N: B, Srcs: []ranks.Src{{Buf: ws.Bufs[p], Lo: p * B, Coef: 1}}})
			}
			prog[len(prog)-1].Dur = ranks.Bytes(in.Bytes*int64(n-1), hw.NVLink)
		}
	case ReduceScatter:
		B := out.Chunks()
		prog = append(prog, c.copyIn(mine, 0, in, 0, in.Chunks(), in.Bytes, "copy-in"))
		prog = append(prog, c.barrierBlocks(i, ws, blocks, "barrier-entry")...)
		prog = append(prog, ranks.Instr{Op: ranks.OpCompute, Phase: "reduce", Dst: out, N: B, Srcs: all(i * B),
			Dur: ranks.Bytes(remote(out.Bytes, n-1), hw.NVLink)})
	case AllToAll:
		B := in.Chunks() / n
		bb := in.Bytes / int64(n)
		// Push block p of my input into peer p's copy at my slot.
		for d := range n {
			p := (i + d) % n
			prog = append(prog, ranks.Instr{Op: ranks.OpCompute, Phase: "p2p-store", Dst: ws.Bufs[p], DstLo: i * B, N: B, Srcs: []ranks.Src{{Buf: in, Lo: p * B, Coef: 1}}})
		}
		prog[len(prog)-1].Dur = ranks.Bytes(bb*int64(n-1), hw.NVLink)
		prog = append(prog, c.barrierBlocks(i, ws, blocks, "barrier-entry")...)
		prog = append(prog, c.copyIn(out, 0, mine, 0, n*B, in.Bytes, "copy-out"))
	case Broadcast:
		B := in.Chunks()
		root := call.Root
		if i == root {
			if mc {
				for d := range n {
					p := (i + d) % n
					prog = append(prog, ranks.Instr{Op: ranks.OpCompute, Phase: "multimem-st", Dst: ws.Bufs[p], N: B, Srcs: []ranks.Src{{Buf: in, Coef: 1}}})
				}
				prog[len(prog)-1].Dur = ranks.Bytes(in.Bytes, hw.NVLink)
			} else {
				prog = append(prog, c.copyIn(mine, 0, in, 0, B, in.Bytes, "copy-in"))
			}
		}
		prog = append(prog, c.barrierBlocks(i, ws, blocks, "barrier-entry")...)
		src := ws.Bufs[root]
		if mc {
			src = mine
		}
		prog = append(prog, ranks.Instr{Op: ranks.OpCompute, Phase: "load", Dst: out, N: B, Srcs: []ranks.Src{{Buf: src, Coef: 1}},
			Dur: ranks.Bytes(in.Bytes, hw.NVLink)})
	}
	if mutant.On(mutant.BarrierNoExit) {
		return prog
	}
	prog = append(prog, c.barrierBlocks(i, ws, blocks, "barrier-exit")...)
	return prog
}
