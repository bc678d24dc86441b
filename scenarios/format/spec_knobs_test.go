package format_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/scenarios/format"
)

// TestUnusedKnobs: a knob the file's form does not read is an error at its
// line, under knobs: and in a variant's set; a knob it reads, or an unread
// one at its default value, is accepted.
func TestUnusedKnobs(t *testing.T) {
	const programs = "communicators: [{name: w, ranks: all}]\ntensors: [{name: x, bytes: 4096}, {name: y, bytes: 4096}]\nprograms: [{ranks: all, ops: [{allreduce: ar, comm: w, in: x, out: y}]}]\n"
	const alloc = "tensors: [{name: x, bytes: 4096}]\nprograms: [{ranks: all, ops: [{alloc: x}]}]\n"
	const moe = "graph: {builder: moe}\n"
	const ops = "communicators: [{name: w, ranks: all}]\ntensors: [{name: x, bytes: 4096}, {name: y, bytes: 4096}]\ngraph: {ops: [{name: ar, kind: allreduce, inputs: [x], output: y, comm: w}]}\n"
	tests := []struct {
		name, knobs, body, set string
		wantErr                string // "" for no error; else line:col: substring
	}{
		{"programs read strategy", "strategy: nccl", programs, "", ""},
		{"programs read nccl-order", "nccl-order: implicit", programs, "", ""},
		{"programs ignore placement", "placement: buggy", programs, "", `4:9: knob "placement" is not read by this file's form (programs)`},
		{"default value accepted", "placement: single", programs, "", ""},
		{"caching needs an alloc", "caching: \"off\"", programs, "", `4:9: knob "caching" is not read`},
		{"caching with an alloc", "caching: \"off\"", alloc, "", ""},
		{"moe reads layers", "layers: 2", moe, "", ""},
		{"moe ignores engines", "engines: fused", moe, "", `4:9: knob "engines" is not read by this file's form (graph builder moe)`},
		{"op graph ignores shared", "shared: mid", ops, "", `4:9: knob "shared" is not read by this file's form (graph ops)`},
		{"variant set", "budget: 1", programs, "coresident: both", `10:21: variant "b": knob "coresident" is not read`},
		{"variant set default", "budget: 1", programs, "skew_ns: 0", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "name: t\nranks: 2\nhardware: sm90\nknobs: {" + tt.knobs + "}\n" + tt.body + "variants:\n  - {name: a}\n"
			if tt.set != "" {
				src += "  - {name: b, set: {" + tt.set + "}}\n"
			}
			_, err := format.LoadSpec("k.yaml", []byte(src))
			if tt.wantErr == "" {
				require.NoError(t, err, src)
				return
			}
			require.Error(t, err, src)
			require.Contains(t, err.Error(), "k.yaml:"+tt.wantErr, src)
		})
	}
}
