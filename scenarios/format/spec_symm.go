package format

import (
	"fmt"
	"slices"

	"github.com/collsim/collsim/collectives"
)

// Symmetric allocations shared by several communicators. A file may declare
//
//	symmetric:
//	  - {name: ws, ranks: all, chunks: 8, pad: allocation}
//
// and an allreduce may run as PyTorch's one-shot kernel over it
// (symmetric: ws, offset, blocks) instead of its communicator's own
// workspace. Every communicator that uses the allocation synchronizes
// through its signal pads; with pad: allocation (PyTorch before #192581) a
// barrier's slot is ws·block + rank-in-group with no group id, so two
// groups on one allocation share slots (collectives/padscope.go). Without
// pad: the pad knob decides.

// SymmSpec is a symmetric allocation.
type SymmSpec struct {
	Name   string
	Ranks  RankSet
	Chunks int
	Pad    string // allocation | per-group; empty: the pad knob
	// Registration is rendezvous (mapped on every rank when made; "" too)
	// or op (mapped on a rank by a register op: spec_flags.go).
	Registration string
	pos          posMap
}

func (d *decoder) symm(o *obj) SymmSpec {
	sy := SymmSpec{pos: posMap{}}
	o.record(sy.pos)
	o.require("name", "ranks", "chunks")
	sy.Name = o.name("name")
	if v := o.get("ranks"); v != nil {
		sy.Ranks, _ = d.rankSet(v, "symmetric ranks")
	}
	sy.Chunks = int(o.int("chunks", 1, MaxTensorChunks))
	if v := o.get("pad"); v != nil {
		sy.Pad = o.str("pad")
		if sy.Pad != string(collectives.PadPerAllocation) && sy.Pad != string(collectives.PadPerGroup) {
			d.add(posOf(v), "symmetric pad: %q; expected allocation or per-group", sy.Pad)
			sy.Pad = ""
		}
	}
	if v := o.get("registration"); v != nil {
		sy.Registration = o.str("registration")
		if sy.Registration != RegisterRendezvous && sy.Registration != RegisterOp {
			d.add(posOf(v), "symmetric registration: %q; expected %s or %s", sy.Registration, RegisterRendezvous, RegisterOp)
			sy.Registration = ""
		}
	}
	return sy
}

// Symmetric returns the symmetric allocation named name, or nil.
func (s *Spec) Symmetric(name string) *SymmSpec {
	for i := range s.Symm {
		if s.Symm[i].Name == name {
			return &s.Symm[i]
		}
	}
	return nil
}

// PadScope is sy's pad scope under cfg.
func (sy *SymmSpec) PadScope(cfg Config) collectives.PadScope {
	if sy.Pad != "" {
		return collectives.PadScope(sy.Pad)
	}
	if cfg.Bug.Pad == "" {
		// no all-reduce runs over it (checkSymmCall says so where one
		// does): its pads are never used
		return collectives.PadPerAllocation
	}
	return collectives.PadScope(cfg.Bug.Pad)
}

// checkSymmCall checks an allreduce on a symmetric allocation on rank r:
// every member of its communicator has a copy, the region fits, the
// blocks' slots fit a pad.
func (s *Spec) checkSymmCall(cfg Config, op *OpSpec, group []int, report func(Pos, string)) {
	sy := s.Symmetric(op.Symmetric)
	if sy == nil {
		return
	}
	on, err := sy.Ranks.Resolve(cfg.TP)
	if err != nil {
		return // reported with the allocation
	}
	for _, g := range group {
		if !slices.Contains(on, g) {
			report(op.pos.at("symmetric"), fmt.Sprintf("allreduce %q: communicator %q's rank %d has no copy of symmetric allocation %q (its ranks: %v)", op.Name, op.Comm, g, sy.Name, on))
			return
		}
	}
	if t := s.Tensor(op.In); t != nil {
		if c := t.ChunksIn(cfg); op.Offset+c > sy.Chunks {
			report(op.pos.at("offset"), fmt.Sprintf("allreduce %q: region [%d, %d) of symmetric allocation %q, which has %d chunks", op.Name, op.Offset, op.Offset+c, sy.Name, sy.Chunks))
		}
	}
	n := len(group)
	if ch := max(op.Blocks, 1); collectives.Slot(n, ch-1, n-1) >= collectives.PadSlots {
		report(op.pos.at("blocks"), fmt.Sprintf("allreduce %q: %d blocks of a %d-rank group need %d pad slots; a pad has %d", op.Name, ch, n, n*ch, collectives.PadSlots))
	}
	if sy.Pad == "" && cfg.Bug.Pad == "" {
		report(sy.pos.at(""), fmt.Sprintf("symmetric %q has no pad, and the pad knob is unset: give pad: allocation or per-group", sy.Name))
	}
}
