package explore

import (
	"testing"

	"github.com/collsim/collsim/scenarios"
	"github.com/stretchr/testify/require"
)

// A use after free through the caching allocator: x is read on aux while
// main frees it and w takes its block. Only timing orders the read before
// w's write. DPOR must reach the corrupt outcome the naive enumeration
// reaches, which needs its footprints to see that w's write touches x's
// memory (ranks.Buffer.Aliases).
const aliasScenario = `
name: alias-uaf
ranks: 1
chunks: 1
tensors:
  - {name: src, bytes: 65536, init: [1, 2, 3, 4]}
  - {name: x, bytes: 65536}
  - {name: w, bytes: 65536}
  - {name: y, bytes: 65536, output: true}
programs:
  - ranks: all
    streams: [main, aux]
    events: [fork]
    ops:
      - {alloc: x, stream: main}
      - {kernel: mul, stream: main, reads: [src], writes: [x], time: 2us}
      - {record: fork, stream: main}
      - {wait: fork, stream: aux}
      - {kernel: sin, stream: aux, reads: [x], writes: [y], time: 1us}
      - {free: x}
      - {alloc: w, stream: main}
      - {kernel: cos, stream: main, reads: [src], writes: [w], time: 2us}
variants:
  - name: recorded
`

func TestDPORSeesAllocatorAliases(t *testing.T) {
	read := func(string) ([]byte, error) { return []byte(aliasScenario), nil }
	tg, err := NewTargetFrom("alias.yaml", "recorded", nil, scenarios.ReadFunc(read))
	require.NoError(t, err)
	want, runs, ok := naiveOutcomes(tg, 20000)
	require.True(t, ok, "naive enumeration within %d runs", runs)
	got, sum := dporOutcomes(tg, runs)
	require.True(t, *sum.Complete)
	require.Equal(t, keys(want), keys(got), "dpor (%d traces) vs naive (%d runs)", sum.Schedules, runs)
	require.Equal(t, "corruption", sum.Verdict)
}
