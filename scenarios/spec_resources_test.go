package scenarios_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios"
)

// TestKernelBlocks: a spinning kernel's blocks: must be resident at once
// on the GPU's SMs and hold them until it completes (ranks/residency.go).
// Two 10 µs spinning kernels on two streams overlap when their grids fit the
// h100's 132 SMs together and run one after the other when they do not —
// unless the sms knob makes room; grids that do not spin run in waves and
// hold nothing.
func TestKernelBlocks(t *testing.T) {
	file := func(blocks, knobs string) string {
		return `name: res
ranks: 1
hardware: h100
knobs: {budget: 0` + knobs + `}
tensors:
  - {name: x, bytes: 4096, init: [1]}
  - {name: a, bytes: 4096}
  - {name: b, bytes: 4096}
programs:
  - ranks: all
    streams: [main, aux]
    events: [fork, join]
    ops:
      - {record: fork}
      - {wait: fork, stream: aux}
      - {kernel: ka, reads: [x], writes: [a], time: 30us` + blocks + `}
      - {kernel: kb, stream: aux, reads: [x], writes: [b], time: 30us` + blocks + `}
      - {record: join, stream: aux}
      - {wait: join}
variants: [{name: v, expect: ok}]
`
	}
	step := func(src string) int64 {
		sc, err := scenarios.Load("res.yaml", []byte(src))
		require.NoError(t, err, src)
		rep, err := check.RunVariant(sc, sc.Variants[0], check.Options{})
		require.NoError(t, err)
		require.Equal(t, "ok", rep.Verdict)
		return rep.StepTimeNs
	}
	free := step(file("", ""))
	fit := step(file(", blocks: 60, spin: true", ""))
	full := step(file(", blocks: 100, spin: true", ""))
	waves := step(file(", blocks: 100", ""))
	room := step(file(", blocks: 100, spin: true", ", sms: 264"))
	// 30 µs kernels issued an eager op apart (7 µs, ranks/gpu/hw.go HostCosts):
	// overlapping, the step is well under the 60 µs of running them in turn.
	require.Less(t, free, int64(60000), "unconstrained kernels overlap")
	t.Logf("step times: free %d, fit %d, full %d, waves %d, room %d", free, fit, full, waves, room)
	require.Equal(t, free, fit, "two 60-block grids fit 132 SMs together")
	require.Greater(t, full, free, "two 100-block grids on 132 SMs run one after the other")
	require.GreaterOrEqual(t, full, int64(60000), "two 100-block grids on 132 SMs run one after the other")
	require.Equal(t, free, room, "sms: 264 fits both")
	require.Equal(t, free, waves, "a grid that does not spin holds no SMs")
}
