package report_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/report"
	"github.com/collsim/collsim/scenarios"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// smallSets shrink tp8-shared-expert to 4 ranks, one layer, one replay and
// forced MULTIMEM: the same bug, small enough to golden.
var smallSets = []string{"tp=4", "strategy=multimem", "layers=1", "replays=1", "chunks=2", "budget=20"}

// buildSmall runs the buggy and fixed variants with smallSets and captures
// their traced schedules.
func buildSmall(t testing.TB) *report.Data {
	t.Helper()
	sc, ok := scenarios.Lookup("tp8-shared-expert")
	require.True(t, ok)
	var vrs []*check.VariantReport
	for _, name := range []string{"buggy", "fixed"} {
		v, ok := sc.Variant(name)
		require.True(t, ok)
		vr, err := check.RunVariant(sc, v, check.Options{Extra: smallSets})
		require.NoError(t, err)
		vrs = append(vrs, vr)
	}
	d, err := report.Build(sc, vrs)
	require.NoError(t, err)
	return d
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./report -update to create it")
	if string(want) == string(got) {
		return
	}
	wl, gl := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := 0; i < max(len(wl), len(gl)); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			t.Fatalf("%s differs from line %d:\nwant: %s\ngot:  %s\nif the change is intended, run go test ./report -update", path, i+1, w, g)
		}
	}
}

func TestGolden(t *testing.T) {
	d := buildSmall(t)
	var tr bytes.Buffer
	require.NoError(t, report.WriteTrace(&tr, d))
	golden(t, "small.trace.json", tr.Bytes())
	data, err := json.MarshalIndent(d, "", " ")
	require.NoError(t, err)
	golden(t, "small.data.json", append(data, '\n'))
}

// TestDeterministic builds the report twice and compares bytes (the trace
// and the rendered page).
func TestDeterministic(t *testing.T) {
	render := func() (string, string) {
		d := buildSmall(t)
		var tr, page bytes.Buffer
		require.NoError(t, report.WriteTrace(&tr, d))
		require.NoError(t, report.WriteHTML(&page, d))
		return tr.String(), page.String()
	}
	t1, h1 := render()
	t2, h2 := render()
	require.Equal(t, t1, t2)
	require.Equal(t, h1, h2)
}

type traceFile struct {
	TraceEvents []struct {
		Name string          `json:"name"`
		Cat  string          `json:"cat"`
		Ph   string          `json:"ph"`
		Ts   float64         `json:"ts"`
		Dur  float64         `json:"dur"`
		Pid  int             `json:"pid"`
		Tid  int             `json:"tid"`
		ID   int             `json:"id"`
		Bp   string          `json:"bp"`
		Args json.RawMessage `json:"args"`
	} `json:"traceEvents"`
	DisplayTimeUnit string `json:"displayTimeUnit"`
}

func TestTraceShape(t *testing.T) {
	d := buildSmall(t)
	var buf bytes.Buffer
	require.NoError(t, report.WriteTrace(&buf, d))
	var tf traceFile
	require.NoError(t, json.Unmarshal(buf.Bytes(), &tf))

	// One process per rank and variant; one thread per stream plus the host.
	procs := map[int]string{}
	threads := map[[2]int]string{}
	for _, e := range tf.TraceEvents {
		var a struct{ Name string }
		switch {
		case e.Ph == "M" && e.Name == "process_name":
			require.NoError(t, json.Unmarshal(e.Args, &a))
			procs[e.Pid] = a.Name
		case e.Ph == "M" && e.Name == "thread_name":
			require.NoError(t, json.Unmarshal(e.Args, &a))
			threads[[2]int{e.Pid, e.Tid}] = a.Name
		}
	}
	require.Len(t, procs, 2*4)
	for vi, v := range d.Variants {
		for r := range v.Ranks {
			pid := vi*report.PidStride + r
			require.Equal(t, "rank "+strconv.Itoa(r)+" · "+v.Name+" ("+v.Verdict+")", procs[pid])
			require.Equal(t, "host", threads[[2]int{pid, 0}])
			require.Equal(t, "stream main", threads[[2]int{pid, 1}])
			require.Equal(t, "stream aux", threads[[2]int{pid, 2}])
		}
	}

	// Every slice lies on a named thread; every flow start has its finish.
	starts, finishes := map[int]int{}, map[int]int{}
	slices := map[string]int{}
	for _, e := range tf.TraceEvents {
		switch e.Ph {
		case "X":
			require.Contains(t, threads, [2]int{e.Pid, e.Tid}, e.Name)
			if e.Cat == "record" || e.Cat == "wait" {
				require.Zero(t, e.Dur, e.Name)
			} else {
				require.Greater(t, e.Dur, 0.0, e.Name)
			}
			slices[e.Cat]++
		case "s":
			starts[e.ID]++
		case "f":
			require.Equal(t, "e", e.Bp)
			finishes[e.ID]++
		}
	}
	require.Equal(t, starts, finishes)
	checkNesting(t, tf)
	require.NotZero(t, slices["allreduce/multimem"])
	require.NotZero(t, slices["phase"])
	require.NotZero(t, slices["record"])

	// The buggy variant's findings are instants on the lanes of the racing
	// kernels, which are kernels of the two all-reduces (each a copy-in, the
	// multimem_all_reduce_ and a copy-out: collectives/multimem.go) on
	// different streams.
	buggy := d.Variants[0]
	require.Equal(t, "corruption", buggy.Verdict)
	require.NotNil(t, buggy.Seed, "exploration found a worse schedule than nominal")
	var race *report.Finding
	for i := range buggy.Findings {
		if buggy.Findings[i].Kind == "race" {
			race = &buggy.Findings[i]
			break
		}
	}
	require.NotNil(t, race)
	require.Len(t, race.Spans, 2)
	a, b := buggy.Spans[race.Spans[0]], buggy.Spans[race.Spans[1]]
	require.NotEqual(t, buggy.Lanes[a.Lane].Stream, buggy.Lanes[b.Lane].Stream, "a cross-stream race")
	call := func(name string) string { return strings.SplitN(name, ".copy_", 2)[0] }
	require.ElementsMatch(t, []string{"L0.shared_ar", "L0.routed_ar"}, []string{call(a.Name), call(b.Name)})
	instants := 0
	for _, e := range tf.TraceEvents {
		if e.Ph == "i" && e.Cat == "finding.race" && e.Pid < report.PidStride {
			instants++
		}
	}
	require.NotZero(t, instants)

	// Mis-consumed signals are flows marked as mismatches, and only in the
	// buggy variant.
	mis := func(v *report.Variant) int {
		n := 0
		for _, f := range v.Flows {
			if f.Mismatch {
				n++
				require.Equal(t, "signal", f.Kind)
				require.NotEqual(t, v.Colls[v.Spans[f.From].Coll], v.Colls[v.Spans[f.To].Coll])
			}
		}
		return n
	}
	require.NotZero(t, mis(buggy))
	require.Zero(t, mis(d.Variants[1]))

	// Expected vs observed: each corrupted rank lists foreign terms, and the
	// span that stored the value is an all-reduce's (a MULTIMEM all-reduce's
	// output is stored by its copy-out kernel).
	require.NotEmpty(t, buggy.Values)
	for _, vd := range buggy.Values {
		require.NotEqual(t, vd.Expected, vd.Observed)
		require.NotEmpty(t, vd.Extra, "the observed value has terms the reference does not")
		require.GreaterOrEqual(t, vd.WrittenBy, 0)
		sp := buggy.Spans[vd.WrittenBy]
		require.True(t, strings.HasPrefix(sp.Kind, "allreduce/") || strings.HasSuffix(sp.Name, ".copy_out"), "%s (%s)", sp.Name, sp.Kind)
	}
	require.Empty(t, d.Variants[1].Values)
	require.Empty(t, d.Variants[1].Findings)
}

// checkNesting checks what trace viewers need: on each thread, complete
// slices nest properly (a slice lies inside another or after it), and every
// flow event lies inside a slice of its thread, so it has one to bind to.
func checkNesting(t *testing.T, tf traceFile) {
	t.Helper()
	ns := func(us float64) int64 { return int64(math.Round(us * 1000)) }
	type slice struct{ start, end int64 }
	byThread := map[[2]int][]slice{}
	for _, e := range tf.TraceEvents {
		if e.Ph == "X" {
			k := [2]int{e.Pid, e.Tid}
			byThread[k] = append(byThread[k], slice{ns(e.Ts), ns(e.Ts) + ns(e.Dur)})
		}
	}
	for k, ss := range byThread {
		sort.SliceStable(ss, func(i, j int) bool {
			if ss[i].start != ss[j].start {
				return ss[i].start < ss[j].start
			}
			return ss[i].end > ss[j].end
		})
		var stack []slice
		for _, s := range ss {
			for len(stack) > 0 && stack[len(stack)-1].end <= s.start && !(stack[len(stack)-1].end == s.start && s.end == s.start && stack[len(stack)-1].start == s.start) {
				stack = stack[:len(stack)-1]
			}
			if len(stack) > 0 {
				top := stack[len(stack)-1]
				require.LessOrEqual(t, s.end, top.end, "thread %v: slice [%d,%d] overlaps [%d,%d] without nesting", k, s.start, s.end, top.start, top.end)
			}
			stack = append(stack, s)
		}
	}
	for _, e := range tf.TraceEvents {
		if e.Ph != "s" && e.Ph != "f" {
			continue
		}
		at, found := ns(e.Ts), false
		for _, s := range byThread[[2]int{e.Pid, e.Tid}] {
			if s.start <= at && (at < s.end || s.start == s.end) {
				found = true
				break
			}
		}
		require.True(t, found, "flow %d (%s) at %dns on %d/%d has no enclosing slice", e.ID, e.Ph, at, e.Pid, e.Tid)
	}
}

// TestPlainKernelProvenance: a plain kernel's output is a source of its
// own, so its expected and observed provenance name the same term; the
// missing and foreign columns then name the bytes the root cause found
// (whose they should have been, whose they were), and the cause is there.
func TestPlainKernelProvenance(t *testing.T) {
	path := filepath.Join("..", "check", "testdata", "aux-use-after-free.yaml")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	sc, err := scenarios.Load(path, data)
	require.NoError(t, err)
	v, ok := sc.Variant("buggy")
	require.True(t, ok)
	vr, err := check.RunVariant(sc, v, check.Options{})
	require.NoError(t, err)
	rv, err := report.Capture(sc, vr)
	require.NoError(t, err)
	require.Len(t, rv.Values, 1)
	d := rv.Values[0]
	require.Equal(t, d.ExpectedProv, d.ObservedProv, "a plain kernel's output: one term both ways")
	require.Equal(t, []string{"y[0] as make_y wrote it"}, d.Missing)
	require.Equal(t, []string{"y[0] as make_x wrote x over it"}, d.Extra)
	require.Contains(t, d.Cause, "Missing: a record_stream of y on stream aux")
}
