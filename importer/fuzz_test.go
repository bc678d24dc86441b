package importer_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/collsim/collsim/importer"
)

var fuzzSeeds = []string{
	`{"traceEvents": []}`,
	`[{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "args": {"stream": 7, "correlation": 1}}]`,
	`{"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": -2}]}`,
	`{"traceEvents": [{"ph": "X", "ts": "soon"}]}`,
	`{"deviceProperties": [{"name": "NVIDIA H200"}], "traceEvents": [{"ph": "i", "name": "[memory]", "ts": 1, "args": {"Addr": 12, "Bytes": -4, "Device Type": 1}}]}`,
	`{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": 1, "dur": 9, "args": {"Collective name": "allreduce", "Process Group Ranks": "[0, 1]", "In msg nelems": 4, "dtype": "Float"}}]}`,
	`{"traceEvents": [{"ph": "X", "tid": "Spans", "pid": 3.5}], "x": [[[{}]]]}`,
	`{"nodes": [{"name": "aten::mul", "inputs": {"values": [[1, 2, 0, 4, 4, "cuda:0"]]}, "attrs": [{"name": "rf_id", "value": 3}]}]}`,
}

// FuzzScan: the streaming reader never panics; what it rejects is an
// *importer.Error naming an event index (or -1 outside the event array).
func FuzzScan(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n := 0
		err := importer.Scan(bytes.NewReader(data), "f.json", func(e *importer.Event) error {
			if e.Index != n {
				t.Fatalf("event index %d, want %d", e.Index, n)
			}
			n++
			return nil
		})
		if err != nil {
			var ie *importer.Error
			if !errors.As(err, &ie) {
				t.Fatalf("error is not an *importer.Error: %v", err)
			}
			if ie.Event < -1 || ie.Event > n {
				t.Fatalf("event index %d out of range (%d read): %v", ie.Event, n, err)
			}
		}
	})
}

// FuzzImport: a whole import (three passes, building, validating the file
// it writes) of any bytes as a trace and as an execution trace never
// panics, and what it writes validates (Import checks that itself).
func FuzzImport(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), []byte(fuzzSeeds[len(fuzzSeeds)-1]))
	}
	for _, name := range []string{"a_eager", "b_record_stream", "c_graph"} {
		tr, err := os.ReadFile(filepath.Join(traces, name+".json"))
		if err != nil {
			f.Fatal(err)
		}
		et, err := os.ReadFile(filepath.Join(traces, name+".et.json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(tr, et)
	}
	// Corpus traces with the record kinds of the real-program corpus: graph
	// captures and replays without step marks, two graphs, allocations by
	// operators without kernels, a collective's c10d operator; and those of
	// the held-out batches: event queries, cudaFree, a thread started in
	// the region, pinned host buffers, views, a graph captured before the
	// region, an in-place _foreach_ op, backward on the autograd thread;
	// and the event-number probe's waits, graphs of make_graphed_callables
	// and of a shared pool, a MemPool, a reduce_scatter; NCCL's watchdog
	// polling events, a polled query naming its event, threads started in
	// the region, two graphs of one function at two sizes.
	for _, name := range []string{"GraphFreeWhileRead", "TwoGraphsSideStream", "EmptyLikeOut", "NcclSideStreamNoJoin", "StaticOutputHeldAcrossReplays",
		"EventQueryPollThenAux", "EmptyCacheAfterDel", "ThreadHandoffNoEvent", "D2HHostReadNoSync", "HostBufferReuseRacy", "HalvesDisjoint",
		"WarmGraphAuxReadNoFork", "CompiledReduceOverheadNoFork", "BackwardThenAuxNoFork",
		"RecordEventBeforeLaunch", "GraphedCallableOutputHeld", "SharedPoolGraphsConcurrent", "MemPoolFreeWhileRead", "ReduceScatterReadNoJoin",
		"BucketDivBeforeAllReduce", "LoggerPollsMainEvent", "ThreadMadeBatchDropped", "TwoShapeGraphsJoined",
		"PoolMadeBatchDroppedUnjoined", "MicrobatchEventsPolledLast", "ThreeSizeGraphsOutputRewritten", "QueueLoggerMainWaitsNote"} {
		f.Add(gunzip(f, filepath.Join(corpusTraces, name+".json.gz")), gunzip(f, filepath.Join(corpusTraces, name+".et.json.gz")))
	}
	f.Fuzz(func(t *testing.T, trace, et []byte) {
		dir := t.TempDir()
		tp, ep := filepath.Join(dir, "t.json"), filepath.Join(dir, "t.et.json")
		if err := os.WriteFile(tp, trace, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(ep, et, 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := importer.Import(importer.Options{Traces: []string{tp}, ET: []string{ep}})
		if err == nil && len(res.YAML) == 0 {
			t.Fatal("no error and no file")
		}
	})
}

// FuzzFlight: a Flight Recorder dump of any bytes imports or is refused
// with an error; never a panic, and what is written validates.
func FuzzFlight(f *testing.F) {
	f.Add([]byte(`{"version": "2.10", "pg_config": {"0": {"name": "0", "ranks": "[0]"}}, "entries": [{"record_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": 1, "profiling_name": "nccl:all_reduce", "input_sizes": [[4]], "input_dtypes": ["Float"], "output_sizes": [[4]], "state": "started", "time_created_ns": 5}]}`))
	f.Add([]byte(`{"entries": [{"record_id": 1, "process_group": ["0"], "is_p2p": true, "profiling_name": "nccl:send 0->1"}]}`))
	f.Add([]byte(`{"entries": [{"record_id": "x"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "fr.json")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := importer.Import(importer.Options{Traces: []string{p}, FlightRecorder: true})
		if err == nil && len(res.YAML) == 0 {
			t.Fatal("no error and no file")
		}
	})
}

func gunzip(f *testing.F, path string) []byte {
	fh, err := os.Open(path)
	if err != nil {
		f.Fatal(err)
	}
	defer fh.Close()
	z, err := gzip.NewReader(fh)
	if err != nil {
		f.Fatal(err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		f.Fatal(err)
	}
	return b
}
