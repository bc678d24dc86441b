package scenarios

import (
	"fmt"
	"slices"

	"github.com/collsim/collsim/check"
)

// A file's references (format/spec_refs.go) as the checker takes them.

// references adds the file's references to refs for the run p: other
// variants (with p's overrides), the unsharded model and explicit values,
// sized by p's configuration.
func (s lower) references(p program, refs *check.References) error {
	cfg := p.cfg
	for _, r := range s.Refs {
		switch {
		case r.Variant != "":
			v, ok := p.sc.Variant(r.Variant)
			if !ok {
				return fmt.Errorf("%w: references: no variant %q", ErrBadKnob, r.Variant)
			}
			rc, err := p.sc.VariantConfig(v, p.sets())
			if err != nil {
				return fmt.Errorf("references: variant %q: %w", r.Variant, err)
			}
			if rc == cfg {
				continue // the run's own serialized reference is that one
			}
			refs.Variants = append(refs.Variants, check.NamedProgram{Name: r.Variant, Program: p.sc.program(rc, p.sets())})
		case r.Model != nil:
			m, err := s.modelOf(r.Model, cfg)
			if err != nil {
				return err
			}
			refs.Model = m
		default:
			for _, x := range r.Expected {
				rs, err := x.Ranks.Resolve(cfg.TP)
				if err != nil {
					return fmt.Errorf("%w: expected values of %q: %w", ErrBadKnob, x.Tensor, err)
				}
				if t := s.Tensor(x.Tensor); t != nil && t.ChunksIn(cfg) != len(x.Values) {
					return fmt.Errorf("%w: expected values of %q: %d values; the tensor has %d chunks in this configuration", ErrBadKnob, x.Tensor, len(x.Values), t.ChunksIn(cfg))
				}
				for _, rk := range rs {
					refs.Expected = append(refs.Expected, check.Expected{Tensor: x.Tensor, Rank: rk, Values: slices.Clone(x.Values)})
				}
			}
		}
	}
	return nil
}

// modelOf is the model m under cfg: its inputs are the file's tensors it
// reads before any op writes them, with their init values.
func (s lower) modelOf(m *ModelSpec, cfg Config) (*check.Model, error) {
	out := &check.Model{Chunks: cfg.Chunks, Outputs: slices.Clone(m.Outputs)}
	made := map[string]bool{}
	for _, op := range m.Ops {
		for _, in := range op.Reads {
			if made[in] {
				continue
			}
			t := s.Tensor(in)
			if t == nil {
				return nil, fmt.Errorf("unsharded model: op %q reads %q before it is produced", op.Name, in)
			}
			made[in] = true
			out.Inputs = append(out.Inputs, check.ModelInput{Name: in, Init: func(c int) uint64 { v, _ := t.InitValue(0, c); return v }})
		}
		w := op.Weight
		if op.Kind == "linear" && w == 0 {
			w = s.WholeWeight(op.Name, cfg.TP)
		}
		out.Ops = append(out.Ops, check.ModelOp{Name: op.Name, Kind: op.Kind, Inputs: slices.Clone(op.Reads), Output: op.Writes, Weight: w})
		made[op.Writes] = true
	}
	return out, nil
}
