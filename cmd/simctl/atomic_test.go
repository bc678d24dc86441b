package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// writeFileAtomic replaces a file whole, and when it cannot, leaves the old
// contents and no temporary file behind.
func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "w.json")
	require.NoError(t, writeFileAtomic(p, []byte("old")))
	require.NoError(t, writeFileAtomic(p, []byte("new contents")))
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, "new contents", string(got))
	st, err := os.Stat(p)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), st.Mode().Perm())

	// A rename that fails (the target is a non-empty directory) keeps
	// what was there and cleans up.
	target := filepath.Join(dir, "busy")
	require.NoError(t, os.MkdirAll(filepath.Join(target, "x"), 0o755))
	require.Error(t, writeFileAtomic(target, []byte("lost")))
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, []string{"w.json", "busy"}, names, "no temporary file is left")
	require.Error(t, writeFileAtomic(filepath.Join(dir, "missing", "w.json"), []byte("x")))
}
