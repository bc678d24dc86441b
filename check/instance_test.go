package check_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// A schedule run in a copy of the reference's template world (what
// RunSchedule does) is the schedule run in a freshly built world: the same
// trace hash, verdict, findings, step time and output values with their
// provenance, for every built-in scenario and variant and random seeds. The
// outcomes of earlier schedules are kept while later ones run and compared
// last, so a copy that shared mutable state with another would show here.
func TestTemplateRunEqualsFreshRun(t *testing.T) {
	type target struct {
		sc  *scenarios.Scenario
		cfg scenarios.Config
	}
	var targets []target
	for _, name := range scenarios.Names() {
		sc, _ := scenarios.Lookup(name)
		for _, v := range sc.Variants {
			cfg, err := sc.VariantConfig(v, nil)
			require.NoError(t, err)
			targets = append(targets, target{sc, cfg})
		}
	}
	// NCCL's ring kernels generate their micro-ops (ranks.InstrGen): a copy
	// must rebind the generator to its own FIFOs and buffers.
	tp8, _ := scenarios.Lookup("tp8-shared-expert")
	for _, v := range []string{"buggy", "fixed"} {
		vv, _ := tp8.Variant(v)
		cfg, err := tp8.VariantConfig(vv, []string{"strategy=nccl", "tp=4"})
		require.NoError(t, err)
		targets = append(targets, target{tp8, cfg})
		// Data-parallel replicas fold onto the first (ranks.World.Fold):
		// a copy runs the template's proto kernels over its own memory.
		for _, sets := range [][]string{{"dp=3", "tp=4"}, {"dp=2", "tp=4", "strategy=nccl"}} {
			cfg, err := tp8.VariantConfig(vv, sets)
			require.NoError(t, err)
			targets = append(targets, target{tp8, cfg})
		}
	}
	refs := map[int]*check.Reference{}
	rapid.Check(t, func(t *rapid.T) {
		i := rapid.IntRange(0, len(targets)-1).Draw(t, "target")
		sc, cfg := targets[i].sc, targets[i].cfg
		ref, ok := refs[i]
		if !ok {
			var err error
			ref, err = check.NewReference(sc.Program(cfg, nil))
			require.NoError(t, err)
			refs[i] = ref
		}
		seeds := rapid.SliceOfN(rapid.Uint64(), 1, 4).Draw(t, "seeds")
		kept := make([]*check.Outcome, len(seeds))
		for k, seed := range seeds {
			o, err := check.RunSchedule(sc.Program(cfg, nil), ref, sim.Timed, sim.NewRandom(seed, check.RandomPerMille))
			require.NoError(t, err)
			kept[k] = o
		}
		for k, seed := range seeds {
			b, err := sc.Build(cfg, check.BuildOptions{}, sim.NewEngine(sim.Timed, sim.NewRandom(seed, check.RandomPerMille)))
			require.NoError(t, err)
			fresh, err := check.RunBuilt(b, ref)
			require.NoError(t, err)
			got := kept[k]
			got.Explain()
			fresh.Explain()
			require.Equal(t, fresh.TraceHash, got.TraceHash, "%s seed %d", sc.Name, seed)
			require.Equal(t, fresh.Verdict, got.Verdict)
			require.Equal(t, fresh.StepTime, got.StepTime)
			require.Equal(t, fresh.Steps, got.Steps)
			require.Equal(t, fresh.Findings, got.Findings)
			require.Equal(t, fresh.Result.Counts, got.Result.Counts)
			require.Equal(t, fresh.Built.Notes, got.Built.Notes)
			fw, gw := fresh.Built.World, got.Built.World
			require.NotSame(t, fw, gw)
			require.Len(t, gw.Buffers(), len(fw.Buffers()))
			for j, fb := range fw.Buffers() {
				gb := gw.Buffers()[j]
				require.Equal(t, fb.Name, gb.Name)
				for c := range fb.Vals {
					require.Equal(t, fb.Vals[c].N, gb.Vals[c].N, "%s[%d]", fb.Name, c)
					require.Equal(t, fw.Srcs.Format(fb.Vals[c]), gw.Srcs.Format(gb.Vals[c]), "%s[%d]", fb.Name, c)
				}
			}
		}
	})
}

// Every built-in's world can serve as a template (otherwise its schedules
// are built afresh, correct but slower).
func TestBuiltinsAreTemplates(t *testing.T) {
	for _, name := range scenarios.Names() {
		sc, _ := scenarios.Lookup(name)
		for _, v := range sc.Variants {
			cfg, err := sc.VariantConfig(v, nil)
			require.NoError(t, err)
			b, err := sc.Build(cfg, check.BuildOptions{}, sim.NewEngine(sim.Timed, nil))
			require.NoError(t, err)
			_, err = ranks.NewTemplate(b.World)
			require.NoError(t, err, "%s/%s", name, v.Name)
		}
	}
}

// A schedule run in recycled memory (the world of an earlier schedule of the
// same config, released: what explorers do) is the schedule run in a fresh
// world. Each seed's outcome is read in full, then released, so the next
// seed runs in its memory; every value a run could see in recycled memory
// would show in the trace hash, the findings or the outputs.
func TestPropRecycledRunEqualsFreshRun(t *testing.T) {
	type target struct {
		sc  *scenarios.Scenario
		cfg scenarios.Config
		ref *check.Reference
	}
	var targets []target
	add := func(name, variant string, sets ...string) {
		sc, _ := scenarios.Lookup(name)
		v, _ := sc.Variant(variant)
		cfg, err := sc.VariantConfig(v, sets)
		require.NoError(t, err)
		ref, err := check.NewReference(sc.Program(cfg, nil))
		require.NoError(t, err)
		targets = append(targets, target{sc, cfg, ref})
	}
	add("tp8-shared-expert", "buggy")
	add("tp8-shared-expert", "fixed", "layers=2")
	add("tp8-shared-expert", "buggy", "strategy=nccl", "tp=4")
	add("aux-stream-lifetime", "buggy")
	add("nccl-order-mismatch", "swapped")
	add("symm-two-streams-one-group", "buggy")
	add("tp8-shared-expert", "buggy", "dp=3", "tp=4")                  // folded replicas
	add("tp8-shared-expert", "fixed", "dp=2", "tp=4", "strategy=nccl") // folded, with FIFOs
	type seen struct {
		hash, verdict string
		findings      []ranks.Finding
		vals          []uint64
		prov          []string
	}
	look := func(o *check.Outcome) seen {
		o.Explain()
		s := seen{hash: o.TraceHash, verdict: o.Verdict, findings: o.Findings}
		w := o.Built.World
		for _, b := range w.Buffers() {
			for _, v := range b.Vals {
				s.vals = append(s.vals, v.N)
				s.prov = append(s.prov, w.Srcs.Format(v))
			}
		}
		return s
	}
	rapid.Check(t, func(t *rapid.T) {
		tg := targets[rapid.IntRange(0, len(targets)-1).Draw(t, "target")]
		seeds := rapid.SliceOfN(rapid.Uint64(), 2, 5).Draw(t, "seeds")
		for _, seed := range seeds {
			o, err := check.RunSchedule(tg.sc.Program(tg.cfg, nil), tg.ref, sim.Timed, sim.NewRandom(seed, check.RandomPerMille))
			require.NoError(t, err)
			got := look(o)
			o.Release()
			b, err := tg.sc.Build(tg.cfg, check.BuildOptions{}, sim.NewEngine(sim.Timed, sim.NewRandom(seed, check.RandomPerMille)))
			require.NoError(t, err)
			fresh, err := check.RunBuilt(b, tg.ref)
			require.NoError(t, err)
			require.Equal(t, look(fresh), got, "%s seed %d", tg.sc.Name, seed)
		}
	})
}
