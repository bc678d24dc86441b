package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// limitedRun is one simctl run in a child process under ulimit -v 2 GiB.
type limitedRun struct {
	code           int
	stdout, stderr string
	cpu            time.Duration // user + system
	maxRSS         int64         // bytes
}

// runLimited runs simctl args in a child process (TestMain's SIMCTL_CHILD)
// under an address-space limit of 2 GiB, as `ulimit -v 2097152` sets it,
// with stdout to the file out ("" for a buffer).
func runLimited(t *testing.T, in, out string, args ...string) limitedRun {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, "/bin/sh", "-c", `ulimit -v 2097152 && exec "$0" -test.run='^$'`, exe)
	c.Env = append(os.Environ(), "SIMCTL_CHILD=1", "SIMCTL_ARGS="+strings.Join(args, "\n"))
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	if in != "" {
		f, err := os.Open(in)
		require.NoError(t, err)
		defer f.Close()
		c.Stdin = f
	}
	if out != "" {
		f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE, 0o644)
		require.NoError(t, err)
		defer f.Close()
		c.Stdout = f
	}
	err = c.Run()
	r := limitedRun{stdout: o.String(), stderr: e.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		r.maxRSS = ru.Maxrss << 10
	}
	return r
}

// gzMember is data as one gzip member.
func gzMember(t *testing.T, data []byte) []byte {
	var b bytes.Buffer
	z, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	require.NoError(t, err)
	_, err = z.Write(data)
	require.NoError(t, err)
	require.NoError(t, z.Close())
	return b.Bytes()
}

// gzBomb writes head, fill repeated to about total bytes, and tail, as
// concatenated gzip members (gunzip reads them as one stream): a few MB
// on disk for gigabytes read.
func gzBomb(t *testing.T, path, head, fill, tail string, total int64) string {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	w := bufio.NewWriter(f)
	_, _ = w.Write(gzMember(t, []byte(head)))
	chunk := []byte(strings.Repeat(fill, max((1<<20)/len(fill), 1)))
	m := gzMember(t, chunk)
	for n := int64(0); n < total; n += int64(len(chunk)) {
		_, _ = w.Write(m)
	}
	_, _ = w.Write(gzMember(t, []byte(tail)))
	require.NoError(t, w.Flush())
	require.NoError(t, f.Close())
	return path
}

// bigShard writes a shard file of n records (schedules i, i+2, …) from
// the records of a real one, the first keeping its witness.
func bigShard(t *testing.T, from, path string, i, n int) string {
	t.Helper()
	data, err := os.ReadFile(from)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(data, &doc))
	recs := doc["records"].([]any)
	plain := recs[len(recs)-1].(map[string]any)
	delete(plain, "witness")
	f, err := os.Create(path)
	require.NoError(t, err)
	w := bufio.NewWriter(f)
	doc["budget"] = 2 * n
	doc["records"] = []any{}
	head, err := json.Marshal(doc)
	require.NoError(t, err)
	cut := bytes.LastIndex(head, []byte(`"records":[]`))
	_, _ = w.Write(head[:cut])
	_, _ = w.WriteString(`"records":[`)
	for j := range n {
		r := plain
		if j < len(recs) {
			r = recs[j].(map[string]any)
		}
		r["index"] = i + 2*j
		b, err := json.Marshal(r)
		require.NoError(t, err)
		if j > 0 {
			_ = w.WriteByte(',')
		}
		_, _ = w.Write(b)
	}
	_, _ = w.WriteString("]" + string(head[cut+len(`"records":[]`):]))
	require.NoError(t, w.Flush())
	require.NoError(t, f.Close())
	return path
}

// bigCheckpoint writes the checkpoint of an exploration of tp8-shared-expert
// (buggy, as shardArgs explores it, with the extra arguments) of more than
// size bytes: the header and records of a real run of 8 schedules, its
// budget raised, and as many more records as it takes, each the last one
// of the real run under another schedule's number. It returns the path
// and the budget.
func bigCheckpoint(t *testing.T, path string, size int, extra ...string) (string, int) {
	t.Helper()
	small := path + ".small"
	code, _, stderr := simctl(t, append(append(shardArgs(), extra...), "--checkpoint", small, "--checkpoint-every", "0s")...)
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSuffix(mustRead(t, small), "\n"), "\n")
	require.Len(t, lines, 9)
	var last map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[8]), &last))
	require.NotContains(t, last, "witness")
	last["index"] = -1
	tmpl, err := json.Marshal(last)
	require.NoError(t, err)
	pre, post, ok := strings.Cut(string(tmpl), `"index":-1`)
	require.True(t, ok)
	n := 8 + size/len(tmpl) + 1
	var head map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &head))
	head["budget"] = n
	hdr, err := json.Marshal(head)
	require.NoError(t, err)
	f, err := os.Create(path)
	require.NoError(t, err)
	w := bufio.NewWriterSize(f, 1<<20)
	_, _ = w.Write(append(hdr, '\n'))
	for _, l := range lines[1:] {
		_, _ = w.WriteString(l + "\n")
	}
	for i := 8; i < n; i++ {
		_, _ = fmt.Fprintf(w, "%s\"index\":%d%s\n", pre, i, post)
	}
	require.NoError(t, w.Flush())
	require.NoError(t, f.Close())
	return path, n
}

// TestHostileInputs31: one case per defect issue 31 found (import bombs,
// huge traces, workers, checkpoints, merges, outputs), each run as simctl
// in a child process under ulimit -v 2097152: each ends with the exit
// status given (2 for bad input) within 10 CPU-seconds and 2 GiB, its
// first line of stderr says what (the limit and the flag that raises it,
// or the file and line), and no Go runtime error or goroutine dump. The
// heavy cases (gigabyte bombs, 10 million events, 88 MB shards) are left
// out of -short.
func TestHostileInputs31(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ulimit -v and /proc: linux")
	}
	if raceEnabled {
		t.Skip("the race detector's shadow memory does not fit ulimit -v 2 GiB: .ci/run runs this test without -race")
	}
	e := newHostileEnv(t)
	d := e.dir
	trace := filepath.Join("..", "..", "validation", "traces", "a_eager.json")
	G := int64(2 << 30)
	if testing.Short() {
		G = 64 << 20 // the same shapes, smaller
	}
	str := gzBomb(t, filepath.Join(d, "str.json.gz"), `{"traceEvents":[{"ph":"X","name":"`, "a", `"}]}`, G)
	skipped := gzBomb(t, filepath.Join(d, "skip.json.gz"), `{"junk":"`, "a", `","traceEvents":[]}`, G)
	brackets := gzBomb(t, filepath.Join(d, "brackets.json.gz"), `{"junk":`, "[", ``, G)
	manyKeys := gzBomb(t, filepath.Join(d, "keys.json.gz"), `{"junk":{`, `"a":{"name":"x"},`, `"z":{}},"traceEvents":[]}`, G)
	pg := gzBomb(t, filepath.Join(d, "pg.json.gz"), `{"version":"2.4","pg_config":{"0":{"name":"0","desc":"default_pg","ranks":"[`, "0, ", `0]"}},"entries":[]}`, G)
	pgMany := gzBomb(t, filepath.Join(d, "pgmany.json.gz"), `{"version":"2.4","pg_config":{`, `"a":{"name":"x"},`, `"z":{}},"entries":[]}`, G)
	etStr := gzBomb(t, filepath.Join(d, "et.json.gz"), `{"schema":"1.0.1","nodes":[{"id":1,"name":"`, "a", `"}]}`, G)
	ws := gzBomb(t, filepath.Join(d, "ws.json.gz"), `{"traceEvents":[`, " ", `]}`, min(G, 256<<20))
	kinds := func(name, ev string, n int64) string {
		return gzBomb(t, filepath.Join(d, name+".json.gz"), `{"traceEvents":[{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","tid":1,"ts":1,"dur":1,"args":{"correlation":1}},`, ev+",", `{"ph":"X","cat":"cpu_op","name":"end","tid":1,"ts":1,"dur":1}]}`, n*int64(len(ev)+1))
	}
	const kindN = 200000
	steps := kinds("steps", `{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","tid":1,"ts":1,"dur":1}`, kindN)
	ops := kinds("ops", `{"ph":"X","cat":"cpu_op","name":"aten::add","tid":1,"ts":1,"dur":1}`, kindN)
	mem := kinds("mem", `{"ph":"i","name":"[memory]","tid":1,"ts":1,"args":{"Device Type":1,"Addr":1,"Bytes":4}}`, kindN)
	kernels := kinds("kernels", `{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"args":{"correlation":1,"stream":7}}`, kindN)
	captures := kinds("captures", `{"ph":"X","cat":"cuda_runtime","name":"cudaStreamBeginCapture","tid":1,"ts":1,"dur":1},{"ph":"X","cat":"cuda_runtime","name":"cudaStreamEndCapture","tid":1,"ts":1,"dur":1}`, kindN)
	ev := `{"ph":"X","cat":"cpu_op","name":"k","ts":1,"dur":1}`
	nEvents := int64(10_000_000)
	if testing.Short() {
		nEvents = 50_000
	}
	tenM := gzBomb(t, filepath.Join(d, "events.json.gz"), `{"traceEvents":[`, ev+",", ev+"]}", nEvents*int64(len(ev)+1))
	perChunk := int64((1 << 20) / (len(ev) + 1)) // gzBomb's events per member
	tenMCount := (nEvents+perChunk-1)/perChunk*perChunk + 1
	// Outputs and checkpoints.
	scenario := e.write(t, "my.yaml", mustRead(t, e.scenario))
	fifo := filepath.Join(d, "ck.fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	mode600 := e.write(t, "old.yaml", "old")
	require.NoError(t, os.Chmod(mode600, 0o600))
	linkTarget := filepath.Join(d, "target.yaml")
	link := filepath.Join(d, "link.yaml")
	require.NoError(t, os.Symlink("target.yaml", link))
	killed := filepath.Join(d, "killed.ckpt")
	code, _, stderr := simctl(t, append(shardArgs(), "--checkpoint", killed, "--checkpoint-every", "0s")...)
	require.Equal(t, 0, code, stderr)
	ck := mustRead(t, killed)
	require.NoError(t, os.WriteFile(killed, []byte(ck[:strings.LastIndex(ck[:len(ck)-1], "\n")+1]), 0o644)) // the last record lost
	gemm := e.write(t, "gemm.yaml", strings.Replace(mustRead(t, e.scenario), "time: 4us", `time: "gemm(1024*1024*1024*1024, 1024*1024*1024*1024, 1024*1024*1024*1024)"`, 1))
	bom := e.write(t, "bom.yaml", "\ufeff"+mustRead(t, e.scenario))
	var body strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&body, "          - {kernel: \"k%d_{l}\", stream: main, reads: [x], writes: [a], time: 1us}\n", i)
	}
	repeat := e.write(t, "repeat.yaml", strings.Replace(mustRead(t, e.scenario), "    ops:\n", "    ops:\n      - repeat: {count: 1024, as: l}\n        ops:\n"+body.String(), 1))
	longExpr := e.write(t, "long-expr.yaml", strings.Replace(mustRead(t, e.scenario), "time: 4us", `time: "`+strings.Repeat("1+", 175000)+`1"`, 1))
	var tr map[string]any
	require.NoError(t, json.Unmarshal([]byte(mustRead(t, trace)), &tr))
	for _, ev := range tr["traceEvents"].([]any) {
		if m := ev.(map[string]any); m["cat"] == "kernel" {
			m["dur"] = 11 * 86400 * 1e6 // 11 days, in µs
			break
		}
	}
	day11, err := json.Marshal(tr)
	require.NoError(t, err)
	longKernel := e.write(t, "day11.json", string(day11))
	// A 2 h pause of the host halfway through the step's launches: every
	// event from the middle launch on moves 2 h later, and the host ranges
	// around it (the step annotation, the operator) last 2 h longer.
	require.NoError(t, json.Unmarshal([]byte(mustRead(t, trace)), &tr))
	var launchTs []float64
	for _, ev := range tr["traceEvents"].([]any) {
		if m := ev.(map[string]any); m["name"] == "cudaLaunchKernel" {
			launchTs = append(launchTs, m["ts"].(float64))
		}
	}
	slices.Sort(launchTs)
	pause, mid := 7.2e9, launchTs[len(launchTs)/2]
	for _, ev := range tr["traceEvents"].([]any) {
		m := ev.(map[string]any)
		ts, ok := m["ts"].(float64)
		if !ok {
			continue
		}
		dur, _ := m["dur"].(float64)
		switch cat, _ := m["cat"].(string); {
		case ts >= mid:
			m["ts"] = ts + pause
		case ts+dur > mid && cat != "kernel" && !strings.HasPrefix(cat, "gpu_"):
			m["dur"] = dur + pause
		}
	}
	pausedData, err := json.Marshal(tr)
	require.NoError(t, err)
	paused := e.write(t, "paused.json", string(pausedData))
	chunksFile := func() string {
		var b strings.Builder
		b.WriteString("name: manychunks\nhardware: h100\nranks: 8\nmode: eager\nknobs:\n  budget: 0\ntensors:\n")
		for i := range 256 {
			fmt.Fprintf(&b, "  - {name: t%d, bytes: 1048576, chunks: 4096}\n", i)
		}
		b.WriteString("programs:\n  - ranks: all\n    streams: [main]\n    ops:\n")
		for i := range 256 {
			fmt.Fprintf(&b, "      - {kernel: k%d, stream: main, reads: [t%d], writes: [t%d], time: 1us}\n", i, i, (i+1)%256)
		}
		b.WriteString("variants:\n  - name: v\n    expect: ok\n")
		return e.write(t, "chunks.yaml", b.String())
	}()
	seedRe := regexp.MustCompile(`"seed": "(\d+)"`)
	var numeric []string
	for i, sh := range e.shards {
		numeric = append(numeric, e.write(t, fmt.Sprintf("numeric-%d.json", i), seedRe.ReplaceAllString(mustRead(t, sh), `"seed": $1`)))
	}
	_, merged, _ := simctl(t, "merge", e.shards[0], e.shards[1], "--format", "json")
	var sorted []string // keys in alphabetical order, as jq -S or a map writes them: "records" before "scenario"
	for i, sh := range e.shards {
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(mustRead(t, sh)), &doc))
		data, err := json.Marshal(doc)
		require.NoError(t, err)
		sorted = append(sorted, e.write(t, fmt.Sprintf("sorted-%d.json", i), string(data)))
	}
	var missing []string
	for i := range 3000 {
		missing = append(missing, fmt.Sprintf("/nonexistent/m%d.y", i)) // short: the arguments travel in one variable
	}
	var big0, big1, bigCk, bigShardCk string
	bigBudget, bigShardBudget := 0, 0
	bigShardOut := filepath.Join(d, "big-shard.json")
	if !testing.Short() {
		bigCk, bigBudget = bigCheckpoint(t, filepath.Join(d, "big.checkpoint"), 129<<20) // past the 128 MiB --resume once took
		bigShardCk, bigShardBudget = bigCheckpoint(t, filepath.Join(d, "big-shard.checkpoint"), 129<<20, "--shard", "0/1")
		big0 = bigShard(t, e.shards[0], filepath.Join(d, "big0.json"), 0, 760000) // 88 MB
		big1 = bigShard(t, e.shards[1], filepath.Join(d, "big1.json"), 1, 760000)
	}

	cases := []struct {
		name  string
		args  []string
		code  int
		first []string // in the first line of stderr
		heavy bool     // left out of -short
		check func(t *testing.T, r limitedRun)
		out   string // stdout to this file
		in    string // stdin from this file
	}{
		// Crashes and hangs: readers bounded by what they read.
		{name: "gzip bomb: one huge string", args: []string{"import", str}, code: 2, first: []string{str + ":1:", "a string longer than 4.0 MiB", "--max-token-bytes"}},
		{name: "gzip bomb: a huge string in a skipped key", args: []string{"import", skipped}, code: 2, first: []string{skipped + ":1:", "--max-token-bytes"}},
		{name: "gzip bomb: an unclosed run of [", args: []string{"import", brackets}, code: 2, first: []string{brackets + ":1:", "nested deeper than 64"}},
		{name: "gzip bomb: a skipped value of many small parts", args: []string{"import", manyKeys}, code: 2, first: []string{manyKeys + ":1:", "--max-record-bytes"}},
		{name: "gzip bomb: a huge pg_config string (--flight-recorder)", args: []string{"import", "--flight-recorder", pg}, code: 2, first: []string{pg + ":1:", "--max-token-bytes"}},
		{name: "gzip bomb: a huge pg_config of many groups (--flight-recorder)", args: []string{"import", "--flight-recorder", pgMany}, code: 2, first: []string{pgMany + ":1:", "--max-record-bytes"}},
		{name: "gzip bomb: a huge string in an execution trace (--et)", args: []string{"import", trace, "--et", etStr}, code: 2, first: []string{etStr + ":1:", "--max-token-bytes"}},
		{name: "gzip of whitespace: linear", args: []string{"import", ws}, code: 2, first: []string{ws, "no kernel"}},
		{name: "10 million events", args: []string{"import", tenM}, code: 2, first: []string{tenM, fmt.Sprintf("the file has %d events, more than 4194304; raise --max-events to %d ", tenMCount, tenMCount)}, heavy: true},
		{name: "step annotations past --max-kept", args: []string{"import", steps, "--max-kept", "100000"}, code: 2, first: []string{steps, "more than 100000 step annotations", "--max-kept"}},
		{name: "CPU ops past --max-kept", args: []string{"import", ops, "--max-kept", "100000"}, code: 2, first: []string{ops, "more than 100000 operators", "--max-kept"}},
		{name: "memory events past --max-kept", args: []string{"import", mem, "--max-kept", "100000"}, code: 2, first: []string{mem, "more than 100000 memory events", "--max-kept"}},
		{name: "kernels of one correlation past --max-kept", args: []string{"import", kernels, "--max-kept", "100000"}, code: 2, first: []string{kernels, "more than 100000 device activities", "--max-kept"}},
		{name: "graph captures past --max-kept", args: []string{"import", captures, "--max-kept", "100000"}, code: 2, first: []string{captures, "more than 100000 graph captures", "--max-kept"}},
		{name: "--step-index -1", args: []string{"import", trace, "--step-index", "-1"}, code: 2, first: []string{"step index -1: want 0"}},
		// Memory limits that fire first, in each command's own knobs.
		{name: "--workers 4 of tp=256 layers=4", args: []string{"explore", "tp8-shared-expert", "--set", "tp=256", "--set", "layers=4", "--workers", "4", "--budget", "8"}, code: 2, first: []string{"--workers 4:", "the limit is", "lower --workers to"}},
		{name: "--workers 32 of tp=64 layers=8", args: []string{"explore", "tp8-shared-expert", "--set", "tp=64", "--set", "layers=8", "--workers", "32", "--budget", "64"}, code: 2, first: []string{"--workers 32:", "lower --workers to"}},
		{name: "merging two 88 MB shards", args: []string{"merge", big0, big1}, code: 0, heavy: true,
			check: func(t *testing.T, r limitedRun) { require.Contains(t, r.stdout, "schedules: 1520000") }},
		{name: "merging two 88 MB shards folds their records as they are read", args: []string{"merge", big0, big1, "--max-memory", "64MiB", "--format", "json"}, code: 0, heavy: true,
			check: func(t *testing.T, r limitedRun) { require.Contains(t, r.stdout, `"schedules": 1520000`) }},
		{name: "shards whose records are not their last key merge alike", args: []string{"merge", sorted[0], sorted[1], "--format", "json"}, code: 0,
			check: func(t *testing.T, r limitedRun) { require.Equal(t, merged, r.stdout) }},
		{name: "a checkpoint over 128 MiB resumes, its records folded as they are read", args: append(shardArgs(), "--budget", fmt.Sprint(bigBudget), "--resume", bigCk, "--max-memory", "64MiB", "--format", "json"), code: 0, heavy: true,
			check: func(t *testing.T, r limitedRun) {
				require.Contains(t, r.stdout, fmt.Sprintf(`"schedules": %d,`, bigBudget))
			}},
		{name: "a sharded checkpoint over 128 MiB resumes, its shard file printed from it", args: append(shardArgs(), "--shard", "0/1", "--budget", fmt.Sprint(bigShardBudget), "--resume", bigShardCk, "--max-memory", "64MiB"), code: 0, heavy: true, out: bigShardOut,
			check: func(t *testing.T, r limitedRun) {
				f, err := os.Open(bigShardOut)
				require.NoError(t, err)
				defer f.Close()
				st, err := f.Stat()
				require.NoError(t, err)
				require.Greater(t, st.Size(), int64(129<<20))
				tail := make([]byte, 512)
				_, err = f.ReadAt(tail, st.Size()-512)
				require.NoError(t, err)
				require.Contains(t, string(tail), fmt.Sprintf("\"index\": %d,", bigShardBudget-1))
				require.True(t, strings.HasSuffix(string(tail), "\n  }\n ]\n}\n"), string(tail))
			}},
		{name: "validate of 3,000 missing files", args: append([]string{"validate"}, missing...), code: 2, first: []string{"/nonexistent/m0.y"}},
		{name: "tensors of chunks: 4096 refused before they run", args: []string{"run", chunksFile}, code: 2, first: []string{"over the resource budget", "the chunks of the file's tensors"}},
		// Nothing overwritten.
		{name: "--checkpoint FIFO", args: append(shardArgs(), "--checkpoint", fifo), code: 2, first: []string{"not a regular file"}},
		{name: "--checkpoint over a scenario file keeps it", args: append(shardArgs(), "--checkpoint", scenario), code: 2, first: []string{"is not a checkpoint; it is kept"},
			check: func(t *testing.T, _ limitedRun) { require.Equal(t, mustRead(t, e.scenario), mustRead(t, scenario)) }},
		{name: "a killed exploration re-run without --resume continues", args: append(shardArgs(), "--checkpoint", killed), code: 0,
			check: func(t *testing.T, r limitedRun) { require.Contains(t, r.stderr, "continuing it") }},
		{name: "import -o onto the input", args: []string{"import", trace, "-o", trace}, code: 2, first: []string{"is the input"}},
		{name: "import -o onto a symlink keeps the link", args: []string{"import", trace, "-o", link}, code: 0,
			check: func(t *testing.T, _ limitedRun) {
				st, err := os.Lstat(link)
				require.NoError(t, err)
				require.Equal(t, os.ModeSymlink, st.Mode().Type())
				require.Contains(t, mustRead(t, linkTarget), "name: a_eager")
			}},
		{name: "import over a mode-600 file keeps 600", args: []string{"import", trace, "-o", mode600}, code: 0,
			check: func(t *testing.T, _ limitedRun) {
				st, err := os.Stat(mode600)
				require.NoError(t, err)
				require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
			}},
		{name: "errors name the output, not a temporary file", args: []string{"import", trace, "-o", filepath.Join(d, "no", "x.yaml")}, code: 2, first: []string{"write " + filepath.Join(d, "no", "x.yaml")},
			check: func(t *testing.T, r limitedRun) { require.NotContains(t, r.stderr, ".tmp-") }},
		// Every failure says so.
		{name: "run's text output on /dev/full", args: []string{"run", e.scenario, "--set", "budget=2"}, code: 2, first: []string{"writing the output", "no space left"}, out: "/dev/full"},
		{name: "merge's text output on /dev/full", args: []string{"merge", e.shards[0], e.shards[1]}, code: 2, first: []string{"writing the output"}, out: "/dev/full"},
		{name: "run --time bounds a budget of a million schedules per variant", args: []string{"run", "tp8-shared-expert", "--set", "budget=1000000", "--time", "1s", "--no-expect"}, code: 0,
			check: func(t *testing.T, r limitedRun) {
				require.Contains(t, r.stdout, "incomplete: --time 1s ran out: variant")
			}},
		{name: "gemm(2^40, 2^40, 2^40) is an error at its line", args: []string{"validate", gemm}, code: 2, first: []string{gemm + ":", "out of range: gemm(1099511627776"}},
		{name: "a UTF-8 BOM is no part of a key", args: []string{"validate", bom}, code: 0},
		{name: "a repeat that expands too far says so first", args: []string{"validate", repeat}, code: 2, first: []string{repeat + ":", "ops to run per rank (repeated blocks expanded, over replays)"},
			check: func(t *testing.T, r limitedRun) { require.NotContains(t, r.stderr, "has no program") }},
		{name: "a 350 KB expression is not echoed whole", args: []string{"validate", longExpr}, code: 2, first: []string{longExpr + ":", "expression of 350001 characters"},
			check: func(t *testing.T, r limitedRun) { require.Less(t, len(r.stderr), 1000) }},
		{name: "an 11-day kernel is refused at its event, not blamed on the importer", args: []string{"import", longKernel}, code: 2, first: []string{longKernel + ": event ", "longer than a scenario's longest time (1 h)"},
			check: func(t *testing.T, r limitedRun) { require.NotContains(t, r.stderr, "importer bug") }},
		{name: "a 2 h host pause in the step is refused at its kernel, not blamed on the importer", args: []string{"import", paused}, code: 2, first: []string{paused + ": event ", "the host waits 7200 s before kernel", "longer than a scenario's longest time (1 h)"}},
		{name: "import - reads standard input", args: []string{"import", "-"}, in: trace, code: 0,
			check: func(t *testing.T, r limitedRun) { require.Contains(t, r.stdout, "name: stdin") }},
		{name: "run --witness - writes the witness to stdout, the summary to stderr", args: []string{"run", "tp8-shared-expert", "--variant", "buggy", "--set", "layers=1", "--witness", "-"}, code: 0,
			check: func(t *testing.T, r limitedRun) {
				require.True(t, strings.HasPrefix(r.stdout, "{\n \"version\": 1,"), r.stdout[:min(len(r.stdout), 200)])
				require.Contains(t, r.stderr, "== buggy: corruption")
			}},
		{name: "explore --trace - writes the timeline to stdout", args: append(shardArgs(), "--trace", "-"), code: 0,
			check: func(t *testing.T, r limitedRun) {
				require.True(t, strings.HasPrefix(r.stdout, `{"traceEvents":[`), r.stdout[:min(len(r.stdout), 200)])
				require.Contains(t, r.stderr, "verdict: race")
			}},
		{name: "two outputs on - are refused", args: []string{"run", "tp8-shared-expert", "--set", "layers=1", "--trace", "-", "--html", "-"}, code: 2, first: []string{"2 of them are - (standard output)"}},
		{name: "--checkpoint - is refused", args: append(shardArgs(), "--checkpoint", "-"), code: 2, first: []string{"--checkpoint -", "name a file"}},
		{name: "merge reads shards whose seeds are numbers (earlier versions)", args: []string{"merge", numeric[0], numeric[1], "--format", "json"}, code: 0,
			check: func(t *testing.T, r limitedRun) { require.Equal(t, merged, r.stdout) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.heavy && testing.Short() {
				t.Skip("heavy: left out of -short")
			}
			r := runLimited(t, c.in, c.out, c.args...)
			require.Equal(t, c.code, r.code, "stdout:\n%.2000s\nstderr:\n%.2000s", r.stdout, r.stderr)
			first, _, _ := strings.Cut(r.stderr, "\n")
			for _, w := range c.first {
				require.Contains(t, first, w)
			}
			if c.code == 2 {
				require.True(t, strings.HasPrefix(first, "simctl: "), first)
			}
			for _, bad := range []string{"goroutine ", "panic", "fatal error", "runtime."} {
				require.NotContains(t, r.stderr, bad)
			}
			require.Less(t, r.cpu, 10*time.Second, "CPU time")
			require.Less(t, r.maxRSS, int64(2<<30), "peak memory")
			if c.check != nil {
				c.check(t, r)
			}
			t.Logf("%.2fs CPU, %d MiB peak", r.cpu.Seconds(), r.maxRSS>>20)
		})
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}
