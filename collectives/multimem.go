package collectives

import (
	"fmt"

	"github.com/collsim/collsim/mutant"
	"github.com/collsim/collsim/ranks"
)

// TensorRT-LLM's MULTIMEM all-reduce as it runs.
//
// TensorRT-LLM's SymmetricMemoryAllReduce.forward
// (tensorrt_llm/_torch/distributed/symm_mem_allreduce.py) issues three
// PyTorch ops on the calling stream, each its own kernel:
//
//	self.buffer[:n].copy_(inp)                                   copy-in
//	torch.ops.symm_mem.multimem_all_reduce_(self.buffer[:n], …)  reduce, in place
//	out.copy_(self.buffer[:n])                                   copy-out
//
// The middle one is PyTorch's multimem_all_reduce_kernel
// (torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemoryOps.cu): a grid
// of at most 8 blocks × 1024 threads; every block runs
//
//	sync_remote_blocks<relaxed>   entry barrier
//	__syncthreads
//	for its part of this rank's slice [numel_per_rank·rank, …):
//	    v = multimem.ld_reduce(mc + i)   the sum over every rank's copy
//	    multimem.st(mc + i, v)           v into every rank's copy
//	__syncthreads
//	sync_remote_blocks<acq_rel>   exit barrier
//
// and sync_remote_blocks (CUDASymmetricMemory-inl.h) has thread t < world
// size of block b put a flag (CAS 0→1, spinning while set) into slot
// b·world_size + rank of rank t's signal pad and then wait (CAS 1→0,
// spinning while clear) on slot b·world_size + t of its own — t = rank
// included: a rank signals itself too. The slot names the block and the
// rank, never the call: two calls on one pad exchange each other's flags.
//
// The copies touch no pad. PyTorch's GroupStreamGuard (GroupStreamGuard.cpp,
// PR #195947) orders a group's pad operations across streams in host issue
// order, but TensorRT-LLM's copies are plain copy_ kernels outside it: with
// the guard on, one call's copy-in can still overwrite the workspace while
// another call's reduce reads it, or before another call's copy-out has read
// its result. The fused model (one kernel, [Comm.FusedMultimem]) cannot show
// that: the guard orders the whole of it.

// MultimemMaxBlocks and MultimemMaxThreads bound multimem_all_reduce_'s grid
// (init_elementwise_launch_config(…, 8, 1024, …) in
// CUDASymmetricMemoryOps.cu).
const (
	MultimemMaxBlocks  = 8
	MultimemMaxThreads = 1024
)

// MultimemGrid is the block count PyTorch launches multimem_all_reduce_
// with for a bf16 tensor (TensorRT-LLM's default dtype) of bytes bytes on n
// ranks: init_elementwise_launch_config with 16-byte alignment (8 elements
// a thread) and n splits — one block while a rank's slice fits 1024
// threads, then one block per 8192 elements, at most 8.
func MultimemGrid(bytes int64, n int) int {
	const elem, align = 2, 16
	numel := max(bytes/elem, 1)
	splits := int64(max(n, 1))
	aligned := (numel + align*splits - 1) / (align * splits) * (align * splits)
	perSplit := aligned / splits
	perThread := int64(align / elem)
	perBlock := int64(MultimemMaxThreads) * perThread
	if perSplit <= perBlock {
		return 1
	}
	return int(min((perSplit+perBlock-1)/perBlock, MultimemMaxBlocks))
}

// Splits reports whether call runs as TensorRT-LLM's three kernels (a
// MULTIMEM all-reduce on a communicator without [Comm.FusedMultimem]).
func (c *Comm) Splits(call Call) bool {
	return call.Op == AllReduce && call.Strategy == Multimem && !c.FusedMultimem
}

// GuardKey is the [ranks.KernelSpec.OrderKey] that [Comm.StreamGuard] puts
// on the communicator's signal-pad kernels.
func (c *Comm) GuardKey() string { return "symm-guard:" + c.Name }

// Launches returns the kernels rank's host launches, in this order on the
// calling stream, for call: copy-in, multimem_all_reduce_ and copy-out for
// a split MULTIMEM all-reduce ([Comm.Splits]); otherwise the one kernel of
// [Comm.AllReduce] (an all-reduce of the communicator's own chunk count with
// the default grid) or [Comm.Collective]. With [Comm.StreamGuard] every
// kernel that uses the signal pad is ordered after the previous one on the
// rank in host issue order, whatever its stream.
func (c *Comm) Launches(rank int, call Call) ([]*ranks.KernelSpec, error) {
	return c.AppendLaunches(nil, nil, rank, call)
}

// AppendLaunches appends [Comm.Launches]' kernels to ks; a split MULTIMEM
// all-reduce's are made in st (nil: allocated), which a builder resets when
// it drops them ([ranks.KernelStore]).
func (c *Comm) AppendLaunches(ks []*ranks.KernelSpec, st *ranks.KernelStore, rank int, call Call) ([]*ranks.KernelSpec, error) {
	n0 := len(ks)
	switch {
	case c.Splits(call):
		var err error
		if ks, err = c.multimemSplit(ks, st, rank, call); err != nil {
			return nil, err
		}
	case call.Op == AllReduce && call.Blocks == 0 && call.In != nil && call.Out != nil && call.In.Chunks() == c.chunks && call.Out.Chunks() == c.chunks:
		k, err := c.AllReduce(rank, call.Name, call.Strategy, call.In, call.Out)
		if err != nil {
			return nil, err
		}
		ks = append(ks, k)
	default:
		k, err := c.Collective(rank, call)
		if err != nil {
			return nil, err
		}
		ks = append(ks, k)
	}
	if c.StreamGuard {
		for _, k := range ks[n0:] {
			if (k.Coll != "" || mutant.On(mutant.GuardOrdersCopies)) && k.OrderKey == "" { // a pad kernel (NCCL's have their own order)
				k.OrderKey, k.OrderPerContext = c.GuardKey(), true
			}
		}
	}
	return ks, nil
}

// splitNames is what a split all-reduce call's kernels are named and
// signed, made once per call name on a communicator (the names are the
// same on every rank).
type splitNames struct {
	copyIn, copyOut string
	op              Op
	bytes           int64  // what sig was made from, with op
	sig             string // Call.Sig
}

func (c *Comm) splitNames(call Call) splitNames {
	n, ok := c.splits[call.Name]
	if !ok {
		if c.splits == nil {
			c.splits = map[string]*splitNames{}
		}
		n = &splitNames{copyIn: call.Name + ".copy_in", copyOut: call.Name + ".copy_out", op: call.Op, bytes: call.In.Bytes, sig: call.Sig()}
		c.splits[call.Name] = n
	}
	if n.op != call.Op || n.bytes != call.In.Bytes {
		return splitNames{copyIn: n.copyIn, copyOut: n.copyOut, sig: call.Sig()}
	}
	return *n
}

// multimemSplit appends rank's copy-in, multimem_all_reduce_ and copy-out
// for call to ks, made in st (see the comment at the top of this file).
func (c *Comm) multimemSplit(ks []*ranks.KernelSpec, st *ranks.KernelStore, rank int, call Call) ([]*ranks.KernelSpec, error) {
	i := c.index(rank)
	if i < 0 {
		return nil, fmt.Errorf("all-reduce %q: rank %d is not in communicator %q %v", call.Name, rank, c.Name, c.Group)
	}
	if call.In == nil || call.Out == nil {
		return nil, fmt.Errorf("all-reduce %q: missing input or output tensor", call.Name)
	}
	C := call.In.Chunks()
	if call.Out.Chunks() != C {
		return nil, fmt.Errorf("all-reduce %q: input has %d chunks, output %d; want equal", call.Name, C, call.Out.Chunks())
	}
	n := len(c.Group)
	blocks := call.Blocks
	if blocks == 0 {
		blocks = MultimemGrid(call.In.Bytes, n)
	}
	if blocks > MultimemMaxBlocks {
		return nil, fmt.Errorf("all-reduce %q: %d blocks; multimem_all_reduce_ launches at most %d", call.Name, blocks, MultimemMaxBlocks)
	}
	ws := c.workspace(call.Name)
	if ws.Bufs[0].Chunks() < C {
		return nil, fmt.Errorf("all-reduce %q: symmetric workspace of %q has %d chunks, the call needs %d (set Comm.WorkspaceChunks before the first call)", call.Name, c.Name, ws.Bufs[0].Chunks(), C)
	}
	if len(ws.Pads[0].Slots) < blocks*n {
		return nil, fmt.Errorf("all-reduce %q: signal pad of %q has %d slots, %d blocks × %d ranks need %d (set Comm.PadSlots before the first call)", call.Name, c.Name, len(ws.Pads[0].Slots), blocks, n, blocks*n)
	}
	hw := c.HW
	mine := ws.Bufs[i]
	names := c.splitNames(call)
	// A copy_ kernel reads and writes its bytes once: the launch latency and
	// 2× bytes through HBM. That is 1.5 µs for 128 KiB on the b200 profile;
	// an H200 measured 1.8 µs back to back for this copy, 8×8192 bf16
	// (validation/results/h200.json, durations "tp8/copy 8x8192").
	copyDur := hw.KStart + ranks.Bytes(2*call.In.Bytes, hw.HBM)
	copyKernel := func(name, phase string, dst, src *ranks.Buffer) *ranks.KernelSpec {
		k, _ := st.Kernel()
		*k = ranks.KernelSpec{Name: name, Kind: "copy", Instrs: st.Instrs(1)}
		srcs := st.Srcs(1)
		srcs[0] = ranks.Src{Buf: src, Coef: 1}
		k.Instrs[0] = ranks.Instr{Op: ranks.OpCompute, Phase: phase, Dst: dst, N: C, Srcs: srcs, Dur: copyDur}
		return k
	}
	in := copyKernel(names.copyIn, "copy-in", mine, call.In)
	red, old := st.Kernel()
	g, _ := old.(*multimemGen)
	*red = ranks.KernelSpec{Name: call.Name, Coll: call.Name, Kind: "allreduce/multimem", Sig: names.sig, GroupSize: n,
		Blocks: blocks, Spins: true, Gen: c.multimemGen(g, i, call, ws, blocks)}
	out := copyKernel(names.copyOut, "copy-out", call.Out, mine)
	return append(ks, in, red, out), nil
}

// multimemAllReduce is rank i's multimem_all_reduce_kernel over the first
// C chunks of ws, with blocks blocks. A block's part of the rank's slice is
// a strided set of 16-byte vectors on hardware; here it is a contiguous run
// of chunks (span). The loaded sums live in registers: a private buffer.
//
// The blocks run concurrently on hardware and the model runs one kernel as
// one sequence, so the phases are laid out as one interleaving of them:
// every block's entry puts, every block's entry waits, every block's
// ld_reduce and st, every block's exit puts, every block's exit waits. A
// block's puts never wait on its own waits, so this adds no wait a block
// would not have.
func (c *Comm) multimemAllReduce(i int, call Call, ws *ranks.Symmetric, blocks int) []ranks.Instr {
	n := len(c.Group)
	hw := c.HW
	C := call.In.Chunks()
	regs := c.scratch(i, call.Name, "/regs", call.In)
	prog := []ranks.Instr{{Op: ranks.OpDelay, Phase: "launch", Dur: hw.KStart}}
	prog = append(prog, c.syncRemoteBlocks(i, ws, blocks, "barrier-entry")...)
	lo, m := span(0, C, n, i)
	slice := call.In.Bytes / int64(n)
	for b := range blocks {
		blo, bm := span(lo, m, blocks, b)
		d := ranks.Bytes(slice/int64(blocks), hw.NVLink)
		if bm == 0 {
			// No chunk of the model's falls in this block's part; the
			// block still moves its bytes.
			prog = append(prog, ranks.Instr{Op: ranks.OpDelay, Phase: "multimem.ld_reduce", Dur: 2 * d})
			continue
		}
		srcs := make([]ranks.Src, n)
		for p := range n {
			srcs[p] = ranks.Src{Buf: ws.Bufs[p], Lo: blo, Coef: 1}
		}
		prog = append(prog, ranks.Instr{Op: ranks.OpCompute, Phase: "multimem.ld_reduce", Dst: regs, DstLo: blo, N: bm, Srcs: srcs, Dur: d})
		for q := range n {
			p := (i + q) % n
			prog = append(prog, ranks.Instr{Op: ranks.OpCompute, Phase: "multimem.st", Dst: ws.Bufs[p], DstLo: blo, N: bm, Srcs: []ranks.Src{{Buf: regs, Lo: blo, Coef: 1}}})
		}
		prog[len(prog)-1].Dur = d
	}
	if mutant.On(mutant.BarrierNoExit) {
		return prog
	}
	return append(prog, c.syncRemoteBlocks(i, ws, blocks, "barrier-exit")...)
}

// syncRemoteBlocks is sync_remote_blocks (CUDASymmetricMemory-inl.h) for
// every block of rank i's grid: thread t of block b puts a flag into slot
// b·n + i of rank t's pad, then waits on slot b·n + t of its own, for every
// t < n, this rank included. Threads run concurrently; the model issues
// every put before any wait, which delays no put.
func (c *Comm) syncRemoteBlocks(i int, ws *ranks.Symmetric, blocks int, phase string) []ranks.Instr {
	n := len(c.Group)
	out := make([]ranks.Instr, 0, 2*blocks*n)
	for b := range blocks {
		for d := range n {
			t := (i + d) % n
			out = append(out, ranks.Instr{Op: ranks.OpPut, Phase: phase, Pad: ws.Pads[t], Slot: b*n + i, Dur: c.HW.SigLat / 4, Peer: c.Group[t]})
		}
	}
	for b := range blocks {
		for d := range n {
			t := (i + d) % n
			out = append(out, ranks.Instr{Op: ranks.OpWait, Phase: phase, Pad: ws.Pads[i], Slot: b*n + t, Dur: c.HW.SigLat / 4, Peer: c.Group[t]})
		}
	}
	return out
}
