package ranks

import (
	"sync"

	"github.com/collsim/collsim/ranks/slab"
)

// Recycling a run's memory.
//
// Exploring a config runs copies of one template thousands of times, and
// each copy used to allocate its tasks, provenance nodes, clock snapshots,
// shadow memory and value chunks afresh: about 230 KB per tp8 schedule,
// which the collector then had to find and free. A world carves all of
// these from slabs, and an arena remembers every slab it handed out. When
// the caller is done with a run ([World.Release]), its arena goes back to
// its template, and the template's next copy carves from the same slabs,
// already in the cache, instead of asking the allocator.
//
// Recycled memory never reaches a result: a slab is cleared before it is
// handed out again, so a world sees exactly the zero memory a fresh
// allocation would give it (check.TestPropRecycledRunEqualsFreshRun).

// arena is the memory one world's slabs come from (see the top of this
// file): one field per kind of slab a world carves (world.go, value.go,
// clock.go, exec.go, template.go).
type arena struct {
	tasks     slab.Slabs[task]
	taskPtrs  slab.Slabs[*task]
	provs     slab.Slabs[Prov]
	provLists slab.Slabs[ProvRef]
	clocks    slab.Slabs[VC]
	words     slab.Slabs[uint32]
	epochs    slab.Slabs[epoch]
	i32       slab.Slabs[int32]
	shadows   slab.Slabs[shadow]
	vals      slab.Slabs[Value]
	bufs      slab.Slabs[Buffer]
	races     slab.Slabs[raceKey]
	dedupes   slab.Slabs[raceDedupeKey]
	slots     slab.Slabs[sigSlot]
	kernels   slab.Slabs[KernelSpec]
	ops       slab.Slabs[HostOp]
}

func (a *arena) recycle() {
	a.tasks.Recycle()
	a.taskPtrs.Recycle()
	a.provs.Recycle()
	a.provLists.Recycle()
	a.clocks.Recycle()
	a.words.Recycle()
	a.epochs.Recycle()
	a.i32.Recycle()
	a.shadows.Recycle()
	a.vals.Recycle()
	a.bufs.Recycle()
	a.races.Recycle()
	a.dedupes.Recycle()
	a.slots.Recycle()
	a.kernels.Recycle()
	a.ops.Recycle()
}

// arenas is a template's released arenas, the last released first (its
// memory is the likeliest to be in the cache). A template lives as long as
// its exploration, and holds at most as many arenas as there were worlds
// alive at once (the workers' and those waiting to be merged). Which arena
// a copy gets cannot change its run: every slab is cleared.
type arenas struct {
	mu   sync.Mutex
	free []*arena
}

func (as *arenas) get() *arena {
	as.mu.Lock()
	defer as.mu.Unlock()
	if k := len(as.free); k > 0 {
		a := as.free[k-1]
		as.free[k-1] = nil
		as.free = as.free[:k-1]
		return a
	}
	return new(arena)
}

func (as *arenas) put(a *arena) {
	a.recycle()
	as.mu.Lock()
	as.free = append(as.free, a)
	as.mu.Unlock()
}

// Release ends w's life: neither w nor anything its run returned that
// points into it (its buffers' values and their provenance, findings whose
// messages are not yet formatted, its timeline) may be used afterwards.
// For a template's copy ([Template.Instantiate]), w's memory then serves
// the template's next copy. Release is how an explorer that keeps only a
// schedule's verdict, findings and hashes runs without allocating; a
// caller that keeps the world simply never calls it.
func (w *World) Release() {
	if w.mem == nil {
		return // released already
	}
	if w.tmpl != nil {
		w.tmpl.arenas.put(w.mem)
	}
	w.mem = nil
}

// memSlabs is where a world's tasks, values, buffers, shadow readers and
// provenance nodes are carved from, and the arena every slab comes from.
type memSlabs struct {
	// blocks that buffers and their chunks are carved from (Alloc)
	valMem []Value
	bufMem []Buffer
	// where every slab comes from (arena.go); nil once released
	mem  *arena
	tmpl *Template // a template's copy: where Release returns mem

	i32Slab   []int32     // see int32s
	i32Free   [][][]int32 // freed lists by capacity (freeI32)
	mores     [][]epoch   // readers of a chunk beyond shadow.r0 (exec.go), by shadow.more
	epochSlab []epoch     // see epochs
	taskSlab  []task      // where the next tasks are allocated (allocTask)
	provs     []Prov      // where the next provenance nodes are allocated (value.go)
	provNext  ProvRef     // the ref of provs[0]
	provTab   provTable
}
