package importer_test

import (
	"path/filepath"
	"testing"

	"github.com/collsim/collsim/importer"
	"github.com/stretchr/testify/require"
)

// withEventProbe writes the corpus trace name with collsim_record's
// event-record probe around its k-th cudaEventRecord call (counting from
// 0): a "collsim::event_record" range and, inside it before the record, an
// empty kernel launched on stream.
func withEventProbe(t *testing.T, name string, k int, stream float64) string {
	t.Helper()
	tr := readCorpusTrace(t, name)
	evs := tr["traceEvents"].([]any)
	var rec map[string]any
	n := 0
	for _, e := range evs {
		m := e.(map[string]any)
		if m["cat"] == "cuda_runtime" && m["name"] == "cudaEventRecordWithFlags" {
			if n == k {
				rec = m
			}
			n++
		}
	}
	require.NotNil(t, rec)
	ts, tid, pid := rec["ts"].(float64), rec["tid"], rec["pid"]
	const corr = 999999999.0
	evs = append(evs,
		map[string]any{"ph": "X", "cat": "user_annotation", "name": "collsim::event_record", "pid": pid, "tid": tid, "ts": ts - 3, "dur": rec["dur"].(float64) + 4, "args": map[string]any{}},
		map[string]any{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": tid, "ts": ts - 2, "dur": 1.0, "args": map[string]any{"correlation": corr}},
		map[string]any{"ph": "X", "cat": "kernel", "name": "void at::cuda::(anonymous namespace)::spin_kernel(long)", "pid": 0, "tid": stream, "ts": ts + 1, "dur": 1.0, "args": map[string]any{"correlation": corr, "stream": stream, "device": 0.0}},
	)
	tr["traceEvents"] = evs
	return writeTrace(t, name, tr)
}

// CUPTI reports a wait's stream but not a record's, so an event recorded
// on a stream that has launched nothing yet (TransitiveRecordTooEarly: aux
// records e2 before it waits on main) is taken to be on the stream the host
// launched to last, main, and aux2's wait on it orders what the GPU does
// not. collsim_record's probe names the record's stream: with it, aux2's
// read races with main's write, as on the GPU.
func TestEventRecordProbeNamesTheStream(t *testing.T) {
	const name = "TransitiveRecordTooEarly"
	et := []string{filepath.Join(corpusTraces, name+".et.json.gz")}
	plain, err := importer.Import(importer.Options{Traces: []string{filepath.Join(corpusTraces, name+".json.gz")}, ET: et})
	require.NoError(t, err)
	require.Equal(t, "ok", dporVerdict(t, plain), "the guess (main) orders aux2 after main")

	// e2's record is the second; aux is stream 53, where cos runs.
	probed, err := importer.Import(importer.Options{Traces: []string{withEventProbe(t, name, 1, 53)}, ET: et})
	require.NoError(t, err)
	require.NotContains(t, string(probed.YAML), "spin_kernel", "the probe kernel is not the program's")
	require.Equal(t, "corruption", dporVerdict(t, probed))
}
