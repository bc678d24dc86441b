package scenarios_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// quick keeps exploration short in tests: the nominal schedule plus a few
// random ones is enough to compare two builds of one scenario.
var quick = []string{"budget=3"}

// sameReports runs every variant of a and b and requires identical
// verdicts, trace hashes, witnesses, findings and notes.
func sameReports(t *testing.T, a, b *scenarios.Scenario, extra []string) {
	t.Helper()
	require.Equal(t, len(a.Variants), len(b.Variants))
	for i, va := range a.Variants {
		vb := b.Variants[i]
		ra, err := check.RunVariant(a, va, check.Options{Extra: extra})
		require.NoError(t, err, "variant %s", va.Name)
		rb, err := check.RunVariant(b, vb, check.Options{Extra: extra})
		require.NoError(t, err, "variant %s", vb.Name)
		require.Equal(t, ra.Name, rb.Name)
		require.Equal(t, ra.Expect, rb.Expect, "variant %s", va.Name)
		require.Equal(t, ra.Verdict, rb.Verdict, "variant %s", va.Name)
		require.Equal(t, ra.TraceHash, rb.TraceHash, "variant %s", va.Name)
		require.Equal(t, ra.WitnessSeed, rb.WitnessSeed, "variant %s", va.Name)
		require.Equal(t, ra.WitnessHash, rb.WitnessHash, "variant %s", va.Name)
		require.Equal(t, ra.StepTimeNs, rb.StepTimeNs, "variant %s", va.Name)
		require.Equal(t, ra.Findings, rb.Findings, "variant %s", va.Name)
		require.Equal(t, ra.Notes, rb.Notes, "variant %s", va.Name)
		require.Equal(t, ra.Config, rb.Config, "variant %s", va.Name)
	}
}

// TestBuiltinsRoundTrip exports every built-in as YAML, loads the file back
// and requires the same verdicts and trace hashes. A built-in made by a Go
// builder the format cannot describe must say so with ErrNotExpressible.
func TestBuiltinsRoundTrip(t *testing.T) {
	for _, name := range scenarios.Names() {
		t.Run(name, func(t *testing.T) {
			sc, ok := scenarios.Lookup(name)
			require.True(t, ok)
			data, err := scenarios.ExportYAML(sc)
			if errors.Is(err, scenarios.ErrNotExpressible) {
				require.Nil(t, sc.Spec, "a scenario loaded from a file is always expressible")
				require.Contains(t, err.Error(), name)
				t.Skipf("%s is marked not expressible: %v", name, err)
			}
			require.NoError(t, err)
			back, err := scenarios.Load(name+".yaml", data)
			require.NoError(t, err, "exported YAML:\n%s", data)
			require.Equal(t, sc.Name, back.Name)
			require.Equal(t, sc.Description, back.Description)
			require.Equal(t, sc.Base, back.Base)
			require.Equal(t, sc.Variants, back.Variants)
			again, err := scenarios.ExportYAML(back)
			require.NoError(t, err)
			require.Equal(t, string(data), string(again), "export is a fixpoint")
			sameReports(t, sc, back, quick)
		})
	}
}

// goTP8 is tp8-shared-expert as it was defined in Go before it became
// builtin/tp8-shared-expert.yaml.
func goTP8() *scenarios.Scenario {
	return &scenarios.Scenario{
		Name: "tp8-shared-expert",
		Base: scenarios.Config{
			TP: 8, Arch: "sm100", Mode: "graph", Phase: "decode", Strategy: "auto", Workspace: "shared",
			Placement: "buggy", Order: "shared-first", Shared: "trailing", Layers: 2, Replays: 2,
			Tokens: 8, Hidden: 8192, Chunks: 4, Seed: 1, Budget: 200,
		},
		Variants: []scenarios.Variant{
			// (expected corruption until the routed MoE took its measured
			// durations: now race|corruption, see the YAML file)
			{Name: "buggy", Expect: "race|corruption"},
			{Name: "fixed", Sets: []string{"placement=fixed"}, Expect: "ok"},
			{Name: "fixed-overlap", Sets: []string{"placement=fixed-overlap"}, Expect: "ok"},
			{Name: "tp4-buggy", Sets: []string{"tp=4"}, Expect: "ok"},
			{Name: "prefill-buggy", Sets: []string{"phase=prefill", "tokens=2048"}, Expect: "ok"},
			{Name: "eager-buggy", Sets: []string{"mode=eager"}, Expect: "race|corruption"},
		},
		Build: scenarios.BuildMoE,
	}
}

// TestTP8YAMLMatchesGo checks the embedded YAML against the Go definition it
// replaced, and the nominal trace hashes against the ones the Go definition
// printed (simctl run tp8-shared-expert --format json at commit 8ef31b3).
func TestTP8YAMLMatchesGo(t *testing.T) {
	y, ok := scenarios.Lookup("tp8-shared-expert")
	require.True(t, ok)
	require.NotNil(t, y.Spec, "tp8-shared-expert is loaded from its YAML file")
	g := goTP8()
	require.Equal(t, g.Base, y.Base)
	for i := range g.Variants {
		require.Equal(t, g.Variants[i].Name, y.Variants[i].Name)
		require.Equal(t, g.Variants[i].Sets, y.Variants[i].Sets)
		require.Equal(t, g.Variants[i].Expect, y.Variants[i].Expect)
	}
	// Nominal trace hashes of the original Go definition (re-pinned when the
	// trace hash function changed to a word-wise mix, and tp4-buggy's when
	// the NCCL ring became NCCL's fused receive-reduce-send steps, and again
	// when it lost its copy-in to read the input where it is; eager-buggy's
	// when eager ops took their measured host issue costs, ranks/gpu/hw.go; the
	// graph variants' when each replay got inputs of its own, re-filled
	// between replays: ranks/replays.go; the MULTIMEM variants' when a
	// MULTIMEM all-reduce became TensorRT-LLM's three kernels,
	// collectives/multimem.go; every variant's when concurrent kernels
	// began to share their GPU, graph nodes to pay the measured gap, and
	// the routed MoE became TensorRT-LLM's measured kernels: ranks/share.go,
	// ranks/gpu/hw.go MeasuredMoEDecode).
	want := map[string]string{
		"buggy": "6413451704d17f35", "fixed": "7e87bde6f3d1143a", "fixed-overlap": "ef23d8fdd4d22c00",
		"tp4-buggy": "7781ae65de533561", "prefill-buggy": "e9807e5d83b44b8c", "eager-buggy": "30833fa5d0d2d1ac",
	}
	for _, v := range y.Variants {
		rep, err := check.RunVariant(y, v, check.Options{Extra: []string{"budget=0"}})
		require.NoError(t, err)
		require.Equal(t, want[v.Name], rep.TraceHash, "variant %s", v.Name)
	}
	gy := *g
	gy.Variants = y.Variants
	gy.Description = y.Description
	sameReports(t, &gy, y, quick)
}

// TestExamples runs every file under docs/examples and requires each
// variant to meet its expected verdict.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob("../docs/examples/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			sc, err := scenarios.Load(f, data)
			require.NoError(t, err)
			for _, v := range sc.Variants {
				rep, err := check.RunVariant(sc, v, check.Options{Extra: []string{"budget=5"}})
				require.NoError(t, err)
				require.True(t, rep.Met, "variant %s: expected %s, got %s", v.Name, v.Expect, rep.Verdict)
			}
			out, err := scenarios.ExportYAML(sc)
			require.NoError(t, err)
			back, err := scenarios.Load(f, out)
			require.NoError(t, err, "exported:\n%s", out)
			sameReports(t, sc, back, []string{"budget=2"})
		})
	}
}

// TestScenarioFiles runs the scenario files under testdata/ok: each loads,
// and each variant meets its expected verdict. They cover the forms and
// mechanics the example does not: a rank-divergent collective order, a user
// op graph with a placement, per-rank initial values.
func TestScenarioFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/ok/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			sc, err := scenarios.Load(f, data)
			require.NoError(t, err)
			for _, v := range sc.Variants {
				rep, err := check.RunVariant(sc, v, check.Options{Extra: []string{"budget=5"}})
				require.NoError(t, err)
				require.True(t, rep.Met, "variant %s: expected %s, got %s: %v", v.Name, v.Expect, rep.Verdict, rep.Findings)
			}
			out, err := scenarios.ExportYAML(sc)
			require.NoError(t, err)
			back, err := scenarios.Load(f, out)
			require.NoError(t, err, "exported:\n%s", out)
			sameReports(t, sc, back, []string{"budget=1"})
		})
	}
}

// TestParseErrors checks that problems are reported at their position,
// several at once.
func TestParseErrors(t *testing.T) {
	const head = "name: t\nranks: 2\nvariants: [{name: a}]\n"
	tests := []struct {
		name string
		src  string
		want []string // "line:col: substring"
	}{
		{"syntax", "name: [t\n", []string{"1:7: YAML syntax"}},
		{"empty", "", []string{"1:1: empty file"}},
		{"not a mapping", "- 1\n", []string{"1:1: scenario: expected a mapping"}},
		{"unknown key", head + "colour: red\n", []string{"4:1: unknown key \"colour\" in scenario; expected one of: name, description"}},
		{"wrong type", "name: t\nranks: two\nvariants: [{name: a}]\ngraph: {builder: moe}\n", []string{"2:8: ranks: expected an integer"}},
		{"several", head + "graph: {builder: moe}\nmode: fast\nreplays: 0\n", []string{"5:7: mode: mode=\"fast\"", "6:10: replays"}},
		{"undefined stream and tensor", head + "tensors: [{name: x, bytes: 8}]\nprograms:\n  - ranks: all\n    ops:\n      - {kernel: k, stream: side, writes: [y]}\n",
			[]string{"8:29: kernel \"k\" on undefined stream \"side\"", "8:44: kernel \"k\" writes undefined tensor \"y\""}},
		{"wait before record", head + "programs:\n  - ranks: all\n    events: [e]\n    ops:\n      - {wait: e}\n      - {record: e}\n",
			[]string{"8:16: wait on event \"e\", which is never recorded before it"}},
		{"comm excludes rank", head + "communicators: [{name: c, ranks: [0]}]\ntensors: [{name: x, bytes: 8}]\nprograms:\n  - ranks: all\n    ops:\n      - {allreduce: ar, comm: c, in: x, out: x}\n",
			[]string{"9:31: allreduce \"ar\" on rank 1 uses communicator \"c\", which does not include rank 1"}},
		{"variant breaks ranks", "name: t\nranks: 2\ncommunicators: [{name: c, ranks: [0, 1]}]\ntensors: [{name: x, bytes: 8}]\nprograms: [{ranks: all, ops: []}]\nvariants:\n  - name: small\n    set: {ranks: 1}\n",
			[]string{"8:11: variant \"small\": with tp=1, communicator \"c\": rank 1 is out of range"}},
		{"limit", "name: t\nranks: 65\nvariants: [{name: a}]\ngraph: {builder: moe}\n", []string{"2:8: ranks: 65 is out of range"}},
		{"anchor redefined around its own alias (terminates)", "name: t\nranks: 1\na: &a 1\nb: &a [*a]\nvariants: *a\n", []string{"3:1: unknown key \"a\""}},
		{"alias before its anchor", "name: *n\nranks: 2\nvariants: [{name: a}]\ngraph: {builder: moe}\n", []string{"1:7: YAML alias *n names no anchor defined before it"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := scenarios.LoadSpec("f.yaml", []byte(tt.src))
			require.Error(t, err)
			require.ErrorIs(t, err, scenarios.ErrInvalid)
			for _, w := range tt.want {
				pos, msg, found := strings.Cut(w, ": ")
				if !found || !strings.Contains(pos, ":") {
					require.Contains(t, err.Error(), w)
					continue
				}
				require.Contains(t, err.Error(), "f.yaml:"+pos+": "+msg, "all errors:\n%v", err)
			}
		})
	}
}

// TestExportDeterministic exports twice and compares bytes.
func TestExportDeterministic(t *testing.T) {
	for _, name := range scenarios.Names() {
		sc, _ := scenarios.Lookup(name)
		a, errA := scenarios.ExportYAML(sc)
		b, errB := scenarios.ExportYAML(sc)
		require.Equal(t, errA, errB)
		require.Equal(t, a, b)
	}
}

func ExampleLoad() {
	src := `
name: hello
ranks: 2
communicators: [{name: world, ranks: all}]
tensors:
  - {name: x, bytes: 4096, init: [1, 2, 3, 4]}
  - {name: y, bytes: 4096, output: true}
programs:
  - ranks: all
    ops:
      - {allreduce: ar, comm: world, in: x, out: y, strategy: nccl}
variants:
  - {name: base, expect: ok}
`
	sc, err := scenarios.Load("hello.yaml", []byte(src))
	if err != nil {
		fmt.Println(err)
		return
	}
	rep, err := check.RunVariant(sc, sc.Variants[0], check.Options{Extra: []string{"budget=0"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sc.Name, sc.Base.TP, "ranks:", rep.Verdict, rep.Met)
	// Output: hello 2 ranks: ok true
}

func ExampleLoadSpec() {
	src := "name: bad\nranks: 2\nprograms:\n  - ranks: all\n    ops:\n      - {kernel: k, stream: side, writes: [y]}\nvariants: [{name: a}]\n"
	_, err := scenarios.LoadSpec("bad.yaml", []byte(src))
	fmt.Println(err)
	// Output:
	// bad.yaml:6:29: kernel "k" on undefined stream "side"; this program's streams: main
	// bad.yaml:6:44: kernel "k" writes undefined tensor "y" (declare it under tensors)
}

func ExampleExportYAML() {
	sc, _ := scenarios.Lookup("tp8-shared-expert")
	data, _ := scenarios.ExportYAML(sc)
	fmt.Println(strings.SplitN(string(data), "\n", 2)[0])
	// Output: name: tp8-shared-expert
}

// TestFormatDocExamples loads every complete scenario (a ```yaml block that
// starts with name:) in docs/scenario-format.md and runs it: the
// documentation's examples must work as written.
func TestFormatDocExamples(t *testing.T) {
	data, err := os.ReadFile("../docs/scenario-format.md")
	require.NoError(t, err)
	blocks := strings.Split(string(data), "```yaml\n")
	n := 0
	for _, b := range blocks[1:] {
		body, _, _ := strings.Cut(b, "```")
		if !strings.HasPrefix(body, "name:") {
			continue
		}
		n++
		sc, err := scenarios.Load("scenario-format.md", []byte(body))
		require.NoError(t, err, "example:\n%s", body)
		for _, v := range sc.Variants {
			rep, err := check.RunVariant(sc, v, check.Options{Extra: []string{"budget=2"}})
			require.NoError(t, err)
			require.True(t, rep.Met, "variant %s: expected %s, got %s", v.Name, v.Expect, rep.Verdict)
		}
	}
	require.Positive(t, n)
}

// TestDepthGuardIgnoresQuotesAndComments: brackets inside quoted strings and
// comments do not count towards the nesting limit.
func TestDepthGuardIgnoresQuotesAndComments(t *testing.T) {
	deep := strings.Repeat("[", 40)
	src := "name: t\ndescription: \"" + deep + "\"\n# " + deep + "\nranks: 2\ngraph: {builder: moe}\nvariants: [{name: a, doc: '" + deep + "'}]\n"
	_, err := scenarios.LoadSpec("q.yaml", []byte(src))
	require.NoError(t, err)
}

func ExampleResolve() {
	// A built-in name resolves without reading anything.
	sc, err := scenarios.Resolve("tp8-shared-expert", nil)
	fmt.Println(sc.Name, err)
	// Anything that looks like a path is read with the given function
	// (simctl passes os.ReadFile) and loaded.
	files := map[string]string{"my/s.yaml": "name: s\nranks: 2\ngraph: {builder: moe}\nvariants: [{name: a}]\n"}
	read := func(p string) ([]byte, error) {
		if d, ok := files[p]; ok {
			return []byte(d), nil
		}
		return nil, os.ErrNotExist
	}
	sc, err = scenarios.Resolve("my/s.yaml", read)
	fmt.Println(sc.Name, sc.Base.TP, err)
	_, err = scenarios.Resolve("nothing-like-it", read)
	fmt.Println(strings.HasPrefix(err.Error(), `unknown scenario "nothing-like-it": not a built-in`))
	// Output:
	// tp8-shared-expert <nil>
	// s 2 <nil>
	// true
}

// TestNotExpressible: a Go builder other than BuildMoE has no file form, and
// says so.
func TestNotExpressible(t *testing.T) {
	sc := &scenarios.Scenario{Name: "custom", Base: scenarios.DefaultConfig(), Variants: []scenarios.Variant{{Name: "a"}},
		Build: func(cfg scenarios.Config, opt scenarios.BuildOptions, eng *sim.Engine) (*scenarios.Built, error) {
			return nil, errors.New("unused")
		}}
	_, err := scenarios.ExportYAML(sc)
	require.ErrorIs(t, err, scenarios.ErrNotExpressible)
	require.Contains(t, err.Error(), `"custom"`)
	sc.Build = scenarios.BuildMoE
	_, err = scenarios.ExportYAML(sc)
	require.NoError(t, err)
}
