package importer_test

import (
	"path/filepath"
	"testing"

	"github.com/collsim/collsim/importer"
	"github.com/stretchr/testify/require"
)

// CUPTI reports a wait's stream but not a record's, so an event recorded
// on a stream that has launched nothing yet (TransitiveRecordTooEarly: aux
// records e2 before it waits on main) is taken to be on the stream the host
// launched to last, main, and aux2's wait on it orders what the GPU does
// not. collsim_record's probe names the record's stream: with it (the
// corpus trace was recorded with it), aux2's read races with main's write,
// as on the GPU; the same trace with the probes stripped reads ok.
func TestEventRecordProbeNamesTheStream(t *testing.T) {
	const name = "TransitiveRecordTooEarly"
	et := []string{filepath.Join(corpusTraces, name+".et.json.gz")}
	probed, err := importer.Import(importer.Options{Traces: []string{filepath.Join(corpusTraces, name+".json.gz")}, ET: et})
	require.NoError(t, err)
	require.NotContains(t, string(probed.YAML), "event records: the trace does not say which stream")
	require.NotContains(t, string(probed.YAML), "spin_kernel", "the probe kernels are not the program's")
	require.Equal(t, "corruption", dporVerdict(t, probed))

	plain, err := importer.Import(importer.Options{Traces: []string{withoutProbes(t, name, "collsim::event_record")}, ET: et})
	require.NoError(t, err)
	require.Contains(t, string(plain.YAML), "event records: the trace does not say which stream")
	require.Equal(t, "ok", dporVerdict(t, plain), "the guess (main) orders aux2 after main")
}

// CUPTI numbers the event a wait waits on but not the event a record
// records; collsim_record's probe makes a private stream wait on each
// event it records, so the record carries the number too and every wait is
// paired with its own event's record, with no guess. RecordEventBeforeLaunch
// (e = aux.record_event(); main writes; aux.wait_stream(main);
// aux2.wait_event(e)) needs it: the latest record before aux2's wait is the
// wait_stream's.
func TestEventNumberProbePairsExactly(t *testing.T) {
	res := importCorpus(t, "RecordEventBeforeLaunch")
	require.NotContains(t, string(res.YAML), "waits paired with the latest event record", "every wait is paired by its event's number")
	require.Equal(t, 4, res.Ranks[0].Waits, "the probe's own waits are not the program's")
	require.Equal(t, "corruption", dporVerdict(t, res))
}

// torch.cuda.Stream.query(): a host that polls aux until it drains and
// then reads what aux wrote is ordered after aux (StreamQueryPollAux,
// clean on the GPU); one that polls main is not (StreamQueryPollMain,
// racy). cudaStreamQuery's record names no stream; the recorder's probe
// does, and the recorded timing says the last query returned true. Without
// the probe the query orders nothing, and the note says so.
func TestStreamQueryProbe(t *testing.T) {
	const name = "StreamQueryPollAux"
	et := []string{filepath.Join(corpusTraces, name+".et.json.gz")}
	res := importCorpus(t, name)
	require.Contains(t, string(res.YAML), "cudaStreamQuery calls returned after their stream's work had ended")
	require.Equal(t, "ok", dporVerdict(t, res))
	require.Equal(t, "corruption", dporVerdict(t, importCorpus(t, "StreamQueryPollMain")))

	plain, err := importer.Import(importer.Options{Traces: []string{withoutProbes(t, name, "collsim::stream_query")}, ET: et})
	require.NoError(t, err)
	require.Contains(t, string(plain.YAML), "whose stream the trace does not name")
	require.Equal(t, "corruption", dporVerdict(t, plain), "without the probe the poll orders nothing")
}

// work.is_completed() asked once with its answer ignored, against polled
// until true (AllGatherPolledOnce racy, AllGatherPolledUntilDone clean on
// the GPU): recorded with the recorder, whose first query of each work
// answers "not yet" without asking, the first trace holds no query at all
// (the host learnt nothing) and the second its real query returning true
// (a sync). Recorded without that, both traces held one query returning
// true and read alike.
func TestQueryNotYetTellsPollingApart(t *testing.T) {
	once := importCorpus(t, "AllGatherPolledOnce")
	require.NotContains(t, string(once.YAML), "cudaEventQuery calls returned after")
	require.Equal(t, "corruption", dporVerdict(t, once))
	polled := importCorpus(t, "AllGatherPolledUntilDone")
	require.Contains(t, string(polled.YAML), "cudaEventQuery calls returned after")
	require.Equal(t, "ok", dporVerdict(t, polled))
}
