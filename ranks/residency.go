package ranks

import (
	"fmt"
	"slices"
	"strings"

	"github.com/collsim/collsim/ranks/gpu"
	"github.com/collsim/collsim/sim"
)

// Residency: a kernel runs only once it is resident on its GPU, and it is
// resident only when what it needs fits in what the GPU has free.
//
// The model counts at SM granularity: each block of a kernel that declares
// Blocks occupies one SM while resident. A collective's block is large (NCCL
// runs 512–640 threads per channel block with most of the SM's shared memory
// for its FIFOs, src/device/common.h; PyTorch's symmetric-memory kernels use
// up to 1024 threads per block), so two such blocks rarely share an SM, and
// counting SMs keeps the knob a user checks against a datasheet (Profile.SMs,
// or --set sms=) instead of occupancy tables per kernel. What it does not
// model: block slots per SM (several small blocks on one SM), partial
// residency (a grid that starts some blocks and waits for SMs for the rest:
// here a spinning grid is resident whole or not at all), and the hardware's
// block scheduler order (any waiting kernel may take freed SMs; exploration
// tries each).
//
// The rule, for a kernel on its rank:
//   - Spins (it waits on peers while holding its SMs): it needs
//     min(Blocks, SMs) free SMs to become resident and holds them until it
//     completes, so a kernel queued behind it for SMs waits on its peers too.
//   - not Spins, Blocks > 0: its blocks run in waves as SMs free up and
//     retire on their own, so it holds none; it waits only while every SM is
//     held (it cannot start a single block).
//   - Blocks == 0: it fits anywhere.
//   - Exclusive key: a pool of one slot per (rank, key), held until
//     completion: NCCL's one-kernel-at-a-time worst case
//     (collectives.NCCLExclusive) is this rule with a capacity of one.
//
// Config.SMs == 0 means the GPU's SMs are not counted (only Exclusive keys
// are). Which waiting kernel takes freed SMs is a scheduling choice: a
// release wakes every waiter and the engine's order (timed) or the chooser
// (untimed) decides which one steps first; the others wait again. Taking
// and releasing a pool are steps in DPOR's footprint ([Step.Pools]).

// pool is one resource of one rank that kernels draw from ([gpu.Pool]).
type pool = gpu.Pool

// residency is every rank's pools; ids are stable for a program (pools are
// made in rank, then program order), so an explorer can name them.
type residency struct {
	pools []pool
	sm    []int32           // per rank: the SM pool, or -1
	excl  map[exclKey]int32 // (rank, key) → Exclusive pool
	opEx  [][]int32         // per rank and op: the op's Exclusive pool, or -1
	// anyContended: some pool is contended (else no start is a step of
	// its own)
	anyContended bool
}

// usesResidency reports whether k draws from a pool at all.
func (w *World) demand(k *KernelSpec) (sms int, hold bool) {
	if w.cfg.SMs <= 0 || k.Blocks <= 0 {
		return 0, false
	}
	if k.Spins {
		return min(k.Blocks, w.cfg.SMs), true
	}
	return 1, false
}

// initResidency makes the pools of the programs: called by Run. A
// template's copy takes the template's, made once: only the pools change
// in a run, and they start as copies.
func (w *World) initResidency() {
	if t := w.tmpl; t != nil && t.res != nil {
		rs := *t.res
		rs.pools = slices.Clone(t.res.pools)
		w.res = &rs
		return
	}
	w.res = residencyOf(w)
}

// residencyOf returns the pools of w's programs, none in use.
func residencyOf(w *World) *residency {
	rs := &residency{sm: make([]int32, w.N), excl: map[exclKey]int32{}}
	mult := 1
	if w.cfg.Mode == Graph {
		mult = w.cfg.Replays
	}
	rs.opEx = make([][]int32, w.N)
	for r, p := range w.progs {
		if p == nil {
			p = &Program{} // as Run makes it: no ops
		}
		rs.opEx[r] = make([]int32, len(p.Ops))
		rs.sm[r] = -1
		if w.cfg.SMs > 0 {
			rs.sm[r] = int32(len(rs.pools))
			rs.pools = append(rs.pools, gpu.NewPool(r, "", w.cfg.SMs))
		}
		need := 0
		for i, op := range p.Ops {
			rs.opEx[r][i] = -1
			if op.Kind != Launch {
				continue
			}
			if n, _ := w.demand(op.Kernel); n > 0 {
				need += n * mult
			}
			if key := op.Kernel.Exclusive; key != "" {
				id, ok := rs.excl[exclKey{r, key}]
				if !ok {
					id = int32(len(rs.pools))
					rs.excl[exclKey{r, key}] = id
					rs.pools = append(rs.pools, gpu.NewPool(r, key, 1))
				}
				rs.opEx[r][i] = id
				pl := &rs.pools[id]
				pl.Contended = pl.Contended || pl.Free < pl.Cap || mult > 1
				pl.Free-- // counts demand here; reset below
			}
		}
		if rs.sm[r] >= 0 {
			rs.pools[rs.sm[r]].Contended = need > w.cfg.SMs
		}
	}
	for i := range rs.pools {
		rs.pools[i].Free = rs.pools[i].Cap
		rs.anyContended = rs.anyContended || rs.pools[i].Contended
	}
	return rs
}

// exclKey names one rank's Exclusive pool for one key (a struct, not a
// formatted string: a 512-rank world makes one per rank each run).
type exclKey struct {
	rank int
	key  string
}

// kernelPools returns the pools t draws from: its rank's SMs (-1: none) and
// its Exclusive pool (-1: none), with the SMs it needs free and whether it
// holds them.
func (w *World) kernelPools(t *task) (sm int32, need int, hold bool, ex int32) {
	sm, ex = -1, -1
	if t.op == nil || t.op.Kind != Launch {
		return
	}
	k := t.op.Kernel
	if need, hold = w.demand(k); need > 0 {
		sm = w.res.sm[t.rank]
	}
	if k.Exclusive != "" && t.node >= 0 {
		ex = w.res.opEx[t.rank][t.node]
	}
	return
}

// fits reports whether t could become resident now.
func (w *World) fits(t *task) bool {
	sm, need, _, ex := w.kernelPools(t)
	if sm >= 0 && w.res.pools[sm].Free < need {
		return false
	}
	if ex >= 0 && w.res.pools[ex].Free < 1 {
		return false
	}
	return true
}

// acquire makes t resident if it fits. It returns false when it does not:
// t stays pending, waiting on the first pool that is short, and is woken
// when that pool is released.
func (w *World) acquire(t *task) bool {
	sm, need, hold, ex := w.kernelPools(t)
	if sm < 0 && ex < 0 {
		return true
	}
	short := int32(-1)
	if sm >= 0 && w.res.pools[sm].Free < need {
		short = sm
	} else if ex >= 0 && w.res.pools[ex].Free < 1 {
		short = ex
	}
	if short >= 0 {
		t.heldBy = short + 1
		w.res.pools[short].Wait(t.id)
		return false
	}
	t.heldBy = 0
	if sm >= 0 && hold {
		w.res.pools[sm].Take(t.id, need)
	}
	if ex >= 0 {
		w.res.pools[ex].Take(t.id, 1)
	}
	return true
}

// release returns what t holds and wakes every kernel waiting on those
// pools (each tries again when it steps; the order is the engine's).
func (w *World) release(t *task) {
	sm, need, hold, ex := w.kernelPools(t)
	if sm >= 0 && hold {
		w.releasePool(sm, t.id, need)
	}
	if ex >= 0 {
		w.releasePool(ex, t.id, 1)
	}
}

func (w *World) releasePool(id int32, task int32, n int) {
	for _, wid := range w.res.pools[id].Release(task, n) {
		u := w.tasks[wid]
		u.heldBy = 0
		w.eng.Schedule(w.eng.Now(), w.key(u), int32(w.N)+wid)
	}
}

// startsAlone reports whether t's becoming resident is a step of its own,
// apart from its first micro-op: in untimed runs (what an explorer drives),
// for a kernel that takes a contended pool. Taking the pool changes state
// even when the first micro-op then spins, so an explorer must see it
// (NextStep reports it as StepStart). Timed runs keep one step.
func (w *World) startsAlone(t *task) bool {
	if !w.res.anyContended || w.eng.Mode() != sim.Untimed {
		return false
	}
	sm, _, _, ex := w.kernelPools(t)
	return (sm >= 0 && w.res.pools[sm].Contended) || (ex >= 0 && w.res.pools[ex].Contended)
}

// PoolUse is one pool a step takes or releases: Pool is stable for a
// program (see residency); Hold is set when the step keeps a share
// (a kernel becoming resident) or returns one (its completion); a
// non-spinning kernel's start only reads the pool (it needs an SM free).
type PoolUse struct {
	Pool      int32
	Hold      bool
	Contended bool
}

// pools lists what t's first step takes (start) or its completion returns.
func (w *World) poolUses(t *task, start bool) []PoolUse {
	sm, _, hold, ex := w.kernelPools(t)
	var out []PoolUse
	if sm >= 0 && (start || hold) {
		out = append(out, PoolUse{Pool: sm, Hold: hold, Contended: w.res.pools[sm].Contended})
	}
	if ex >= 0 {
		out = append(out, PoolUse{Pool: ex, Hold: true, Contended: w.res.pools[ex].Contended})
	}
	return out
}

// waitEdges is the hang analysis's wait-for edges of a kernel waiting for
// residency: every holder of the pool it waits on.
func (w *World) waitEdges(t *task) []int32 {
	if t.heldBy <= 0 {
		return nil
	}
	return w.res.pools[t.heldBy-1].Holders
}

// residencyReason says what a waiting kernel waits for.
func (w *World) residencyReason(t *task) string {
	pl := &w.res.pools[t.heldBy-1]
	names := make([]string, len(pl.Holders))
	for i, h := range pl.Holders {
		names[i] = w.taskName(h)
	}
	if pl.Key != "" {
		return fmt.Sprintf("waits for the GPU: %s holds %q", strings.Join(names, ", "), pl.Key)
	}
	need, _ := w.demand(t.op.Kernel)
	return fmt.Sprintf("waits for the GPU: needs %d of rank %d's %d SMs, %d free; held by %s", need, t.rank, pl.Cap, pl.Free, strings.Join(names, ", "))
}
