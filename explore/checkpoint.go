package explore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/collsim/collsim/check"
)

// CheckpointVersion is the version of the checkpoint format.
const CheckpointVersion = 1

// CheckpointHeader is the first line of a checkpoint file: what the
// exploration explores, so that a resume with other flags is refused.
//
// A checkpoint file is JSON Lines: the header, then one [Record] per
// completed schedule, in schedule order (the order Explore merges them).
// Records are appended in batches; a process killed mid-write leaves at
// most one torn last line, which [ParseCheckpoint] drops.
type CheckpointHeader struct {
	Checkpoint int `json:"checkpoint"` // CheckpointVersion
	Exploration
	Budget   int   `json:"budget"`
	Outcomes bool  `json:"outcomes"`
	Shard    Shard `json:"shard"`
}

// Matches says why h is not the header of an exploration of e with
// budget, outcomes and shard ("" when it is).
func (h *CheckpointHeader) Matches(e Exploration, budget int, outcomes bool, sh Shard) string {
	switch {
	case h.Checkpoint != CheckpointVersion:
		return fmt.Sprintf("checkpoint version %d, want %d", h.Checkpoint, CheckpointVersion)
	case !h.Exploration.Equal(e):
		return fmt.Sprintf("it explored %s variant %s (sets %v, strategy %s, seed %d), not %s variant %s (sets %v, strategy %s, seed %d)",
			h.Scenario, h.Variant, h.Sets, h.Strategy, h.Seed, e.Scenario, e.Variant, e.Sets, e.Strategy, e.Seed)
	case h.Budget != budget:
		return fmt.Sprintf("it has --budget %d, not %d", h.Budget, budget)
	case h.Outcomes != outcomes:
		return fmt.Sprintf("it has --outcomes=%v", h.Outcomes)
	case h.Shard != sh:
		return fmt.Sprintf("it is shard %d/%d, not %d/%d", h.Shard.Index, h.Shard.Count, sh.Index, sh.Count)
	}
	return ""
}

// AppendLine appends v as one JSON line to b.
func AppendLine(b []byte, v any) ([]byte, error) {
	line, err := json.Marshal(v)
	if err != nil {
		return b, err
	}
	return append(append(b, line...), '\n'), nil
}

// ReadCheckpoint reads a checkpoint file from r as [ParseCheckpoint] does,
// a line at a time, without holding the file's bytes; the strings records
// repeat (verdicts, outcome hashes, kind lists) are shared. good is the
// length of the well-formed prefix.
func ReadCheckpoint(r io.Reader) (h *CheckpointHeader, recs []*Record, good int64, err error) {
	br := bufio.NewReaderSize(r, 1<<16)
	intern := interner{}.of
	kinds := map[string][]string{}
	for line := 1; ; line++ {
		text, rerr := br.ReadBytes('\n')
		if rerr != nil { // io.EOF: what is left is torn, or nothing
			if rerr != io.EOF {
				return nil, nil, 0, rerr
			}
			break
		}
		body := text[:len(text)-1]
		if h == nil {
			x, _, _, perr := ParseCheckpoint(text)
			if perr != nil {
				return nil, nil, 0, perr
			}
			h = x
		} else {
			var r Record
			if err := json.Unmarshal(body, &r); err != nil {
				return nil, nil, 0, fmt.Errorf("%w: line %d: not a schedule record: %w", ErrBadInput, line, jsonAt(body, err))
			}
			r.Verdict, r.OutHash = intern(r.Verdict), intern(r.OutHash)
			if len(r.Kinds) > 0 {
				k := strings.Join(r.Kinds, "\x00")
				if ks, ok := kinds[k]; ok {
					r.Kinds = ks
				} else {
					kinds[k] = r.Kinds
				}
			}
			recs = append(recs, &r)
		}
		good += int64(len(text))
	}
	if h == nil {
		return nil, nil, 0, fmt.Errorf("%w: line 1: empty checkpoint (no header line)", ErrBadInput)
	}
	return h, recs, good, nil
}

// ParseCheckpoint reads a checkpoint file. It returns the header, the
// records and the length of the well-formed prefix of data (a torn last
// line, from a process killed while writing, is not part of it: a resume
// truncates the file there and appends). A malformed line anywhere else is
// an error naming its line.
func ParseCheckpoint(data []byte) (*CheckpointHeader, []*Record, int, error) {
	var h *CheckpointHeader
	var recs []*Record
	good := 0
	for line := 1; good < len(data); line++ {
		end := bytes.IndexByte(data[good:], '\n')
		if end < 0 { // torn: the writer died before the newline
			break
		}
		text := data[good : good+end]
		if h == nil {
			var x CheckpointHeader
			dec := json.NewDecoder(bytes.NewReader(text))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&x); err != nil || x.Checkpoint == 0 {
				return nil, nil, 0, fmt.Errorf("%w: line %d: not a checkpoint header (want {\"checkpoint\": %d, …}): %v", ErrBadInput, line, CheckpointVersion, err)
			}
			h = &x
		} else {
			var r Record
			if err := json.Unmarshal(text, &r); err != nil {
				return nil, nil, 0, fmt.Errorf("%w: line %d: not a schedule record: %w", ErrBadInput, line, jsonAt(text, err))
			}
			recs = append(recs, &r)
		}
		good += end + 1
	}
	if h == nil {
		return nil, nil, 0, fmt.Errorf("%w: line 1: empty checkpoint (no header line)", ErrBadInput)
	}
	return h, recs, good, nil
}

// knownVerdict reports whether v is a verdict this build knows.
func knownVerdict(v string) bool { return v == check.OK || check.Worse(v, check.OK) }

// checkRecords verifies that recs are the first len(recs) of the planned
// indices, each once, with known verdicts and a witness wherever the
// verdict got worse (what a resume or a merge needs to reproduce the
// summary). what names the file in messages.
func checkRecords(what string, recs []*Record, planned int, index func(j int) int) error {
	if len(recs) > planned {
		return fmt.Errorf("%w: %s holds %d schedules; it plans %d", ErrBadInput, what, len(recs), planned)
	}
	best := check.OK
	for j, r := range recs {
		switch {
		case r == nil:
			return fmt.Errorf("%w: %s: record %d is empty (null)", ErrBadInput, what, j+1)
		case r.Index != index(j):
			return fmt.Errorf("%w: %s: record %d is schedule %d; want schedule %d (records are the planned schedules in order, each once)", ErrBadInput, what, j+1, r.Index, index(j))
		case !knownVerdict(r.Verdict):
			return fmt.Errorf("%w: %s: schedule %d has verdict %q, which this simctl does not know", ErrBadInput, what, r.Index, r.Verdict)
		}
		for _, k := range r.Kinds {
			if !knownVerdict(k) || k == check.OK {
				return fmt.Errorf("%w: %s: schedule %d has finding kind %q, which this simctl does not know", ErrBadInput, what, r.Index, k)
			}
		}
		if check.Worse(r.Verdict, best) {
			if r.Witness == nil {
				return fmt.Errorf("%w: %s: schedule %d has verdict %s but no witness", ErrBadInput, what, r.Index, r.Verdict)
			}
			best = r.Verdict
		}
	}
	return nil
}

// resume merges opt.Resume (the records of a checkpoint) into the
// summary and returns the indices still to run and the worst verdict so
// far (which decides the records that carry a witness, as if the run had
// never stopped).
func resume(s Strategy, sum *Summary, m *merger, indices schedules, opt Options) (schedules, string, error) {
	best := check.OK
	if len(opt.Resume) == 0 {
		return indices, best, nil
	}
	if _, ok := s.(Independent); !ok {
		return indices, "", fmt.Errorf("%w: strategy %s cannot resume: its schedules depend on each other (resume random or pct)", ErrBadInput, s.Name())
	}
	if err := checkRecords("the checkpoint", opt.Resume, indices.n, indices.at); err != nil {
		return indices, "", err
	}
	for _, r := range opt.Resume {
		if check.Worse(r.Verdict, best) {
			best = r.Verdict
		}
		if opt.Shard.Count > 0 {
			sum.Records = append(sum.Records, r)
		}
		m.add(r)
	}
	return indices.from(len(opt.Resume)), best, nil
}

// schedules is an arithmetic run of schedule indices (first, first+step,
// … n of them): the schedules one run plans, without a slice the size of
// a budget from the command line.
type schedules struct{ first, step, n int }

func (p schedules) at(k int) int { return p.first + k*p.step }

// from is p without its first k schedules.
func (p schedules) from(k int) schedules { return schedules{p.at(k), p.step, p.n - k} }

// planOf is what a run of budget schedules plans: all of them, or those
// shard sh owns.
func planOf(budget int, sh Shard) schedules {
	if sh.Count <= 1 {
		return schedules{0, 1, budget}
	}
	return schedules{sh.Index, sh.Count, owned(sh.Index, sh.Count, budget)}
}

// interner shares one copy of each string the records of a checkpoint or
// a shard repeat (verdicts, outcome hashes, kind lists).
type interner map[string]string

func (m interner) of(s string) string {
	if v, ok := m[s]; ok {
		return v
	}
	m[s] = s
	return s
}
