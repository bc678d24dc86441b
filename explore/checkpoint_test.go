package explore

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// checkpointOf runs an exploration of budget schedules and returns its
// summary and the checkpoint file it would have written.
func checkpointOf(t require.TestingT, tg *Target, budget, workers int, outcomes bool) (*Summary, []byte) {
	s, err := New("random", tg, 1)
	require.NoError(t, err)
	var file []byte
	file, err = AppendLine(file, CheckpointHeader{Checkpoint: CheckpointVersion, Budget: budget})
	require.NoError(t, err)
	sum, err := Explore(tg, s, 1, Options{Budget: budget, Workers: workers, Outcomes: outcomes, Checkpoint: func(r *Record) {
		file, err = AppendLine(file, r)
		require.NoError(t, err)
	}})
	require.NoError(t, err)
	sum.Elapsed = 0
	return sum, file
}

// TestPropResumeEqualsUninterrupted: for any cut of a checkpoint (any
// number of whole records, and a torn part of the next line), resuming
// from it gives the summary of the run that was never cut, and the
// records it checkpoints are those the uninterrupted run wrote after the
// cut: the worst verdict so far, which decides the records that carry a
// witness, comes back with the checkpoint.
func TestPropResumeEqualsUninterrupted(t *testing.T) {
	tg, err := NewTarget("tp8-shared-expert", "buggy", []string{"layers=1", "tp=2", "strategy=p2p-oneshot"})
	require.NoError(t, err)
	const budget = 24
	full, file := checkpointOf(t, tg, budget, 1, true)
	want := summaryJSON(t, full)
	rapid.Check(t, func(rt *rapid.T) {
		cut := rapid.IntRange(0, len(file)).Draw(rt, "cut")
		workers := rapid.IntRange(1, 3).Draw(rt, "workers")
		h, recs, good, err := ParseCheckpoint(file[:cut])
		if err != nil {
			require.LessOrEqual(rt, cut, bytes.IndexByte(file, '\n'), "only a cut inside the header fails: %v", err)
			return
		}
		require.Equal(rt, budget, h.Budget)
		require.LessOrEqual(rt, good, cut)
		s, err := New("random", tg, 1)
		require.NoError(rt, err)
		rest := append([]byte{}, file[:good]...)
		sum, err := Explore(tg, s, 1, Options{Budget: budget, Workers: workers, Outcomes: true, Resume: Records(recs), Checkpoint: func(r *Record) {
			rest, err = AppendLine(rest, r)
			require.NoError(rt, err)
		}})
		require.NoError(rt, err)
		sum.Elapsed = 0
		require.Equal(rt, want, summaryJSON(rt, sum))
		require.Equal(rt, string(file), string(rest), "the resumed run's checkpoint continues the uninterrupted one's")
	})
}

// A checkpoint that is not a prefix of the planned schedules is refused.
func TestResumeRefusesWhatItCannotContinue(t *testing.T) {
	tg, err := NewTarget("tp8-shared-expert", "buggy", []string{"layers=1", "tp=2", "strategy=p2p-oneshot"})
	require.NoError(t, err)
	_, file := checkpointOf(t, tg, 6, 1, false)
	_, recs, _, err := ParseCheckpoint(file)
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		recs func() []*Record
		want string
	}{
		{"a gap", func() []*Record { return []*Record{recs[0], recs[2]} }, "record 2 is schedule 2; want schedule 1"},
		{"a duplicate", func() []*Record { return []*Record{recs[0], recs[0]} }, "record 2 is schedule 0; want schedule 1"},
		{"an unknown verdict", func() []*Record { r := *recs[0]; r.Verdict = "fine"; return []*Record{&r} }, `verdict "fine"`},
		{"an unknown finding kind", func() []*Record { r := *recs[0]; r.Kinds = []string{"boom"}; return []*Record{&r} }, `finding kind "boom"`},
		{"a worse verdict without its witness", func() []*Record {
			i := 0
			for recs[i].Witness == nil || i == 0 && recs[i].Verdict == "ok" {
				i++
			}
			out := append([]*Record{}, recs[:i+1]...)
			r := *recs[i]
			r.Witness = nil
			out[i] = &r
			return out
		}, "but no witness"},
		{"more than planned", func() []*Record { return append(append([]*Record{}, recs...), recs[0]) }, "holds 7 schedules; it plans 6"},
		{"a null record", func() []*Record { return []*Record{nil} }, "record 1 is empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := New("random", tg, 1)
			require.NoError(t, err)
			_, err = Explore(tg, s, 1, Options{Budget: 6, Resume: Records(c.recs())})
			require.ErrorIs(t, err, ErrBadInput)
			require.ErrorContains(t, err, c.want)
		})
	}
	s, err := New("dpor", tg, 1)
	require.NoError(t, err)
	_, err = Explore(tg, s, 1, Options{Budget: 6, Resume: Records(recs[:1])})
	require.ErrorContains(t, err, "cannot resume")
}

// A torn last line is dropped; a malformed line before it is an error
// naming its line.
func TestParseCheckpointLines(t *testing.T) {
	hdr := `{"checkpoint": 1, "scenario": "s", "variant": "v", "sets": [], "config": {}, "strategy": "random", "seed": 1, "budget": 3, "outcomes": false, "shard": {"index": 0, "count": 0}}` + "\n"
	rec := `{"index": 0, "seed": 1, "verdict": "ok", "out_hash": "a"}` + "\n"
	for _, c := range []struct {
		name, data string
		recs, good int
		err        string
	}{
		{"header only", hdr, 0, len(hdr), ""},
		{"torn header", hdr[:20], 0, 0, "empty checkpoint"},
		{"one record", hdr + rec, 1, len(hdr + rec), ""},
		{"a torn record", hdr + rec + rec[:10], 1, len(hdr + rec), ""},
		{"a malformed record before the end", hdr + "{oops\n" + rec, 0, 0, "line 2: not a schedule record"},
		{"not a checkpoint", `{"version": 1}` + "\n", 0, 0, "line 1: not a checkpoint header"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, recs, good, err := ParseCheckpoint([]byte(c.data))
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.Len(t, recs, c.recs)
			require.Equal(t, c.good, good)
		})
	}
}

// FuzzParseCheckpoint: no input panics; what parses is a whole-line
// prefix that parses again to the same records.
func FuzzParseCheckpoint(f *testing.F) {
	f.Add([]byte(`{"checkpoint": 1, "budget": 3}` + "\n" + `{"index": 0, "verdict": "ok", "out_hash": "a"}` + "\n{\"ind"))
	f.Add([]byte("\n\n\n"))
	f.Add([]byte(`{"checkpoint": 1}` + "\nnull\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, recs, good, err := ParseCheckpoint(data)
		if err != nil {
			return
		}
		require.LessOrEqual(t, good, len(data))
		require.Equal(t, byte('\n'), data[good-1])
		_, again, good2, err := ParseCheckpoint(data[:good])
		require.NoError(t, err)
		require.Equal(t, good, good2)
		a, _ := json.Marshal(recs)
		b, _ := json.Marshal(again)
		require.Equal(t, string(a), string(b))
		// A line at a time, as a resume reads it: the same records and
		// the same well-formed prefix.
		rd, err := NewCheckpointReader(bytes.NewReader(data))
		require.NoError(t, err)
		var read []*Record
		for r, err := range rd.Records() {
			require.NoError(t, err)
			read = append(read, r)
		}
		c, _ := json.Marshal(read)
		require.Equal(t, string(a), string(c))
		require.Equal(t, int64(good), rd.Good())
	})
}
