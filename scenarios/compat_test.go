package scenarios_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios"
)

// TestCompatFiles pins the scenario files that validated when the format
// grew its new mechanisms (issue 14): testdata/compat/ holds frozen copies of
// docs/examples, testdata/ok and the built-in tp8-shared-expert.yaml as they
// were then. Each must still load, and each variant must give the verdict
// recorded in testdata/compat/verdicts.golden (budget 2). Rewrite the golden
// with -update only when a verdict moved for a reason the commit states.
func TestCompatFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/compat/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var got strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		sc, err := scenarios.Load(f, data)
		require.NoError(t, err, "a file that validated before must still validate")
		for _, v := range sc.Variants {
			rep, err := check.RunVariant(sc, v, check.Options{Extra: []string{"budget=2"}})
			require.NoError(t, err)
			fmt.Fprintf(&got, "%s %s %s\n", filepath.Base(f), v.Name, rep.Verdict)
		}
	}
	path := filepath.Join("testdata", "compat", "verdicts.golden")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got.String()), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run with -update to create it")
	require.Equal(t, string(want), got.String())
}
