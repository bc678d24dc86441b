package scenarios_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios"
)

var update = flag.Bool("update", false, "rewrite the golden reports under testdata/")

// The judged reports of the family scenarios (budget 2) are golden: any
// change in verdicts, findings, step times or trace hashes shows in review.
// Rewrite with go test ./scenarios -run Golden -update.
func TestFamilyGoldenReports(t *testing.T) {
	for _, name := range familyScenarios {
		t.Run(name, func(t *testing.T) {
			sc, _ := scenarios.Lookup(name)
			var reps []*check.VariantReport
			for _, v := range sc.Variants {
				rep, err := check.RunVariant(sc, v, check.Options{Extra: []string{"budget=2"}})
				require.NoError(t, err)
				reps = append(reps, rep)
			}
			got, err := json.MarshalIndent(reps, "", "  ")
			require.NoError(t, err)
			path := filepath.Join("testdata", name+".golden.json")
			if *update {
				require.NoError(t, os.MkdirAll("testdata", 0o755))
				require.NoError(t, os.WriteFile(path, append(got, '\n'), 0o644))
				return
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run with -update to create it")
			require.Equal(t, string(want), string(got)+"\n")
		})
	}
}
