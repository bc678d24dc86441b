package importer_test

import (
	"path/filepath"
	"testing"

	"github.com/collsim/collsim/importer"
	"github.com/stretchr/testify/require"
)

// withSlowKernel rewrites the corpus trace name so that every kernel that
// started before its cudaEventQuery call runs until 100 µs after the
// query (the event's work among them), and writes it to a temporary file.
func withSlowKernel(t *testing.T, name string) string {
	t.Helper()
	tr := readCorpusTrace(t, name)
	evs := tr["traceEvents"].([]any)
	var q map[string]any
	for _, e := range evs {
		m := e.(map[string]any)
		if m["name"] == "cudaEventQuery" {
			q = m
		}
	}
	require.NotNil(t, q)
	n := 0
	for _, e := range evs {
		m := e.(map[string]any)
		if m["cat"] == "kernel" && m["ts"].(float64) < q["ts"].(float64) {
			m["dur"] = q["ts"].(float64) + q["dur"].(float64) + 100 - m["ts"].(float64)
			n++
		}
	}
	require.NotZero(t, n)
	return writeTrace(t, name, tr)
}

// torch.cuda.Event.query() polled until true orders what the host does
// next after the event's work: the recorded timing tells a query that saw
// the event done (it returned after the work ended) from one that saw it
// pending. The same trace with the event's kernel running past the query
// is a program whose host went on without knowing: aux's read races.
func TestEventQueryReadsTheRecordedTiming(t *testing.T) {
	const name = "EventQueryPollThenAux"
	et := []string{filepath.Join(corpusTraces, name+".et.json.gz")}
	res, err := importer.Import(importer.Options{Traces: []string{filepath.Join(corpusTraces, name+".json.gz")}, ET: et})
	require.NoError(t, err)
	require.Contains(t, string(res.YAML), "1 cudaEventQuery calls returned after their event's work had ended")
	require.Equal(t, "ok", dporVerdict(t, res))

	res, err = importer.Import(importer.Options{Traces: []string{withSlowKernel(t, name)}, ET: et})
	require.NoError(t, err)
	require.NotContains(t, string(res.YAML), "cudaEventQuery calls returned after")
	require.Equal(t, "corruption", dporVerdict(t, res))
}

// onThread rewrites the corpus trace name so that its cudaEventQuery calls
// are made by host thread tid, and writes it to a temporary file.
func onThread(t *testing.T, name string, tid float64) string {
	t.Helper()
	tr := readCorpusTrace(t, name)
	n := 0
	for _, e := range tr["traceEvents"].([]any) {
		if m := e.(map[string]any); m["name"] == "cudaEventQuery" {
			m["tid"] = tid
			n++
		}
	}
	require.NotZero(t, n)
	return writeTrace(t, name, tr)
}

// What a host thread learns from a sync or a query reaches only what that
// thread does after it. NCCL's watchdog thread polls every collective's
// end event and launches nothing: its queries order no launch of the
// step's thread. BucketDivBeforeAllReduce's trace holds hundreds of them,
// some after the all-reduce ended and before main's div_ was launched:
// taken as the host's, they hid the race.
func TestQueriesOfAThreadThatLaunchesNothingOrderNothing(t *testing.T) {
	const name = "BucketDivBeforeAllReduce"
	res, err := importer.Import(importer.Options{Traces: []string{filepath.Join(corpusTraces, name+".json.gz")}, ET: []string{filepath.Join(corpusTraces, name+".et.json.gz")}})
	require.NoError(t, err)
	require.Contains(t, string(res.YAML), "queries on host threads other than the step's that launch and free nothing after them")
	require.Equal(t, "corruption", dporVerdict(t, res))

	// The same query that ordered aux's read after main's write, moved
	// to a thread that launches nothing, orders nothing.
	const polled = "EventQueryPollThenAux"
	et := []string{filepath.Join(corpusTraces, polled+".et.json.gz")}
	res, err = importer.Import(importer.Options{Traces: []string{onThread(t, polled, 987654)}, ET: et})
	require.NoError(t, err)
	require.NotContains(t, string(res.YAML), "cudaEventQuery calls returned after")
	require.Equal(t, "corruption", dporVerdict(t, res))
}
