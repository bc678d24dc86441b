package scenarios_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios"
)

// runVerdict runs variant of sc with extra --set knobs and returns its
// verdict.
func runVerdict(t *testing.T, sc check.Scenario, variant string, extra ...string) string {
	t.Helper()
	for _, v := range sc.(*scenarios.Scenario).Variants {
		if v.Name == variant {
			rep, err := check.RunVariant(sc, v, check.Options{Extra: append([]string{"budget=8"}, extra...)})
			require.NoError(t, err)
			return rep.Verdict
		}
	}
	t.Fatalf("no variant %q", variant)
	return ""
}

// TestNCCLCoresident: two communicators that the GPUs reach in opposite
// orders hang when a GPU runs one NCCL kernel at a time, and finish when it
// runs both communicators' kernels together (nccl-coresident). Implicit
// order (NCCL's serial mode: a kernel waits for the previous one's
// completion, src/enqueue.cc getImplicitOrder) rescues a consistent host
// order, never an opposite one, co-resident or not; its launch mode lets
// co-resident kernels finish opposite host orders.
func TestNCCLCoresident(t *testing.T) {
	sc, ok := scenarios.Lookup("two-comms-opposite-order")
	require.True(t, ok)
	for _, tc := range []struct {
		variant, order, coresident, want string
	}{
		{"per-comm-order", "", "off", "hang"},
		{"per-comm-order", "", "on", "ok"},
		{"implicit-order", "", "off", "ok"},
		{"implicit-order", "", "on", "ok"},
		{"host-opposite", "", "off", "hang"},
		{"host-opposite", "", "on", "hang"},
		// The launch mode (CUDA ≥ 12.3): a kernel waits for the previous
		// one to start. One kernel per GPU, that is the serial mode; with
		// co-resident kernels the opposite host orders finish, though the
		// program serialized on one stream still hangs.
		{"implicit-order", "implicit-launch", "on", "ok"},
		{"host-opposite", "implicit-launch", "off", "hang"},
		{"host-opposite", "implicit-launch", "on", "reference-hang"},
	} {
		t.Run(tc.variant+"/"+tc.order+"/"+tc.coresident, func(t *testing.T) {
			extra := []string{"nccl-coresident=" + tc.coresident}
			if tc.order != "" {
				extra = append(extra, "nccl-order="+tc.order)
			}
			require.Equal(t, tc.want, runVerdict(t, sc, tc.variant, extra...))
		})
	}
}

// oneCommTwoStreams: one communicator's all-reduces X (aux) and Y (main),
// issued X then Y on both ranks; the work before each is short on one
// stream and long on the other, mirrored on rank 1, so without an order
// between them the two GPUs reach them in opposite orders.
const oneCommTwoStreams = `name: one-comm-two-streams
ranks: 2
hardware: h200
chunks: 2
knobs: {strategy: nccl, budget: 8}
communicators: [{name: world, ranks: all}]
tensors:
  - {name: x, bytes: 65536, init_per_rank: [[1, 2], [3, 4]]}
  - {name: y, bytes: 65536, init_per_rank: [[10, 20], [30, 40]]}
  - {name: px, bytes: 65536}
  - {name: py, bytes: 65536}
  - {name: xo, bytes: 65536, output: true}
  - {name: yo, bytes: 65536, output: true}
programs:
  - ranks: 0
    streams: [main, aux]
    events: [fork, join]
    ops: &ops
      - {record: fork}
      - {wait: fork, stream: aux}
      - {kernel: prep_x, stream: aux, reads: [x], writes: [px], time: 2us}
      - {kernel: prep_y, reads: [y], writes: [py], time: 40us}
      - {allreduce: X, stream: aux, comm: world, in: px, out: xo}
      - {allreduce: Y, comm: world, in: py, out: yo}
      - {record: join, stream: aux}
      - {wait: join}
  - ranks: 1
    streams: [main, aux]
    events: [fork, join]
    ops:
      - {record: fork}
      - {wait: fork, stream: aux}
      - {kernel: prep_x, stream: aux, reads: [x], writes: [px], time: 40us}
      - {kernel: prep_y, reads: [y], writes: [py], time: 2us}
      - {allreduce: X, stream: aux, comm: world, in: px, out: xo}
      - {allreduce: Y, comm: world, in: py, out: yo}
      - {record: join, stream: aux}
      - {wait: join}
variants:
  - {name: eager, set: {mode: eager}}
  - {name: graph, set: {mode: graph}}
`

// TestNCCLGraphUnordered: NCCL orders one communicator's kernels in host
// issue order on a GPU, eager and captured (the strong stream,
// src/enqueue.cc ncclLaunchPrepare; across graphs the serialEvent of
// src/misc/strongstream.cc when graph mixing is on, its default). RCCL's
// graph path adds no such order between graphs (GRAPH_MIXING_SUPPORT
// defaults to 0 there): with nccl-order graph-unordered the captured X and Y
// are unordered, the GPUs take them in opposite orders, and each call
// pairs with the other's data. Eager launches keep the order.
func TestNCCLGraphUnordered(t *testing.T) {
	sc, err := scenarios.Load("one-comm.yaml", []byte(oneCommTwoStreams))
	require.NoError(t, err)
	for _, tc := range []struct {
		variant, order string
		ok             bool
	}{
		{"eager", "per-comm", true},
		{"graph", "per-comm", true},
		{"eager", "graph-unordered", true},
		{"graph", "graph-unordered", false},
	} {
		t.Run(fmt.Sprintf("%s/%s", tc.variant, tc.order), func(t *testing.T) {
			v := runVerdict(t, sc, tc.variant, "nccl-order="+tc.order)
			if tc.ok {
				require.Equal(t, "ok", v)
			} else {
				require.Contains(t, []string{"corruption", "mismatch"}, v)
			}
		})
	}
}
