package scenarios_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// addSeeds adds every scenario file the repository holds to f's corpus: the
// malformed ones under testdata/bad, the good ones under testdata/ok, the
// built-ins, the documentation's examples and the bug zoo. (Inputs the fuzzer finds
// failing are kept by go test under testdata/fuzz/.)
func addSeeds(f *testing.F) {
	var files []string
	for _, pat := range []string{"testdata/bad/*.yaml", "testdata/ok/*.yaml", "builtin/*.yaml", "../docs/examples/*.yaml", "../docs/examples/bugs/*.yaml"} {
		m, err := filepath.Glob(pat)
		require.NoError(f, err)
		files = append(files, m...)
	}
	require.NotEmpty(f, files)
	for _, p := range files {
		data, err := os.ReadFile(p)
		require.NoError(f, err)
		f.Add(data)
	}
}

// FuzzParseSpec: no input panics or hangs the parser; an error always names
// a position; a file that loads exports to YAML that loads back to the same
// scenario.
func FuzzParseSpec(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := scenarios.ParseSpec("fuzz.yaml", data)
		if err != nil {
			require.ErrorIs(t, err, scenarios.ErrInvalid)
			require.Contains(t, err.Error(), "fuzz.yaml:")
			return
		}
		if spec.Validate() != nil {
			return
		}
		sc := scenarios.ScenarioOf(spec)
		out, err := scenarios.ExportYAML(sc)
		require.NoError(t, err)
		back, err := scenarios.Load("fuzz.yaml", out)
		require.NoError(t, err, "export of a valid file does not load:\n%s", out)
		require.Equal(t, sc.Base, back.Base)
		require.Equal(t, sc.Variants, back.Variants)
		again, err := scenarios.ExportYAML(back)
		require.NoError(t, err)
		require.Equal(t, string(out), string(again))
	})
}

// FuzzValidate: validation never panics, and a scenario that validates
// builds and runs its nominal schedule without an error or a panic (small
// ones only, to keep each input fast): whatever passes validation is safe to
// run, and every error a run could return was reported by validation first.
func FuzzValidate(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := scenarios.ParseSpec("fuzz.yaml", data)
		if err != nil {
			return
		}
		if err := spec.Validate(); err != nil {
			require.ErrorIs(t, err, scenarios.ErrInvalid)
			return
		}
		sc := scenarios.ScenarioOf(spec)
		for _, v := range sc.Variants {
			cfg, err := sc.VariantConfig(v, nil)
			require.NoError(t, err, "a validated variant's knobs apply")
			if !small(spec, cfg) {
				continue
			}
			// Validation is complete: what it accepts builds and runs
			// (capture rules included) without an error.
			ref, err := check.NewReference(sc.Program(cfg, nil))
			require.NoError(t, err, "variant %s", v.Name)
			_, err = check.RunSchedule(sc.Program(cfg, nil), ref, sim.Timed, sim.Nominal{})
			require.NoError(t, err, "variant %s", v.Name)
		}
	})
}

// small bounds the work one fuzz input may ask for.
func small(s *scenarios.Spec, cfg scenarios.Config) bool {
	if cfg.TP > 8 || cfg.Replays > 4 || cfg.Layers > 2 {
		return false
	}
	ops := 0
	for _, p := range s.Programs {
		for _, op := range p.Ops {
			switch r := op.Repeat; {
			case r == nil:
				ops++
			case r.CountKnob != "":
				return false // a knob's count may be large
			default:
				ops += r.Count * len(r.Ops)
			}
		}
	}
	if s.Graph != nil {
		ops += len(s.Graph.Ops)
	}
	return ops <= 64
}
