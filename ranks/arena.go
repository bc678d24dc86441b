package ranks

import "sync"

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

// slabs hands out slabs of T, reusing released ones when they are big
// enough.
type slabs[T any] struct {
	used [][]T // handed out to the world that owns the arena
	free [][]T // released by an earlier world, ready to be handed out
}

// get returns n zero values of T: a released slab when the last one is big
// enough (cleared), else a new one.
func (s *slabs[T]) get(n int) []T {
	var x []T
	if k := len(s.free); k > 0 && cap(s.free[k-1]) >= n {
		x = s.free[k-1][:n]
		s.free[k-1] = nil
		s.free = s.free[:k-1]
		clear(x)
	} else {
		x = make([]T, n)
	}
	s.used = append(s.used, x)
	return x
}

// getUnzeroed is get, but a recycled slab keeps what the last world wrote
// in it: for slabs whose every element is written before anything reads
// it (provenance nodes, value.go), whose clearing is 4 MiB a 512-rank ring.
func (s *slabs[T]) getUnzeroed(n int) []T {
	if k := len(s.free); k > 0 && cap(s.free[k-1]) >= n {
		x := s.free[k-1][:n]
		s.free[k-1] = nil
		s.free = s.free[:k-1]
		s.used = append(s.used, x)
		return x
	}
	return s.get(n)
}

// recycle makes every slab handed out free again, in the order they were
// handed out: a copy of the same template asks for the same sizes in the
// same order, so each request finds its own slab again.
func (s *slabs[T]) recycle() {
	for i := len(s.used) - 1; i >= 0; i-- {
		s.free = append(s.free, s.used[i])
		s.used[i] = nil
	}
	s.used = s.used[:0]
}

// arena is the memory one world's slabs come from (see the top of this
// file): one field per kind of slab a world carves (world.go, value.go,
// clock.go, exec.go, template.go).
type arena struct {
	tasks     slabs[task]
	taskPtrs  slabs[*task]
	provs     slabs[Prov]
	provLists slabs[ProvRef]
	clocks    slabs[VC]
	words     slabs[uint32]
	epochs    slabs[epoch]
	i32       slabs[int32]
	shadows   slabs[shadow]
	vals      slabs[Value]
	bufs      slabs[Buffer]
	races     slabs[raceKey]
	dedupes   slabs[raceDedupeKey]
	slots     slabs[sigSlot]
	kernels   slabs[KernelSpec]
	ops       slabs[HostOp]
}

func (a *arena) recycle() {
	a.tasks.recycle()
	a.taskPtrs.recycle()
	a.provs.recycle()
	a.provLists.recycle()
	a.clocks.recycle()
	a.words.recycle()
	a.epochs.recycle()
	a.i32.recycle()
	a.shadows.recycle()
	a.vals.recycle()
	a.bufs.recycle()
	a.races.recycle()
	a.dedupes.recycle()
	a.slots.recycle()
	a.kernels.recycle()
	a.ops.recycle()
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
