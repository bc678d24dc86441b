package importer_test

import (
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/collsim/collsim/explore"
	"github.com/collsim/collsim/importer"
	"github.com/collsim/collsim/scenarios"
	"github.com/stretchr/testify/require"
)

const corpusTraces = "../validation/corpus/traces"

// readCorpusTrace decodes the corpus trace name (its gzipped Kineto JSON).
func readCorpusTrace(t *testing.T, name string) map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(corpusTraces, name+".json.gz"))
	require.NoError(t, err)
	defer f.Close()
	z, err := gzip.NewReader(f)
	require.NoError(t, err)
	var tr map[string]any
	require.NoError(t, json.NewDecoder(z).Decode(&tr))
	return tr
}

// writeTrace writes a rewritten trace to a temporary file named name.json.
func writeTrace(t *testing.T, name string, tr map[string]any) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name+".json")
	b, err := json.Marshal(tr)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(out, b, 0o644))
	return out
}

// withoutProbe rewrites a trace recorded with validation/collsim_record.py
// as a plain profiler would have recorded it: without the
// "collsim::record_stream" ranges and the empty kernel each launched.
func withoutProbe(t *testing.T, name string) string {
	return withoutProbes(t, name, "collsim::record_stream")
}

// withoutProbes strips the probe ranges named probe (and their kernels).
func withoutProbes(t *testing.T, name, probe string) string {
	t.Helper()
	tr := readCorpusTrace(t, name)
	evs := tr["traceEvents"].([]any)
	type rng struct{ lo, hi float64 }
	var probes []rng
	for _, e := range evs {
		if m := e.(map[string]any); m["name"] == probe {
			probes = append(probes, rng{m["ts"].(float64), m["ts"].(float64) + m["dur"].(float64)})
		}
	}
	require.NotEmpty(t, probes, "the trace was recorded with the probe")
	corrs := map[float64]bool{}
	for _, e := range evs {
		m := e.(map[string]any)
		args, _ := m["args"].(map[string]any)
		// the probe's own launch, not the call it names (an event
		// probe's range also holds the cudaEventRecord, a query probe's
		// the cudaStreamQuery)
		if m["cat"] != "cuda_runtime" || args == nil || strings.HasPrefix(m["name"].(string), "cudaEventRecord") || m["name"] == "cudaStreamQuery" {
			continue
		}
		ts, _ := m["ts"].(float64)
		for _, r := range probes {
			if ts >= r.lo && ts <= r.hi {
				corrs[args["correlation"].(float64)] = true
			}
		}
	}
	var kept []any
	dropped := 0
	for _, e := range evs {
		m := e.(map[string]any)
		args, _ := m["args"].(map[string]any)
		c, _ := args["correlation"].(float64)
		if m["name"] == probe || (args != nil && corrs[c] && m["cat"] != "cuda_sync") {
			dropped++
			continue
		}
		kept = append(kept, e)
	}
	require.GreaterOrEqual(t, dropped, 3, "the range, its launch and its kernel")
	tr["traceEvents"] = kept
	return writeTrace(t, name, tr)
}

func dporVerdict(t *testing.T, res *importer.Result) string {
	t.Helper()
	read := func(string) ([]byte, error) { return res.YAML, nil }
	tg, err := explore.NewTargetFrom(res.Spec.Name+".yaml", "recorded", nil, scenarios.ReadFunc(read))
	require.NoError(t, err)
	sum, err := explore.Explore(tg, &explore.DPOR{}, 0, explore.Options{Budget: 5000})
	require.NoError(t, err)
	require.True(t, *sum.Complete)
	return sum.Verdict
}

// A record_stream call naming a stream that never used the tensor protects
// nothing. The trace recorded with collsim_record's probe names the stream,
// and the importer writes the call there (RecordStreamWrongStream names
// aux2, a stream none of the program's kernels use). The same trace without
// the probe cannot tell that call from a right one: the import guesses the
// stream that read the tensor, and says so.
func TestRecordStreamProbeNamesTheStream(t *testing.T) {
	const name = "RecordStreamWrongStream"
	et := []string{filepath.Join(corpusTraces, name+".et.json.gz")}
	rsOps := func(res *importer.Result) []string {
		var rs []string
		for _, op := range res.Spec.Programs[0].Ops {
			if op.Kind == scenarios.OpRecordStream {
				rs = append(rs, op.Name+"@"+op.Stream)
			}
		}
		return rs
	}
	kernelStreams := func(res *importer.Result) map[string]bool {
		m := map[string]bool{}
		for _, op := range res.Spec.Programs[0].Ops {
			if op.Kind == scenarios.OpKernel {
				m[op.Stream] = true
			}
		}
		return m
	}

	probed, err := importer.Import(importer.Options{Traces: []string{filepath.Join(corpusTraces, name+".json.gz")}, ET: et})
	require.NoError(t, err)
	require.NotContains(t, string(probed.YAML), "record_stream calls: the trace does not name the stream")
	require.NotContains(t, string(probed.YAML), "spin_kernel", "the probe kernel is not the program's")
	rs := rsOps(probed)
	require.Len(t, rs, 1)
	st := rs[0][strings.Index(rs[0], "@")+1:]
	require.False(t, kernelStreams(probed)[st], "the probe names aux2, where no kernel of the program runs")

	plain, err := importer.Import(importer.Options{Traces: []string{withoutProbe(t, name)}, ET: et})
	require.NoError(t, err)
	require.Contains(t, string(plain.YAML), "record_stream calls: the trace does not name the stream")
	rs = rsOps(plain)
	require.Len(t, rs, 1)
	st = rs[0][strings.Index(rs[0], "@")+1:]
	require.True(t, kernelStreams(plain)[st], "the guess is the stream that read the tensor")

	// A block freed after record_stream comes back once a malloc finds the
	// recorded stream's work done (ranks/dynalloc.go): aux2 has none, so
	// the next malloc takes the block while aux may still read it, the use
	// after free the GPU showed. The guessed call protects aux's read.
	require.Equal(t, "corruption", dporVerdict(t, probed))
	require.Equal(t, "ok", dporVerdict(t, plain))
}
