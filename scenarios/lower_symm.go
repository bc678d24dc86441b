package scenarios

import (
	"fmt"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
)

// Making a file's symmetric allocations (format/spec_symm.go) on a world.

// symmAllocs makes the file's symmetric allocations on w, in file order.
func (s lower) symmAllocs(w *ranks.World, cfg Config, hw ranks.Profile) (map[string]*collectives.SymmAlloc, error) {
	out := map[string]*collectives.SymmAlloc{}
	for i := range s.Symm {
		sy := &s.Symm[i]
		on, err := sy.Ranks.Resolve(cfg.TP)
		if err != nil {
			return nil, fmt.Errorf("%w: symmetric %q: %w", ErrBadKnob, sy.Name, err)
		}
		a, err := collectives.NewSymmAlloc(w, sy.Name, on, sy.Chunks, sy.PadScope(cfg), hw)
		if err != nil {
			return nil, err
		}
		out[sy.Name] = a
	}
	return out, nil
}

// symmNotes says, for each symmetric allocation several communicators use,
// which pad slots their barriers alias (collectives.SymmAlloc.Aliases): the
// note a reader needs to see why two groups' signals can complete each
// other's waits. Nothing is noted when no slot is shared.
func (s lower) symmNotes(progs []ProgramSpec, cfg Config, symms map[string]*collectives.SymmAlloc) []string {
	var notes []string
	for i := range s.Symm {
		name := s.Symm[i].Name
		a := symms[name]
		if a == nil {
			continue
		}
		used := map[string]bool{}
		blocks := 1
		for _, p := range progs {
			for _, op := range p.Ops {
				if op.Symmetric == name {
					used[op.Comm] = true
					blocks = max(blocks, op.Blocks)
				}
			}
		}
		var groups []collectives.Group
		for _, c := range s.Comms {
			if !used[c.Name] {
				continue
			}
			rs, err := c.Ranks.Resolve(cfg.TP)
			if err != nil {
				continue
			}
			groups = append(groups, collectives.Group{Name: c.Name, Ranks: rs})
		}
		if len(groups) < 2 {
			continue
		}
		for _, al := range a.Aliases(groups, blocks) {
			notes = append(notes, "aliased slot: "+al)
		}
	}
	return notes
}
