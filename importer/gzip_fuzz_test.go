package importer

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fuzzLimits are small, so the fuzzer reaches every limit (the guard
// finds records itself, so where MaxRecord is passed does not depend on
// the sizes of the reads, which differ between gzip and plain).
var fuzzLimits = Limits{MaxBytes: 1 << 20, MaxToken: 4 << 10, MaxRecord: 1 << 10, MaxDepth: 16, MaxEvents: 10000, MaxKept: 1000}

func gz(t testing.TB, data []byte) []byte {
	var b bytes.Buffer
	z := gzip.NewWriter(&b)
	if _, err := z.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// FuzzGzipTrace: a trace read from a file wrapped in gzip, as one member,
// as two members split at any byte, or as one member repeated (an
// expansion), reads exactly as its plain bytes do: the same events, and an
// error exactly when they give one, the same limit where a limit is
// passed. A cut or garbled gzip is an error, never a panic. Whatever the
// bytes, the import (three passes, the build, the validation of what it
// writes) and the execution-trace and Flight Recorder readers never panic,
// and every limit passed names its flag.
func FuzzGzipTrace(f *testing.F) {
	for _, s := range []string{
		`{"traceEvents": []}`,
		`[{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "args": {"stream": 7, "correlation": 1}}]`,
		`{"traceEvents": [{"ph": "X", "name": "` + strings.Repeat("a", 5000) + `"}]}`,
		"[" + strings.Repeat(" ", 3000) + "\n" + strings.Repeat("\t", 2000) + `{"ph": "X", "ts": ?}]`,
		`{"x": ` + strings.Repeat("[", 20) + `0` + strings.Repeat("]", 20) + `, "traceEvents": []}`,
		"\ufeff[]",
	} {
		f.Add([]byte(s), uint16(3), uint8(0))
		f.Add([]byte(s), uint16(7), uint8(1))
		f.Add([]byte(s), uint16(2), uint8(2))
	}
	f.Fuzz(func(t *testing.T, data []byte, split uint16, mode uint8) {
		dir := t.TempDir()
		at := int(split) % (len(data) + 1)
		var file, plain []byte
		switch mode % 5 {
		case 0: // one member
			file, plain = gz(t, data), data
		case 1: // two members, split anywhere
			file, plain = append(gz(t, data[:at]), gz(t, data[at:])...), data
		case 2: // a member repeated: the plain bytes repeated
			n := 1 + int(split)%64
			m := gz(t, data)
			file, plain = bytes.Repeat(m, n), bytes.Repeat(data, n)
		case 3: // a member cut short: an error
			m := gz(t, data)
			file = m[:min(at, len(m)-1)]
		case 4: // the bytes as they are, read as gzip
			file = data
		}
		p := filepath.Join(dir, "t.json.gz")
		if err := os.WriteFile(p, file, 0o644); err != nil {
			t.Fatal(err)
		}
		var got []string
		err := scanFile(p, fuzzLimits, nil, func(e *Event) error { got = append(got, e.Name+"|"+e.Ph); return nil })
		checkLimitMsg(t, err)
		if mode%5 == 3 && err == nil {
			t.Fatal("a cut gzip member read without an error")
		}
		if plain != nil {
			var want []string
			g := newGuard(bytes.NewReader(plain), "t.json", fuzzLimits)
			werr := scan(g, "t.json", nil, func(e *Event) error { want = append(want, e.Name+"|"+e.Ph); return nil })
			if werr != nil && g.err != nil && g.delivered {
				werr = g.err
			}
			if (err == nil) != (werr == nil) {
				t.Fatalf("gzip-wrapped: %v; plain: %v", err, werr)
			}
			if errors.Is(err, ErrLimit) != errors.Is(werr, ErrLimit) {
				t.Fatalf("a limit on one side only: gzip-wrapped: %v; plain: %v", err, werr)
			}
			if err == nil && strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("gzip-wrapped read %d events, plain %d", len(got), len(want))
			}
		}
		if _, err := readETFile(p, nil, fuzzLimits); err != nil {
			checkLimitMsg(t, err)
		}
		if _, err := readFlight(p, fuzzLimits); err != nil {
			checkLimitMsg(t, err)
		}
		if res, err := Import(Options{Traces: []string{p}, Limits: fuzzLimits}); err == nil && len(res.YAML) == 0 {
			t.Fatal("no error and no file")
		} else if err != nil {
			checkLimitMsg(t, err)
		}
	})
}

// checkLimitMsg: a limit passed says which, and how to raise it.
func checkLimitMsg(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, ErrLimit) && !strings.Contains(err.Error(), "raise --") && !strings.Contains(err.Error(), "nested deeper") {
		t.Fatalf("a limit that does not say how to raise it: %v", err)
	}
}
