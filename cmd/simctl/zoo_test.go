package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/scenarios"
)

// zooMin is how many public reports docs/examples/bugs/ holds at least; it
// only grows (issue 14 asks for fifteen).
const zooMin = 17

var zooLink = regexp.MustCompile(`https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+`)

// TestBugZoo runs every file of docs/examples/bugs/ as `simctl run FILE`
// does: each exits 0 (every variant meets its expectation), names its
// public report in the first line of its description, has a variant that
// reproduces the report's symptom (an expectation other than ok) and one
// that shows the fix (ok), and has its row in the folder's README with the
// same link.
func TestBugZoo(t *testing.T) {
	dir := filepath.Join("..", "..", "docs", "examples", "bugs")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), zooMin, "the zoo holds at least %d public reports", zooMin)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			code, out, stderr := simctl(t, "run", f, "--format", "json")
			require.Equal(t, 0, code, "simctl run %s: every variant meets its expectation\nstderr: %s\n%s", f, stderr, out)
			var doc struct {
				Variants []struct {
					Name    string `json:"name"`
					Expect  string `json:"expect"`
					Verdict string `json:"verdict"`
				} `json:"variants"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &doc))
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			sc, err := scenarios.Load(f, data)
			require.NoError(t, err)
			first, _, _ := strings.Cut(sc.Description, "\n")
			link := zooLink.FindString(first)
			require.NotEmpty(t, link, "the description's first line names the report: %q", first)
			var symptom, fixed bool
			for _, v := range doc.Variants {
				require.NotEmpty(t, v.Expect, "variant %s declares the verdict it expects", v.Name)
				if v.Expect == "ok" {
					fixed = true
				} else if !strings.Contains("|"+v.Expect+"|", "|ok|") {
					symptom = true
				}
			}
			require.True(t, symptom, "a variant shows the reported symptom")
			require.True(t, fixed, "a variant shows the fix (expect: ok)")
			row := "[" + strings.TrimSuffix(filepath.Base(f), ".yaml") + "]"
			var line string
			for _, l := range strings.Split(string(readme), "\n") {
				if strings.Contains(l, row) {
					line = l
				}
			}
			require.NotEmpty(t, line, "README.md has a row for %s", row)
			require.Contains(t, line, link, "README.md's row links the same report")
		})
	}
}
