package ranks

import (
	"errors"
	"fmt"
	"sort"
)

// Caching-allocator constants, from PyTorch's CUDACachingAllocator.cpp:
// requests are rounded up to kMinBlockSize (512 bytes); requests up to
// kSmallSize (1 MiB) are served from the small pool, larger ones from the
// large pool, and a block never moves between pools.
const (
	AllocRound     int64 = 512
	AllocSmallSize int64 = 1 << 20
)

// ErrAlloc wraps every allocator misuse (double free, unknown tensor).
var ErrAlloc = errors.New("allocator")

// Block is one caching-allocator block: a range of device memory owned by
// the stream it was first allocated on. Every tensor handed this block
// aliases the same memory: the same value chunks and the same
// happens-before shadow, so a use after free is seen by the race detector
// and in the values.
type Block struct {
	ID     int
	Rank   int
	Stream string // the stream whose pool owns the block
	Bytes  int64  // rounded size
	// Tensors lists, in order, the tensors that lived in this block.
	Tensors []string

	vals  []Value
	sh    []shadow
	inUse bool
	// pending is set when the block was freed with record_stream uses
	// outstanding: it returns to the pool only after those uses complete.
	pending bool
	uses    []string // record_stream streams
}

// Allocator is one rank's CUDA caching allocator, run in host issue order
// (the allocator is a host-side structure: its decisions are a function of
// the order of malloc, free and record_stream calls, never of device time).
//
// The rule it models: a block freed by a tensor allocated on stream A goes
// back to A's pool at once and is handed to the next fitting allocation on
// A, even while another stream may still read it, unless [Allocator.RecordStream]
// marked it used by that stream; then the free is deferred until those uses
// complete. The allocator does not know about events: if the streams were
// joined before the free, the reuse is ordered by happens-before and is
// safe; if not, it is a use after free, which the race detector reports.
//
// Deferred frees: PyTorch records an event on each used stream and returns
// the block when a later malloc finds those events complete. The host runs
// ahead of the device here, so the model answers "not complete" until the
// host synchronizes ([Allocator.Synchronize]); that is the safe direction.
type Allocator struct {
	w       *World
	rank    int
	caching bool
	blocks  []*Block
	owner   map[*Buffer]*Block
	// Log records every decision, in order ("malloc L0.rt_out 16 KiB on main:
	// reuses block #0 (freed by L0.x_norm)").
	Log []string
}

// NewAllocator returns rank's allocator. With caching false every malloc
// gets fresh memory and a free releases it (cudaFree synchronizes the
// device), as PYTORCH_NO_CUDA_MEMORY_CACHING=1 does.
func (w *World) NewAllocator(rank int, caching bool) *Allocator {
	return &Allocator{w: w, rank: rank, caching: caching, owner: map[*Buffer]*Block{}}
}

// RoundSize is the block size a request of n bytes is served with.
func RoundSize(n int64) int64 {
	if n < AllocRound {
		return AllocRound
	}
	return (n + AllocRound - 1) / AllocRound * AllocRound
}

func small(n int64) bool { return n <= AllocSmallSize }

// Malloc allocates a tensor of bytes and chunks on stream. It reuses the
// best-fitting free block of stream's pool (same small/large pool, at least
// the rounded size, at least as many value chunks; smallest first, then
// lowest id) or creates a new block.
func (a *Allocator) Malloc(name, stream string, bytes int64, chunks int) (*Buffer, error) {
	if bytes <= 0 || chunks <= 0 {
		return nil, fmt.Errorf("%w: malloc %q: size %d bytes, %d chunks: want both positive", ErrAlloc, name, bytes, chunks)
	}
	size := RoundSize(bytes)
	var best *Block
	if a.caching {
		for _, b := range a.blocks {
			if b.inUse || b.pending || b.Stream != stream || small(b.Bytes) != small(size) || b.Bytes < size || len(b.vals) < chunks {
				continue
			}
			if best == nil || b.Bytes < best.Bytes {
				best = b
			}
		}
	}
	buf := &Buffer{Name: name, Rank: a.rank, Bytes: bytes, id: int32(len(a.w.bufs))}
	if best != nil {
		buf.Vals, buf.sh = best.vals[:chunks:chunks], best.sh[:chunks:chunks]
		a.Log = append(a.Log, fmt.Sprintf("malloc %s (%d B) on %s: reuses block #%d (%d B, last held %s)", name, bytes, stream, best.ID, best.Bytes, best.Tensors[len(best.Tensors)-1]))
	} else {
		best = &Block{ID: len(a.blocks), Rank: a.rank, Stream: stream, Bytes: size, vals: make([]Value, chunks), sh: make([]shadow, chunks)}
		a.blocks = append(a.blocks, best)
		buf.Vals, buf.sh = best.vals, best.sh
		a.Log = append(a.Log, fmt.Sprintf("malloc %s (%d B) on %s: new block #%d (%d B)", name, bytes, stream, best.ID, size))
	}
	best.inUse, best.uses = true, nil
	best.Tensors = append(best.Tensors, name)
	buf.Block = best
	a.owner[buf] = best
	a.w.bufs = append(a.w.bufs, buf)
	return buf, nil
}

// RecordStream marks b as used by stream (tensor.record_stream): its block
// will not be reused before that stream's uses complete.
func (a *Allocator) RecordStream(b *Buffer, stream string) error {
	blk, ok := a.owner[b]
	if !ok || !blk.inUse {
		return fmt.Errorf("%w: record_stream on %q, which is not a live tensor of rank %d", ErrAlloc, b.Name, a.rank)
	}
	if stream != blk.Stream {
		blk.uses = append(blk.uses, stream)
	}
	return nil
}

// Free releases b (the last Python reference dropped). Without
// record_stream uses the block is free for the next allocation on its
// stream at once.
func (a *Allocator) Free(b *Buffer) error {
	blk, ok := a.owner[b]
	if !ok || !blk.inUse {
		return fmt.Errorf("%w: free of %q, which is not a live tensor of rank %d", ErrAlloc, b.Name, a.rank)
	}
	delete(a.owner, b)
	blk.inUse = false
	switch {
	case !a.caching:
		// cudaFree: the memory goes back to the driver; the next malloc
		// gets new memory.
		blk.pending = true
		a.Log = append(a.Log, fmt.Sprintf("free %s: block #%d released to the driver (no caching)", b.Name, blk.ID))
	case len(blk.uses) > 0:
		blk.pending = true
		a.Log = append(a.Log, fmt.Sprintf("free %s: block #%d deferred until its uses on %v complete (record_stream)", b.Name, blk.ID, blk.uses))
	default:
		a.Log = append(a.Log, fmt.Sprintf("free %s: block #%d back in stream %s's pool", b.Name, blk.ID, blk.Stream))
	}
	return nil
}

// Synchronize is a device synchronize seen by the allocator: every deferred
// free completes (its recorded uses are done) and the block returns to its
// stream's pool.
func (a *Allocator) Synchronize() {
	for _, b := range a.blocks {
		if b.pending && a.caching {
			b.pending = false
			b.uses = nil
		}
	}
}

// Blocks returns the allocator's blocks by id.
func (a *Allocator) Blocks() []*Block {
	out := append([]*Block(nil), a.blocks...)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// describe names the block for reports.
func (b *Block) describe() string {
	s := fmt.Sprintf("caching-allocator block #%d of stream %s's pool", b.ID, b.Stream)
	if len(b.Tensors) > 1 {
		s += fmt.Sprintf(", which held %v in turn", b.Tensors)
	}
	return s
}
