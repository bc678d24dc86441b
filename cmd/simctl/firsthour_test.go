package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// A shrunk witness replays with its one deviation named in words (which
// step ran before which, on which rank and stream), and --html draws it
// with that deviation listed.
func TestReplayNamesDeviationAndDrawsWitness(t *testing.T) {
	t.Chdir(t.TempDir())
	code, _, errs := simctl(t, "explore", "tp8-shared-expert", "--variant", "buggy", "--set", "layers=1", "--strategy", "pct", "--budget", "5", "--witness", "w.json")
	require.Equal(t, 0, code, errs)
	code, out, errs := simctl(t, "replay", "w.json", "--shrink", "--html", "r.html", "--trace", "r.json")
	require.Equal(t, 0, code, errs)
	small := out[strings.Index(out, "replay w.min.json"):]
	m := regexp.MustCompile(`(\d+) deviations\)\n`).FindStringSubmatch(small)
	require.NotNil(t, m, small)
	require.Contains(t, small, "deviations from nominal ("+m[1]+"):\n", "each deviation is listed")
	require.Equal(t, m[1], strconv.Itoa(strings.Count(small, " ran before ")), "each is a step run before another")
	require.Regexp(t, `1\. choice \d+ at [0-9.]+µs: rank \d+ (host|stream \w+): .* ran before rank \d+ (host|stream \w+): `, small)
	html, err := os.ReadFile("r.html")
	require.NoError(t, err)
	require.Contains(t, string(html), `"deviations":["choice `, "the report lists the deviation")
	require.Contains(t, string(html), `untimed), schedule`)
	st, err := os.Stat("r.json")
	require.NoError(t, err)
	require.NotZero(t, st.Size())

	// Replaying the shrunk witness names the same deviation.
	code, again, errs := simctl(t, "replay", "w.min.json", "--html", "r2.html")
	require.Equal(t, 0, code, errs)
	line := func(s string) string {
		i := strings.Index(s, "  1. choice")
		return s[i : i+strings.Index(s[i:], "\n")]
	}
	require.Equal(t, line(small), line(again))
}

// explore --html draws its witness; with no finding it draws nominal.
func TestExploreDrawsWitness(t *testing.T) {
	t.Chdir(t.TempDir())
	code, _, errs := simctl(t, "explore", "tp8-shared-expert", "--variant", "buggy", "--set", "layers=1", "--strategy", "pct", "--budget", "3", "--html", "e.html", "--trace", "e.json")
	require.Equal(t, 0, code, errs)
	html, err := os.ReadFile("e.html")
	require.NoError(t, err)
	require.Contains(t, string(html), "pct witness (untimed)")
	code, _, errs = simctl(t, "explore", "tp8-shared-expert", "--variant", "fixed", "--set", "layers=1", "--strategy", "random", "--budget", "2", "--html", "ok.html")
	require.Equal(t, 0, code, errs)
	html, err = os.ReadFile("ok.html")
	require.NoError(t, err)
	require.Contains(t, string(html), `"schedule":"nominal"`)
}

func TestFirstHourFlags(t *testing.T) {
	// --variant is repeatable and comma-separated, each variant once.
	code, out, errs := simctl(t, "run", "tp8-shared-expert", "--variant", "buggy,fixed", "--variant", "tp4-buggy", "--variant", "buggy", "--set", "budget=3")
	require.Equal(t, 0, code, errs)
	var rows []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && (f[0] == "buggy" || f[0] == "fixed" || f[0] == "tp4-buggy") {
			rows = append(rows, f[0])
		}
	}
	require.Equal(t, []string{"buggy", "fixed", "tp4-buggy"}, rows)

	// A what-if that flips the verdict: exit 1, or 0 with --no-expect and
	// the verdict still printed.
	args := []string{"run", "tp8-shared-expert", "--variant", "buggy", "--set", "workspace=per-call", "--set", "budget=0"}
	code, out, _ = simctl(t, args...)
	require.Equal(t, 1, code)
	require.Contains(t, out, " NO ")
	code, out2, _ := simctl(t, append(args, "--no-expect")...)
	require.Equal(t, 0, code)
	// --no-expect judges nothing: the verdicts without the expect and met
	// columns, the rest as without it.
	require.NotContains(t, out2, " NO ")
	require.NotContains(t, out2, "expect")
	_, rest, _ := strings.Cut(out, "\n\n== ")
	require.True(t, strings.HasSuffix(out2, rest), "--no-expect changes the table and the exit status only")
	code, _, _ = simctl(t, "explore", "tp8-shared-expert", "--variant", "buggy", "--set", "workspace=per-call", "--set", "layers=1", "--budget", "2", "--no-expect")
	require.Equal(t, 0, code)
	code, _, errs = simctl(t, "run", "nope", "--no-expect")
	require.Equal(t, 2, code, "bad input still exits 2")
	require.NotEmpty(t, errs)

	// explore and show take one variant: a second is an error, not the
	// last one silently winning.
	for _, args := range [][]string{
		{"explore", "tp8-shared-expert", "--variant", "buggy", "--variant", "fixed"},
		{"show", "tp8-shared-expert", "--variant", "buggy,fixed"},
	} {
		code, _, errs = simctl(t, args...)
		require.Equal(t, 2, code, "%v", args)
		require.Contains(t, errs, "takes one variant")
	}

	// --budget 0 is refused, not silently the default.
	code, _, errs = simctl(t, "explore", "tp8-shared-expert", "--budget", "0")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "--budget 0")

	// --version answers like the version subcommand.
	code, v1, _ := simctl(t, "--version")
	require.Equal(t, 0, code)
	_, v2, _ := simctl(t, "version")
	require.Equal(t, v2, v1)
}

func TestStdinScenario(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "examples", "two-stream.yaml"))
	require.NoError(t, err)
	old := stdin
	t.Cleanup(func() {
		stdin = old
		stdinOnce = struct {
			sync.Once
			data []byte
			err  error
		}{}
	})
	stdin = strings.NewReader(string(data))
	code, fromStdin, errs := simctl(t, "run", "-")
	require.Equal(t, 0, code, errs)
	require.Contains(t, fromStdin, "scenario ")
}

func TestCompletion(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "run", "tp8-shared-expert", "--variant", ""}, []string{"buggy\trace|corruption", "tp4-buggy\tok"}},
		{[]string{"__complete", "run", "tp8-shared-expert", "--variant", "buggy,"}, []string{"buggy,fixed\tok"}},
		{[]string{"__complete", "explore", "tp8-shared-expert", "--set", ""}, []string{"workspace=", "tp="}},
		{[]string{"__complete", "run", "tp8-shared-expert", "--set", "workspace="}, []string{"workspace=per-call"}},
		{[]string{"__complete", "run", "x", "--format", ""}, []string{"text", "json"}},
	} {
		code, out, errs := simctl(t, tc.args...)
		require.Equal(t, 0, code, errs)
		for _, w := range tc.want {
			require.Contains(t, strings.Split(out, "\n"), w, "%v", tc.args)
		}
	}
}

// list keeps its columns whatever the variant names' lengths.
func TestListColumnsAligned(t *testing.T) {
	code, out, errs := simctl(t, "list")
	require.Equal(t, 0, code, errs)
	col := -1
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "  ") {
			continue
		}
		i := strings.Index(l, " expect ")
		require.Positive(t, i, l)
		if col < 0 {
			col = i
		}
		require.Equal(t, col, i, "the expect column moved: %q", l)
	}
	require.Positive(t, col)
}

// No silent caps: the JSON says how many findings there were and that some
// were left out; the text says how many more; --max-findings keeps more.
// moe-ep-dropped-allreduce drops 47 collectives (each on both ranks: one
// finding per collective) and corrupts both ranks' outputs.
func TestFindingsNotSilentlyCapped(t *testing.T) {
	type variant struct {
		Name      string                  `json:"name"`
		Findings  []struct{ Kind string } `json:"findings"`
		Total     int                     `json:"findings_total"`
		Truncated bool                    `json:"findings_truncated"`
	}
	get := func(args ...string) variant {
		code, out, errs := simctl(t, append([]string{"run", "moe-ep-dropped-allreduce", "--variant", "per-layer", "--set", "budget=0", "--format", "json"}, args...)...)
		require.Equal(t, 0, code, errs)
		var rep struct{ Variants []variant }
		require.NoError(t, json.Unmarshal([]byte(out), &rep))
		require.Len(t, rep.Variants, 1)
		return rep.Variants[0]
	}
	v := get()
	require.Len(t, v.Findings, 32+2, "32 dropped kept, 2 corruptions")
	require.Equal(t, 47+2, v.Total)
	require.True(t, v.Truncated)
	v = get("--max-findings", "100")
	require.Len(t, v.Findings, 47+2)
	require.Equal(t, 47+2, v.Total)
	require.False(t, v.Truncated)
	code, out, _ := simctl(t, "run", "moe-ep-dropped-allreduce", "--variant", "per-layer", "--set", "budget=0")
	require.Equal(t, 0, code)
	require.Contains(t, out, "[dropped] … and 44 more (32 kept: see --format json; raise --max-findings for the rest)")
}

// Seeds are strings in JSON: a reader that holds numbers as float64 (jq)
// gets them exactly.
func TestSeedsAreStrings(t *testing.T) {
	code, out, errs := simctl(t, "explore", "tp8-shared-expert", "--variant", "buggy", "--set", "layers=1", "--strategy", "pct", "--budget", "2", "--seed", "18446744073709551557", "--format", "json")
	require.Equal(t, 0, code, errs)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	require.Equal(t, "18446744073709551557", doc["seed"])
	require.IsType(t, "", doc["witness"].(map[string]any)["seed"])
	require.IsType(t, "", doc["config"].(map[string]any)["seed"])
}

// A witness file written before seeds were strings (a bare number) still
// replays.
func TestOldWitnessWithNumericSeedReplays(t *testing.T) {
	t.Chdir(t.TempDir())
	code, _, errs := simctl(t, "explore", "tp8-shared-expert", "--variant", "buggy", "--set", "layers=1", "--strategy", "pct", "--budget", "2", "--witness", "w.json")
	require.Equal(t, 0, code, errs)
	data, err := os.ReadFile("w.json")
	require.NoError(t, err)
	old := regexp.MustCompile(`"seed": "(\d+)"`).ReplaceAll(data, []byte(`"seed": $1`))
	require.NotEqual(t, string(data), string(old))
	require.NoError(t, os.WriteFile("old.json", old, 0o644))
	code, out, errs := simctl(t, "replay", "old.json")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, ": reproduced")
}

// The transform's notes ("skipped: mid-branch collective") reach run's JSON
// and show, text and JSON.
func TestTransformNotesEverywhere(t *testing.T) {
	const skip = "transform skipped L0.moe: shared branch of L0.moe has a mid-branch collective L0.shared_mid_ar; skipped"
	args := []string{"tp8-shared-expert", "--variant", "fixed", "--set", "shared=mid"}
	code, out, errs := simctl(t, append(append([]string{"run"}, args...), "--set", "budget=0", "--format", "json")...)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, `"`+skip+`"`)
	code, out, errs = simctl(t, append([]string{"show"}, args...)...)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "note: "+skip)
	code, out, errs = simctl(t, append(append([]string{"show"}, args...), "--format", "json")...)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, `"`+skip+`"`)
}

// explore's witness says how many findings it had, past the per-kind cap,
// and a merge of shards says the same as one machine.
func TestExploreWitnessFindingsTotal(t *testing.T) {
	t.Chdir(t.TempDir())
	args := []string{"explore", "moe-ep-dropped-allreduce", "--variant", "per-layer", "--budget", "2"}
	code, out, errs := simctl(t, append(args, "--format", "json")...)
	require.Equal(t, 0, code, errs)
	var sum struct {
		Total     int  `json:"witness_findings_total"`
		Truncated bool `json:"witness_findings_truncated"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &sum))
	require.Equal(t, 47+2, sum.Total, "47 dropped collectives and 2 corrupted outputs")
	require.True(t, sum.Truncated)
	for i, sh := range []string{"0/2", "1/2"} {
		code, shard, errs := simctl(t, append(args, "--shard", sh)...)
		require.Equal(t, 0, code, errs)
		require.NoError(t, os.WriteFile(fmt.Sprintf("s%d.json", i), []byte(shard), 0o644))
	}
	code, merged, errs := simctl(t, "merge", "s0.json", "s1.json", "--format", "json")
	require.Equal(t, 0, code, errs)
	require.Equal(t, out, merged)

	// --max-findings keeps them all.
	code, out, errs = simctl(t, append(args, "--max-findings", "100", "--format", "json")...)
	require.Equal(t, 0, code, errs)
	sum.Truncated = false
	require.NoError(t, json.Unmarshal([]byte(out), &sum))
	require.Equal(t, 47+2, sum.Total)
	require.False(t, sum.Truncated)
	require.Equal(t, 47, strings.Count(out, `"kind": "dropped"`))
}
