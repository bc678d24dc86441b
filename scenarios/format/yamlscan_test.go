package format

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// deep returns a flow nesting of n "[".
func deep(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// TestScanLimits: one case per way the byte-level depth check it replaced
// went wrong, and the block nesting it did not see at all.
func TestScanLimits(t *testing.T) {
	// Under a key, the top-level mapping is one level.
	ok := deep(MaxDepth - 1)
	tooDeep := deep(MaxDepth)
	var blockMap strings.Builder
	for i := range MaxDepth + 1 {
		blockMap.WriteString(strings.Repeat(" ", 2*i) + "k:\n")
	}
	blockMap.WriteString(strings.Repeat(" ", 2*MaxDepth+2) + "x\n")
	cases := []struct {
		name, in string
		wantOK   bool
		wantAt   Pos
		wantMsg  string
	}{
		{"flow at the limit", "a: " + ok + "\n", true, Pos{}, ""},
		{"flow over the limit", "a: " + tooDeep + "\n", false, Pos{1, 3 + MaxDepth}, "nesting deeper than 32"},
		// The byte scan took the apostrophe for an opening quote and skipped the rest of the file.
		{"apostrophe in a plain scalar", "description: it's fine\nname: " + tooDeep + "\n", false, Pos{2, 6 + MaxDepth}, "nesting"},
		// An unbalanced quote in a block scalar, likewise.
		{"unbalanced quote in a block scalar", "description: |\n  say \"hi\n  it's\nname: " + tooDeep + "\n", false, Pos{4, 6 + MaxDepth}, "nesting"},
		// A block scalar is text: forty "[" in it are not nesting (the byte scan rejected this valid file).
		{"forty [ in a description block", "description: |\n  " + strings.Repeat("[", 40) + "\nname: a\n", true, Pos{}, ""},
		{"[ in a quoted string", "name: '" + strings.Repeat("[", 40) + "'\n", true, Pos{}, ""},
		{"[ in a comment", "name: a # " + strings.Repeat("[", 40) + "\n", true, Pos{}, ""},
		{"nested block sequences", strings.Repeat("- ", MaxDepth+1) + "x\n", false, Pos{1, 2*MaxDepth + 1}, "nesting"},
		{"nested block sequences at the limit", strings.Repeat("- ", MaxDepth) + "x\n", true, Pos{}, ""},
		{"nested block mappings", blockMap.String(), false, Pos{MaxDepth + 1, 2*MaxDepth + 1}, "nesting"},
		{"block and flow together", strings.Repeat("- ", MaxDepth/2) + deep(MaxDepth/2+1) + "\n", false, Pos{1, MaxDepth + MaxDepth/2 + 1}, "nesting"},
		{"siblings do not add up", strings.Repeat("a:\n  b: 1\n", 1000), true, Pos{}, ""},
		{"too many tokens", strings.Repeat("- x\n", MaxTokens), false, Pos{MaxTokens/2 + 1, 1}, "YAML tokens"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			at, msg, ok := scanLimits([]byte(c.in))
			require.Equal(t, c.wantOK, ok, msg)
			if !c.wantOK {
				require.Equal(t, c.wantAt, at)
				require.Contains(t, msg, c.wantMsg)
			}
		})
	}
}

// TestScanLimitsBuiltins: every built-in and example file passes the scan.
func TestScanLimitsBuiltins(t *testing.T) {
	for _, dir := range []string{"../builtin", "../testdata/ok", "../../docs/examples"} {
		ents, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".yaml") {
				continue
			}
			data, err := os.ReadFile(dir + "/" + e.Name())
			require.NoError(t, err)
			_, msg, ok := scanLimits(data)
			require.True(t, ok, "%s/%s: %s", dir, e.Name(), msg)
		}
	}
}

// TestParseSpecDeepIsFast: the inputs that stalled the loader for a minute
// now fail in milliseconds, with a position.
func TestParseSpecDeepIsFast(t *testing.T) {
	for name, in := range map[string]string{
		"64k block levels": strings.Repeat("- ", 64000) + "x\n",
		"64k flow levels":  strings.Repeat("[", 64000),
		"1 MiB of keys":    strings.Repeat("k: v\n", MaxFileBytes/5),
	} {
		start := processCPU()
		_, err := ParseSpec("deep.yaml", []byte(in))
		require.Error(t, err, name)
		require.Contains(t, err.Error(), "deep.yaml:", name)
		// CPU time of this process, so other load on the machine does
		// not count. The worst (a million bytes of "k: v" lines) takes
		// about 0.3 s of CPU, 2 s under -race; a parser quadratic in the
		// nesting takes minutes.
		require.Less(t, processCPU()-start, 8*time.Second, name)
	}
}

// scanBounds are the front end's per-input bounds the fuzzer asserts:
// allocation linear in the input's length, and time too (generous, for a
// loaded machine).
func scanBounds(n int) (bytes uint64, d time.Duration) {
	return 4096*uint64(n) + 1<<20, 200*time.Millisecond + time.Duration(n)*20*time.Microsecond
}

// FuzzScanLimits: the front end never panics, stays within linear time
// and allocation per input, and when it accepts a file the parser's
// nesting stays within MaxDepth+1 flow levels (what the parser is
// quadratic in).
func FuzzScanLimits(f *testing.F) {
	for _, s := range []string{
		"name: a\n", "a: " + deep(40), "description: |\n  [[[[\n", "- - - x", "a: 'it''s'\n", "{a: [b, {c: d}]}",
		"a: \"x\\\"[[\"\n", "? a\n: b\n", "a: >\n  {{{\n", "# [[[\n", "- 'unterminated\n",
	} {
		f.Add([]byte(s))
	}
	for _, dir := range []string{"../builtin", "../testdata/ok", "../testdata/bad"} {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if data, err := os.ReadFile(dir + "/" + e.Name()); err == nil {
				f.Add(data)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		maxBytes, maxTime := scanBounds(len(data))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := processCPU()
		_, _, _ = scanLimits(data)
		el := processCPU() - start
		runtime.ReadMemStats(&after)
		require.LessOrEqual(t, after.TotalAlloc-before.TotalAlloc, maxBytes, "allocation for %d bytes", len(data))
		require.Less(t, el, maxTime, "time for %d bytes", len(data))
		// The whole loader: bounded too, never a panic.
		start = processCPU()
		_, err := ParseSpec("f.yaml", data)
		if err != nil {
			require.Contains(t, err.Error(), "f.yaml:")
		}
		require.Less(t, processCPU()-start, 10*maxTime, "ParseSpec time for %d bytes", len(data))
	})
}
