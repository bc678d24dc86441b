package scenarios_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// A kernel's read or write TENSOR[LO:HI] touches chunks LO..HI-1 only: two
// streams using disjoint halves of one buffer are not a race (a
// storage-wide view would call them one), overlapping halves are, and a
// read range shorter than the write repeats.
func TestKernelChunkRanges(t *testing.T) {
	file := func(auxReads, auxWrites, mainWrites string) string {
		return fmt.Sprintf(`name: t
ranks: 1
mode: eager
tensors:
  - {name: x, bytes: 4096, chunks: 4, init: [1, 2, 3, 4]}
  - {name: y, bytes: 4096, chunks: 4, output: true}
programs:
  - ranks: all
    streams: [main, aux]
    events: [e]
    ops:
      - {kernel: read, stream: aux, reads: [%q], writes: [%q], weight: 3, time: 5us}
      - {kernel: write, stream: main, reads: ["x[0:2]"], writes: [%q], weight: 5, time: 1us}
      - {record: e, stream: aux}
      - {wait: e, stream: main}
variants: [{name: v}]
`, auxReads, auxWrites, mainWrites)
	}
	for _, tc := range []struct {
		name, auxReads, auxWrites, mainWrites, want string
	}{
		{"disjoint halves", "x[0:2]", "y[0:2]", "x[2:4]", "ok"},
		{"the same half", "x[0:2]", "y[0:2]", "x[0:2]", "corruption"},
		{"overlapping by one chunk", "x[0:2]", "y[0:2]", "x[1:3]", "corruption"},
		{"the whole tensor against a half", "x", "y", "x[2:4]", "corruption"},
		// a longer read gives its first chunks: x's chunks 0 and 1 only
		{"a longer read against the other half", "x", "y[0:2]", "x[2:4]", "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := runFile(t, file(tc.auxReads, tc.auxWrites, tc.mainWrites), "v")
			require.Equal(t, tc.want, rep.Verdict)
		})
	}
}

// A write range leaves the tensor's other chunks as they were, and a read
// range shorter than the write gives its chunks in turn.
func TestKernelChunkRangeValues(t *testing.T) {
	src := `name: t
ranks: 1
mode: eager
tensors:
  - {name: x, bytes: 4096, chunks: 4, init: [1, 2, 3, 4]}
  - {name: y, bytes: 4096, chunks: 4, init: [7, 7, 7, 7], output: true}
  - {name: z, bytes: 4096, chunks: 4, output: true}
programs:
  - ranks: all
    streams: [main]
    ops:
      - {kernel: half, reads: ["x[2:4]"], writes: ["y[0:2]"], weight: 1}
      - {kernel: wrap, reads: ["x[2:4]"], writes: [z], weight: 1}
references:
  - expected:
      - {tensor: y, ranks: all, values: [3, 4, 7, 7]}
      - {tensor: z, ranks: all, values: [3, 4, 3, 4]}
variants: [{name: v}]
`
	rep := runFile(t, src, "v")
	require.Equal(t, "ok", rep.Verdict, "%v", rep.Findings)
}
