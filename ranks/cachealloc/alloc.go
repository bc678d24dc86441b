package cachealloc

import (
	"errors"
	"fmt"
)

// The CUDA caching allocator as PyTorch has it: c10/cuda/CUDACachingAllocator.cpp
// (pytorch/pytorch, read at commit 001074d2). Every constant and rule below
// names the function it follows.
const (
	// AllocRound is kMinBlockSize: every request is rounded up to a
	// multiple of 512 bytes (round_size).
	AllocRound int64 = 512
	// AllocSmallSize is kSmallSize: requests up to 1 MiB are served from
	// the small pool, larger ones from the large pool (get_pool); a block
	// never moves between pools.
	AllocSmallSize int64 = 1 << 20
	// AllocSmallSegment is kSmallBuffer: the small pool's segments are
	// 2 MiB (get_allocation_size).
	AllocSmallSegment int64 = 2 << 20
	// AllocLargeSegment is kLargeBuffer: a large request under
	// kMinLargeAlloc (10 MiB) takes a 20 MiB segment.
	AllocLargeSegment int64 = 20 << 20
	// AllocMinLarge is kMinLargeAlloc: from 10 MiB a segment is the request
	// rounded up to kRoundLarge (2 MiB).
	AllocMinLarge   int64 = 10 << 20
	allocRoundLarge int64 = 2 << 20
	// allocBase is where the model's first segment starts: addresses are
	// synthetic (cudaMalloc's are the driver's), segments follow each other
	// 2 MiB-aligned in the order they are made.
	allocBase int64 = 0x7f00_0000_0000
)

// ErrAlloc wraps every allocator misuse (double free, unknown tensor).
var ErrAlloc = errors.New("allocator")

// Segment is one cudaMalloc the allocator made: it is carved into blocks.
type Segment struct {
	ID     int
	Base   int64
	Size   int64
	Stream string // blocks of a segment belong to the stream that made it
	Small  bool   // small pool (2 MiB segments) or large pool
	// Pool is 0 for the allocator's own pools, k for the private pool of
	// the k-th graph capture (allocations during capture come from it and
	// stay with the graph).
	Pool     int
	Released bool // returned to the driver (empty_cache, or freed without caching)

	head *span // first block by address
	// blocks handed out in this segment, in allocation order (for
	// address-range overlaps)
	blocks []*Block
}

// span is one block of a segment: a range that is free or handed out.
// Blocks of a segment are linked by address; a free block merges with a
// free neighbour (free_block, try_merge_blocks).
type span struct {
	seg        *Segment
	ptr, size  int64
	allocated  bool
	prev, next *span
	// uses: streams record_stream'ed on the tensor; pending: freed with
	// uses outstanding, waiting for their events (insert_events) — not
	// free for reuse, and not merged with its neighbours.
	uses    []string
	pending bool
}

func (s *span) free() bool { return !s.allocated && !s.pending }

// Block is where a tensor of the caching allocator lives: its address,
// rounded size, segment and the stream whose pool it came from. It is
// fixed when the tensor is allocated.
type Block struct {
	ID     int
	Rank   int
	Name   string // the tensor's
	Stream string // the stream whose pool the block came from
	Ptr    int64
	Bytes  int64 // the block's size: the request rounded, or the whole free block it took
	// Requested is the tensor's size in bytes as asked for: its memory is
	// [Ptr, Ptr+Requested).
	Requested int64
	Seg       *Segment
	// Tensors lists, in order, the earlier tensors whose memory this one
	// overlaps, then this tensor (a write through one is seen by the
	// others' readers: a use after free).
	Tensors []string
	// Over lists the blocks of those earlier tensors, in the same order.
	Over []*Block
	// CaptureMalloc: without caching, the block was a cudaMalloc during a
	// graph capture, which invalidates the capture
	// (cudaErrorStreamCaptureInvalidated).
	CaptureMalloc bool

	sp   *span
	live bool // allocated and not yet freed
}

// Allocator is one rank's CUDA caching allocator, run in host issue order
// (the allocator is a host-side structure: its decisions are a function of
// the order of malloc, free and record_stream calls, never of device time).
//
// What it models: sizes rounded to 512 B; a small (≤ 1 MiB) and a large
// pool, with 2 MiB, 20 MiB or rounded segments (get_allocation_size);
// best fit by (stream, size, address) among the free blocks of the
// request's pool (BlockComparatorSize, get_free_block): a block is only
// reused by its own stream; a found block is split when the rest is worth
// keeping (should_split: ≥ 512 B in the small pool, > 1 MiB in the large);
// a freed block merges with its free neighbours (free_block). A tensor
// freed while other streams may still read it is reused at once unless
// record_stream marked those streams; then the free waits for their events.
// Reuse is by address: a later tensor whose byte range overlaps a freed
// one's shares its memory ([Block.Over]), also when a request twice the
// size lands at the freed address; the world links their chunks, so the
// race detector and the values see a use after free wherever the ranges
// meet.
//
// Deferred frees: PyTorch records an event on each used stream
// (DeviceCachingAllocator::free → insert_events) and returns the block when
// a later malloc finds all of them complete (malloc → process_events,
// cudaEventQuery). Whether they are complete at a given malloc depends on
// the device's progress, which this host-side structure cannot see: run in
// host issue order alone, it answers "not complete" until the host
// synchronizes ([Allocator.Synchronize]). A world that runs the allocator
// at run time asks the device instead and calls [Allocator.Release] for
// each free whose events are done at the malloc (ranks/dynalloc.go); the
// H200 run of validation/lifetime.py saw the block come back within the
// same eager step when the device had caught up (docs/fidelity.md).
//
// Graph capture ([Allocator.BeginCapture]): allocations come from a
// private pool of the capture, whose blocks are freed and reused within the
// capture as usual and never handed to allocations outside it; frees with
// record_stream uses are deferred until after the capture
// (needs_events_deferred_until_no_capture). Without caching, a malloc
// during capture is a cudaMalloc, which invalidates the capture: the block
// says so ([Block.CaptureMalloc]) and the world reports it.
type Allocator struct {
	rank    int
	caching bool
	segs    []*Segment
	blocks  []*Block
	next    int64 // base of the next segment
	capture int   // current private pool (0: not capturing)
	pools   int   // private pools made
	// graphRNG: the generator's graph seed and offset tensors exist
	graphRNG bool
	// deferred: blocks freed during a capture with record_stream uses
	deferred []*span
	// Log records every decision, in order ("malloc L0.rt_out (64 KiB) on
	// main: 0x7f0000010000, reuses freed memory of L0.x_norm"), unless
	// [Allocator.Quiet] turned it off.
	Log   []string
	quiet bool
}

// Quiet turns the decision log off: an allocator run once per schedule
// (ranks/dynalloc.go) keeps no log nobody reads.
func (a *Allocator) Quiet() { a.quiet = true }

func (a *Allocator) logf(format string, args ...any) {
	if !a.quiet {
		a.Log = append(a.Log, fmt.Sprintf(format, args...))
	}
}

// New returns rank's allocator. With caching false every malloc gets
// fresh memory and a free releases it (cudaFree synchronizes the device),
// as PYTORCH_NO_CUDA_MEMORY_CACHING=1 does.
func New(rank int, caching bool) *Allocator {
	return &Allocator{rank: rank, caching: caching, next: allocBase}
}

// RoundSize is the block size a request of n bytes is served with
// (round_size).
func RoundSize(n int64) int64 {
	if n < AllocRound {
		return AllocRound
	}
	return (n + AllocRound - 1) / AllocRound * AllocRound
}

// SegmentSize is the size of the segment a request of (rounded) size n
// makes when no free block fits (get_allocation_size).
func SegmentSize(n int64) int64 {
	switch {
	case n <= AllocSmallSize:
		return AllocSmallSegment
	case n < AllocMinLarge:
		return AllocLargeSegment
	}
	return (n + allocRoundLarge - 1) / allocRoundLarge * allocRoundLarge
}

// shouldSplit reports whether a free block of size have, found for a
// request of size n, is split (should_split).
func shouldSplit(small bool, have, n int64) bool {
	rest := have - n
	if small {
		return rest >= AllocRound
	}
	return rest > AllocSmallSize
}

// bestFit is get_free_block: the smallest free block of the pool with at
// least size bytes, of the same stream, lowest address first.
func (a *Allocator) bestFit(stream string, small bool, pool int, size int64) *span {
	var best *span
	for _, sg := range a.segs {
		if sg.Released || sg.Stream != stream || sg.Small != small || sg.Pool != pool {
			continue
		}
		for s := sg.head; s != nil; s = s.next {
			if !s.free() || s.size < size {
				continue
			}
			if best == nil || s.size < best.size || s.size == best.size && s.ptr < best.ptr {
				best = s
			}
		}
	}
	return best
}

// newSegment is alloc_block: a cudaMalloc of size bytes for stream's pool.
func (a *Allocator) newSegment(stream string, small bool, size int64) *span {
	sg := &Segment{ID: len(a.segs), Base: a.next, Size: size, Stream: stream, Small: small, Pool: a.capture}
	a.next += (size + allocRoundLarge - 1) / allocRoundLarge * allocRoundLarge
	sg.head = &span{seg: sg, ptr: sg.Base, size: size}
	a.segs = append(a.segs, sg)
	return sg.head
}

// Malloc allocates a tensor of bytes on stream: the best-fitting free
// block of stream's pool, split if worth it, or a new segment. The block's
// Over lists every earlier block whose byte range overlaps its own.
func (a *Allocator) Malloc(name, stream string, bytes int64) (*Block, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("%w: malloc %q: size %d bytes: want it positive", ErrAlloc, name, bytes)
	}
	size := RoundSize(bytes)
	small := size <= AllocSmallSize
	var sp *span
	how := "new segment"
	if a.caching {
		sp = a.bestFit(stream, small, a.capture, size)
		if sp != nil {
			how = "reuses a free block"
		}
	}
	captureMalloc := false
	if sp == nil {
		seg := SegmentSize(size)
		if !a.caching {
			seg = size // cudaMalloc of the request itself
			captureMalloc = a.capture > 0
		}
		sp = a.newSegment(stream, small, seg)
	}
	if a.caching && shouldSplit(small, sp.size, size) {
		rest := &span{seg: sp.seg, ptr: sp.ptr + size, size: sp.size - size, prev: sp, next: sp.next}
		if sp.next != nil {
			sp.next.prev = rest
		}
		sp.next, sp.size = rest, size
	}
	sp.allocated, sp.uses = true, nil
	blk := &Block{ID: len(a.blocks), Rank: a.rank, Name: name, Stream: stream, Ptr: sp.ptr, Bytes: sp.size, Requested: bytes, Seg: sp.seg, CaptureMalloc: captureMalloc, sp: sp, live: true}
	a.blocks = append(a.blocks, blk)
	blk.Over = a.overlaps(blk)
	for _, o := range blk.Over {
		blk.Tensors = append(blk.Tensors, o.Name)
	}
	blk.Tensors = append(blk.Tensors, name)
	if !a.quiet {
		msg := fmt.Sprintf("malloc %s (%s) on %s: %#x in segment #%d (%s), %s", name, FormatBytes(bytes), stream, sp.ptr, sp.seg.ID, FormatBytes(sp.seg.Size), how)
		if len(blk.Over) > 0 {
			msg += fmt.Sprintf("; overlaps freed %s", names(blk.Over))
		}
		a.Log = append(a.Log, msg)
	}
	return blk, nil
}

// overlaps returns every earlier block of b's segment whose requested
// bytes overlap b's, in allocation order, and adds b to its segment.
func (a *Allocator) overlaps(b *Block) []*Block {
	var over []*Block
	seg := b.Seg
	lo, hi := b.Ptr, b.Ptr+b.Requested
	for _, o := range seg.blocks {
		olo, ohi := o.Ptr, o.Ptr+o.Requested
		if olo >= hi || lo >= ohi {
			continue
		}
		over = append(over, o)
	}
	seg.blocks = append(seg.blocks, b)
	return over
}

// RecordStream marks blk as used by stream (tensor.record_stream): it
// will not be reused before that stream's uses complete.
func (a *Allocator) RecordStream(blk *Block, stream string) error {
	if !blk.live {
		return fmt.Errorf("%w: record_stream on %q, which is not a live tensor of rank %d", ErrAlloc, blk.Name, a.rank)
	}
	if stream != blk.Stream {
		blk.sp.uses = append(blk.sp.uses, stream)
	}
	return nil
}

// Free releases blk (the last Python reference dropped). Without
// record_stream uses it is free for the next allocation on its stream at
// once, merged with its free neighbours.
func (a *Allocator) Free(blk *Block) error {
	if !blk.live {
		return fmt.Errorf("%w: free of %q, which is not a live tensor of rank %d", ErrAlloc, blk.Name, a.rank)
	}
	blk.live = false
	sp := blk.sp
	sp.allocated = false
	switch {
	case !a.caching:
		// cudaFree: the memory goes back to the driver (and cudaFree
		// synchronizes the device, so whatever reuses it is ordered).
		sp.seg.Released = true
		a.logf("free %s: %#x released to the driver (no caching)", blk.Name, sp.ptr)
	case len(sp.uses) > 0:
		sp.pending = true
		if a.capture > 0 {
			a.deferred = append(a.deferred, sp)
		}
		a.logf("free %s: %#x deferred until its uses on %v complete (record_stream)", blk.Name, sp.ptr, sp.uses)
	default:
		a.release(sp)
		a.logf("free %s: %#x back in stream %s's pool", blk.Name, blk.Ptr, blk.Stream)
	}
	return nil
}

// release makes sp free and merges it with free neighbours (free_block).
func (a *Allocator) release(sp *span) {
	sp.pending, sp.uses = false, nil
	if p := sp.prev; p != nil && p.free() {
		p.size += sp.size
		p.next = sp.next
		if sp.next != nil {
			sp.next.prev = p
		}
		sp = p
	}
	if n := sp.next; n != nil && n.free() {
		sp.size += n.size
		sp.next = n.next
		if n.next != nil {
			n.next.prev = sp
		}
	}
}

// Release is process_events finding every event of blk's deferred free
// complete (free with record_stream uses, [Allocator.Free]): the block
// returns to its stream's pool, merged with its free neighbours. The world
// that runs the allocator at run time calls it at a malloc, once the
// recorded streams' work is done (ranks/dynalloc.go). It reports whether
// blk was waiting.
func (a *Allocator) Release(blk *Block) bool {
	sp := blk.sp
	if blk.live || !sp.pending || sp.allocated || a.deferredInCapture(sp) {
		return false
	}
	a.release(sp)
	a.logf("process_events: %s's events complete: %#x back in stream %s's pool", blk.Name, blk.Ptr, blk.Stream)
	return true
}

// Pending reports whether blk was freed with record_stream uses and still
// waits for their events.
func (a *Allocator) Pending(blk *Block) bool { return !blk.live && blk.sp.pending && !blk.sp.allocated }

// Synchronize is a device synchronize seen by the allocator: every
// deferred free completes (its recorded uses are done) and the block
// returns to its stream's pool. Frees deferred by a capture in progress
// stay deferred.
func (a *Allocator) Synchronize() {
	if !a.caching {
		return
	}
	for _, sg := range a.segs {
		for s := sg.head; s != nil; {
			next := s.next
			if s.pending && !a.deferredInCapture(s) {
				a.release(s)
			}
			s = next
		}
	}
}

func (a *Allocator) deferredInCapture(s *span) bool {
	if a.capture == 0 {
		return false
	}
	for _, d := range a.deferred {
		if d == s {
			return true
		}
	}
	return false
}

// EmptyCache is torch.cuda.empty_cache(): after a synchronize, every
// segment of the allocator's own pools that is entirely free goes back to
// the driver (release_cached_blocks). Segments of graphs' private pools
// stay with their graphs.
func (a *Allocator) EmptyCache() {
	a.Synchronize()
	for _, sg := range a.segs {
		if !sg.Released && sg.Pool == 0 && sg.head.free() && sg.head.next == nil {
			sg.Released = true
			a.logf("empty_cache: segment #%d (%s at %#x) released", sg.ID, FormatBytes(sg.Size), sg.Base)
		}
	}
}

// GraphRNGTensors are the CUDA generator's seed and offset tensors (one
// int64 each) that the first graph capture of a process allocates
// (CUDAGeneratorState::register_graph, aten/src/ATen/cuda/CUDAGeneratorImpl.cpp).
var GraphRNGTensors = []string{"graph_rng_seed", "graph_rng_offset"}

// BeginCaptureOn is torch.cuda.CUDAGraph.capture_begin on stream: the
// first graph of a process registers with the CUDA generator, which then
// allocates [GraphRNGTensors] in the default pool on the current stream;
// then [Allocator.BeginCapture]. It returns the blocks it allocated.
func (a *Allocator) BeginCaptureOn(stream string) ([]*Block, error) {
	var made []*Block
	if !a.graphRNG {
		a.graphRNG = true
		for _, n := range GraphRNGTensors {
			blk, err := a.Malloc(n, stream, 8)
			if err != nil {
				return made, err
			}
			made = append(made, blk)
		}
	}
	a.BeginCapture()
	return made, nil
}

// BeginCapture starts a CUDA graph capture: until [Allocator.EndCapture],
// every allocation comes from the capture's private pool. (It allocates
// nothing itself; see [Allocator.BeginCaptureOn].)
func (a *Allocator) BeginCapture() {
	a.pools++
	a.capture = a.pools
}

// EndCapture ends the capture. The private pool stays with the graph;
// frees it deferred for record_stream now wait for a synchronize.
func (a *Allocator) EndCapture() {
	a.capture = 0
	a.deferred = nil
}

// Blocks returns the allocator's blocks in allocation order.
func (a *Allocator) Blocks() []*Block { return append([]*Block(nil), a.blocks...) }

// Segments returns the allocator's segments in the order they were made.
func (a *Allocator) Segments() []*Segment { return append([]*Segment(nil), a.segs...) }

// Describe names the block for reports.
func (b *Block) Describe() string {
	s := fmt.Sprintf("caching-allocator block %#x+%s of segment #%d, stream %s's pool", b.Ptr, FormatBytes(b.Bytes), b.Seg.ID, b.Stream)
	if len(b.Tensors) > 1 {
		s += fmt.Sprintf(", memory that %v held in turn", b.Tensors)
	}
	return s
}

func names(bs []*Block) string {
	s := ""
	for i, b := range bs {
		if i > 0 {
			s += ", "
		}
		s += b.Name
	}
	return s
}

// FormatBytes writes n as the allocator's log does: "2 MiB", "16 KiB",
// "100 B".
func FormatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
