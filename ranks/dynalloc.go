package ranks

import (
	"fmt"

	"github.com/collsim/collsim/mutant"
	"github.com/collsim/collsim/ranks/cachealloc"
)

// The caching allocator at run time.
//
// A block freed after record_stream goes back to its pool when a later
// malloc finds the events its free recorded complete: PyTorch's
// DeviceCachingAllocator::free calls insert_events (one cudaEventRecord on
// each stream in the block's stream_uses), and malloc first calls
// process_events, which cudaEventQuery's each outstanding event and calls
// free_block on a block whose last event is done (c10/cuda/
// CUDACachingAllocator.cpp, pytorch/pytorch at 001074d2). Whether the
// recorded streams' work is done when the host reaches the malloc is a race
// between the host and the device: a host that runs ahead sees "not ready"
// and the malloc takes other memory; a device that caught up hands the
// freed block out again, and a stream that read the tensor without being
// recorded may still be reading it.
//
// [Allocator] runs in host issue order while the world is built and cannot
// see the device; a program whose frees wait for record_stream events runs
// its allocator here instead, as the host reaches each call ([MemCall],
// carried by the host op it precedes). The free's events are Record ops of
// the program on the recorded streams ([HostOp.FreeEvent]); a malloc reads
// whether each pending free's record tasks are done at that point of the
// simulated timeline, and so does an explorer: the malloc's issue step
// reads each event's completion ([Step.Queries]), which the record task's
// completion writes ([Step.FreeEvent]), so DPOR explores both orders. When
// a malloc finds a free's events done, the host has seen that work finish:
// every task it issues afterwards is ordered after those records, as after
// a host sync (host.acq), so the recorded streams' reads never race with
// the new tenant's writes, while an unrecorded stream's can.
//
// Every malloc links the new tensor's chunks with those of the earlier
// tensors its block overlaps, as [Allocator.Malloc] does at build time;
// until then the tensor's memory is its own. Its chunks start with the
// bytes the last tenant left (values and the last write's epoch). A buffer
// of such a tensor ([World.AllocDeferred]) has a stand-in [Block] with no
// allocator block until its malloc gives it its own, and counts, for the passes that run
// before anything does (which lanes share memory, coarse steps, derived
// replay inputs), as memory every such tensor of its rank may share.

// MemKind is a call into the caching allocator.
type MemKind uint8

const (
	// MemMalloc allocates Buf (Bytes bytes) on Stream.
	MemMalloc MemKind = iota
	// MemFree frees Buf; with record_stream uses, its events are the
	// Record ops at Events (indexes into Program.Ops).
	MemFree
	// MemRecordStream marks Buf as used by Stream.
	MemRecordStream
	// MemEmptyCache is torch.cuda.empty_cache() after its device sync.
	MemEmptyCache
)

// MemCall is one call the host makes into its rank's caching allocator at
// run time, just before issuing the op that carries it ([HostOp.Mem]).
type MemCall struct {
	Kind   MemKind
	Buf    *Buffer
	Stream string
	Bytes  int64
	Events []int
}

// dynStore is the memory of the tensors of one rank's run-time allocator,
// as the static passes see it (Buffer.storage): any of them may come to
// overlap any other.
type dynStore struct{ rank int }

// AllocDeferred makes a tensor of rank's caching allocator whose block is
// chosen at run time, by the [MemMalloc] call the host makes for it.
func (w *World) AllocDeferred(rank int, name string, bytes int64, chunks int) (*Buffer, error) {
	if bytes <= 0 || chunks <= 0 {
		return nil, fmt.Errorf("%w: malloc %q: size %d bytes, %d chunks: want both positive", ErrAlloc, name, bytes, chunks)
	}
	if chunks > maxChunks {
		return nil, fmt.Errorf("%w: malloc %q: %d chunks; at most %d", ErrAlloc, name, chunks, maxChunks)
	}
	if w.dynStores == nil {
		w.dynStores = map[int]*dynStore{}
	}
	ds := w.dynStores[rank]
	if ds == nil {
		ds = &dynStore{rank: rank}
		w.dynStores[rank] = ds
	}
	b := w.Alloc(rank, name, bytes, chunks)
	b.Block = &Block{buf: b, dyn: ds}
	return b, nil
}

// dynAlloc is one rank's caching allocator in a run.
type dynAlloc struct {
	a     *cachealloc.Allocator
	bufs  []*Buffer        // by cachealloc block ID
	block map[int32]*Block // by buffer id: the live tensors
	pend  []pendingFree    // frees waiting for their events, in free order
}

type pendingFree struct {
	blk    *cachealloc.Block
	events []int // op indexes of the Record ops
}

func (w *World) dynOf(r int) *dynAlloc {
	if w.dyn == nil {
		w.dyn = make([]*dynAlloc, w.N)
	}
	d := w.dyn[r]
	if d == nil {
		d = &dynAlloc{a: cachealloc.New(r, true), block: map[int32]*Block{}}
		d.a.Quiet()
		w.dyn[r] = d
	}
	return d
}

// runMem makes rank r's allocator calls that precede its next op.
func (w *World) runMem(r int, calls []MemCall) {
	d := w.dynOf(r)
	for i := range calls {
		c := &calls[i]
		var err error
		switch c.Kind {
		case MemMalloc:
			err = w.memMalloc(r, d, c)
		case MemFree:
			b := w.bufOf(c.Buf)
			blk := d.block[b.id]
			if blk == nil {
				err = fmt.Errorf("%w: free of %q, which is not a live tensor of rank %d", ErrAlloc, b.Name, r)
				break
			}
			delete(d.block, b.id)
			if err = d.a.Free(blk.Block); err == nil && d.a.Pending(blk.Block) {
				d.pend = append(d.pend, pendingFree{blk: blk.Block, events: c.Events})
			}
		case MemRecordStream:
			b := w.bufOf(c.Buf)
			blk := d.block[b.id]
			if blk == nil {
				err = fmt.Errorf("%w: record_stream on %q, which is not a live tensor of rank %d", ErrAlloc, b.Name, r)
				break
			}
			err = d.a.RecordStream(blk.Block, c.Stream)
		case MemEmptyCache:
			// After its device sync every event is done (release_cached_blocks
			// synchronizes them first).
			d.pend = d.pend[:0]
			d.a.EmptyCache()
		}
		if err != nil {
			panic(fmt.Sprintf("ranks: rank %d allocator at run time: %v", r, err)) // the build checked the calls
		}
	}
}

// pendingEvents calls f with the task of each event of a free still
// waiting on rank r (the reads a malloc there makes: process_events).
func (w *World) pendingEvents(r int, f func(id int32)) {
	if w.dyn == nil || w.dyn[r] == nil {
		return
	}
	h := &w.hosts[r]
	for _, p := range w.dyn[r].pend {
		for _, op := range p.events {
			if op < h.next {
				f(h.base[op])
			}
		}
	}
}

// memMalloc is process_events, then the malloc.
func (w *World) memMalloc(r int, d *dynAlloc, c *MemCall) error {
	h := &w.hosts[r]
	kept := d.pend[:0]
	for _, p := range d.pend {
		ready := true
		for _, op := range p.events {
			if op >= h.next || w.tasks[h.base[op]].state != done {
				ready = false
				break
			}
		}
		if mutant.On(mutant.DeferredFreeAtSyncOnly) {
			ready = false
		}
		if !ready {
			kept = append(kept, p)
			continue
		}
		d.a.Release(p.blk)
		for _, op := range p.events {
			// The host saw the recorded work finish: what it issues
			// from now on is ordered after it.
			h.acq = append(h.acq, h.base[op])
		}
		w.eng.Mix2(uint64(p.blk.ID)|1<<62, uint64(r))
	}
	clear(d.pend[len(kept):])
	d.pend = kept
	b := w.bufOf(c.Buf)
	cb, err := d.a.Malloc(b.Name, c.Stream, c.Bytes)
	if err != nil {
		return err
	}
	w.eng.Mix2(uint64(cb.Ptr), uint64(b.id)|1<<61)
	if len(d.bufs) <= cb.ID {
		d.bufs = append(d.bufs, make([]*Buffer, cb.ID+1-len(d.bufs))...)
	}
	d.bufs[cb.ID] = b
	blk := &Block{Block: cb, buf: b, dyn: b.Block.dyn}
	b.Block = blk
	d.block[b.id] = blk
	for _, ob := range cb.Over {
		o := d.bufs[ob.ID]
		for ci := range b.Vals {
			clo, chi := chunkRange(b, ci)
			for di := range o.Vals {
				dlo, dhi := chunkRange(o, di)
				if dlo < chi && clo < dhi {
					b.addAlias(ci, o.id, di)
					o.addAlias(di, b.id, ci)
					// The memory holds what its last tenant left.
					if !b.inited {
						b.Vals[ci] = o.Vals[di]
					}
					if b.sh != nil && o.sh != nil {
						b.sh[ci].w = o.sh[di].w
					}
				}
			}
		}
	}
	return nil
}

// allocatesAtRunTime reports whether p calls its caching allocator at run
// time (such a rank is never folded: its memory's aliases are its own).
func (p *Program) allocatesAtRunTime() bool {
	for i := range p.Ops {
		if len(p.Ops[i].Mem) > 0 || p.Ops[i].FreeEvent {
			return true
		}
	}
	return false
}

// mallocs reports whether calls include a malloc (which queries the
// pending frees' events).
func (w *World) mallocs(calls []MemCall) bool {
	for i := range calls {
		if calls[i].Kind == MemMalloc {
			return true
		}
	}
	return false
}
