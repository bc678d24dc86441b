package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const realTraces = "../../validation/traces"

func importReal(t *testing.T, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name+".yaml")
	code, stdout, stderr := simctl(t, "import", filepath.Join(realTraces, name+".json"), "--et", filepath.Join(realTraces, name+".et.json"), "-o", out)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "recorded step time")
	code, _, stderr = simctl(t, "validate", out)
	require.Equal(t, 0, code, stderr)
	return out
}

// The aux-stream program, recorded eager and clean: DPOR on the imported
// file finds the corruption, names the tensor and both streams, and writes
// a witness.
func TestImportExploreFindsTheFreedRead(t *testing.T) {
	file := importReal(t, "a_eager")
	w := filepath.Join(t.TempDir(), "w.json")
	code, stdout, stderr := simctl(t, "explore", file, "--strategy", "dpor", "--witness", w)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "verdict: corruption")
	require.Contains(t, stdout, "complete: true")
	require.Contains(t, stdout, `tensor "x" (caching-allocator block`)
	require.Contains(t, stdout, "stream stream13")
	require.Contains(t, stdout, "stream stream7")
	st, err := os.Stat(w)
	require.NoError(t, err)
	require.NotZero(t, st.Size())
	// The recorded schedule itself is clean in values: only the race shows.
	code, stdout, _ = simctl(t, "run", file, "--set", "budget=0")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "race")
	require.NotContains(t, stdout, "corruption")
}

// The same program with record_stream: DPOR completes with ok.
func TestImportExploreRecordStreamIsOK(t *testing.T) {
	file := importReal(t, "b_record_stream")
	code, stdout, stderr := simctl(t, "explore", file, "--strategy", "dpor")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "verdict: ok")
	require.Contains(t, stdout, "complete: true")
}

// A malformed trace exits 2 naming the file, the position and the event.
func TestImportBadTrace(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, body, want string }{
		{"trunc.json", `{"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": 2},` + "\n" + `{"ph": "X", "ts": "soon"}]}`, `trunc.json:2:1: event 1: "ts" is a JSON string, not a float64`},
		{"neg.json", `{"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": -2}]}`, "neg.json:1:18: event 0: dur -2 is negative"},
		{"noph.json", `[{"name": "k"}]`, `noph.json:1:2: event 0: no "ph"`},
		{"eof.json", `{"traceEvents": [{"ph": "X"`, "eof.json:1:18: event 0: the file ends too early"},
		{"empty.json", `{"traceEvents": []}`, "no kernel in the imported step"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			require.NoError(t, os.WriteFile(p, []byte(tc.body), 0o644))
			code, _, stderr := simctl(t, "import", p)
			require.Equal(t, 2, code)
			require.Contains(t, stderr, tc.want)
			require.False(t, strings.Contains(stderr, "panic"))
		})
	}
	code, _, stderr := simctl(t, "import", filepath.Join(dir, "missing.json"))
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "missing.json")
}
