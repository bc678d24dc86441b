package importer_test

import (
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/collsim/collsim/importer"
	"github.com/collsim/collsim/scenarios"
	"github.com/stretchr/testify/require"
)

func importCorpus(t *testing.T, name string) *importer.Result {
	t.Helper()
	return importFrom(t, corpusTraces, name)
}

// corpusFirst holds each corpus program's first recording, some made
// before the recorder captured graphs in a profiling session of their own
// or probed anything: what a plain profiler's trace is.
const corpusFirst = "../validation/corpus/traces-first"

func importFrom(t *testing.T, dir, name string) *importer.Result {
	t.Helper()
	res, err := importer.Import(importer.Options{
		Traces: []string{filepath.Join(dir, name+".json.gz")},
		ET:     []string{filepath.Join(dir, name+".et.json.gz")},
	})
	require.NoError(t, err)
	return res
}

func kernelNamed(t *testing.T, res *importer.Result, prefix string) scenarios.OpSpec {
	t.Helper()
	for _, op := range res.Spec.Programs[0].Ops {
		if op.Kind == scenarios.OpKernel && strings.HasPrefix(op.Name, prefix) {
			return op
		}
	}
	require.Failf(t, "no kernel", "no kernel named %s…", prefix)
	return scenarios.OpSpec{}
}

// torch.compile(mode="reduce-overhead") captures its CUDA graph during
// warm-up, before the recorded region, so a plain profiler's trace (the
// program's first recording) holds the replay's
// kernel but not the capture that says what it reads and writes. The
// importer gives it a graph's static buffers as the host uses them: it
// reads the static input cudagraph trees filled just before it
// (aten::_foreach_copy_, an in-place op that returns nothing: its write is
// its first argument) and writes the output the step first reads after it.
// Without that the aux stream's unjoined read of the output races with
// nothing; with it, DPOR finds the race, and the twin that forks aux after
// the replay stays ok.
func TestOpaqueReplayTakesStaticBuffers(t *testing.T) {
	res := importFrom(t, corpusFirst, "CompiledReduceOverheadNoFork")
	require.Contains(t, string(res.YAML), "its capture is not in the trace (captured before the recorded region)")
	cp := kernelNamed(t, res, "_foreach_copy_")
	g := kernelNamed(t, res, "graph.")
	require.NotEmpty(t, cp.Writes)
	require.NotContains(t, cp.Writes[0], "scratch", "an in-place op writes its first argument")
	require.Equal(t, cp.Writes, g.Reads, "the replay reads the static input filled just before it")
	require.Len(t, g.Writes, 1)
	var reader scenarios.OpSpec
	for _, op := range res.Spec.Programs[0].Ops {
		if op.Kind == scenarios.OpKernel && op.Stream != g.Stream && len(op.Reads) > 0 && op.Reads[0] == g.Writes[0] {
			reader = op
		}
	}
	require.NotEmpty(t, reader.Name, "the aux stream reads what the replay writes")
	require.Equal(t, "corruption", dporVerdict(t, res))

	require.Equal(t, "ok", dporVerdict(t, importFrom(t, corpusFirst, "CompiledReduceOverheadForked")))
}

// Views: the execution trace gives each tensor's offset and element count,
// so a kernel on x[:H] reaches x's first chunks only. HalvesDisjoint (aux
// reads x[:H] while main rewrites x[H:] in place; clean on the GPU) reads
// ok; HalvesOverlap (main rewrites x[:H]; racy) still races.
func TestViewsReachTheirChunks(t *testing.T) {
	res := importCorpus(t, "HalvesDisjoint")
	require.Contains(t, string(res.YAML), "reached through views")
	sin := kernelNamed(t, res, "sin")
	mul := kernelNamed(t, res, "mul_")
	require.Regexp(t, `\[0:2\]$`, sin.Reads[0])
	require.Regexp(t, `\[2:4\]$`, mul.Writes[0])
	require.Equal(t, "ok", dporVerdict(t, res))
	require.Equal(t, "corruption", dporVerdict(t, importCorpus(t, "HalvesOverlap")))
}

// Two graphs of two kernels each (mul+sin, mul+cos), each from its own
// pool, replayed at once on two streams: clean on the GPU. Each replay is
// the capture whose operators its kernels name; taking the latest capture
// of as many launches made both replays the second graph, writing the same
// temporaries from two streams. The twin whose graphs share one pool races
// on the GPU and here.
func TestReplayTakesTheCaptureItsKernelsName(t *testing.T) {
	res := importCorpus(t, "OwnPoolGraphsConcurrent")
	sin, cos := kernelNamed(t, res, "sin"), kernelNamed(t, res, "cos")
	require.NotEqual(t, sin.Stream, cos.Stream, "one graph's kernel on each stream")
	require.Equal(t, "ok", dporVerdict(t, res))
	require.Equal(t, "corruption", dporVerdict(t, importCorpus(t, "SharedPoolGraphsConcurrent")))
}

// make_graphed_callables captures at set-up, before the region; the
// recorder profiles the capture in a session of its own, whose execution
// trace numbers storages afresh. The capture's storages are its own
// (cap1.t22), never the step's storage of the same number (a clone the aux
// stream reads, in GraphedCallableOutputCloned); and every replay of the
// graph writes the static output any replay showed (the second call
// rewrites call 1's output, which the aux stream is still reading, in
// GraphedCallableOutputHeld, though the step reads it no more after).
func TestGraphedCallableStaticBuffers(t *testing.T) {
	held := importCorpus(t, "GraphedCallableOutputHeld")
	require.Contains(t, string(held.YAML), "counting those of the other replays of the same graph")
	require.Equal(t, "corruption", dporVerdict(t, held))
	cloned := importCorpus(t, "GraphedCallableOutputCloned")
	require.Contains(t, string(cloned.YAML), "cap1.t")
	require.Equal(t, "ok", dporVerdict(t, cloned))
}

// withoutCaptures is a corpus trace as a recorder without the capture hook
// writes it: the graph captures made before the region (between
// cudaStreamBeginCapture and cudaStreamEndCapture, on every thread) are
// gone, and so are their execution-trace nodes (ids past 10^9).
func withoutCaptures(t *testing.T, name string) (trace, et string) {
	t.Helper()
	tr := readCorpusTrace(t, name)
	evs := tr["traceEvents"].([]any)
	var lo []float64
	type rng struct{ lo, hi float64 }
	var caps []rng
	for _, e := range evs {
		m := e.(map[string]any)
		switch m["name"] {
		case "cudaStreamBeginCapture", "cudaStreamBeginCaptureToGraph":
			lo = append(lo, m["ts"].(float64))
		case "cudaStreamEndCapture":
			if len(lo) > 0 {
				caps = append(caps, rng{lo[len(lo)-1], m["ts"].(float64) + m["dur"].(float64)})
				lo = lo[:len(lo)-1]
			}
		}
	}
	require.NotEmpty(t, caps)
	var kept []any
	for _, e := range evs {
		m := e.(map[string]any)
		ts, _ := m["ts"].(float64)
		in := false
		for _, c := range caps {
			in = in || (ts >= c.lo && ts <= c.hi)
		}
		if !in {
			kept = append(kept, e)
		}
	}
	tr["traceEvents"] = kept
	trace = writeTrace(t, name, tr)

	f, err := os.Open(filepath.Join(corpusTraces, name+".et.json.gz"))
	require.NoError(t, err)
	defer f.Close()
	z, err := gzip.NewReader(f)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.NewDecoder(z).Decode(&doc))
	var nodes []any
	for _, n := range doc["nodes"].([]any) {
		if n.(map[string]any)["id"].(float64) < 1e9 {
			nodes = append(nodes, n)
		}
	}
	doc["nodes"] = nodes
	data, err := json.Marshal(doc)
	require.NoError(t, err)
	et = filepath.Join(t.TempDir(), name+".et.json")
	require.NoError(t, os.WriteFile(et, data, 0o644))
	return trace, et
}

// The same make_graphed_callables programs recorded without their capture:
// the two launches ran the same kernels, so they are one graph, and the
// second writes the static output the first showed (the step reads it
// after the first launch only).
func TestOpaqueReplaysOfOneGraphShareStaticBuffers(t *testing.T) {
	imp := func(name string) *importer.Result {
		tr, et := withoutCaptures(t, name)
		res, err := importer.Import(importer.Options{Traces: []string{tr}, ET: []string{et}})
		require.NoError(t, err)
		require.Contains(t, string(res.YAML), "its capture is not in the trace")
		return res
	}
	held := imp("GraphedCallableOutputHeld")
	require.Contains(t, string(held.YAML), "counting those of the other replays of the same graph")
	require.Equal(t, "corruption", dporVerdict(t, held))
	require.Equal(t, "ok", dporVerdict(t, imp("GraphedCallableOutputCloned")))
}

// A graph captured at set-up records an event inside the capture, and the
// step zeroes the graph's static output before the replay: the output
// looks like an input (filled before the launch), but the step reads it
// after the launch with no write between, so the replay writes it too. An
// aux stream that waits on the event recorded before the write inside the
// graph then races with the write (GraphExternalEventEarly, racy on the
// GPU); with the event recorded after the write it does not.
func TestZeroedStaticOutputIsWritten(t *testing.T) {
	require.Equal(t, "corruption", dporVerdict(t, importCorpus(t, "GraphExternalEventEarly")))
	require.Equal(t, "ok", dporVerdict(t, importCorpus(t, "GraphExternalEventLate")))
}

// Strided views: aux writes out[::2] while main writes out[1::2]
// (StridedWritesDisjoint, clean on the GPU) or out[::4]
// (StridedWritesOverlap, racy). The storage is laid out in lanes (element
// e in lane e mod 2, or mod 4), so each strided view is whole lanes and
// disjoint views share no chunk; a view's extent reaches its last element,
// not numel elements from its offset.
func TestStridedViewsAreLanes(t *testing.T) {
	require.Equal(t, "ok", dporVerdict(t, importCorpus(t, "StridedWritesDisjoint")))
	require.Equal(t, "corruption", dporVerdict(t, importCorpus(t, "StridedWritesOverlap")))
}

// One kernel, several views of one storage: torch.cat of parts 1 and 3 of
// torch.split(buf, N/4) reaches those parts only, each its own run of
// chunks, not the span from part 1 to part 3; main's in-place write of
// part 2 does not race with it (SplitCatSideOtherPart, clean on the GPU),
// its write of part 1 does (SplitCatSideSamePart, racy).
func TestEachViewItsOwnChunks(t *testing.T) {
	res := importCorpus(t, "SplitCatSideOtherPart")
	cat := kernelNamed(t, res, "cat")
	require.Len(t, cat.Reads, 2, "parts 1 and 3: two runs of chunks")
	require.Equal(t, "ok", dporVerdict(t, res))
	require.Equal(t, "corruption", dporVerdict(t, importCorpus(t, "SplitCatSideSamePart")))
}

// torch.compile(mode="reduce-overhead") called with two input sizes runs
// two graphs of the same Triton kernel on two grids: they are two graphs,
// not one (kernels and launch shapes name a graph whose capture the trace
// lacks), and the first graph's output, read after the second replay, is
// the first's alone. An aux stream that waits on an event recorded between
// the two calls reads it safely (CompiledTwoShapesEventAfter, clean); one
// recorded before the first call does not (CompiledTwoShapesEventEarly).
func TestTwoGraphsOfOneCompiledFunction(t *testing.T) {
	require.Equal(t, "ok", dporVerdict(t, importCorpus(t, "CompiledTwoShapesEventAfter")))
	require.Equal(t, "corruption", dporVerdict(t, importCorpus(t, "CompiledTwoShapesEventEarly")))
}

// A copy from the device to pageable host memory returns only when done,
// even as cudaMemcpyAsync ("Memcpy DtoH (Device -> Pageable)" in the
// trace): the host's later copy out of it is ordered (PageableD2HHostCopy,
// clean); into pinned memory it is not (ToCpuNonBlockingHostCopy, racy).
func TestPageableCopyWaits(t *testing.T) {
	res := importCorpus(t, "PageableD2HHostCopy")
	require.Contains(t, string(res.YAML), "copies from the device to pageable host memory")
	require.Equal(t, "ok", dporVerdict(t, res))
	require.Equal(t, "corruption", dporVerdict(t, importCorpus(t, "ToCpuNonBlockingHostCopy")))
}

// A program that marks each iteration of a loop record_function("step")
// races from one iteration into the next (CrossIterationNoJoin: iteration
// 1's write of buf against iteration 0's aux read). The repeated step name
// is imported from its first occurrence to its last, as one step; the
// first occurrence alone (--step-index 0) cannot show the race.
func TestRepeatedStepIsOneWindow(t *testing.T) {
	res := importCorpus(t, "CrossIterationNoJoin")
	require.Contains(t, string(res.YAML), "occurs 2 times on its thread")
	require.Equal(t, "corruption", dporVerdict(t, res))
	require.Equal(t, "ok", dporVerdict(t, importCorpus(t, "CrossIterationJoined")))

	one, err := importer.Import(importer.Options{
		Traces:   []string{filepath.Join(corpusTraces, "CrossIterationNoJoin.json.gz")},
		ET:       []string{filepath.Join(corpusTraces, "CrossIterationNoJoin.et.json.gz")},
		PickStep: true,
	})
	require.NoError(t, err)
	require.Equal(t, "ok", dporVerdict(t, one), "one iteration has no race of its own")
}

// torch.sum(x, dim=0, out=red) allocates a temporary: red existed before
// the operator (it is also its input), so the allocation is not red's
// block, and red stays one tensor whose reuse by the second sum races with
// aux's unjoined read (SumOutReusedUnjoined, racy; joined: clean).
func TestOutArgumentKeepsItsStorage(t *testing.T) {
	require.Contains(t, []string{"race", "corruption"}, dporVerdict(t, importCorpus(t, "SumOutReusedUnjoined")))
	require.Equal(t, "ok", dporVerdict(t, importCorpus(t, "SumOutReusedJoined")))
}

// Event(blocking=True).synchronize() waits for the event's record, not for
// all its stream was given since: an event recorded before a copy to
// pinned memory lets the host read the buffer while the copy still runs
// (BlockingEventRecordedEarly, racy); recorded after the copy, it does
// not (BlockingEventRecordedLate, clean).
func TestEventSyncWaitsForItsRecord(t *testing.T) {
	early := importCorpus(t, "BlockingEventRecordedEarly")
	require.Contains(t, string(early.YAML), "stream: eventsync")
	require.Equal(t, "corruption", dporVerdict(t, early))
	require.Equal(t, "ok", dporVerdict(t, importCorpus(t, "BlockingEventRecordedLate")))
}

// A tensor made on a thread the profiler did not record and handed over a
// queue: its allocation is not in the trace, but its free on the main
// thread is, and the block's reuse by main's next tensor races with aux's
// read unless record_stream was called (QueueHandoffNoRecordStream racy,
// QueueHandoffRecordStream clean).
func TestUnrecordedThreadsTensorIsFreedAndReused(t *testing.T) {
	res := importCorpus(t, "QueueHandoffNoRecordStream")
	require.Contains(t, string(res.YAML), "threads the profiler did not record are tied to the first later free")
	require.Equal(t, "corruption", dporVerdict(t, res))
	require.Equal(t, "ok", dporVerdict(t, importCorpus(t, "QueueHandoffRecordStream")))
}
