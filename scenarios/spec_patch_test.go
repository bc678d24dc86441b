package scenarios_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios"
)

// patchedFile is aux-stream-lifetime with its remedies written as variant
// patches instead of knobs.
const patchedFile = `name: patched
ranks: 1
knobs: {budget: 3}
tensors:
  - {name: x, bytes: 16384, init: [3, 4]}
  - {name: x_norm, bytes: 16384}
  - {name: sh_h, bytes: 16384}
  - {name: sh_g, bytes: 16384}
  - {name: rt_out, bytes: 16384}
  - {name: out, bytes: 16384, output: true}
programs:
  - ranks: all
    streams: [main, aux]
    events: [fork, join]
    ops:
      - {alloc: x_norm}
      - {kernel: norm, reads: [x], writes: [x_norm], time: 1us}
      - {record: fork}
      - {wait: fork, stream: aux}
      - {alloc: sh_h, stream: aux}
      - {kernel: sh_up, stream: aux, reads: [x], writes: [sh_h], time: 20us}
      - {alloc: sh_g, stream: aux}
      - {kernel: sh_gate, stream: aux, reads: [x_norm, sh_h], writes: [sh_g], time: 2us}
      - {record: join, stream: aux}
      - {free: x_norm, id: drop}
      - {alloc: rt_out}
      - {kernel: rt_scale, reads: [x], writes: [rt_out], time: 1us}
      - {wait: join, id: late_join}
      - {alloc: out}
      - {kernel: merge, reads: [rt_out, sh_g], writes: [out], time: 1us}
variants:
  - name: buggy
    expect: race|corruption
  - name: record-stream
    expect: ok
    patch:
      - {add: {record_stream: x_norm, stream: aux}, before: drop}
  - name: joined
    expect: ok
    patch:
      - {add: {wait: join}, after: join}
  - name: gate-reads-h
    expect: ok
    patch:
      - {replace: sh_gate, with: {kernel: sh_gate, stream: aux, reads: [sh_h], writes: [sh_g], time: 2us}}
  - name: free-late
    expect: ok
    patch:
      - {move: drop, after: merge}
  - name: no-gate
    expect: ok
    patch:
      - {remove: sh_gate}
      - {remove: merge}
      - {add: {kernel: merge, reads: [rt_out], writes: [out], time: 1us}, program: 0}
`

// TestVariantPatches: each remedy written as a patch (add, replace, move,
// remove) changes the program the variant runs, and so its verdict; the
// base program keeps its use after free.
func TestVariantPatches(t *testing.T) {
	sc, err := scenarios.Load("patched.yaml", []byte(patchedFile))
	require.NoError(t, err)
	for _, v := range sc.Variants {
		t.Run(v.Name, func(t *testing.T) {
			rep, err := check.RunVariant(sc, v, check.Options{})
			require.NoError(t, err)
			require.True(t, rep.Met, "expected %s, got %s: %v", v.Expect, rep.Verdict, rep.Findings)
		})
	}
	// The patch is the knob patch=NAME: --set selects it on any variant.
	base, _ := sc.Variant("buggy")
	rep, err := check.RunVariant(sc, base, check.Options{Extra: []string{"patch=record-stream"}})
	require.NoError(t, err)
	require.Equal(t, "ok", rep.Verdict)
	_, err = check.RunVariant(sc, base, check.Options{Extra: []string{"patch=nothing"}})
	require.ErrorContains(t, err, `patch="nothing"`)
}

// TestVariantPatchErrors: a patch that names no op, or one op twice, or
// leaves a program invalid is reported at its line.
func TestVariantPatchErrors(t *testing.T) {
	head := "name: t\nranks: 2\ntensors: [{name: x, bytes: 4096, init: [1]}, {name: y, bytes: 4096}]\nprograms:\n  - ranks: [0]\n    events: [e]\n    ops:\n      - {kernel: k, reads: [x], writes: [y]}\n      - {record: e}\n      - {record: e}\n  - ranks: [1]\n    ops: []\nvariants:\n  - name: v\n    patch:\n"
	tests := []struct{ name, step, want string }{
		{"no such op", "      - {remove: nope}\n", `16:18: patch: no op named "nope" in any program`},
		{"ambiguous", "      - {remove: e}\n", `16:18: patch: "e" names more than one op of the program at line 5`},
		{"move without anchor", "      - {move: k}\n", `16:10: patch: move needs after: or before:`},
		{"added op invalid", "      - {add: {kernel: k2, reads: [z], writes: [y]}, after: k}\n", `16:36: kernel "k2" reads undefined tensor "z"`},
		{"ranks clash", "      - {program: 1, ranks: [0, 1]}\n", `rank 0 has two programs`},
		{"wait loses its record", "      - {add: {wait: e}, before: k}\n", `wait on event "e", which is never recorded before it`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := scenarios.LoadSpec("p.yaml", []byte(head+tt.step))
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestPatchReplaceKeepsID: an op replaced by one that gives no id keeps
// the id it had, so a later step still names it: here the free (id drop)
// is replaced by the same free, then moved after merge by its id.
func TestPatchReplaceKeepsID(t *testing.T) {
	src := patchedFile + `  - name: replaced-then-moved
    expect: ok
    patch:
      - {replace: drop, with: {free: x_norm}}
      - {move: drop, after: merge}
`
	sc, err := scenarios.Load("patched.yaml", []byte(src))
	require.NoError(t, err)
	v, ok := sc.Variant("replaced-then-moved")
	require.True(t, ok)
	rep, err := check.RunVariant(sc, v, check.Options{})
	require.NoError(t, err)
	require.Equal(t, check.OK, rep.Verdict, "%v", rep.Findings)
}

// TestPatchReachesCaptureBlocks: a patch names the ops of a capture block
// as it names the program's own. graphs-piecewise's no-join variant races
// (the attention graph's attn reads kv while the eager kv_write writes
// it); removing attn from the capture takes the race away, and adding a
// replay inside a capture block is refused, as the file's own blocks are.
func TestPatchReachesCaptureBlocks(t *testing.T) {
	data, err := os.ReadFile("testdata/ok/graphs-piecewise.yaml")
	require.NoError(t, err)
	src := string(data) + `  - name: no-join-no-attn
    expect: ok
    set: {join: "off"}
    patch:
      - {remove: attn}
`
	sc, err := scenarios.Load("p.yaml", []byte(src))
	require.NoError(t, err)
	for _, c := range [][2]string{{"joined", check.OK}, {"no-join", "race|corruption"}, {"no-join-no-attn", check.OK}} {
		name, want := c[0], c[1]
		v, ok := sc.Variant(name)
		require.True(t, ok)
		rep, err := check.RunVariant(sc, v, check.Options{})
		require.NoError(t, err)
		require.True(t, check.Meets(rep.Verdict, want), "%s: %s, want %s: %v", name, rep.Verdict, want, rep.Findings)
	}
	bad := string(data) + `  - name: nested
    patch:
      - {add: {replay: mlp}, after: up}
`
	_, err = scenarios.Load("p.yaml", []byte(bad))
	require.ErrorContains(t, err, "cannot go into a capture block")
}
