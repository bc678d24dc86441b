package check_test

import (
	"runtime"
	"strings"
	"testing"
	"weak"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// spyProgram is a program that remembers, weakly, every world it builds as
// a reference, and wraps the programs of the variant references it
// declares the same way. With alt set, its reference builds are alt's: a
// program whose reference no longer builds what it built before.
type spyProgram struct {
	check.Program
	worlds *[]weak.Pointer[ranks.World]
	alt    check.Program
}

func newSpy(p check.Program) *spyProgram {
	return &spyProgram{Program: p, worlds: new([]weak.Pointer[ranks.World])}
}

func (s *spyProgram) Build(opt check.BuildOptions, eng *sim.Engine) (*check.Built, error) {
	p := s.Program
	if opt.Reference && s.alt != nil {
		p = s.alt
	}
	b, err := p.Build(opt, eng)
	if err == nil && opt.Reference {
		*s.worlds = append(*s.worlds, weak.Make(b.World))
	}
	return b, err
}

func (s *spyProgram) References() (*check.References, error) {
	refs, err := s.Program.References()
	if err != nil || refs == nil {
		return refs, err
	}
	out := *refs
	out.Variants = nil
	for _, v := range refs.Variants {
		out.Variants = append(out.Variants, check.NamedProgram{Name: v.Name, Program: &spyProgram{Program: v.Program, worlds: s.worlds}})
	}
	return &out, nil
}

func spyOn(t *testing.T, scenario, variant string, sets ...string) *spyProgram {
	t.Helper()
	sc, ok := scenarios.Lookup(scenario)
	require.True(t, ok, scenario)
	v, ok := sc.Variant(variant)
	require.True(t, ok, variant)
	cfg, err := sc.VariantConfig(v, sets)
	require.NoError(t, err)
	return newSpy(sc.Program(cfg, nil))
}

// TestReferenceKeepsNoWorld: a Reference keeps a record of each reference
// run's compared tensors and releases the run's world (check/refrecord.go),
// so a command's memory is one schedule's, not a schedule's plus the
// reference's. After NewReference and a collection, no world built as a
// reference is reachable: the program's own run, each graph replay's run
// on inputs of its own, and another variant's reference run. The
// Reference still judges (an ok program is ok, a corrupting one corrupts).
func TestReferenceKeepsNoWorld(t *testing.T) {
	for _, c := range []struct {
		scenario, variant string
		sets              []string
		runs              int // reference runs NewReference makes
		verdict           string
	}{
		{"tp8-shared-expert", "fixed", []string{"layers=1", "mode=graph", "replays=3"}, 3, check.OK},
		{"nccl-order-mismatch", "swapped", nil, 2, check.Corruption},
	} {
		spy := spyOn(t, c.scenario, c.variant, c.sets...)
		ref, err := check.NewReference(spy)
		require.NoError(t, err)
		runtime.GC()
		require.Len(t, *spy.worlds, c.runs, "%s: the reference runs", c.scenario)
		for i, w := range *spy.worlds {
			require.Nil(t, w.Value(), "%s: reference world %d is still reachable after NewReference", c.scenario, i)
		}
		o, err := check.RunSchedule(spy, ref, sim.Timed, sim.Nominal{})
		require.NoError(t, err)
		require.Equal(t, c.verdict, o.Verdict, "%s: %v", c.scenario, o.Findings)
		runtime.KeepAlive(ref)
	}
}

// TestExplainRebuildsTheReference: a corruption message spells out the
// provenance of the expected value from the reference run, rebuilt for
// the explanation (the record keeps values and provenance handles only).
// The rebuilt world is dropped once the outcome is explained, and a
// reference that does not rebuild to what was recorded says so in the
// message instead of printing another run's provenance.
func TestExplainRebuildsTheReference(t *testing.T) {
	const scenario, variant = "symm-pad-aliasing", "buggy"
	explain := func(spy *spyProgram, tamper check.Program) *check.Outcome {
		t.Helper()
		ref, err := check.NewReference(spy)
		require.NoError(t, err)
		spy.alt = tamper
		o, err := check.RunSchedule(spy, ref, sim.Timed, sim.Nominal{})
		require.NoError(t, err)
		require.Equal(t, check.Corruption, o.Verdict)
		o.Explain()
		return o
	}
	spy := spyOn(t, scenario, variant, "budget=0")
	o := explain(spy, nil)
	var msgs []string
	for _, f := range o.Findings {
		if f.Kind == check.Corruption {
			require.Contains(t, f.Message, "expected ")
			require.NotContains(t, f.Message, "unavailable")
			msgs = append(msgs, f.Message)
		}
	}
	require.NotEmpty(t, msgs)
	require.Len(t, *spy.worlds, 2, "NewReference's run and the one the explanation rebuilt")
	runtime.GC()
	for i, w := range *spy.worlds {
		require.Nil(t, w.Value(), "reference world %d is still reachable after Explain", i)
	}
	runtime.KeepAlive(o)

	// Another program's reference in place of the first (another
	// variant's would do if it computed other values; per-group-pads
	// computes the same): the record no longer matches what rebuilds,
	// and the message says so.
	other := spyOn(t, "nccl-order-mismatch", "consistent")
	o = explain(spyOn(t, scenario, variant, "budget=0"), other.Program)
	var said bool
	for _, f := range o.Findings {
		if f.Kind == check.Corruption && strings.Contains(f.Message, "(provenance unavailable: the reference run, rebuilt, is not the one judged against: its values differ from the first run's)") {
			said = true
		}
	}
	require.True(t, said, "%v", o.Findings)
}
