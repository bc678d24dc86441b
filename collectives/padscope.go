package collectives

import (
	"fmt"

	"github.com/collsim/collsim/mutant"
	"github.com/collsim/collsim/ranks"
)

// PadScope is how a group's barrier finds its signal slots in a symmetric
// allocation that several process groups use.
type PadScope string

const (
	// PadPerAllocation is PyTorch's symmetric memory before the fix of
	// #192581: one signal pad per allocation and rank, and a barrier of a
	// group of ws ranks uses slot ws·channel + (rank in the group), with no
	// group id. Two groups that share the allocation share the slots: a
	// signal one group sends can complete a wait of the other.
	PadPerAllocation PadScope = "allocation"
	// PadPerGroup gives each group its own pad on each rank.
	PadPerGroup PadScope = "per-group"
)

// PadSlots is the number of slots of a pad (2048 bytes of uint32 flags).
const PadSlots = 512

// Group is a process group: a name and its world ranks in group order.
type Group struct {
	Name  string
	Ranks []int
}

func (g Group) index(rank int) int {
	for i, r := range g.Ranks {
		if r == rank {
			return i
		}
	}
	return -1
}

// SymmAlloc is one symmetric-memory allocation over a set of world ranks,
// with its signal pads, which several groups may rendezvous on.
type SymmAlloc struct {
	Sym   *ranks.Symmetric
	Scope PadScope
	HW    ranks.Profile

	w    *ranks.World
	pads map[string][]*ranks.SignalPad // per group, per group index
}

// NewSymmAlloc allocates name over world ranks on w with chunks value chunks
// per rank.
func NewSymmAlloc(w *ranks.World, name string, on []int, chunks int, scope PadScope, hw ranks.Profile) (*SymmAlloc, error) {
	if scope != PadPerAllocation && scope != PadPerGroup {
		return nil, fmt.Errorf("symmetric allocation %q: pad scope %q: want %q or %q", name, scope, PadPerAllocation, PadPerGroup)
	}
	return &SymmAlloc{Sym: w.AllocSymmetric(name, on, 0, chunks, PadSlots), Scope: scope, HW: hw, w: w, pads: map[string][]*ranks.SignalPad{}}, nil
}

// Pad returns the pad group g's barrier on its member gi uses.
func (a *SymmAlloc) Pad(g Group, gi int) *ranks.SignalPad {
	if a.Scope == PadPerAllocation || mutant.On(mutant.PadAlwaysShared) {
		return a.Sym.Pads[a.Sym.Index(g.Ranks[gi])]
	}
	ps, ok := a.pads[g.Name]
	if !ok {
		for _, r := range g.Ranks {
			ps = append(ps, ranks.NewSignalPad(a.Sym.Name+"/"+g.Name, r, PadSlots))
		}
		a.pads[g.Name] = ps
	}
	return ps[gi]
}

// Slot is the pad slot member gi of a group of ws ranks signals for channel
// ch: ws·ch + gi (CUDASymmetricMemory-inl.h sync_remote_blocks, with the
// block index as the channel). It carries no group id.
func Slot(ws, ch, gi int) int { return ws*ch + gi }

// barrier is sync_remote_blocks for channels blocks of group g on member gi.
func (a *SymmAlloc) barrier(g Group, gi, channels int, phase string) []ranks.Instr {
	n := len(g.Ranks)
	var out []ranks.Instr
	for ch := range channels {
		for d := 1; d < n; d++ {
			p := (gi + d) % n
			out = append(out, ranks.Instr{Op: ranks.OpPut, Phase: phase, Pad: a.Pad(g, p), Slot: Slot(n, ch, gi), Dur: a.HW.SigLat / 4, Peer: g.Ranks[p]})
		}
	}
	for ch := range channels {
		for d := 1; d < n; d++ {
			p := (gi + d) % n
			out = append(out, ranks.Instr{Op: ranks.OpWait, Phase: phase, Pad: a.Pad(g, gi), Slot: Slot(n, ch, p), Dur: a.HW.SigLat / 4, Peer: g.Ranks[p]})
		}
	}
	return out
}

// OneShot returns rank's kernel for a one-shot all-reduce of group g named
// call: copy in into chunks [lo, lo+in.Chunks()) of this rank's copy of the
// allocation, barrier, load every member's copy of that region and reduce
// into out, barrier. channels is the kernel's block count; each block
// synchronizes on its own slots.
func (a *SymmAlloc) OneShot(rank int, g Group, call string, channels, lo int, in, out *ranks.Buffer) (*ranks.KernelSpec, error) {
	gi := g.index(rank)
	if gi < 0 {
		return nil, fmt.Errorf("all-reduce %q: rank %d is not in group %q %v", call, rank, g.Name, g.Ranks)
	}
	n := len(g.Ranks)
	if channels < 1 || Slot(n, channels-1, n-1) >= PadSlots {
		return nil, fmt.Errorf("all-reduce %q: %d channels of a %d-rank group do not fit %d pad slots", call, channels, n, PadSlots)
	}
	C := in.Chunks()
	if out.Chunks() != C || lo < 0 || lo+C > a.Sym.Bufs[0].Chunks() {
		return nil, fmt.Errorf("all-reduce %q: region [%d, %d) does not fit allocation %q of %d chunks", call, lo, lo+C, a.Sym.Name, a.Sym.Bufs[0].Chunks())
	}
	for _, r := range g.Ranks {
		if a.Sym.Index(r) < 0 {
			return nil, fmt.Errorf("all-reduce %q: group %q rank %d has no copy of allocation %q", call, g.Name, r, a.Sym.Name)
		}
	}
	hw := a.HW
	mine := a.Sym.Bufs[a.Sym.Index(rank)]
	prog := []ranks.Instr{{Op: ranks.OpCompute, Phase: "copy-in", Dst: mine, DstLo: lo, N: C, Srcs: []ranks.Src{{Buf: in, Coef: 1}}, Dur: hw.KStart + ranks.Bytes(in.Bytes, hw.HBM)}}
	prog = append(prog, a.barrier(g, gi, channels, "barrier-entry")...)
	srcs := make([]ranks.Src, n)
	for p, r := range g.Ranks {
		srcs[p] = ranks.Src{Buf: a.Sym.Bufs[a.Sym.Index(r)], Lo: lo, Coef: 1}
	}
	prog = append(prog, ranks.Instr{Op: ranks.OpCompute, Phase: "p2p-reduce", Dst: out, N: C, Srcs: srcs, Dur: ranks.Bytes(in.Bytes*int64(n-1), hw.NVLink) + ranks.Bytes(in.Bytes, hw.HBM)})
	if !mutant.On(mutant.BarrierNoExit) {
		prog = append(prog, a.barrier(g, gi, channels, "barrier-exit")...)
	}
	// Its grid: one block per channel, spinning at the barriers while
	// resident (ranks/residency.go).
	return &ranks.KernelSpec{Name: call, Coll: call, Kind: "allreduce/symm-oneshot", Instrs: prog, Blocks: channels, Spins: true}, nil
}

// Aliases lists the pad slots that members of two different groups signal
// on the same pad, when each group's kernels use channels blocks: "rank 0's
// pad slot 1: rank 1 of group A (world rank 1) and rank 1 of group B (world
// rank 2)". With per-group pads there are none.
func (a *SymmAlloc) Aliases(groups []Group, channels int) []string {
	type user struct {
		g      Group
		gi, ch int
	}
	var out []string
	for _, pr := range a.Sym.Group {
		slots := map[int][]user{}
		var order []int
		for _, g := range groups {
			if g.index(pr) < 0 {
				continue
			}
			n := len(g.Ranks)
			for ch := range channels {
				for gi, r := range g.Ranks {
					if r == pr {
						continue // a rank does not signal itself
					}
					s := Slot(n, ch, gi)
					if _, ok := slots[s]; !ok {
						order = append(order, s)
					}
					slots[s] = append(slots[s], user{g, gi, ch})
				}
			}
		}
		for _, s := range order {
			us := slots[s]
			for i := 1; i < len(us); i++ {
				u, v := us[0], us[i]
				if u.g.Name == v.g.Name || a.Pad(u.g, u.g.index(pr)) != a.Pad(v.g, v.g.index(pr)) {
					continue
				}
				out = append(out, fmt.Sprintf("rank %d's pad slot %d: rank %d of group %s (world rank %d, channel %d) and rank %d of group %s (world rank %d, channel %d)",
					pr, s, u.gi, u.g.Name, u.g.Ranks[u.gi], u.ch, v.gi, v.g.Name, v.g.Ranks[v.gi], v.ch))
			}
		}
	}
	return out
}
