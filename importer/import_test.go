package importer_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/importer"
	"github.com/collsim/collsim/scenarios"
	"github.com/stretchr/testify/require"
)

const traces = "../validation/traces"

func importTrace(t *testing.T, name string, et bool) *importer.Result {
	t.Helper()
	o := importer.Options{Traces: []string{filepath.Join(traces, name+".json")}}
	if et {
		o.ET = []string{filepath.Join(traces, name+".et.json")}
	}
	res, err := importer.Import(o)
	require.NoError(t, err)
	return res
}

// nominal runs the imported scenario's one variant on its nominal schedule.
func nominal(t *testing.T, res *importer.Result) *check.VariantReport {
	t.Helper()
	sc, err := scenarios.Load(res.Spec.Name+".yaml", res.YAML)
	require.NoError(t, err)
	rep, err := check.RunVariant(sc, sc.Variants[0], check.Options{Extra: []string{"budget=0"}})
	require.NoError(t, err)
	return rep
}

// Every committed real trace imports into a file that validates, and its
// nominal schedule reproduces the recorded step time within 10 %.
func TestRealTracesReproduceStepTime(t *testing.T) {
	for _, tc := range []struct {
		name string
		et   bool
		mode string
	}{
		{"a_eager", true, "eager"},
		{"b_record_stream", true, "eager"},
		{"c_graph", true, "graph"},
		{"d_comm", false, "eager"},
		{"a_eager", false, "eager"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := importTrace(t, tc.name, tc.et)
			require.Equal(t, tc.mode, res.Ranks[0].Mode)
			require.Positive(t, res.StepNs)
			rep := nominal(t, res)
			ratio := float64(rep.StepTimeNs) / float64(res.StepNs)
			t.Logf("%s: recorded %d ns, simulated %d ns (%.3f)", tc.name, res.StepNs, rep.StepTimeNs, ratio)
			require.InDelta(t, 1, ratio, 0.10, "simulated step time %d ns vs recorded %d ns", rep.StepTimeNs, res.StepNs)
		})
	}
}

// The host gaps are what make an eager step's time: without them the
// simulated step of trace a is the GPU's critical path, far below what the
// trace recorded (the profiler slowed the host).
func TestHostGapsCarryTheStepTime(t *testing.T) {
	res := importTrace(t, "a_eager", true)
	for i := range res.Spec.Programs[0].Ops {
		res.Spec.Programs[0].Ops[i].HostNs = 0
	}
	res.YAML = scenarios.MarshalSpec(res.Spec)
	rep := nominal(t, res)
	require.Less(t, float64(rep.StepTimeNs), 0.5*float64(res.StepNs))
}

func opsOf(res *importer.Result) []scenarios.OpSpec { return res.Spec.Programs[0].Ops }

func findOp(ops []scenarios.OpSpec, name string) (scenarios.OpSpec, bool) {
	for _, op := range ops {
		if op.Name == name {
			return op, true
		}
	}
	return scenarios.OpSpec{}, false
}

// Trace a: the block x lived in is handed to w; the aux stream reads it and
// main writes it again, and nothing but the recorded timing orders the two.
func TestEagerFreeAndReuseIsOneTensor(t *testing.T) {
	ops := opsOf(importTrace(t, "a_eager", true))
	sin, ok := findOp(ops, "y.sin")
	require.True(t, ok)
	cos, ok := findOp(ops, "w.cos")
	require.True(t, ok)
	require.Equal(t, []string{"x/w"}, sin.Reads)
	require.Equal(t, []string{"x/w"}, cos.Writes)
	require.NotEqual(t, sin.Stream, cos.Stream)
	// The fork before the read: main records, aux waits.
	var kinds []string
	for _, op := range ops {
		kinds = append(kinds, string(op.Kind)+":"+op.Stream)
	}
	require.Equal(t, []string{"kernel:stream7", "record:stream7", "wait:stream13", "kernel:stream13"}, kinds[:4])
}

// Trace b: record_stream makes the allocator wait for aux before it hands
// the block out again; the import orders w's kernel after aux's read.
func TestRecordStreamOrdersTheReuse(t *testing.T) {
	res := importTrace(t, "b_record_stream", true)
	ops := opsOf(res)
	i := slices.IndexFunc(ops, func(op scenarios.OpSpec) bool { return op.Name == "w.cos" })
	require.Positive(t, i)
	w := ops[i-1]
	require.Equal(t, scenarios.OpWait, w.Kind)
	require.Equal(t, "stream7", w.Stream)
	j := slices.IndexFunc(ops, func(op scenarios.OpSpec) bool { return op.Kind == scenarios.OpRecord && op.Name == w.Name })
	require.Equal(t, "stream13", ops[j].Stream)
	require.Less(t, slices.IndexFunc(ops, func(op scenarios.OpSpec) bool { return op.Name == "y.sin" }), j)
	require.Contains(t, strings.Join(res.Ranks[0].Notes, "\n"), "record_stream")
}

// Without the execution trace the importer says what it could not see.
func TestWithoutExecutionTraceSaysSo(t *testing.T) {
	res := importTrace(t, "a_eager", false)
	require.Contains(t, strings.Join(res.Ranks[0].Notes, "\n"), "no execution trace")
	require.Contains(t, res.Spec.Description, "no execution trace")
	for _, op := range opsOf(res) {
		require.Empty(t, op.Reads, op.Name)
	}
}

// A graph replay is a graph-mode program on the replay's streams, with
// every captured kernel matched to a replayed one.
func TestGraphReplay(t *testing.T) {
	res := importTrace(t, "c_graph", true)
	require.Equal(t, "graph", res.Spec.Base.Mode)
	p := res.Spec.Programs[0]
	require.Equal(t, []string{"stream7", "stream142"}, p.Streams)
	var names []string
	for _, op := range p.Ops {
		if op.Kind == scenarios.OpKernel {
			names = append(names, op.Name+"@"+op.Stream)
		}
	}
	require.Equal(t, []string{"x.mul@stream7", "y.sin@stream7", "mm.memset@stream142", "mm@stream142", "w.cos@stream142", "z.add@stream7"}, names)
}

// The same traces give the same file, byte for byte.
func TestImportIsDeterministic(t *testing.T) {
	a := importTrace(t, "c_graph", true)
	b := importTrace(t, "c_graph", true)
	require.Equal(t, string(a.YAML), string(b.YAML))
}
