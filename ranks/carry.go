package ranks

import (
	"slices"

	"github.com/collsim/collsim/ranks/hb"
)

// Which clock entries a lane carries.
//
// sharedLanes keeps an unshared lane's entry out of every release. That is
// not enough once a buffer is shared on every rank: in a TP group whose
// ranks each have a compute stream A and a communication stream B that
// share buffers, every lane is shared, each ring message carries its
// sender's whole clock, and every clock grows to the group's 2·TP lanes.
// A ring hop then changes about half of the receiver's entries (every lane
// ticks once per hop, and the news travels one hop per step), so no clock
// structure that keeps whole clocks, tree clocks included, does less than
// Θ(TP) work per message: Θ(TP³) for the Θ(TP²) messages of a layer.
//
// Yet rank r's entries are only ever read on rank r: the only lane that
// checks an access of A_r against its own is B_r, and the other way round.
// Every race check at lane M reads one entry, that of the lane L whose
// epoch sits in the shadow of a location both touched: L and M are
// partners (they touch one buffer's storage, one side of a pad or one side
// of a FIFO: walkLocations). Entry L must therefore be exact in M's clock
// when M checks, and nowhere else matters except on the way there.
//
// Take the chain of releases and acquires that brought M its value of L:
// L, Y1, …, Yk, M. Cut it after the last L on it (L's own entry only grows,
// so that release carries at least the value), and before the first M
// after that (M's clock only grows, so M had the value from then on). What
// is left has every Yi different from L and M, so in the static lane graph
// G (an edge X→Y when Y can acquire a release of X: a task dependency, a
// pad's put into its wait, a FIFO's send into its receive, a flag store
// into a flag wait on the same buffer) Yi is
// reachable from L without passing M, and reaches M without passing L. A
// lane X that is no such Yi for any partner M of L never needs L's entry:
// acquires drop it (carry.filter). Every check then reads exactly the value
// the full vector clock would give (the largest value of L on any chain is
// carried along it), so race detection is unchanged; it is the
// thread-local filter of sharedLanes, extended from "is anybody
// interested" to "is this lane on a way to somebody interested".
//
// For the TP group: A_r's only out-edges go to B_r, so nothing is on a way
// from A_r to B_r but themselves, and B_r's way to A_r goes through no
// other lane. Every clock keeps its own rank's two entries, and a ring
// message costs O(1) whatever TP is.
//
// The analysis is static (programs, not schedules) and deterministic.
// Where it would cost too much — a location touched by many lanes, a lane
// with many partners, or a total budget of graph steps spent — the lane's
// entry travels everywhere, as sharedLanes alone has it.
type carry = hb.Carry

// FullClocks turns the carry filter off for w's run: every shared lane's
// clock entry travels to every lane, as before the filter existed. A debug
// switch and the bench's baseline (perf, clocks-vs-full): results are the
// same either way, only time and memory differ. Call it before Run.
func (w *World) FullClocks() { w.noCarry = true }

// Limits of the analysis (beyond them, a lane's entry travels everywhere).
const (
	carryClique   = 16       // lanes touching one location
	carryPartners = 16       // partners of one lane
	carryBudget   = 64 << 20 // graph steps in all
)

// bufLanes lists, per buffer, the lanes doing something to it (in
// first-seen order, each lane once).
type bufLanes struct {
	ix    map[*Buffer]int
	bufs  []*Buffer
	lanes [][]int32
}

func (b *bufLanes) add(buf *Buffer, lane int32) {
	if b.ix == nil {
		b.ix = map[*Buffer]int{}
	}
	i, ok := b.ix[buf]
	if !ok {
		i = len(b.bufs)
		b.ix[buf] = i
		b.bufs = append(b.bufs, buf)
		b.lanes = append(b.lanes, nil)
	}
	if !slices.Contains(b.lanes[i], lane) {
		b.lanes[i] = append(b.lanes[i], lane)
	}
}

func (b *bufLanes) of(buf *Buffer) []int32 {
	if i, ok := b.ix[buf]; ok {
		return b.lanes[i]
	}
	return nil
}

// flagLanes returns, per buffer, the lanes that store flags into it
// (OpFlagPut) and the lanes that wait on flags in it (OpFlagWait). A
// generated kernel that is not [Enumerable] does not say which micro-ops
// it has: it counts as both for every buffer it names.
//
// A folded rank's kernel is its proto's renamed: the proto's flag
// accesses are listed once and renamed (as walkLocations does).
func flagLanes(progs []*Program, laneBase []int32) (puts, waits bufLanes) {
	eachLocation(progs, laneBase, flagLocations, func(_ int, fold *fold, lane int32, l loc) {
		b := l.b
		if fold != nil {
			b = fold.buf(b)
		}
		if l.kind == locFlagPut {
			puts.add(b, lane)
		} else {
			waits.add(b, lane)
		}
	})
	return puts, waits
}

// flagLocations calls f for the buffers kernel k stores flags into
// (locFlagPut) and polls (locFlagWait). A generated kernel that is not
// [Enumerable] counts as both for every buffer it names.
func flagLocations(k *KernelSpec, scratch *Instr, f func(loc)) {
	if k.listed(scratch, func(in *Instr) {
		switch {
		case in.Dst == nil:
		case in.Op == OpFlagPut:
			f(loc{kind: locFlagPut, b: in.Dst})
		case in.Op == OpFlagWait:
			f(loc{kind: locFlagWait, b: in.Dst})
		}
	}) {
		return
	}
	for _, b := range k.Gen.Refs().Buffers {
		if b != nil {
			f(loc{kind: locFlagPut, b: b})
			f(loc{kind: locFlagWait, b: b})
		}
	}
}

// laneGraph is the static lane graph: out[x] are the lanes that can
// acquire a release of x, in[y] the lanes y can acquire from. Lists are
// sorted and have no duplicates or self-loops.
type laneGraph struct {
	out, in [][]int32
}

// carryLanes computes which entries each of nl lanes keeps, from the
// programs, their lowered nodes (the task dependencies) and whether they
// run as CUDA graphs (a replay's join task, on each rank's first lane,
// follows every node and precedes the next replay's roots).
func carryLanes(progs []*Program, laneBase []int32, nl int32, nodes [][]node, graph bool) *carry {
	c := &carry{Need: make([][]int32, nl), All: make([]bool, nl)}
	// Locations, numbered in first-seen order, and the lanes touching
	// each (a lane once).
	var ix locIndex
	var locLanes [][]int32
	var keys []any // the pad and FIFO sides, the only keys read back
	walkLocations(progs, laneBase, func(k any, lane int32) {
		i, added := ix.index(k)
		if added {
			locLanes = append(locLanes, nil)
			switch k.(type) {
			case *padSide, *fifoSide:
				keys = append(keys, k)
			}
		}
		if !slices.Contains(locLanes[i], lane) {
			locLanes[i] = append(locLanes[i], lane)
		}
	})

	var edges []uint64
	edge := func(a, b int32) {
		if a != b {
			edges = append(edges, uint64(a)<<32|uint64(uint32(b)))
		}
	}
	for r, ns := range nodes {
		base := laneBase[r]
		for _, n := range ns {
			for _, d := range n.deps {
				edge(base+int32(ns[d].stream), base+int32(n.stream))
			}
			if graph {
				edge(base+int32(n.stream), base)
				edge(base, base+int32(n.stream))
			}
		}
	}
	for _, k := range keys {
		i, _ := ix.lookup(k)
		var other any
		switch s := k.(type) {
		case *padSide:
			if !s.put {
				continue
			}
			other = s.p.side(false)
		case *fifoSide:
			if !s.send {
				continue
			}
			other = s.f.side(false)
		default:
			continue
		}
		j, ok := ix.lookup(other)
		if !ok {
			continue
		}
		for _, a := range locLanes[i] {
			for _, b := range locLanes[j] {
				edge(a, b)
			}
		}
	}
	// Device-side flags (flags.go): a flag wait acquires the release of
	// the flag put whose value it observed in the same buffer.
	puts, waits := flagLanes(progs, laneBase)
	for i, b := range puts.bufs {
		for _, w := range waits.of(b) {
			for _, a := range puts.lanes[i] {
				edge(a, w)
			}
		}
	}
	g := newLaneGraph(nl, edges)

	// Partners, per lane.
	partners := make([][]int32, nl)
	for _, ls := range locLanes {
		if len(ls) < 2 {
			continue
		}
		if len(ls) > carryClique {
			for _, l := range ls {
				c.All[l] = true
			}
			continue
		}
		for _, a := range ls {
			for _, b := range ls {
				if a != b {
					partners[a] = append(partners[a], b)
				}
			}
		}
	}

	s := newReachScratch(nl)
	budget := carryBudget
	set := make([]int32, 0, 16)
	for l := range nl {
		ps := partners[l]
		if len(ps) == 0 || c.All[l] {
			continue
		}
		slices.Sort(ps)
		ps = slices.Compact(ps)
		if len(ps) > carryPartners || budget <= 0 {
			c.All[l] = true
			continue
		}
		set = set[:0]
		s.setGen++
		add := func(x int32) {
			if s.inSet[x] != s.setGen {
				s.inSet[x] = s.setGen
				set = append(set, x)
			}
		}
		for _, m := range ps {
			add(m)
			for _, x := range g.between(l, m, s, &budget) {
				add(x)
			}
		}
		if budget <= 0 || len(set) > max(64, int(nl)/8) {
			c.All[l] = true
			continue
		}
		for _, x := range set {
			c.Need[x] = append(c.Need[x], l) // l ascends: each list stays sorted
		}
	}
	return c
}

// newLaneGraph builds the graph of nl lanes from packed edges a<<32|b.
func newLaneGraph(nl int32, edges []uint64) *laneGraph {
	slices.Sort(edges)
	edges = slices.Compact(edges)
	g := &laneGraph{out: make([][]int32, nl), in: make([][]int32, nl)}
	for _, e := range edges {
		a, b := int32(e>>32), int32(uint32(e))
		g.out[a] = append(g.out[a], b)
	}
	for _, e := range edges { // sorted by a: each in-list comes out sorted
		a, b := int32(e>>32), int32(uint32(e))
		g.in[b] = append(g.in[b], a)
	}
	return g
}

// reachScratch holds the marks of the graph searches, by generation, so
// that no search clears them.
type reachScratch struct {
	f, b, r     []uint32 // forward, backward and restricted-search marks
	inSet       []uint32
	gen, setGen uint32
	qf, qb, qr  []int32
}

func newReachScratch(nl int32) *reachScratch {
	return &reachScratch{f: make([]uint32, nl), b: make([]uint32, nl), r: make([]uint32, nl), inSet: make([]uint32, nl)}
}

// between returns the lanes other than l and m that lie on a path from l
// to m that passes neither l nor m in between: reachable from l without
// passing m, and reaching m without passing l. Both searches advance in
// turn and the first to finish bounds the answer: every lane on such a
// path before m is in the forward set, and every lane after l is in the
// backward set, so a search restricted to the finished set finds them
// all. The answer is valid until the next call; budget is charged one per
// edge looked at.
func (g *laneGraph) between(l, m int32, s *reachScratch, budget *int) []int32 {
	s.gen++
	gen := s.gen
	qf, qb := append(s.qf[:0], l), append(s.qb[:0], m)
	s.f[l], s.b[m] = gen, gen
	hf, hb := 0, 0
	for {
		if hf == len(qf) {
			// Forward done: lanes of it (but l) that reach m within it.
			s.qf, s.qb = qf, qb
			return g.restricted(m, g.in, s.f, l, s, budget)
		}
		if hb == len(qb) {
			s.qf, s.qb = qf, qb
			return g.restricted(l, g.out, s.b, m, s, budget)
		}
		if *budget <= 0 {
			s.qf, s.qb = qf, qb
			return nil // the caller sees the budget spent and gives up on l
		}
		a := qf[hf]
		hf++
		for _, y := range g.out[a] {
			if y != m && s.f[y] != gen {
				s.f[y] = gen
				qf = append(qf, y)
			}
		}
		b := qb[hb]
		hb++
		for _, x := range g.in[b] {
			if x != l && s.b[x] != gen {
				s.b[x] = gen
				qb = append(qb, x)
			}
		}
		*budget -= len(g.out[a]) + len(g.in[b])
	}
}

// restricted searches from start along adj, visiting only lanes marked gen
// in within and never skip, and returns what it visited but start.
func (g *laneGraph) restricted(start int32, adj [][]int32, within []uint32, skip int32, s *reachScratch, budget *int) []int32 {
	gen := s.gen
	q := append(s.qr[:0], start)
	s.r[start] = gen
	for h := 0; h < len(q); h++ {
		*budget -= len(adj[q[h]])
		for _, y := range adj[q[h]] {
			if y != skip && within[y] == gen && s.r[y] != gen {
				s.r[y] = gen
				q = append(q, y)
			}
		}
	}
	s.qr = q
	return q[1:]
}
