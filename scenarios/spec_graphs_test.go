package scenarios_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// graphsFile is a program with one capture block: n kernels on main
// adding 10·step to acc (step a host scalar the kernel reads when it is
// issued, or captured), replayed three times with the host's step
// advancing between replays and an eager kernel between them.
func graphsFile(n int) string {
	ops := ""
	for i := range n {
		ops += "          - {kernel: add" + string(rune('a'+i)) + ", reads: [one, acc], writes: [acc], weight: 10, scale: step, time: 1us}\n"
	}
	return `name: graphs
ranks: 1
mode: graph
knobs: {budget: 1}
references: [eager]
host_scalars:
  - {name: step, value: 1}
tensors:
  - {name: one, bytes: 64, init: [1]}
  - {name: acc, bytes: 64, output: true}
  - {name: log, bytes: 64}
programs:
  - ranks: all
    ops:
      - capture: step
        ops:
` + ops + `      - repeat: {count: 3, as: i}
        ops:
          - {replay: step}
          - {kernel: "log${i}", reads: [acc], writes: [log], time: 1us}
          - {advance: step}
variants: [{name: a}]
`
}

// TestGraphBlocks: what a capture block and its replays compute and when
// (spec_graphs.go), against the same program issued eagerly.
func TestGraphBlocks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
		return p
	}
	one := write("one.yaml", graphsFile(1))
	counter := write("counter.yaml", `name: counter
ranks: 1
mode: graph
tensors:
  - {name: pos, bytes: 8, init: [1]}
  - {name: acc, bytes: 64, output: true}
programs:
  - ranks: all
    ops:
      - capture: step
        ops:
          - {kernel: add, reads: [pos, acc], writes: [acc], weight: 10}
          - {increment: pos}
      - {replay: step}
      - {replay: step}
      - {replay: step}
variants: [{name: a}]
`)
	ten := write("ten.yaml", graphsFile(10))
	tests := []struct {
		name string
		file string
		sets []string
		want uint64
	}{
		// The capture read step = 1; each of 3 replays adds 10·1.
		{"host scalar frozen at capture", one, nil, 30},
		// Eager: each replay issues the block again, reading 1, 2, 3.
		{"eager replays re-read the host scalar", one, []string{"mode=eager"}, 10 + 20 + 30},
		{"ten captured kernels", ten, nil, 300},
		{"ten kernels eager", ten, []string{"mode=eager"}, 10 * (10 + 20 + 30)},
		// A device counter incremented inside the graph: each replay
		// reads the count the last one left.
		{"device counter in a capture block", counter, nil, 10 + 20 + 30},
		{"device counter eager", counter, []string{"mode=eager"}, 10 + 20 + 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := finalValue(t, tt.file, tt.sets, 0, "acc", 0)
			require.Equal(t, tt.want%ranks.Modulus, got)
		})
	}
	// One launch issues every node: ten 1 µs kernels replayed take about
	// their device time, eagerly about ten launches each.
	_, graph := finalValue(t, ten, nil, 0, "acc", 0)
	_, eager := finalValue(t, ten, []string{"mode=eager"}, 0, "acc", 0)
	require.Less(t, int64(graph)*2, int64(eager), "graph %v, eager %v", graph, eager)
	// The eager path differs from the graph path in the frozen value.
	data, err := os.ReadFile(one)
	require.NoError(t, err)
	sc, err := scenarios.Load(one, data)
	require.NoError(t, err)
	rep, err := check.RunVariant(sc, sc.Variants[0], check.Options{Extra: []string{"budget=1"}})
	require.NoError(t, err)
	require.Equal(t, "corruption", rep.Verdict, "%v", rep.Findings)
}

// TestGraphStreams: a replay's nodes keep the capture's dependencies, not
// the eager streams' order. In graphs-piecewise.yaml an eager kernel on aux
// writes kv and the attention graph's aux node reads it: the graph's aux
// node runs on the graph's own stream, so only the explicit join orders
// the two; eagerly the same ops are ordered by the aux stream itself.
func TestGraphStreams(t *testing.T) {
	requireFileVerdicts(t, "testdata/ok/graphs-piecewise.yaml", []setsVerdict{
		{nil, "ok"},
		{[]string{"join=off"}, "race"},
		{[]string{"join=off", "mode=eager"}, "ok"},
		{[]string{"mode=eager"}, "ok"},
	})
}

// TestGraphProgramReplaysUnread: with capture blocks the program says
// where graphs replay, so the replays knob changes nothing unless a repeat
// count names it, and setting it is an error at its line.
func TestGraphProgramReplaysUnread(t *testing.T) {
	src := graphsFile(1)
	_, err := scenarios.LoadSpec("g.yaml", []byte(src))
	require.NoError(t, err)
	withReplays := "name: graphs\nranks: 1\nmode: graph\nreplays: 3\n" + src[len("name: graphs\nranks: 1\nmode: graph\n"):]
	_, err = scenarios.LoadSpec("g.yaml", []byte(withReplays))
	require.ErrorContains(t, err, `g.yaml:4:10: knob "replays" is not read by this file's form`)
	counted := strings.Replace(withReplays, "repeat: {count: 3, as: i}", "repeat: {count: replays, as: i}", 1)
	_, err = scenarios.LoadSpec("g.yaml", []byte(counted))
	require.NoError(t, err)
}

// TestReissuedCollectivesAreInstances: a collective issued again (each
// replay of a captured one, each eager issue of a replayed block) is an
// instance of its own, named the same on every rank: ar, ar#2, ar#3.
func TestReissuedCollectivesAreInstances(t *testing.T) {
	data, err := os.ReadFile("testdata/ok/graphs-collective.yaml")
	require.NoError(t, err)
	sc, err := scenarios.Load("graphs-collective.yaml", data)
	require.NoError(t, err)
	for _, mode := range []string{"graph", "eager"} {
		cfg, err := sc.VariantConfig(sc.Variants[0], []string{"mode=" + mode})
		require.NoError(t, err)
		b, err := sc.Build(cfg, scenarios.BuildOptions{Timeline: true}, sim.NewEngine(sim.Timed, nil))
		require.NoError(t, err)
		_, err = b.World.Run()
		require.NoError(t, err)
		seen := map[int][]string{}
		for _, s := range b.World.Spans() {
			if s.Coll != "" && !slices.Contains(seen[s.Rank], s.Coll) {
				seen[s.Rank] = append(seen[s.Rank], s.Coll)
			}
		}
		for r := range 2 {
			require.Equal(t, []string{"ar", "ar#2", "ar#3"}, seen[r], "%s mode, rank %d", mode, r)
		}
	}
}

// TestGraphOpTime: a graph op's time replaces the cost model's duration
// (a gemm's roofline, a moe's measured kernels, an add's bytes): on one
// stream, 20 µs more on any op makes the step exactly 20 µs longer, and a
// moe op with a time runs that time, not TensorRT-LLM's fused MoE (tens
// of µs on its own).
func TestGraphOpTime(t *testing.T) {
	file := func(kind, time string) string {
		tm := ""
		if time != "" {
			tm = ", time: " + time
		}
		return `name: t
ranks: 1
hardware: h200
mode: eager
knobs: {budget: 0, placement: single}
tensors:
  - {name: x, bytes: 4096}
  - {name: y, bytes: 4096, output: true}
graph:
  ops:
    - {name: op, kind: ` + kind + `, inputs: [x], output: y, m: 1, k: 1024, n: 1` + tm + `}
variants: [{name: a}]
`
	}
	step := func(src string) int64 {
		sc, err := scenarios.Load("t.yaml", []byte(src))
		require.NoError(t, err)
		rep, err := check.RunVariant(sc, sc.Variants[0], check.Options{})
		require.NoError(t, err)
		require.Equal(t, "ok", rep.Verdict, "%v", rep.Findings)
		return rep.StepTimeNs
	}
	for _, kind := range []string{"gemm", "moe"} {
		t.Run(kind, func(t *testing.T) {
			a, b := step(file(kind, "5us")), step(file(kind, "25us"))
			require.Equal(t, int64(20000), b-a)
		})
	}
	require.Greater(t, step(file("moe", ""))-step(file("moe", "5us")), int64(20000), "a moe op without a time runs the measured fused MoE")
}
