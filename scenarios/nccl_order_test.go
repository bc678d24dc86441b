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
// graph path orders them within one graph too (rccl src/enqueue.cc at
// 0cbce2a, ncclLaunchPrepare l.1376-1382: a persistent plan's launch
// stream waits on the deviceStream's tip) but adds nothing between graphs
// captured apart (GRAPH_MIXING_SUPPORT defaults to 0, strongstream.cc
// l.111, so a graph's first NCCL node waits on no serialEvent, l.171-177).
// With nccl-order graph-unordered the whole program captured as one graph
// keeps X before Y; captured apart and replayed from two streams, X and Y
// are unordered, the GPUs take them in opposite orders, and one NCCL
// kernel at a time per GPU pairs each call with the other's data.
func TestNCCLGraphUnordered(t *testing.T) {
	one, err := scenarios.Load("one-comm.yaml", []byte(oneCommTwoStreams))
	require.NoError(t, err)
	apart, err := scenarios.Load("two-graphs.yaml", []byte(oneCommTwoGraphs))
	require.NoError(t, err)
	for _, tc := range []struct {
		sc             check.Scenario
		variant, order string
		ok             bool
	}{
		{one, "eager", "per-comm", true},
		{one, "graph", "per-comm", true},
		{one, "eager", "graph-unordered", true},
		{one, "graph", "graph-unordered", true},
		{apart, "graphs", "per-comm", true},
		{apart, "graphs", "graph-unordered", false},
	} {
		t.Run(fmt.Sprintf("%s/%s/%s", tc.sc.(*scenarios.Scenario).Name, tc.variant, tc.order), func(t *testing.T) {
			v := runVerdict(t, tc.sc, tc.variant, "nccl-order="+tc.order)
			if tc.ok {
				require.Equal(t, "ok", v)
			} else {
				require.Contains(t, []string{"corruption", "mismatch"}, v)
			}
		})
	}
}

// oneCommTwoGraphs is oneCommTwoStreams with X and Y captured apart, each
// with its prep kernel, and the graphs replayed from aux and main.
const oneCommTwoGraphs = `name: one-comm-two-graphs
ranks: 2
hardware: h200
chunks: 2
mode: graph
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
    ops:
      - capture: gx
        ops:
          - {kernel: prep_x, reads: [x], writes: [px], time: 2us}
          - {allreduce: X, comm: world, in: px, out: xo}
      - capture: gy
        ops:
          - {kernel: prep_y, reads: [y], writes: [py], time: 40us}
          - {allreduce: Y, comm: world, in: py, out: yo}
      - {record: fork}
      - {wait: fork, stream: aux}
      - {replay: gx, stream: aux}
      - {replay: gy}
      - {record: join, stream: aux}
      - {wait: join}
  - ranks: 1
    streams: [main, aux]
    events: [fork, join]
    ops:
      - capture: gx
        ops:
          - {kernel: prep_x, reads: [x], writes: [px], time: 40us}
          - {allreduce: X, comm: world, in: px, out: xo}
      - capture: gy
        ops:
          - {kernel: prep_y, reads: [y], writes: [py], time: 2us}
          - {allreduce: Y, comm: world, in: py, out: yo}
      - {record: fork}
      - {wait: fork, stream: aux}
      - {replay: gx, stream: aux}
      - {replay: gy}
      - {record: join, stream: aux}
      - {wait: join}
variants:
  - {name: graphs}
`

// TestRCCLGraphsSharedConnections: four graphs, each captured apart with an
// all-reduce on one communicator, replayed at once from four streams on
// each of two GPUs (rocm/rccl #2179's reproducer). RCCL orders nothing
// between them (nccl-order graph-unordered); a GPU that runs NCCL kernels
// together (nccl-coresident on) then runs the four at once, and they race on
// the connections' step counters (ranks/stepconn.go): some schedule loses a
// different count of increments on the two GPUs and a receive waits for a
// step its peer never sends. At nominal timing both GPUs lose the same
// count and the calls complete (only the race is seen). One NCCL kernel at
// a time per GPU runs them in each GPU's own order: cross-paired calls.
// Graph mixing (RCCL_GRAPH_MIXING_SUPPORT=1, nccl-order per-comm) orders
// the graphs: ok.
func TestRCCLGraphsSharedConnections(t *testing.T) {
	sc, err := scenarios.Load("four-graphs.yaml", []byte(fourGraphsOneComm))
	require.NoError(t, err)
	for _, tc := range []struct {
		order, coresident, budget string
		want                      []string
	}{
		{"graph-unordered", "on", "8", []string{"hang"}},
		{"graph-unordered", "on", "0", []string{"race"}},
		{"graph-unordered", "off", "8", []string{"corruption", "mismatch"}},
		{"per-comm", "on", "8", []string{"ok"}},
		{"per-comm", "off", "8", []string{"ok"}},
	} {
		t.Run(tc.order+"/"+tc.coresident+"/budget="+tc.budget, func(t *testing.T) {
			v := runVerdict(t, sc, "replays", "nccl-order="+tc.order, "nccl-coresident="+tc.coresident, "budget="+tc.budget)
			require.Contains(t, tc.want, v)
		})
	}
}

const fourGraphsOneComm = `name: four-graphs-one-comm
ranks: 2
hardware: h200
mode: graph
chunks: 2
knobs: {strategy: nccl}
communicators: [{name: tp, ranks: all}]
tensors:
  - {name: x0, bytes: 65536, init_per_rank: [[1, 2], [3, 4]]}
  - {name: x1, bytes: 65536, init_per_rank: [[5, 6], [7, 8]]}
  - {name: x2, bytes: 65536, init_per_rank: [[9, 10], [11, 12]]}
  - {name: x3, bytes: 65536, init_per_rank: [[13, 14], [15, 16]]}
  - {name: y0, bytes: 65536, output: true}
  - {name: y1, bytes: 65536, output: true}
  - {name: y2, bytes: 65536, output: true}
  - {name: y3, bytes: 65536, output: true}
programs:
  - ranks: all
    streams: [main, s0, s1, s2, s3]
    events: [go, d0, d1, d2, d3]
    ops:
      - capture: g0
        ops: [{allreduce: ar0, comm: tp, in: x0, out: y0}]
      - capture: g1
        ops: [{allreduce: ar1, comm: tp, in: x1, out: y1}]
      - capture: g2
        ops: [{allreduce: ar2, comm: tp, in: x2, out: y2}]
      - capture: g3
        ops: [{allreduce: ar3, comm: tp, in: x3, out: y3}]
      - {record: go}
      - {wait: go, stream: s0}
      - {wait: go, stream: s1}
      - {wait: go, stream: s2}
      - {wait: go, stream: s3}
      - {replay: g0, stream: s0}
      - {replay: g1, stream: s1}
      - {replay: g2, stream: s2}
      - {replay: g3, stream: s3}
      - {record: d0, stream: s0}
      - {record: d1, stream: s1}
      - {record: d2, stream: s2}
      - {record: d3, stream: s3}
      - {wait: d0}
      - {wait: d1}
      - {wait: d2}
      - {wait: d3}
variants:
  - {name: replays}
`
