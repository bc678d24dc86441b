package importer_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/collsim/collsim/importer"
)

// writeSyntheticTrace writes a Kineto-shaped trace of steps steps, each
// the shape of validation/traces/a_eager.json: a ProfilerStep#k annotation,
// operators, launches, kernels on two streams, an event record and wait
// with cuda_sync entries, and [memory] events. About 9 KB per step.
func writeSyntheticTrace(w io.Writer, steps int) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	fmt.Fprint(bw, `{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "numSms": 132}], "traceEvents": [`+"\n")
	first := true
	ev := func(format string, a ...any) {
		if !first {
			bw.WriteString(",\n")
		}
		first = false
		fmt.Fprintf(bw, format, a...)
	}
	const pad = `"Input type": ["float", "double"], "Input Strides": [[1], []], "Input Dims": [[4194304], []], "Concrete Inputs": ["", ""]`
	corr, ext := int64(1), int64(1)
	for s := 0; s < steps; s++ {
		t := float64(s) * 2000
		ev(`{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", "pid": 1, "tid": 1, "ts": %.3f, "dur": 1500, "args": {"External id": %d, "Record function id": %d}}`, s, t, ext, ext)
		ext++
		type k struct {
			name   string
			stream int
			dur    float64
		}
		for i, kk := range []k{{"aten::mul", 7, 8.8}, {"aten::sin", 13, 6.5}, {"aten::mm", 7, 181}, {"aten::cos", 7, 9.2}, {"aten::add", 7, 10.5}} {
			ts := t + 10 + float64(i)*200
			ev(`{"ph": "X", "cat": "cpu_op", "name": "%s", "pid": 1, "tid": 1, "ts": %.3f, "dur": 60, "args": {"External id": %d, "Record function id": %d, %s}}`, kk.name, ts, ext, ext, pad)
			ev(`{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": %.3f, "args": {"Total Reserved": 218103808, "Total Allocated": 201326592, "Bytes": 16777216, "Device Id": 0, "Device Type": 1, "Addr": %d}}`, ts+5, 140267860525056+int64(i)<<24)
			ev(`{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": %.3f, "dur": 10, "args": {"External id": %d, "cbid": 211, "correlation": %d}}`, ts+20, ext, corr)
			ev(`{"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4, at::native::Functor%d<float>, std::array<char*, 2ul> >(int, std::array<char*, 2ul>)", "pid": 0, "tid": %d, "ts": %.3f, "dur": %.3f, "args": {"External id": %d, "queued": 0, "device": 0, "context": 1, "stream": %d, "correlation": %d, "registers per thread": 16, "shared memory": 0, "blocks per SM": 248.24, "warps per SM": 1985.94, "grid": [32768, 1, 1], "block": [128, 1, 1], "est. achieved occupancy %%": 100}}`, i, kk.stream, ts+40, kk.dur, ext, kk.stream, corr)
			ev(`{"ph": "f", "id": %d, "pid": 0, "tid": %d, "ts": %.3f, "cat": "ac2g", "name": "ac2g", "bp": "e"}`, corr, kk.stream, ts+40)
			ev(`{"ph": "s", "id": %d, "pid": 1, "tid": 1, "ts": %.3f, "cat": "ac2g", "name": "ac2g"}`, corr, ts+20)
			corr++
			ext++
			if i == 0 || i == 3 {
				ws := 13
				if i == 3 {
					ws = 7
				}
				ev(`{"ph": "X", "cat": "cuda_runtime", "name": "cudaEventRecordWithFlags", "pid": 1, "tid": 1, "ts": %.3f, "dur": 3, "args": {"cbid": 370, "correlation": %d}}`, ts+120, corr)
				corr++
				ev(`{"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamWaitEvent", "pid": 1, "tid": 1, "ts": %.3f, "dur": 3, "args": {"cbid": 147, "correlation": %d}}`, ts+130, corr)
				ev(`{"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 0, "tid": %d, "ts": %.3f, "dur": 2, "args": {"External id": %d, "cuda_sync_kind": "Stream Wait Event", "wait_on_stream": -1, "wait_on_cuda_event_record_corr_id": -1, "wait_on_cuda_event_id": 59, "stream": %d, "correlation": %d, "device": 0, "context": 1}}`, ws, ts+131, corr, ws, corr)
				corr++
			}
		}
	}
	fmt.Fprint(bw, "\n], \"traceName\": \"synthetic\"}\n")
	return bw.Flush()
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// peakRSS is the process's peak resident set (VmHWM), in bytes; 0 where
// /proc is not there.
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkImportLarge generates a trace of COLLSIM_IMPORT_BENCH_MB
// megabytes (default 1024: a 1 GB trace; never committed) and imports its
// tenth step. It reports the file size, the throughput and the process's
// peak resident memory, which streaming keeps far below the file's size:
//
//	go test -run '^$' -bench ImportLarge -benchtime 1x ./importer/
func BenchmarkImportLarge(b *testing.B) {
	mb := 1024
	if v := os.Getenv("COLLSIM_IMPORT_BENCH_MB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("COLLSIM_IMPORT_BENCH_MB=%q: expected a positive integer", v)
		}
		mb = n
	}
	path := filepath.Join(b.TempDir(), "large.json")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	var probe countWriter
	if err := writeSyntheticTrace(&probe, 100); err != nil {
		b.Fatal(err)
	}
	steps := int(int64(mb) << 20 * 100 / probe.n)
	if err := writeSyntheticTrace(f, steps); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	before := peakRSS()
	b.SetBytes(st.Size())
	b.ResetTimer()
	for b.Loop() {
		// A trace this large has more events than the default limit lets in
		// (--max-events); the user raises it, as here.
		res, err := importer.Import(importer.Options{Traces: []string{path}, StepIndex: 10, Limits: importer.Limits{MaxEvents: 1 << 30}})
		if err != nil {
			b.Fatal(err)
		}
		if res.Ranks[0].Kernels != 5 {
			b.Fatalf("imported %d kernels, want 5", res.Ranks[0].Kernels)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(st.Size())/(1<<20), "trace-MiB")
	b.ReportMetric(float64(peakRSS())/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(before)/(1<<20), "RSS-before-MiB")
}

// The synthetic trace imports like a real one (a small one, in tests).
func TestSyntheticTraceImports(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeSyntheticTrace(f, 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// A trace this large has more events than the default limit lets in
	// (--max-events); the user raises it, as here.
	res, err := importer.Import(importer.Options{Traces: []string{path}, StepIndex: 10, Limits: importer.Limits{MaxEvents: 1 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ranks[0].Step != "ProfilerStep#10" || res.Ranks[0].Kernels != 5 || res.Ranks[0].Waits != 2 {
		t.Fatalf("imported %+v", res.Ranks[0])
	}
}

// A trace with no step annotation and more runtime calls than a scenario
// can hold is refused while it is read, before its events pile up.
func TestHugeStepRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 10 MB trace")
	}
	path := filepath.Join(t.TempDir(), "huge.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriter(f)
	bw.WriteString("[")
	for i := range 70000 {
		if i > 0 {
			bw.WriteString(",\n")
		}
		fmt.Fprintf(bw, `{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": %d, "dur": 1, "args": {"correlation": %d}}`, i*2, i)
	}
	bw.WriteString("]\n")
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = importer.Import(importer.Options{Traces: []string{path}})
	if err == nil || !strings.Contains(err.Error(), "more than 65536 runtime calls") || !strings.Contains(err.Error(), "event 65536") {
		t.Fatalf("got %v", err)
	}
}
