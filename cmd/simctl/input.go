package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/collsim/collsim/scenarios"
)

// Limits on the files simctl reads. A scenario file's is the format's own
// (scenarios.MaxFileBytes, 1 MiB); a witness holds one choice per engine
// decision (about 30 bytes each; a tp8 layer makes about 1,300) and a shard
// or checkpoint file one record per schedule (about 150 bytes without
// --outcomes), so theirs are larger but still far below what the 2 GiB a
// parse may take.
const (
	maxWitnessBytes = 32 << 20
	maxShardBytes   = 128 << 20
)

// errNotRegular: simctl reads only regular files: a device (/dev/zero)
// never ends and a FIFO may block forever.
var errNotRegular = errors.New("not a regular file")

// readFile reads the regular file path, at most limit bytes. It opens
// without blocking (a FIFO's open waits for a writer), checks the file's
// type on the open descriptor, and reads through a limit, so that no path
// a user names can make simctl block or allocate more than limit bytes.
// what names the file's role in messages ("scenario", "witness", …).
func readFile(path, what string, limit int64) ([]byte, error) {
	if path == stdinPath { // "-" (stdin.go): read once, through a limit
		data, err := readStdin()
		if err == nil && int64(len(data)) > limit {
			err = fmt.Errorf("%s: %s is more than %d bytes; at most %d are accepted", path, what, limit, limit)
		}
		return data, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (%s); want a %s file", path, errNotRegular, st.Mode().Type(), what)
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s: %s file is %d bytes; at most %d are accepted", path, what, st.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit { // it grew while we read
		return nil, fmt.Errorf("%s: %s file is more than %d bytes; at most %d are accepted", path, what, limit, limit)
	}
	return data, nil
}

// openRegular opens path for reading if it is a regular file, without
// blocking (a FIFO's open waits for a writer); what names its role.
func openRegular(path, what string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: %w (%s); want a %s file", path, errNotRegular, st.Mode().Type(), what)
	}
	return f, nil
}

// readScenario reads a scenario file, at most scenarios.MaxFileBytes.
// A UTF-8 byte order mark, which some editors write first, is dropped: it
// read as part of the first key.
func readScenario(path string) ([]byte, error) {
	data, err := readFile(path, "scenario", scenarios.MaxFileBytes)
	return bytes.TrimPrefix(data, []byte("\ufeff")), err
}

// witnessScenarioReader returns the ReadFunc for the scenario a witness
// file names. A witness is data someone may hand you: it may name a file
// relative to its own directory (where explore --witness puts it) or a
// built-in; any other path (absolute, or climbing out with "..") only with
// --allow-path, so that replaying a stranger's witness cannot read
// arbitrary files.
func witnessScenarioReader(witnessPath string, allowPath bool) scenarios.ReadFunc {
	dir := filepath.Dir(witnessPath)
	return func(p string) ([]byte, error) {
		if allowPath {
			if !filepath.IsAbs(p) && filepath.IsLocal(p) {
				if data, err := readScenario(filepath.Join(dir, p)); err == nil {
					return data, nil
				}
			}
			return readScenario(p)
		}
		if !filepath.IsLocal(p) {
			return nil, fmt.Errorf("the witness names scenario file %s, outside its own directory; pass --allow-path to read it", quoteName(p))
		}
		return readScenario(filepath.Join(dir, p))
	}
}

// witnessScenarioName is what a witness written to witnessPath records for
// the scenario the user named as source: a built-in's name as it is, a
// file as a path relative to the witness's directory when it lies under
// it, else as an absolute path (which replay reads only with --allow-path).
func witnessScenarioName(source, witnessPath string) string {
	if _, ok := scenarios.Lookup(source); ok {
		return source
	}
	abs, err1 := filepath.Abs(source)
	dir, err2 := filepath.Abs(filepath.Dir(witnessPath))
	if err1 != nil || err2 != nil {
		return source
	}
	if rel, err := filepath.Rel(dir, abs); err == nil && filepath.IsLocal(rel) {
		return filepath.ToSlash(rel)
	}
	return abs
}

// quoteName returns s for a terminal: printable as it is, with control
// characters (an ESC sequence in a scenario or file name) escaped, so no
// name a user or a file supplies can rewrite the terminal.
func quoteName(s string) string { return escapeControls(s, false) }

// escapeControls escapes C0 and C1 control characters, DEL and the bidi
// overrides in s as \xHH or \uHHHH; with keepLines, newlines and tabs
// stay (for multi-line error lists).
func escapeControls(s string, keepLines bool) string {
	bad := func(r rune) bool { return isControl(r) && !(keepLines && (r == '\n' || r == '\t')) }
	if !strings.ContainsFunc(s, bad) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case !bad(r):
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// isControl reports C0 and C1 control characters, DEL, and the bidi
// controls that reorder what a terminal shows.
func isControl(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}
