package importer

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// TestLimits: one case per limit of the guard, each refused as an
// *Error wrapping ErrLimit that names the flag raising it, at the line
// where it was passed.
func TestLimits(t *testing.T) {
	small := Limits{MaxBytes: 1 << 20, MaxToken: 64, MaxRecord: 1 << 10, MaxDepth: 8, MaxEvents: 3}
	ev := `{"ph": "X", "name": "k", "ts": 1, "dur": 1}`
	cases := []struct {
		name, in, flag string
		line           int
	}{
		{"decompressed bytes", `{"traceEvents": [` + "\n" + strings.Repeat(ev+",\n", 1) + strings.Repeat(" ", 2<<20) + "]}", "--max-trace-bytes", 0},
		{"a long string", `{"traceEvents": [` + "\n" + `{"name": "` + strings.Repeat("a", 100) + `"}]}`, "--max-token-bytes", 2},
		{"a long string in a skipped key", `{"x": "` + strings.Repeat("a", 100) + `", "traceEvents": []}`, "--max-token-bytes", 1},
		{"a long number", `[{"ts": 1` + strings.Repeat("0", 100) + `}]`, "--max-token-bytes", 1},
		{"deep nesting", `{"x": ` + strings.Repeat("[", 100), "nested deeper than 8", 1},
		{"a large event", `[{"ph": "X", "args": {"x": [` + strings.Repeat("1, ", 1000) + `1]}}]`, "--max-record-bytes", 1},
		{"a large skipped value", `{"x": [` + strings.Repeat("1, ", 1000) + `1], "traceEvents": []}`, "--max-record-bytes", 1},
		{"many events", "[" + strings.Repeat(ev+",", 3) + ev + "]", "--max-events", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "t.json")
			require.NoError(t, os.WriteFile(p, []byte(c.in), 0o644))
			err := scanFile(p, small, nil, func(*Event) error { return nil })
			require.Error(t, err)
			require.True(t, errors.Is(err, ErrLimit), "%v", err)
			require.Contains(t, err.Error(), c.flag)
			require.True(t, strings.HasPrefix(err.Error(), p+":"), err.Error())
			var ie *Error
			require.ErrorAs(t, err, &ie)
			if c.line > 0 {
				require.Equal(t, c.line, ie.Line, err.Error())
			}
		})
	}
}

// TestLongWhitespaceIsCut: a run of whitespace between tokens reaches the
// JSON decoder cut to wsKeep bytes (its decoder rescans whitespace it
// holds, so a long run cost quadratic time), and an error after it is
// still placed at its line and column in the file.
func TestLongWhitespaceIsCut(t *testing.T) {
	in := "[\n" + strings.Repeat(" ", 1<<20) + "\n" + strings.Repeat("\t", 5000) + `{"ph": "X", "ts": ?}]`
	g := newGuard(strings.NewReader(in), "w.json", Limits{})
	err := scan(g, "w.json", nil, func(*Event) error { return nil })
	require.Error(t, err)
	require.Less(t, g.out, int64(4096), "bytes handed to the decoder")
	p := filepath.Join(t.TempDir(), "w.json")
	require.NoError(t, os.WriteFile(p, []byte(in), 0o644))
	err = ScanFile(p, nil, func(*Event) error { return nil })
	var ie *Error
	require.ErrorAs(t, err, &ie)
	require.False(t, errors.Is(err, ErrLimit))
	require.Equal(t, 3, ie.Line, err.Error())
	require.Equal(t, 5001, ie.Col, err.Error())
}

// TestGzipByMagic: a gzip file reads whatever its name, concatenated
// members read as one stream, and a .gz that is not gzip is said to be so.
func TestGzipByMagic(t *testing.T) {
	dir := t.TempDir()
	member := func(s string) []byte {
		var b bytes.Buffer
		z := gzip.NewWriter(&b)
		_, _ = z.Write([]byte(s))
		require.NoError(t, z.Close())
		return b.Bytes()
	}
	data := append(member(`[{"ph": "X", "name": "a", "ts": 1},`), member(` {"ph": "X", "name": "b", "ts": 2}]`)...)
	for _, name := range []string{"t.json", "t.json.gz"} {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, 0o644))
		var got []string
		require.NoError(t, ScanFile(p, nil, func(e *Event) error { got = append(got, e.Name); return nil }))
		require.Equal(t, []string{"a", "b"}, got)
	}
	p := filepath.Join(dir, "plain.json.gz")
	require.NoError(t, os.WriteFile(p, []byte(`[]`), 0o644))
	err := ScanFile(p, nil, func(*Event) error { return nil })
	require.ErrorContains(t, err, "not a gzip file")
}

// TestTooManyCountsTheRest: a file with more records than --max-events is
// refused with how many it has (the records past the limit counted at
// the byte level: commas inside strings and nested values are no
// records), and what to raise the flag to; a file cut short says "at
// least".
func TestTooManyCountsTheRest(t *testing.T) {
	lim := Limits{MaxEvents: 3}
	ev := `{"ph": "X", "name": "a, [b] {c} \"d,\" \\", "ts": 1, "dur": 1, "args": {"x": [1, 2, {"y": ","}]}}`
	evs := func(n int) string { return strings.Repeat(ev+",\n", n-1) + ev }
	node := `{"id": 1, "name": "n, [", "inputs": {"values": [1, 2]}}`
	entry := `{"record_id": 1, "profiling_name": "nccl:all_reduce, [x]", "input_dims": [[1, 2]]}`
	cases := []struct {
		name, in, want string
		read           func(p string) error
	}{
		{"events in an object", `{"traceEvents": [` + evs(7) + `], "displayTimeUnit": "ns", "x": [1, 2]}`, "the file has 7 events, more than 3; raise --max-events to 7 ", nil},
		{"events in an array", "[" + evs(4) + "]", "the file has 4 events, more than 3; raise --max-events to 4 ", nil},
		{"events cut short", "[" + evs(5) + ",", "the file has at least 5 events", nil},
		{"execution-trace nodes", `{"schema": "1.0.1", "nodes": [` + strings.Repeat(node+", ", 5) + node + `]}`, "the file has 6 nodes, more than 3; raise --max-events to 6 ",
			func(p string) error { _, err := readETFile(p, nil, lim); return err }},
		{"Flight Recorder entries", `{"version": "2.4", "entries": [` + strings.Repeat(entry+", ", 9) + entry + `]}`, "the file has 10 entries, more than 3; raise --max-events to 10 ",
			func(p string) error { _, err := readFlight(p, lim); return err }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "t.json")
			require.NoError(t, os.WriteFile(p, []byte(c.in), 0o644))
			read := c.read
			if read == nil {
				read = func(p string) error { return scanFile(p, lim, nil, func(*Event) error { return nil }) }
			}
			err := read(p)
			require.ErrorIs(t, err, ErrLimit)
			require.ErrorContains(t, err, c.want)
		})
	}
}

// TestRecordLimitIsExact: --max-record-bytes bounds each record's own
// bytes, found by the guard's lexing, whatever the sizes of the reads
// (one byte at a time, a few, all at once): a record of exactly the limit
// is read, one byte more is refused at that byte, inside a string or
// not; an array of records under another key is one record; whitespace
// cut before the decoder does not count.
func TestRecordLimitIsExact(t *testing.T) {
	const max = 200
	ev := func(n int) string { // an event of n bytes
		const head, tail = `{"ph":"X","name":"`, `"}`
		return head + strings.Repeat("a", n-len(head)-len(tail)) + tail
	}
	cases := []struct {
		name, in string
		events   int // visited before the error
		col      int // of the byte past the limit (0: no error)
	}{
		{"exactly the limit", "[" + ev(max) + "," + ev(max) + "]", 2, 0},
		{"one byte more, at the closing brace", "[" + ev(max) + "," + ev(max+1) + "]", 1, 1 + (max + 1) + max + 1},
		{"far more, inside the string", `{"traceEvents": [` + ev(30) + "," + ev(5*max) + "]}", 1, len(`{"traceEvents": [`) + 31 + max + 1},
		{"a top-level value", `{"x": [` + strings.Repeat("1,", max) + `1], "traceEvents": []}`, 0, len(`{"x": `) + max + 1},
		{"an array of records under another key", `{"traceEvent": [` + ev(max/2) + "," + ev(max/2) + "]}", 0, len(`{"traceEvent": `) + max + 1},
		{"white space between records is no record's", "[" + ev(max) + strings.Repeat(" ", 3*max) + "," + strings.Repeat("\n", 3*max) + ev(max) + "]", 2, 0},
		{"a string value", `{"x": "` + strings.Repeat("a", max-2) + `" , "traceEvents": []}`, 0, 0},
		{"a number", `{"x": ` + strings.Repeat("1", max) + ` , "traceEvents": [], "y": ` + strings.Repeat("1", max+1) + `}`, 0, len(`{"x": `+strings.Repeat("1", max)+` , "traceEvents": [], "y": `) + max + 1},
	}
	readers := map[string]func(string) io.Reader{
		"one byte": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"halves":   func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
		"whole":    func(s string) io.Reader { return strings.NewReader(s) },
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for rname, r := range readers {
				n := 0
				g := newGuard(r(c.in), "r.json", Limits{MaxRecord: max})
				err := g.finish(scan(g, "r.json", nil, func(*Event) error { n++; return nil }), "r.json")
				if c.col == 0 {
					if err != nil {
						require.NotErrorIs(t, err, ErrLimit, rname)
					}
				} else {
					require.ErrorIs(t, err, ErrLimit, rname)
					require.ErrorContains(t, err, "--max-record-bytes", rname)
					var ie *Error
					require.ErrorAs(t, err, &ie)
					require.Equal(t, 1, ie.Line, rname)
					require.Equal(t, c.col, ie.Col, "%s: %v", rname, err)
				}
				require.Equal(t, c.events, n, rname)
			}
		})
	}
}
