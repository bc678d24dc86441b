package ranks

import (
	"fmt"

	"github.com/collsim/collsim/ranks/cachealloc"
)

// ErrAlloc wraps every allocator misuse (double free, unknown tensor).
var ErrAlloc = cachealloc.ErrAlloc

// KindCaptureError is a program whose CUDA graph capture the driver
// invalidates (cudaErrorStreamCaptureInvalidated): a cudaMalloc or cudaFree
// during capture, as PyTorch does for every tensor with
// PYTORCH_NO_CUDA_MEMORY_CACHING=1, or a host synchronize. The graph is never
// made, so nothing runs.
const KindCaptureError = "capture-error"

// Segment is one cudaMalloc the allocator made (package cachealloc).
type Segment = cachealloc.Segment

// Block is where a tensor of the caching allocator lives: the allocator's
// block (its address, rounded size, segment and pool), and the chunks of
// other tensors whose memory overlaps the tensor's.
type Block struct {
	*cachealloc.Block

	buf *Buffer
	// dyn: the block of a tensor the allocator places at run time
	// (dynalloc.go), or its stand-in before the malloc (Block nil).
	dyn *dynStore
	// ov[c] lists the chunks of other tensors whose memory overlaps the
	// tensor's chunk c: a write through either is a write to both (exec.go
	// writeAliases). nil when it overlaps nothing.
	ov [][]aliasRef
}

// Allocator is one rank's CUDA caching allocator ([cachealloc.Allocator])
// in a world: every block it hands out is a tensor of the world, whose
// chunks alias those of the earlier tensors its memory overlaps.
type Allocator struct {
	*cachealloc.Allocator
	w      *World
	rank   int
	blocks []*Block // by cachealloc.Block.ID
	owner  map[*Buffer]*Block
	// Findings are the capture errors the allocation pattern causes.
	Findings []Finding
}

// NewAllocator returns rank's allocator. With caching false every malloc
// gets fresh memory and a free releases it (cudaFree synchronizes the
// device), as PYTORCH_NO_CUDA_MEMORY_CACHING=1 does.
func (w *World) NewAllocator(rank int, caching bool) *Allocator {
	return &Allocator{Allocator: cachealloc.New(rank, caching), w: w, rank: rank, owner: map[*Buffer]*Block{}}
}

// Malloc allocates a tensor of bytes and chunks on stream
// ([cachealloc.Allocator.Malloc]). The tensor's chunks alias those of
// every earlier tensor whose byte range overlaps theirs.
func (a *Allocator) Malloc(name, stream string, bytes int64, chunks int) (*Buffer, error) {
	if bytes <= 0 || chunks <= 0 {
		return nil, fmt.Errorf("%w: malloc %q: size %d bytes, %d chunks: want both positive", ErrAlloc, name, bytes, chunks)
	}
	if chunks > maxChunks {
		return nil, fmt.Errorf("%w: malloc %q: %d chunks; at most %d", ErrAlloc, name, chunks, maxChunks)
	}
	cb, err := a.Allocator.Malloc(name, stream, bytes)
	if err != nil {
		return nil, err
	}
	if cb.CaptureMalloc {
		a.Findings = append(a.Findings, Finding{
			Kind:     KindCaptureError,
			Ranks:    []int{a.rank},
			Ops:      []string{name},
			Streams:  []string{stream},
			Resource: fmt.Sprintf("rank %d tensor %q", a.rank, name),
			Message: fmt.Sprintf("rank %d: allocating %s (%s) during graph capture calls cudaMalloc without the caching allocator (PYTORCH_NO_CUDA_MEMORY_CACHING=1): the capture is invalidated (cudaErrorStreamCaptureInvalidated) and no graph is made",
				a.rank, name, cachealloc.FormatBytes(bytes)),
		})
	}
	return a.adopt(cb, chunks), nil
}

// adopt makes the tensor of cb and links its chunks with the overlapping
// chunks of every earlier tensor cb overlaps, both ways.
func (a *Allocator) adopt(cb *cachealloc.Block, chunks int) *Buffer {
	buf := a.w.Alloc(a.rank, cb.Name, cb.Requested, chunks)
	blk := &Block{Block: cb, buf: buf}
	buf.Block = blk
	a.blocks = append(a.blocks, blk)
	a.owner[buf] = blk
	for _, ob := range cb.Over {
		o := a.blocks[ob.ID].buf
		for c := range buf.Vals {
			clo, chi := chunkRange(buf, c)
			for d := range o.Vals {
				dlo, dhi := chunkRange(o, d)
				if dlo < chi && clo < dhi {
					buf.addAlias(c, o.id, d)
					o.addAlias(d, buf.id, c)
				}
			}
		}
	}
	return buf
}

// chunkRange is chunk c's bytes: [c·n/C, (c+1)·n/C) of the tensor's n
// requested bytes, from its block's address.
func chunkRange(b *Buffer, c int) (int64, int64) {
	n, k := b.Bytes, int64(len(b.Vals))
	return b.Block.Ptr + int64(c)*n/k, b.Block.Ptr + int64(c+1)*n/k
}

func (b *Buffer) addAlias(c int, other int32, chunk int) {
	blk := b.Block
	if blk.ov == nil {
		blk.ov = make([][]aliasRef, len(b.Vals))
	}
	blk.ov[c] = append(blk.ov[c], aliasRef{buf: other, chunk: int32(chunk)})
}

// RecordStream marks b as used by stream (tensor.record_stream): its block
// will not be reused before that stream's uses complete.
func (a *Allocator) RecordStream(b *Buffer, stream string) error {
	blk, ok := a.owner[b]
	if !ok {
		return fmt.Errorf("%w: record_stream on %q, which is not a live tensor of rank %d", ErrAlloc, b.Name, a.rank)
	}
	return a.Allocator.RecordStream(blk.Block, stream)
}

// Free releases b (the last Python reference dropped). Without
// record_stream uses its block is free for the next allocation on its
// stream at once, merged with its free neighbours.
func (a *Allocator) Free(b *Buffer) error {
	blk, ok := a.owner[b]
	if !ok {
		return fmt.Errorf("%w: free of %q, which is not a live tensor of rank %d", ErrAlloc, b.Name, a.rank)
	}
	delete(a.owner, b)
	return a.Allocator.Free(blk.Block)
}

// BeginCaptureOn is torch.cuda.CUDAGraph.capture_begin on stream
// ([cachealloc.Allocator.BeginCaptureOn]): the CUDA generator's seed and
// offset tensors of the first capture are tensors of the world too.
func (a *Allocator) BeginCaptureOn(stream string) error {
	made, err := a.Allocator.BeginCaptureOn(stream)
	for _, cb := range made {
		a.adopt(cb, 1)
	}
	return err
}

// Blocks returns the allocator's blocks in allocation order.
func (a *Allocator) Blocks() []*Block { return append([]*Block(nil), a.blocks...) }
