package ranks

import (
	"fmt"

	"github.com/collsim/collsim/mutant"
	"github.com/collsim/collsim/ranks/findings"
)

// Device-side flags in simulated memory: the protocol a custom all-reduce
// is written in. A flag is a chunk of a buffer — a rank's tensor, or one
// rank's copy of a symmetric buffer, which a peer reaches over NVLink —
// and its value is the chunk's value, so the data word itself can be the
// flag (Lamport-style in-band flags: a sentinel value means "not yet
// written"). Three micro-ops act on flags:
//
//   - [OpFlagPut] stores a value (Instr.Slot, or the chunks of Srcs[0]: the
//     data itself) into chunks [DstLo, DstLo+N) of Dst with release
//     semantics: st.release.sys in vLLM's custom all-reduce
//     (csrc/custom_all_reduce.cuh, st_flag_release), TensorRT-LLM's
//     st_flag_release (cpp/tensorrt_llm/kernels/customAllReduceKernels.cu).
//     With Instr.Fresh the store is relaxed instead: a reset that re-arms a
//     flag or clears a Lamport buffer (it releases nothing).
//   - [OpFlagWait] spins until every chunk of the region compares true with
//     Instr.Slot (or, with Srcs, chunk Srcs[0].Lo of Srcs[0].Buf: a value
//     in device memory, such as a colour counter) under Instr.Cmp (vLLM's `while (ld_flag_acquire(...) !=
//     flag)`, a Lamport poll `while (is_neg_zero(v))`). It acquires the
//     release clock of the put whose value each chunk holds — only when the
//     chunk still holds exactly the value that put stored: a wait that is
//     satisfied by a stale value, a reset, or a plain store acquires
//     nothing, so what it orders is what the protocol really ordered.
//   - [OpFault] is an access through an address the rank never mapped (a
//     peer's buffer that was not registered, an IPC handle never opened): a
//     CUDA illegal memory access. It reports [KindInvalidAccess].
//
// Flag stores and waits are atomics: two of them on one chunk never race
// with each other (the C++/PTX memory model: a data race needs a
// non-atomic access). A flag store is checked against the chunk's plain
// reads and writes, and becomes the chunk's last write, so a plain access
// that is not ordered after it races with it; a satisfied wait is checked
// against the chunk's last plain write. Races on the data a protocol guards
// come from the ordinary race detector, with the edges these acquires add.

// KindInvalidAccess is a kernel that touched memory its rank never mapped
// there (an unregistered peer buffer): CUDA's illegal memory access.
const KindInvalidAccess = "invalid-access"

// FlagCmp is the comparison a flag wait spins on.
type FlagCmp uint8

// Comparisons of a flag wait: the chunk's value against Instr.Slot.
const (
	FlagEq FlagCmp = iota
	FlagNe
	FlagGe
	FlagGt
	FlagLe
	FlagLt
)

var flagCmpNames = [...]string{"eq", "ne", "ge", "gt", "le", "lt"}

func (c FlagCmp) String() string {
	if int(c) < len(flagCmpNames) {
		return flagCmpNames[c]
	}
	return "cmp?"
}

// ParseFlagCmp returns the comparison named s (eq, ne, ge, gt, le, lt).
func ParseFlagCmp(s string) (FlagCmp, bool) {
	for i, n := range flagCmpNames {
		if n == s {
			return FlagCmp(i), true
		}
	}
	return 0, false
}

// FlagCmpNames lists the comparisons' names.
func FlagCmpNames() []string { return append([]string(nil), flagCmpNames[:]...) }

func (c FlagCmp) holds(v, want uint64) bool {
	switch c {
	case FlagEq:
		return v == want
	case FlagNe:
		return v != want
	case FlagGe:
		return v >= want
	case FlagGt:
		return v > want
	case FlagLe:
		return v <= want
	case FlagLt:
		return v < want
	}
	return false
}

// flagState is a world's flag bookkeeping, made at the first flag
// micro-op (nil in a world without flags): per chunk written by a flag
// store, what that store wrote and released; per buffer, the waits
// spinning on it.
type flagState struct {
	cells   map[flagKey]*flagCell
	waiters map[int32]*[]int32 // buffer id → tasks spinning on it
}

type flagKey struct{ buf, chunk int32 }

// flagCell is the last flag store into a chunk.
type flagCell struct {
	val Value // what it stored (the chunk holds it until the next store)
	vc  *VC   // its release clock; nil for a relaxed store (a reset)
	w   epoch // its access epoch: the chunk's last write while it stands
}

func (w *World) flagsState() *flagState {
	if w.flags == nil {
		w.flags = &flagState{cells: map[flagKey]*flagCell{}, waiters: map[int32]*[]int32{}}
	}
	return w.flags
}

// execFlagPut stores the flag value (or Srcs[0]'s chunks) into Dst's
// region: one atomic store per chunk, with release unless in.Fresh.
func (w *World) execFlagPut(t *task, in *Instr) {
	fs := w.flagsState()
	b := w.bufOf(in.Dst)
	vals := make([]Value, in.N)
	for i := range vals {
		if len(in.Srcs) > 0 {
			vals[i] = w.read(t, in.Srcs[0].Buf, in.Srcs[0].Lo+i)
		} else {
			vals[i] = Value{N: uint64(in.Slot) % Modulus}
		}
	}
	for i, v := range vals {
		c := in.DstLo + i
		k := flagKey{b.id, int32(c)}
		cell := fs.cells[k]
		if !b.private {
			w.checkAtomicStore(t, b, c, cell)
		}
		if cell == nil {
			cell = &flagCell{}
			fs.cells[k] = cell
		}
		if !b.private {
			cell.w = w.epoch(t)
		}
		cell.val, cell.vc = v, nil // a release store gets its clock below
		b.Vals[c] = v
		w.eng.Mix2(uint64(b.id)<<20|uint64(c)|1<<62, v.N)
	}
	if !in.Fresh {
		// The release comes after every access of the store (a Lamport put
		// reads its data first): the snapshot starts the lane's next epoch.
		vc := w.snapshot(t.lane)
		for i := 0; i < in.N; i++ {
			fs.cells[flagKey{b.id, int32(in.DstLo + i)}].vc = vc
			w.snapPool.Own(vc) // a flag word keeps its clock for good
		}
	}
	w.flagWoke(b)
}

// checkAtomicStore checks a flag store into chunk c of b against the
// chunk's plain accesses (not against an earlier atomic store: cell holds
// the last one, and the chunk's last write is it while it stands) and
// makes the store the chunk's last write.
func (w *World) checkAtomicStore(t *task, b *Buffer, c int, cell *flagCell) {
	sh := &b.sh[c]
	if cell != nil && sh.w == cell.w {
		// the last write is an atomic store: no race with this one; the
		// plain reads since still count
		sh.w = noEpoch
	}
	w.checkWrite(t, b, c)
}

// flagHolds reports whether every chunk of in's region satisfies its
// comparison now.
func (w *World) flagHolds(in *Instr) bool {
	b := w.bufOf(in.Dst)
	want := uint64(in.Slot) % Modulus
	if len(in.Srcs) > 0 {
		want = w.bufOf(in.Srcs[0].Buf).Vals[in.Srcs[0].Lo].N
	}
	for i := 0; i < in.N; i++ {
		if !in.Cmp.holds(b.Vals[in.DstLo+i].N, want) {
			return false
		}
	}
	return true
}

// execFlagWait spins until in's region satisfies its comparison, then
// acquires the release clocks of the stores whose values it observed.
func (w *World) execFlagWait(t *task, in *Instr) bool {
	fs := w.flagsState()
	b := w.bufOf(in.Dst)
	if !w.flagHolds(in) {
		w.addWaiter(fs.watch(b), t.id)
		w.blockOn(t, nil, in, -1)
		if len(in.Srcs) > 0 {
			// the value compared with is device memory too: a write to it
			// (a kernel advancing a colour counter) re-evaluates the wait
			if a := w.bufOf(in.Srcs[0].Buf); a != b && !mutant.On(mutant.WakeOnFlagStoresOnly) {
				w.addWaiter(fs.watch(a), t.id)
			}
		}
		return false
	}
	if len(in.Srcs) > 0 {
		w.read(t, in.Srcs[0].Buf, in.Srcs[0].Lo) // the value compared with: a plain load
		// woken through one of its two lists, it may still be on the other
		if ws := fs.waiters[b.id]; ws != nil {
			dropWaiter(ws, t.id)
		}
		if ws := fs.waiters[w.bufOf(in.Srcs[0].Buf).id]; ws != nil {
			dropWaiter(ws, t.id)
		}
	}
	for i := 0; i < in.N; i++ {
		c := in.DstLo + i
		v := b.Vals[c]
		cell := fs.cells[flagKey{b.id, int32(c)}]
		if cell != nil && cell.vc != nil && (cell.val == v || mutant.On(mutant.FlagAcquireAnyValue)) {
			w.acquireVC(t.lane, cell.vc) // observed that put's value
		}
		if !b.private {
			// an atomic load: it races only with a plain write not ordered
			// before it
			sh := &b.sh[c]
			if !(cell != nil && sh.w == cell.w) && !w.hb(sh.w, w.vc[t.lane]) {
				w.race(t, sh.w.task, b, c, "write", "read")
			}
		}
		w.eng.Mix2(uint64(b.id)<<20|uint64(c)|1<<61, v.N)
	}
	return true
}

// watch returns the list of waits spinning on b and marks b polled, so
// that every write to it, whatever makes it, wakes them (World.write).
func (fs *flagState) watch(b *Buffer) *[]int32 {
	b.polled = true
	ws := fs.waiters[b.id]
	if ws == nil {
		ws = new([]int32)
		fs.waiters[b.id] = ws
	}
	return ws
}

// dropWaiter takes task id off a waiter list.
func dropWaiter(ws *[]int32, id int32) {
	for i, x := range *ws {
		if x == id {
			*ws = append((*ws)[:i], (*ws)[i+1:]...)
			return
		}
	}
}

// flagWoke wakes the waits spinning on b: a write changed it. Every store
// into a polled buffer calls it — a flag put or reset, a kernel, a
// collective's receive, a host re-fill, a write through memory that
// overlaps it — so a wait is re-evaluated after every change of a value it
// compares, and a run hangs on it only when no write can still come
// (DESIGN.md, Wakeups).
func (w *World) flagWoke(b *Buffer) {
	if w.flags == nil {
		return
	}
	if ws := w.flags.waiters[b.id]; ws != nil {
		w.wake(ws)
	}
}

// execFault reports an access through an unmapped address, once per
// (kernel, buffer).
func (w *World) execFault(t *task, in *Instr) {
	b := w.bufOf(in.Dst)
	k := findings.Key{Kind: KindInvalidAccess, Res: b.Name, A: w.taskName(t.id), X: fmt.Sprint(t.rank, "/", b.Rank)}
	if !w.log.First(k) {
		return
	}
	w.noteTasks(t.id)
	w.report(Finding{
		Kind: KindInvalidAccess,
		Message: fmt.Sprintf("rank %d %s: %s touches %s, which rank %d never mapped (%s): an illegal memory access",
			t.rank, w.streamName(t.id), w.taskName(t.id), b.Describe(), t.rank, in.Phase),
		Ranks:    uniqInts(t.rank, b.Rank),
		Ops:      []string{w.taskName(t.id)},
		Streams:  []string{w.streamName(t.id)},
		Resource: b.Describe(),
	})
}

// flagWaitReason describes a flag wait a task spins on, for hang reports.
func flagWaitReason(in *Instr) string {
	if len(in.Srcs) > 0 {
		return fmt.Sprintf("flag wait on %s chunks [%d, %d) until %s %s[%d]", in.Dst.Describe(), in.DstLo, in.DstLo+in.N, in.Cmp, in.Srcs[0].Buf.Name, in.Srcs[0].Lo)
	}
	return fmt.Sprintf("flag wait on %s chunks [%d, %d) until %s %d", in.Dst.Describe(), in.DstLo, in.DstLo+in.N, in.Cmp, in.Slot)
}
