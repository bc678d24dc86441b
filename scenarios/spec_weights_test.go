package scenarios_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/collsim/collsim/explore"
	"github.com/collsim/collsim/scenarios"
)

// twoWriters is a one-rank program whose two kernels, on two streams that
// nothing orders, write o from x: the output depends on which runs last
// exactly when their default weights differ.
const twoWriters = `name: two-writers
ranks: 1
knobs: {budget: 0}
tensors:
  - {name: x, bytes: 64, chunks: 1, init: [3]}
  - {name: o, bytes: 64, chunks: 1, output: true}
programs:
  - ranks: all
    streams: [main, aux]
    ops:
      - {kernel: FIRST, reads: [x], writes: [o]}
      - {kernel: SECOND, stream: aux, reads: [x], writes: [o]}
variants:
  - {name: base}
`

// TestDefaultWeightsNeverTurnOnAName: two unordered kernels writing one
// tensor from one input give DPOR-complete corruption whatever they are
// called. With a weight hashed from the name (2 + (fnv(name) + rank) mod
// 89), kA and kB gave corruption and kA and k159 — whose hashes collide —
// gave race (DESIGN.md, Value weights).
func TestDefaultWeightsNeverTurnOnAName(t *testing.T) {
	for _, names := range [][2]string{{"kA", "kB"}, {"kA", "k159"}, {"up", "down"}, {"a", "b"}} {
		t.Run(names[0]+","+names[1], func(t *testing.T) {
			file := strings.NewReplacer("FIRST", names[0], "SECOND", names[1]).Replace(twoWriters)
			read := func(string) ([]byte, error) { return []byte(file), nil }
			tg, err := explore.NewTargetFrom("w.yaml", "base", nil, read)
			require.NoError(t, err)
			sum, err := explore.Explore(tg, &explore.DPOR{}, 0, explore.Options{Budget: 100})
			require.NoError(t, err)
			require.True(t, *sum.Complete)
			require.Equal(t, "corruption", sum.Verdict, "kernels %s and %s", names[0], names[1])
		})
	}
}

// TestDefaultWeightsDistinct: in a file whose kernels have any names —
// plain, repeated by a block (one kernel per iteration), patched in by a
// variant — every (kernel, rank) pair gets its own default weight.
func TestDefaultWeightsDistinct(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		name := rapid.StringMatching(`[a-z][a-z0-9]{0,3}`)
		plain := rapid.SliceOfNDistinct(name, 1, 6, func(s string) string { return s }).Draw(rt, "plain")
		rep := rapid.SliceOfNDistinct(name, 0, 3, func(s string) string { return s }).Draw(rt, "repeated")
		count := rapid.IntRange(1, 12).Draw(rt, "count")
		patched := name.Draw(rt, "patched")
		var b strings.Builder
		fmt.Fprintf(&b, "name: w\nranks: 4\ntensors:\n  - {name: x, bytes: 64, init: [1]}\n  - {name: y, bytes: 64}\nprograms:\n  - ranks: all\n    ops:\n")
		for _, n := range plain {
			fmt.Fprintf(&b, "      - {kernel: %q, reads: [x], writes: [y]}\n", n)
		}
		if len(rep) > 0 {
			fmt.Fprintf(&b, "      - repeat: {count: %d, as: l}\n        ops:\n", count)
			for _, n := range rep {
				fmt.Fprintf(&b, "          - {kernel: \"%s${l}\", reads: [x], writes: [y]}\n", n)
			}
		}
		fmt.Fprintf(&b, "variants:\n  - {name: base}\n  - name: patched\n    patch:\n      - {add: {kernel: %q, reads: [x], writes: [y]}, before: %q}\n", patched, plain[0])
		spec, err := scenarios.LoadSpec("w.yaml", []byte(b.String()))
		require.NoError(rt, err, b.String())
		kernels := map[string]bool{patched: true}
		for _, n := range plain {
			kernels[n] = true
		}
		for _, n := range rep {
			for l := range count {
				kernels[fmt.Sprintf("%s%d", n, l)] = true
			}
		}
		seen := map[int64]string{}
		for k := range kernels {
			for r := range 4 {
				w := spec.KernelWeight(k, r)
				require.GreaterOrEqual(rt, w, int64(2))
				id := fmt.Sprintf("%s on rank %d", k, r)
				if other, dup := seen[w]; dup {
					rt.Fatalf("%s and %s share the default weight %d\n%s", other, id, w, b.String())
				}
				seen[w] = id
			}
		}
	})
}
