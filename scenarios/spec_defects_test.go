package scenarios_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios"
)

// TestEagerOpCountsPerStep: references: [eager] names the ops the graph
// captures more often than the eager path issues them per step, whatever
// the replays: a graph replayed twice on independent steps (the eager path
// issues the program once) names only the ops the capture path adds, and
// says each runs 0× per eager step — never every op of the program.
func TestEagerOpCountsPerStep(t *testing.T) {
	data, err := os.ReadFile("testdata/ok/capture-twice.yaml")
	require.NoError(t, err)
	sc, err := scenarios.Load("capture-twice.yaml", data)
	require.NoError(t, err)
	v, ok := sc.Variant("twice")
	require.True(t, ok)
	for _, replays := range []string{"replays=1", "replays=2", "replays=3"} {
		t.Run(replays, func(t *testing.T) {
			rep, err := check.RunVariant(sc, v, check.Options{Extra: []string{replays, "budget=0"}})
			require.NoError(t, err)
			require.Equal(t, check.Corruption, rep.Verdict)
			msg := rep.Findings[0].Message
			require.Contains(t, msg, "op add_again is captured 1× in the graph but runs 0× per eager step")
			require.Contains(t, msg, "op shared_again is captured 1× in the graph but runs 0× per eager step")
			for _, same := range []string{"moe", "copy_out", "add_shared", "shared"} {
				require.NotContains(t, msg, "op "+same+" is captured", "%s runs as often eagerly", same)
			}
		})
	}
}

// constantComparand is a graph of independent replays whose flag wait
// compares against a tensor the file initialises and nothing writes: a
// constant of the protocol, not an input of the step.
const constantComparand = `name: constant-comparand
ranks: 1
hardware: h100
mode: graph
replays: 2
knobs: {budget: 2}
tensors:
  - {name: fl, bytes: 64, chunks: 1}
  - {name: colour, bytes: 64, chunks: 1, COLOUR}
  - {name: x, bytes: 64, chunks: 1, init: [3]}
  - {name: y, bytes: 64, chunks: 1, output: true}
programs:
  - ranks: all
    ops:
      - {reset: r, flag: fl}
      - {put: p, flag: fl, value: 1}
      - {await: w, flag: fl, against: colour}
      - {kernel: k, reads: [x], writes: [y]}
variants:
  - {name: base}
`

// TestReplayInputsAreData: under independent steps the tensors re-filled
// before each replay are those a kernel reads as data (x here) and the
// file's per_replay: ones; a tensor only a flag op reads (the colour a
// wait compares against) keeps its init: in every replay. Re-filled with
// derived values, the colour made every replay's reference but the last
// hang, and the run exit with an error. A per_replay: colour that does
// not match in replay 0 hangs there: the reference of that replay hanging
// is a reference-hang finding, not an error.
func TestReplayInputsAreData(t *testing.T) {
	for _, tt := range []struct {
		colour, want string
		refHang      bool
	}{
		{"init: [1]", check.OK, false},
		{"per_replay: [[2], [1]]", check.Hang, true},
	} {
		t.Run(tt.colour, func(t *testing.T) {
			src := strings.ReplaceAll(constantComparand, "COLOUR", tt.colour)
			sc, err := scenarios.Load("c.yaml", []byte(src))
			require.NoError(t, err)
			rep, err := check.RunVariant(sc, sc.Variants[0], check.Options{})
			require.NoError(t, err)
			require.Equal(t, tt.want, rep.Verdict, "%v", rep.Findings)
			found := false
			for _, f := range rep.Findings {
				found = found || (f.Kind == check.ReferenceHang && strings.Contains(f.Message, "replay 0's inputs hangs"))
			}
			require.Equal(t, tt.refHang, found, "%v", rep.Findings)
		})
	}
}

// TestRecordStreamOnAStaticTensor: record_stream of a tensor no alloc op
// allocates is accepted and does nothing (the tensor lives for the whole
// program, so no free waits on it; PyTorch accepts record_stream on any
// CUDA tensor); a free of one is still an error.
func TestRecordStreamOnAStaticTensor(t *testing.T) {
	file := `name: rs-static
ranks: 1
tensors:
  - {name: x, bytes: 64, chunks: 1, init: [1]}
  - {name: y, bytes: 64, chunks: 1, output: true}
programs:
  - ranks: all
    streams: [main, aux]
    events: [e]
    ops:
      - {record: e}
      - {wait: e, stream: aux}
      - {kernel: k, stream: aux, reads: [x], writes: [y]}
      - OP
      - {record: e, stream: aux}
      - {wait: e}
variants:
  - {name: base}
`
	sc, err := scenarios.Load("rs.yaml", []byte(strings.Replace(file, "OP", "{record_stream: x, stream: aux}", 1)))
	require.NoError(t, err)
	rep, err := check.RunVariant(sc, sc.Variants[0], check.Options{Extra: []string{"budget=2"}})
	require.NoError(t, err)
	require.Equal(t, check.OK, rep.Verdict, "%v", rep.Findings)
	_, err = scenarios.Load("rs.yaml", []byte(strings.Replace(file, "OP", "{free: x}", 1)))
	require.ErrorContains(t, err, `free of "x", which no alloc op allocates`)
}

// TestAnchorsAndAliases: an alias stands for its anchor's value, so
// even- and odd-rank programs can share their ops; the file loads as the
// same file with the ops written twice.
func TestAnchorsAndAliases(t *testing.T) {
	aliased := `name: anchors
ranks: 4
tensors:
  - {name: x, bytes: 64, chunks: 1, init: [1]}
  - {name: y, bytes: 64, chunks: 1, output: true}
programs:
  - ranks: [0, 2]
    ops: &even
      - {kernel: k, reads: [x], writes: [y]}
  - ranks: [1, 3]
    ops: *even
variants:
  - {name: base}
`
	written := strings.Replace(strings.Replace(aliased, "ops: &even", "ops:", 1), "ops: *even", "ops:\n      - {kernel: k, reads: [x], writes: [y]}", 1)
	a, err := scenarios.LoadSpec("a.yaml", []byte(aliased))
	require.NoError(t, err)
	w, err := scenarios.LoadSpec("w.yaml", []byte(written))
	require.NoError(t, err)
	require.Len(t, a.Programs, 2)
	for i := range a.Programs {
		require.Len(t, a.Programs[i].Ops, 1)
		require.Equal(t, w.Programs[i].Ops[0].Name, a.Programs[i].Ops[0].Name)
		require.Equal(t, w.Programs[i].Ops[0].Reads, a.Programs[i].Ops[0].Reads)
	}
}
