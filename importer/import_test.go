package importer_test

import (
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
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

// Trace a: x is allocated on main, read on aux, freed by main while aux
// may still read it, and w is allocated on main right after: the import
// writes the lifetime (alloc, free) and leaves the block to the simulated
// caching allocator, as the real one decided.
func TestEagerLifetime(t *testing.T) {
	ops := opsOf(importTrace(t, "a_eager", true))
	var seq []string
	for _, op := range ops {
		switch op.Kind {
		case scenarios.OpAlloc, scenarios.OpFree, scenarios.OpRecordStream:
			seq = append(seq, string(op.Kind)+":"+op.Name+"@"+op.Stream)
		case scenarios.OpKernel:
			seq = append(seq, op.Name+"@"+op.Stream)
		}
	}
	require.Equal(t, []string{"alloc:x@stream7", "x.mul@stream7", "alloc:y@stream13", "y.sin@stream13", "alloc:mm@stream7", "mm.memset@stream7", "mm@stream7",
		"free:x@", "alloc:w@stream7", "w.cos@stream7", "alloc:z@stream7", "z.add@stream7", "free:w@"}, seq)
	sin, _ := findOp(ops, "y.sin")
	require.Equal(t, []string{"x"}, sin.Reads)
	// The fork before the read: main records, aux waits.
	var kinds []string
	for _, op := range ops {
		if op.Kind == scenarios.OpRecord || op.Kind == scenarios.OpWait {
			kinds = append(kinds, string(op.Kind)+":"+op.Stream)
		}
	}
	require.Equal(t, []string{"record:stream7", "wait:stream13", "record:stream13", "wait:stream7"}, kinds)
}

// Trace b: x.record_stream(aux) becomes a record_stream op on the aux
// stream, before x's free.
func TestRecordStream(t *testing.T) {
	res := importTrace(t, "b_record_stream", true)
	ops := opsOf(res)
	rs := slices.IndexFunc(ops, func(op scenarios.OpSpec) bool { return op.Kind == scenarios.OpRecordStream })
	require.GreaterOrEqual(t, rs, 0)
	require.Equal(t, "x", ops[rs].Name)
	require.Equal(t, "stream13", ops[rs].Stream)
	free := slices.IndexFunc(ops, func(op scenarios.OpSpec) bool { return op.Kind == scenarios.OpFree && op.Name == "x" })
	require.Less(t, rs, free)
}

// Without [memory] events (profile_memory off) tensors are the execution
// trace's storages: a block handed out again is one tensor ("x/w"), and
// record_stream becomes the order the caching allocator keeps: a record on
// aux at the free and a wait before the kernel that writes the reused block.
func TestBlocksWithoutMemoryEvents(t *testing.T) {
	for _, name := range []string{"a_eager", "b_record_stream"} {
		dir := t.TempDir()
		tr := filepath.Join(dir, name+".json")
		data, err := os.ReadFile(filepath.Join(traces, name+".json"))
		require.NoError(t, err)
		var doc map[string]any
		require.NoError(t, json.Unmarshal(data, &doc))
		var kept []any
		for _, e := range doc["traceEvents"].([]any) {
			if e.(map[string]any)["name"] != "[memory]" {
				kept = append(kept, e)
			}
		}
		doc["traceEvents"] = kept
		data, err = json.Marshal(doc)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(tr, data, 0o644))
		res, err := importer.Import(importer.Options{Traces: []string{tr}, ET: []string{filepath.Join(traces, name+".et.json")}})
		require.NoError(t, err)
		ops := opsOf(res)
		sin, _ := findOp(ops, "y.sin")
		cos, _ := findOp(ops, "w.cos")
		require.Equal(t, []string{"x/w"}, sin.Reads)
		require.Equal(t, []string{"x/w"}, cos.Writes)
		i := slices.IndexFunc(ops, func(op scenarios.OpSpec) bool { return op.Name == "w.cos" })
		if name == "a_eager" {
			require.NotEqual(t, scenarios.OpWait, ops[i-1].Kind)
			continue
		}
		w := ops[i-1]
		require.Equal(t, scenarios.OpWait, w.Kind)
		require.Equal(t, "stream7", w.Stream)
		j := slices.IndexFunc(ops, func(op scenarios.OpSpec) bool { return op.Kind == scenarios.OpRecord && op.Name == w.Name })
		require.Equal(t, "stream13", ops[j].Stream)
		require.Less(t, slices.IndexFunc(ops, func(op scenarios.OpSpec) bool { return op.Name == "y.sin" }), j)
		require.Contains(t, strings.Join(res.Ranks[0].Notes, "\n"), "record_stream")
	}
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

// A gzipped trace imports as the plain one does.
func TestGzipTrace(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(traces, "a_eager.json"))
	require.NoError(t, err)
	gz := filepath.Join(t.TempDir(), "a_eager.json.gz")
	f, err := os.Create(gz)
	require.NoError(t, err)
	zw := gzip.NewWriter(f)
	_, err = zw.Write(data)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	require.NoError(t, f.Close())
	a, err := importer.Import(importer.Options{Traces: []string{gz}, ET: []string{filepath.Join(traces, "a_eager.et.json")}})
	require.NoError(t, err)
	b := importTrace(t, "a_eager", true)
	require.Equal(t, b.Spec.Programs, a.Spec.Programs)
}

// A malformed execution trace is reported at its node.
func TestBadExecutionTrace(t *testing.T) {
	et := filepath.Join(t.TempDir(), "bad.et.json")
	require.NoError(t, os.WriteFile(et, []byte(`{"nodes": [{"name": "a", "attrs": []},`+"\n"+`  {"name": 3}]}`), 0o644))
	_, err := importer.Import(importer.Options{Traces: []string{filepath.Join(traces, "a_eager.json")}, ET: []string{et}})
	require.ErrorContains(t, err, "bad.et.json:2:3: node 1: ")
}

// A FIFO or a device given as a trace is refused at once, not read until the
// writer closes it (or forever).
func TestNotARegularFile(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "trace.json")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, path := range []string{fifo, "/dev/zero"} {
		_, err := importer.Import(importer.Options{Traces: []string{path}})
		require.ErrorContains(t, err, "not a regular file", path)
	}
}
