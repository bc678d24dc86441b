package scenarios

import (
	"fmt"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

func init() {
	Register(&Scenario{
		Name: "symm-pad-aliasing",
		Description: `PyTorch #192581: process groups {0,1,2} and {0,2} rendezvous on one
symmetric-memory allocation and share its signal pad. A barrier signals slot
world_size·channel + rank-in-group with no group id, so rank 2 (rank 2 of the
first group, rank 1 of the second) signals slot 2 for one group and slot 1 for
the other, which is the slot rank 0 waits on for rank 1 in the first group.
With the two groups' all-reduces in flight on their own streams, a signal of
one group completes a wait of the other: rank 0 reads rank 1's copy before
rank 1 wrote it, or a wait is left with nothing to consume. Per-group pads fix
it.`,
		Base: Config{
			TP: 3, Arch: "sm90", Mode: "eager", Layers: 1, Replays: 1,
			Tokens: 8, Hidden: 4096, Chunks: 2, Seed: 1, Budget: 60,
			Bug: BugKnobs{Pad: "allocation", SkewNs: 20000},
		},
		Variants: []Variant{
			{Name: "buggy", Expect: "corruption|hang", Doc: "one pad per allocation, slot ws·channel+rank: the groups' signals alias"},
			{Name: "per-group-pads", Sets: []string{"pad=per-group"}, Expect: "ok", Doc: "each group has its own pad"},
		},
		Build: buildPadAliasing,
	})
}

// buildPadAliasing: ranks 0..2; group A = {0,1,2} on stream "a", group B =
// {0,2} on stream "b"; one allocation over {0,1,2}, A using chunks [0,C), B
// [C,2C). Rank 1 is skew_ns late (it did more work before the collective).
func buildPadAliasing(cfg Config, opt BuildOptions, eng *sim.Engine) (*Built, error) {
	if cfg.TP != 3 {
		return nil, fmt.Errorf("%w: symm-pad-aliasing needs tp=3 (groups {0,1,2} and {0,2}), got tp=%d", ErrBadKnob, cfg.TP)
	}
	f, err := newFam(cfg, opt, eng, []string{"a", "b"}, nil)
	if err != nil {
		return nil, err
	}
	f.forkJoin = true
	C := cfg.Chunks
	act := cfg.Tokens * cfg.Hidden * 2
	alloc, err := collectives.NewSymmAlloc(f.w, "symm", []int{0, 1, 2}, 2*C, collectives.PadScope(cfg.Bug.Pad), f.hw)
	if err != nil {
		return nil, err
	}
	ga := collectives.Group{Name: "A", Ranks: []int{0, 1, 2}}
	gb := collectives.Group{Name: "B", Ranks: []int{0, 2}}
	b := &Built{World: f.w}
	for _, a := range alloc.Aliases([]collectives.Group{ga, gb}, 1) {
		b.Notes = append(b.Notes, "aliased slot: "+a)
	}
	for r := range 3 {
		var cmp []*ranks.Buffer
		if r == 1 && cfg.Bug.SkewNs > 0 {
			f.launch(r, 0, &ranks.KernelSpec{Name: "prior_work", Kind: "gemm", Instrs: []ranks.Instr{{Op: ranks.OpDelay, Phase: "gemm", Dur: sim.Time(cfg.Bug.SkewNs)}}})
		}
		for gi, g := range []collectives.Group{ga, gb} {
			member := false
			for _, x := range g.Ranks {
				member = member || x == r
			}
			if !member {
				continue
			}
			in := f.w.Alloc(r, g.Name+".in", act, C)
			f.w.Init(in, func(c int) uint64 { return uint64(10*(r+1) + c + 100*gi) })
			out := f.w.Alloc(r, g.Name+".out", act, C)
			k, err := alloc.OneShot(r, g, g.Name+".allreduce", 1, gi*C, in, out)
			if err != nil {
				return nil, err
			}
			f.launch(r, gi, k)
			cmp = append(cmp, out)
		}
		b.Compare = append(b.Compare, cmp)
	}
	f.finish()
	return b, nil
}
