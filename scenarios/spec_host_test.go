package scenarios_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// finalValue builds file's scenario under sets, runs its nominal schedule
// and returns chunk c of rank r's compared tensor name, and the run's step
// time.
func finalValue(t *testing.T, file string, sets []string, r int, name string, c int) (uint64, sim.Time) {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	sc, err := scenarios.Load(file, data)
	require.NoError(t, err)
	cfg, err := sc.VariantConfig(scenarios.Variant{Name: "t"}, sets)
	require.NoError(t, err)
	b, err := sc.Build(cfg, scenarios.BuildOptions{}, sim.NewEngine(sim.Timed, nil))
	require.NoError(t, err)
	res, err := b.World.Run()
	require.NoError(t, err)
	require.False(t, res.Hung)
	for _, x := range b.Compare[r] {
		if x.Name == name {
			return x.Vals[c].N, res.StepTime
		}
	}
	t.Fatalf("rank %d compares no tensor %q", r, name)
	return 0, 0
}

// TestHostValues: the values a step computes from host scalars, device
// counters and per-replay inputs, in graph and eager mode (spec_host.go).
func TestHostValues(t *testing.T) {
	data, err := os.ReadFile("testdata/ok/per-replay.yaml")
	require.NoError(t, err)
	spec, err := scenarios.LoadSpec("per-replay.yaml", data)
	require.NoError(t, err)
	w := func(name string, r int) uint64 { return uint64(spec.KernelWeight(name, r)) }
	tests := []struct {
		name   string
		file   string
		sets   []string
		tensor string
		want   uint64
	}{
		// acc += 10·step per step, step advancing 1, 2, 3 on the host.
		{"host scalar frozen at capture", "testdata/ok/host-values.yaml", nil, "acc", 10 + 10 + 10},
		{"host scalar read at every eager issue", "testdata/ok/host-values.yaml", []string{"mode=eager"}, "acc", 10 + 20 + 30},
		{"one replay reads what eager reads", "testdata/ok/host-values.yaml", []string{"replays=1"}, "acc", 10},
		// acc += 10·pos, pos += 1 on the device after each step.
		{"device counter fresh in every replay", "testdata/ok/host-values.yaml", []string{"step_counter=device"}, "acc", 10 + 20 + 30},
		{"device counter eager", "testdata/ok/host-values.yaml", []string{"step_counter=device", "mode=eager"}, "acc", 10 + 20 + 30},
		// out = Σ_r w_r·batch; the last replay's batch is row 3.
		{"per-replay input: the last replay's row", "testdata/ok/per-replay.yaml", nil, "out", (w("embed", 0) + w("embed", 1)) * 9},
		{"per-replay input: eager runs on the last row", "testdata/ok/per-replay.yaml", []string{"mode=eager"}, "out", (w("embed", 0) + w("embed", 1)) * 9},
		{"per-replay input: one replay, the first row", "testdata/ok/per-replay.yaml", []string{"replays=1"}, "out", (w("embed", 0) + w("embed", 1)) * 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := finalValue(t, tt.file, tt.sets, 0, tt.tensor, 0)
			require.Equal(t, tt.want%ranks.Modulus, got)
		})
	}
}

// TestPerReplayInputsEachReplay: every replay of a graph computes on its
// own row, so a kernel that reads the input after the host re-filled it
// for the next replay would be seen: each replay's output is checked
// against the reference run on that replay's row.
func TestPerReplayInputsEachReplay(t *testing.T) {
	data, err := os.ReadFile("testdata/ok/per-replay.yaml")
	require.NoError(t, err)
	sc, err := scenarios.Load("per-replay.yaml", data)
	require.NoError(t, err)
	cfg, err := sc.VariantConfig(scenarios.Variant{Name: "t"}, nil)
	require.NoError(t, err)
	b, err := sc.Build(cfg, scenarios.BuildOptions{}, sim.NewEngine(sim.Timed, nil))
	require.NoError(t, err)
	b.World.WatchReplays(b.Compare)
	_, err = b.World.Run()
	require.NoError(t, err)
	w := uint64(sc.Spec.KernelWeight("embed", 0) + sc.Spec.KernelWeight("embed", 1))
	for k, row := range [][]uint64{{5, 6}, {7, 8}} {
		vals := b.World.ReplayValues(0, k)
		require.Len(t, vals, 2)
		require.Equal(t, w*row[0], vals[0].N, "replay %d chunk 0", k)
		require.Equal(t, w*row[1], vals[1].N, "replay %d chunk 1", k)
	}
}

// TestHostValuesVerdicts: the frozen host scalar is caught by the eager
// path, and only the mechanism's knob flips it.
func TestHostValuesVerdicts(t *testing.T) {
	requireFileVerdicts(t, "testdata/ok/host-values.yaml", []setsVerdict{
		{nil, "corruption"},
		{[]string{"step_counter=device"}, "ok"},
		{[]string{"mode=eager"}, "ok"},
		{[]string{"replays=1"}, "ok"},
	})
}

// TestHostValuesNeedPrograms: an op graph makes its own program, so host
// values in such a file would be ignored: they are errors at their line.
func TestHostValuesNeedPrograms(t *testing.T) {
	src := `name: t
ranks: 2
steps: carried
tensors:
  - {name: x, bytes: 1024, per_replay: [[1]]}
  - {name: y, bytes: 1024}
graph:
  ops:
    - {name: g, kind: gemm, inputs: [x], output: y, m: 8, k: 8, n: 8}
variants: [{name: a}]
`
	_, err := scenarios.LoadSpec("t.yaml", []byte(src))
	require.ErrorContains(t, err, "t.yaml:3:8: steps: host values are for programs")
	require.ErrorContains(t, err, `t.yaml:5:40: tensor "x": per_replay is for programs`)
}

// setsVerdict is one row of a verdict table: the knobs set, the verdict
// the file's nominal schedule must give.
type setsVerdict struct {
	sets []string
	want string
}

// requireFileVerdicts loads the scenario file at path and requires each
// row's --set knobs to give its verdict (one schedule, the nominal one).
func requireFileVerdicts(t *testing.T, path string, rows []setsVerdict) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	sc, err := scenarios.Load(filepath.Base(path), data)
	require.NoError(t, err)
	for _, tt := range rows {
		rep, err := check.RunVariant(sc, scenarios.Variant{Name: "t"}, check.Options{Extra: append([]string{"budget=1"}, tt.sets...)})
		require.NoError(t, err)
		require.Equal(t, tt.want, rep.Verdict, "sets %v: %v", tt.sets, rep.Findings)
	}
}
