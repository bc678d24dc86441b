package scenarios_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios"
)

// orderFile: two ranks issue X then Y on one NCCL communicator; the swapped
// variant moves Y before X on rank 1. Each rank's own program serialized
// pairs X with Y too, so only a reference to the ordered variant shows the
// mixed data as corruption. REFS is replaced per case.
const orderFile = `name: order
ranks: 2
chunks: 2
knobs: {strategy: nccl, budget: 2}
REFS
communicators: [{name: tp, ranks: all}]
tensors:
  - {name: X.in, bytes: 65536, init_per_rank: [[10, 11], [20, 21]]}
  - {name: X.out, bytes: 65536, output: true}
  - {name: Y.in, bytes: 65536, init_per_rank: [[100, 101], [200, 201]]}
  - {name: Y.out, bytes: 65536, output: true}
programs:
  - ranks: [0]
    ops:
      - {allreduce: X, comm: tp, in: X.in, out: X.out}
      - {allreduce: Y, comm: tp, in: Y.in, out: Y.out}
  - ranks: [1]
    ops:
      - {allreduce: X, comm: tp, in: X.in, out: X.out}
      - {allreduce: Y, comm: tp, in: Y.in, out: Y.out}
variants:
  - name: ordered
  - name: swapped
    patch: [{move: Y, before: X, program: 1}]
`

// shardFile: a linear op sharded across the ranks (moe) and one left
// replicated with its whole weight (shared), added before the all-reduce:
// the shared expert is counted once per rank. The program agrees with its
// own serialized reference; only the unsharded model disagrees.
const shardFile = `name: shard
ranks: 2
chunks: 2
knobs: {strategy: nccl, shared_shard: replicated, budget: 2}
REFS
communicators: [{name: tp, ranks: all}]
tensors:
  - {name: x, bytes: 4096, init: [3, 5]}
  - {name: rt, bytes: 4096}
  - {name: sh, bytes: 4096}
  - {name: pre, bytes: 4096}
  - {name: out, bytes: 4096, output: true}
programs:
  - ranks: all
    ops:
      - {kernel: moe, reads: [x], writes: [rt], launch: gemm}
      - {kernel: shared, reads: [x], writes: [sh], weight: whole, when: {shared_shard: replicated}}
      - {kernel: shared, reads: [x], writes: [sh], when: {shared_shard: sharded}}
      - {kernel: merge, reads: [rt, sh], writes: [pre], sum: true}
      - {allreduce: ar, comm: tp, in: pre, out: out}
variants:
  - name: v
`

const unsharded = `references:
  - unsharded:
      ops:
        - {linear: moe, reads: [x], writes: rt}
        - {linear: shared, reads: [x], writes: sh}
        - {add: merge, reads: [rt, sh], writes: out}
      outputs: [out]`

func runFile(t *testing.T, src, variant string, sets ...string) *check.VariantReport {
	t.Helper()
	sc, err := scenarios.Load("t.yaml", []byte(src))
	require.NoError(t, err)
	v, ok := sc.Variant(variant)
	require.True(t, ok, variant)
	rep, err := check.RunVariant(sc, v, check.Options{Extra: sets})
	require.NoError(t, err)
	return rep
}

// Each reference decides a verdict only through the values it compares:
// without it the same run is judged by its own serialized program alone.
func TestReferences(t *testing.T) {
	// 10+20 = 30 and 11+21 = 32 on every rank: X.out's right values.
	expectedOK := "references:\n  - expected:\n      - {tensor: X.out, ranks: all, values: [30, 32]}\n      - {tensor: Y.out, ranks: [1], values: [300, 302]}"
	expectedBad := "references:\n  - expected:\n      - {tensor: X.out, ranks: [1], values: [30, 33]}"
	tests := []struct {
		name, file, refs, variant string
		sets                      []string
		want                      string
		finding                   string // substring of a finding's message
	}{
		{"variant: swapped against ordered", orderFile, "references: [variant: ordered]", "swapped", nil, "corruption", "differs from variant ordered's reference"},
		{"variant: ordered against itself", orderFile, "references: [variant: ordered]", "ordered", nil, "ok", ""},
		{"no variant reference: the mix agrees with itself", orderFile, "", "swapped", nil, "mismatch", "consumed data of another collective"},
		{"variant reference follows --set", orderFile, "references: [variant: ordered]", "swapped", []string{"chunks=4"}, "corruption", "differs from variant ordered's reference"},
		{"expected: right values", orderFile, expectedOK, "ordered", nil, "ok", ""},
		{"expected: a wrong value", orderFile, expectedBad, "ordered", nil, "corruption", "rank 1 tensor X.out[1]: expected 33 (an explicit expected value); observed 32"},
		{"expected: the swapped run", orderFile, expectedOK, "swapped", nil, "corruption", "an explicit expected value"},
		{"unsharded: replicated counted twice", shardFile, unsharded, "v", nil, "corruption", "op shared's contribution is counted 2 times"},
		{"unsharded: sharded matches", shardFile, unsharded, "v", []string{"shared_shard=sharded"}, "ok", ""},
		{"unsharded: one rank", shardFile, unsharded, "v", []string{"tp=1"}, "ok", ""},
		{"unsharded: four ranks", shardFile, unsharded, "v", []string{"tp=4"}, "corruption", "counted 4 times"},
		{"no unsharded reference: the program agrees with itself", shardFile, "", "v", nil, "ok", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := runFile(t, strings.Replace(tt.file, "REFS", tt.refs, 1), tt.variant, tt.sets...)
			require.Equal(t, tt.want, rep.Verdict, "%v", rep.Findings)
			if tt.finding != "" {
				found := false
				for _, f := range rep.Findings {
					found = found || strings.Contains(f.Message, tt.finding)
				}
				require.True(t, found, "no finding with %q in %v", tt.finding, rep.Findings)
			}
		})
	}
}

// A sum kernel keeps the provenance of its terms (the unsharded model can
// name the op counted twice); a weighted kernel makes a fresh value, whose
// only term is itself. launch: gemm charges an eager matmul's host cost.
func TestKernelSumAndGEMM(t *testing.T) {
	src := strings.Replace(shardFile, "REFS", unsharded, 1)
	fresh := strings.Replace(src, "writes: [pre], sum: true}", "writes: [pre]}", 1)
	rep := runFile(t, fresh, "v")
	require.Equal(t, "corruption", rep.Verdict)
	for _, f := range rep.Findings {
		require.NotContains(t, f.Message, "counted 2 times", "a fresh merge value carries no terms to attribute")
	}
	base := runFile(t, src, "v", "shared_shard=sharded")
	noGEMM := runFile(t, strings.Replace(src, ", launch: gemm", "", 1), "v", "shared_shard=sharded")
	require.Greater(t, base.StepTimeNs, noGEMM.StepTimeNs, "an eager GEMM costs the host more than an elementwise op")
}

// The references round-trip through the exporter.
func TestReferencesExport(t *testing.T) {
	for _, refs := range []string{"references: [variant: ordered]", "references:\n  - eager\n  - variant: ordered\n  - expected:\n      - {tensor: X.out, ranks: [0, 1], values: [30, 32]}"} {
		src := strings.Replace(orderFile, "REFS", refs, 1)
		spec, err := scenarios.LoadSpec("t.yaml", []byte(src))
		require.NoError(t, err)
		out := scenarios.MarshalSpec(spec)
		back, err := scenarios.LoadSpec("t.yaml", out)
		require.NoError(t, err, "%s", out)
		require.Equal(t, string(out), string(scenarios.MarshalSpec(back)))
		require.Equal(t, len(spec.Refs), len(back.Refs))
	}
	src := strings.Replace(shardFile, "REFS", unsharded, 1)
	spec, err := scenarios.LoadSpec("t.yaml", []byte(src))
	require.NoError(t, err)
	out := scenarios.MarshalSpec(spec)
	require.Contains(t, string(out), "- {linear: moe, reads: [x], writes: rt}")
	require.Contains(t, string(out), "weight: whole")
	require.Contains(t, string(out), "sum: true")
	_, err = scenarios.LoadSpec("t.yaml", out)
	require.NoError(t, err, "%s", out)
}

// FuzzReferences: any references: section parses without a panic, a file
// that validates exports and loads back to the same YAML, and every
// variant's references are made (sized by its configuration) without a
// panic or, for a validated file, an error.
func FuzzReferences(f *testing.F) {
	for _, refs := range []string{
		"", "references: [eager]", "references: [variant: ordered]", "references: [variant: swapped, eager]",
		"references:\n  - expected:\n      - {tensor: X.out, ranks: all, values: [30, 32]}",
		"references:\n  - expected:\n      - {tensor: X.out, ranks: [1], values: [1]}",
		"references: [{variant: a, expected: []}]", "references: [{}]", "references: [expected: ]", "references: [unsharded: {}]",
		"references:\n  - unsharded:\n      ops: [{linear: X, reads: [X.in], writes: X.out, weight: 2}]\n      outputs: [X.out]",
		"references:\n  - unsharded:\n      ops: [{add: X, reads: [X.in, Y.in], writes: X.out}, {linear: q, reads: [X.out], writes: Y.out}]\n      outputs: [X.out, Y.out]",
	} {
		f.Add([]byte(strings.Replace(orderFile, "REFS", refs, 1)))
	}
	f.Add([]byte(strings.Replace(shardFile, "REFS", unsharded, 1)))
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := scenarios.ParseSpec("fuzz.yaml", data)
		if err != nil {
			require.ErrorIs(t, err, scenarios.ErrInvalid)
			return
		}
		if spec.Validate() != nil {
			return
		}
		out := scenarios.MarshalSpec(spec)
		back, err := scenarios.LoadSpec("fuzz.yaml", out)
		require.NoError(t, err, "export of a valid file does not load:\n%s", out)
		require.Equal(t, string(out), string(scenarios.MarshalSpec(back)))
		sc := scenarios.ScenarioOf(spec)
		for _, v := range sc.Variants {
			su, err := sc.Setup(v, nil)
			if err != nil {
				continue // a variant's own knobs: reported by validation
			}
			_, err = su.Program.References()
			require.NoError(t, err, "variant %s", v.Name)
		}
	})
}
