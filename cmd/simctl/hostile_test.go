package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// hostileEnv is what the hostile-input cases share: a directory with a
// valid scenario file and, made once, the shard files of one small
// exploration.
type hostileEnv struct {
	dir      string
	scenario string // a copy of docs/examples/two-stream.yaml
	shards   []string
}

func newHostileEnv(t *testing.T) *hostileEnv {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "examples", "two-stream.yaml"))
	require.NoError(t, err)
	e := &hostileEnv{dir: dir, scenario: filepath.Join(dir, "two-stream.yaml")}
	require.NoError(t, os.WriteFile(e.scenario, data, 0o644))
	for _, sh := range []string{"0/2", "1/2"} {
		code, out, stderr := simctl(t, append(shardArgs(), "--shard", sh)...)
		require.Equal(t, 0, code, stderr)
		f := filepath.Join(dir, "shard-"+sh[:1]+".json")
		require.NoError(t, os.WriteFile(f, []byte(out), 0o644))
		e.shards = append(e.shards, f)
	}
	return e
}

func shardArgs() []string {
	return []string{"explore", "tp8-shared-expert", "--variant", "buggy", "--budget", "8", "--set", "layers=1", "--set", "tp=2", "--set", "strategy=p2p-oneshot"}
}

// write puts data in a new file of the environment.
func (e *hostileEnv) write(t *testing.T, name, data string) string {
	t.Helper()
	p := filepath.Join(e.dir, name)
	require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
	return p
}

// editShard rewrites shard file i through f (on its decoded JSON).
func (e *hostileEnv) editShard(t *testing.T, i int, name string, f func(map[string]any)) string {
	t.Helper()
	data, err := os.ReadFile(e.shards[i])
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(data, &doc))
	f(doc)
	out, err := json.Marshal(doc)
	require.NoError(t, err)
	return e.write(t, name, string(out))
}

func records(doc map[string]any) []any { return doc["records"].([]any) }

// TestHostileInputs: one case per way the issue (#18) found to take simctl
// down, lose work or mislead; each must end in < 2 s with the exit status
// and message given (file and line, or the knob to lower), and never a
// panic or a Go runtime error. Big inputs are generated here. Run it under
// an address-space limit with:
//
//	go test -c -o /tmp/simctl.test ./cmd/simctl && (ulimit -v 2097152; /tmp/simctl.test -test.run 'TestHostileInputs|TestCheckpointSurvivesSIGKILL')
func TestHostileInputs(t *testing.T) {
	e := newHostileEnv(t)
	deepBlock := e.write(t, "deep-block.yaml", strings.Repeat("- ", 64000)+"x\n") // 128 KB
	apostrophe := e.write(t, "apostrophe.yaml", "name: it's\ndescription: "+strings.Repeat("[", 40)+strings.Repeat("]", 40)+"\n")
	blockQuote := e.write(t, "block-quote.yaml", "name: a\ndescription: |\n  say \"hi\nranks: "+strings.Repeat("{", 40)+"\n")
	forty, err := os.ReadFile(e.scenario)
	require.NoError(t, err)
	fortyOK := e.write(t, "forty.yaml", strings.Replace(string(forty), "description: |-\n", "description: |-\n  "+strings.Repeat("[", 40)+"\n", 1))
	big := e.write(t, "big.yaml", "name: big\n#"+strings.Repeat("x", 2<<20)+"\n")
	fifo := filepath.Join(e.dir, "fifo.yaml")
	if runtime.GOOS != "windows" {
		require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	}
	witnessTo := func(name, scenario string) string {
		return e.write(t, name, `{"version": 1, "scenario": "`+scenario+`", "variant": "buggy", "sets": [], "strategy": "random", "mode": "timed",
 "seed": 1, "schedule": 0, "verdict": "ok", "kinds": [], "trace_hash": "", "deviations": 0, "choices": []}`)
	}
	hugeCount := e.editShard(t, 0, "huge-count.json", func(d map[string]any) { d["shard"] = map[string]any{"index": 0, "count": 1 << 40} })
	cut := e.editShard(t, 1, "cut.json", func(d map[string]any) { d["records"] = records(d)[:2] })
	cutSaid := e.editShard(t, 1, "cut-said.json", func(d map[string]any) { d["records"], d["cut"] = records(d)[:2], true })
	dup := e.editShard(t, 1, "dup.json", func(d map[string]any) { r := records(d); r[1] = r[0] })
	gap := e.editShard(t, 1, "gap.json", func(d map[string]any) { r := records(d); d["records"] = append(r[:1:1], r[2:]...) })
	verdict := e.editShard(t, 1, "verdict.json", func(d map[string]any) { records(d)[1].(map[string]any)["verdict"] = "fine" })
	outside := e.editShard(t, 1, "outside.json", func(d map[string]any) { records(d)[1].(map[string]any)["index"] = 99 })
	// Shards whose verdict misses the variant's expectation (corruption
	// expected; a workspace per call makes it ok): explore exits 1, so
	// merge must too.
	var unmet []string
	for _, sh := range []string{"0/2", "1/2"} {
		code, out, _ := simctl(t, append(shardArgs(), "--set", "workspace=per-call", "--shard", sh)...)
		require.Equal(t, 0, code)
		unmet = append(unmet, e.write(t, "unmet-"+sh[:1]+".json", out))
	}
	esc := e.write(t, "esc.yaml", strings.Replace(string(forty), "name: two-stream", "name: \"two\\e[31mstream\"", 1))
	escTensor := e.write(t, "esc-tensor.yaml", strings.ReplaceAll(string(forty), "a_sum", `"a\e[2Jsum"`))
	notDir := e.write(t, "plain", "x")

	cases := []struct {
		name string
		args []string
		code int
		want []string // in stderr (or stdout for exit 0 and 1)
		skip bool
	}{
		// YAML front end (scenarios/format/yamlscan.go)
		{"128 KB of nested block sequences", []string{"validate", deepBlock}, 2, []string{deepBlock + ":1:", "nesting deeper than 32"}, false},
		{"apostrophe in a plain scalar does not hide what follows", []string{"validate", apostrophe}, 2, []string{apostrophe + ":2:", "nesting deeper than 32"}, false},
		{"unbalanced quote in a block scalar does not hide what follows", []string{"validate", blockQuote}, 2, []string{blockQuote + ":4:", "nesting deeper than 32"}, false},
		{"forty [ in a description block are text", []string{"validate", fortyOK}, 0, nil, false},
		// reading files (input.go)
		{"/dev/zero as a scenario", []string{"run", "/dev/zero"}, 2, []string{"/dev/zero", "not a regular file"}, runtime.GOOS != "linux"},
		{"a FIFO as a scenario does not block", []string{"validate", fifo}, 2, []string{fifo, "not a regular file"}, runtime.GOOS == "windows"},
		{"a scenario over 1 MiB", []string{"validate", big}, 2, []string{big, "at most 1048576"}, false},
		{"/dev/zero as a witness", []string{"replay", "/dev/zero"}, 2, []string{"not a regular file"}, runtime.GOOS != "linux"},
		{"a witness naming /dev/zero", []string{"replay", witnessTo("w-zero.json", "/dev/zero")}, 2, []string{"outside its own directory; pass --allow-path"}, false},
		{"a witness naming /dev/zero, allowed", []string{"replay", "--allow-path", witnessTo("w-zero2.json", "/dev/zero")}, 2, []string{"not a regular file"}, runtime.GOOS != "linux"},
		{"a witness climbing out of its directory", []string{"replay", witnessTo("w-up.json", "../../etc/passwd.yaml")}, 2, []string{"outside its own directory"}, false},
		{"/dev/zero as a shard file", []string{"merge", "/dev/zero"}, 2, []string{"not a regular file"}, runtime.GOOS != "linux"},
		// sizes from the input (explore/shard.go, explore.go flags)
		{"a shard count of 2^40", []string{"merge", hugeCount, e.shards[1]}, 2, []string{"needs 1099511627776 shard files, 2 given"}, false},
		// The fixed variant: its verdict is ok however few schedules --time
		// lets run on a loaded machine, so the exit status does not hang on
		// the clock (the buggy one exits 1 when no schedule got to the bug).
		{"--budget 2000000000 sizes nothing", []string{"explore", "tp8-shared-expert", "--variant", "fixed", "--set", "layers=1", "--set", "tp=2", "--set", "strategy=p2p-oneshot", "--budget", "2000000000", "--time", "300ms", "--checkpoint", filepath.Join(e.dir, "big.ckpt")}, 0, []string{"incomplete:", "of 2000000000 schedules"}, false},
		{"--workers 10000000", []string{"explore", "tp8-shared-expert", "--workers", "10000000"}, 2, []string{"--workers 10000000: want 1 to 1024"}, false},
		// the resource budget (scenarios/budget.go)
		{"dp counts: tp=1024 dp=4 layers=256", []string{"run", "tp8-shared-expert", "--set", "tp=1024", "--set", "dp=4", "--set", "layers=256"}, 2, []string{"over the resource budget", "4096 ranks", "lower tp (now 1024)"}, false},
		// A programs file's world is tp ranks: dp changes nothing there, so
		// it is refused as unread before the budget would count it.
		{"a file's programs do not read dp", []string{"explore", e.scenario, "--set", "dp=1024", "--max-memory", "256MiB"}, 2, []string{`dp=1024: knob "dp" is not read by scenario two-stream's form (programs)`, "knobs it reads: arch, budget, chunks"}, false},
		{"a run that grows past --max-memory is refused before it starts", []string{"explore", "tp8-shared-expert", "--set", "tp=64", "--set", "dp=16", "--set", "layers=4", "--max-memory", "100MiB"}, 2, []string{"would need an estimated", "the limit is 100.0 MiB"}, false},
		// merge verifies (explore/shard.go)
		{"merge: a missing shard", []string{"merge", e.shards[0]}, 2, []string{"incomplete: a 2-way split needs 2 shard files, 1 given; missing shard 1/2"}, false},
		{"merge: a shard cut short without saying so", []string{"merge", e.shards[0], cut}, 2, []string{cut, "holds 2 of its 4 schedules", "truncated"}, false},
		{"merge: a shard cut by --time", []string{"merge", e.shards[0], cutSaid}, 0, []string{"incomplete: 6 of 8 schedules", "verdict: race"}, false},
		{"merge: a duplicated record", []string{"merge", e.shards[0], dup}, 2, []string{dup, "record 2 is schedule 1; want schedule 3"}, false},
		{"merge: a record missing in the middle", []string{"merge", e.shards[0], gap}, 2, []string{gap, "want schedule 3"}, false},
		{"merge: an unknown verdict", []string{"merge", e.shards[0], verdict}, 2, []string{verdict, `verdict "fine"`}, false},
		{"merge: a record not its shard's", []string{"merge", e.shards[0], outside}, 2, []string{outside, "schedule 99, which is not its own"}, false},
		{"merge: exit 1 where explore exits 1", []string{"merge", unmet[0], unmet[1]}, 1, []string{"verdict: ok"}, false},
		// atomic outputs, summary first (atomic.go)
		{"an unwritable --witness keeps the summary", []string{"explore", "tp8-shared-expert", "--variant", "buggy", "--set", "layers=1", "--budget", "4", "--witness", filepath.Join(notDir, "w.json")}, 2, []string{"verdict: race", "--witness", "not a directory"}, false},
		// terminal safety (input.go)
		{"control characters in a scenario's name", []string{"run", esc, "--set", "budget=0", "--no-expect"}, 0, []string{`two\x1b[31mstream`}, false},
		{"control characters in a tensor's name, in findings", []string{"run", escTensor, "--no-expect"}, 0, []string{`a\x1b[2Jsum`}, false},
		{"control characters in a file name", []string{"validate", filepath.Join(e.dir, "no\x1b[2Jsuch.yaml")}, 2, []string{`no\x1b[2Jsuch.yaml`}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.skip {
				t.Skip("not on " + runtime.GOOS)
			}
			start := time.Now()
			code, stdout, stderr := simctl(t, c.args...)
			took := time.Since(start)
			require.Equal(t, c.code, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			for _, w := range c.want {
				require.Contains(t, stdout+stderr, w)
			}
			require.NotContains(t, stderr, "goroutine ")
			require.NotContains(t, stderr, "panic")
			require.NotContains(t, stdout+stderr, "\x1b", "no raw escape reaches the terminal")
			// A hostile input must be refused, not waited on: a blocked
			// read never returns. Each case takes well under a second
			// alone; the bound is wide so a loaded machine does not fail it.
			require.Less(t, took, 30*time.Second)
		})
	}
}
