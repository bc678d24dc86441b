package explore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/sim"
)

// The inputs a user hands simctl that this package parses never panic: a
// witness file (replay), a --shard value, and shard files (merge). What
// parses also survives its own round trip.

func FuzzParseWitness(f *testing.F) {
	w := &Witness{Version: WitnessVersion, Scenario: "tp8-shared-expert", Variant: "buggy", Strategy: "pct", Mode: "untimed",
		Seed: 3, Schedule: 7, Verdict: "corruption", Kinds: []string{"corruption"}, TraceHash: "0123456789abcdef", Deviations: 1,
		Choices: []sim.Choice{{D: sim.DecSchedule, N: 3, V: 1}}}
	seed, err := w.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"version": 1}`))
	f.Add([]byte(`{"version": 1, "mode": "timed", "choices": [{"d": 9, "n": 0, "v": -1}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := ParseWitness(data)
		if err != nil {
			return
		}
		again, err := w.Marshal()
		if err != nil {
			t.Fatalf("a parsed witness does not marshal: %v", err)
		}
		if _, err := ParseWitness(again); err != nil {
			t.Fatalf("a marshalled witness does not parse: %v", err)
		}
	})
}

func FuzzParseShard(f *testing.F) {
	for _, s := range []string{"0/4", "3/4", "4/4", "-1/2", "1/0", "x/y", "1", "/", "9999999999999999999/1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sh, err := ParseShard(s)
		if err != nil {
			return
		}
		if sh.Index < 0 || sh.Index >= sh.Count {
			t.Fatalf("ParseShard(%q) = %+v", s, sh)
		}
		back, err := ParseShard(fmt.Sprintf("%d/%d", sh.Index, sh.Count))
		if err != nil || back != sh {
			t.Fatalf("%+v does not round-trip: %+v, %v", sh, back, err)
		}
	})
}

// FuzzMerge decodes two shard files as simctl merge does and merges them.
func FuzzMerge(f *testing.F) {
	mk := func(i, n int, recs string) []byte {
		return fmt.Appendf(nil, `{"version": %d, "scenario": "tp8-shared-expert", "variant": "fixed", "sets": [], "strategy": "random", "seed": 1,
			"shard": {"index": %d, "count": %d}, "budget": 4, "records": [%s]}`, ShardFileVersion, i, n, recs)
	}
	f.Add(mk(0, 2, `{"index": 0, "verdict": "ok", "out_hash": "a"}, {"index": 2, "verdict": "ok", "out_hash": "a"}`),
		mk(1, 2, `{"index": 1, "verdict": "race", "out_hash": "b", "kinds": ["race"]}, {"index": 3, "verdict": "ok", "out_hash": "a"}`))
	f.Add(mk(0, 0, ``), mk(0, 0, ``))
	f.Add(mk(0, -1, `null`), mk(0, 1, `null`))
	f.Add(mk(0, 1, `{"index": 0, "verdict": "hang", "out_hash": "x"}`), []byte(`{}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var files []*ShardFile
		for _, data := range [][]byte{a, b} {
			sf, err := ParseShardFile(data)
			// Read record by record, the same file (what merge does).
			rf, rerr := ReadShardFile(bytes.NewReader(data))
			switch {
			case err == nil && rerr != nil && !strings.Contains(rerr.Error(), "a second"):
				t.Fatalf("ParseShardFile reads it, ReadShardFile says %v", rerr)
			case err == nil && rerr == nil:
				x, _ := json.Marshal(sf)
				y, _ := json.Marshal(rf)
				if !bytes.Equal(x, y) {
					t.Fatalf("ParseShardFile and ReadShardFile differ:\n%s\n%s", x, y)
				}
				// The header first, at the speed of reading, then a record
				// at a time, holding none (what merge does): the same
				// header and records.
				head, herr := ReadShardHeader(bytes.NewReader(data))
				require.NoError(t, herr)
				var recs []*Record
				tail, serr := ScanShardFile(bytes.NewReader(data), func(r *Record) error {
					recs = append(recs, r)
					return nil
				})
				require.NoError(t, serr)
				h1, _ := json.Marshal(head)
				h2, _ := json.Marshal(tail)
				require.Equal(t, string(h1), string(h2))
				head.Records = recs
				if rf.Records != nil && recs == nil {
					head.Records = []*Record{}
				}
				z, _ := json.Marshal(head)
				if !bytes.Equal(x, z) {
					t.Fatalf("ParseShardFile and ScanShardFile differ:\n%s\n%s", x, z)
				}
			}
			if err != nil {
				return
			}
			files = append(files, sf)
		}
		_, _ = Merge(files)
	})
}

// A malformed witness or shard file is reported at its line and column.
func TestJSONErrorsSayWhere(t *testing.T) {
	for _, tc := range []struct {
		data, want string
	}{
		{"{\n \"version\": 1,\n oops\n}\n", "line 3, column 2: invalid character 'o'"},
		{"{\"version\": 1,", "line 1, column 14: unexpected end of JSON input"},
		{"{\n \"version\": \"one\"\n}", "line 2, column 17: json: cannot unmarshal string"},
	} {
		_, err := ParseShardFile([]byte(tc.data))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseShardFile(%q) = %v, want …%s…", tc.data, err, tc.want)
		}
		_, err = ParseWitness([]byte(tc.data))
		if err == nil || !strings.Contains(err.Error(), tc.want[:len("line 1, column 1")]) {
			t.Errorf("ParseWitness(%q) = %v, want it to say where", tc.data, err)
		}
	}
}
