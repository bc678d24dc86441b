package check_test

import (
	"os"
	"testing"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// TestScaleProfile runs a large nominal schedule; it is for profiling
// (COLLSIM_SCALE=dp:layers), skipped otherwise.
func TestScaleProfile(t *testing.T) {
	spec := os.Getenv("COLLSIM_SCALE")
	if spec == "" {
		t.Skip("set COLLSIM_SCALE=dp,layers to run")
	}
	sc, _ := scenarios.Lookup("tp8-shared-expert")
	v, _ := sc.Variant("fixed")
	dp, layers, _ := cut(spec)
	cfg, err := sc.VariantConfig(v, []string{"dp=" + dp, "layers=" + layers, "budget=0"})
	if err != nil {
		t.Fatal(err)
	}
	o, err := check.RunSchedule(sc.Program(cfg, nil), nil, sim.Timed, sim.Nominal{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("steps %d verdict %s", o.Steps, o.Verdict)
}

func cut(s string) (string, string, bool) {
	for i := range s {
		if s[i] == ',' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "1", false
}
