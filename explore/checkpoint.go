package explore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"iter"

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

// CheckpointReader reads a checkpoint file a line at a time: the header
// when it is made, then the records as [CheckpointReader.Records] hands
// them out, one at a time: a resume folds each as it comes, so its memory
// is that of the outcomes, not of the records (a checkpoint of any size
// resumes).
type CheckpointReader struct {
	Header *CheckpointHeader
	br     *bufio.Reader
	line   int   // lines read
	good   int64 // bytes of the well-formed lines read
	done   bool
}

// NewCheckpointReader reads the header line of a checkpoint from r. A
// file without a whole first line is an "empty checkpoint" error, with
// nothing read (Good is 0).
func NewCheckpointReader(r io.Reader) (*CheckpointReader, error) {
	c := &CheckpointReader{br: bufio.NewReaderSize(r, 1<<16), line: 1}
	text, err := c.br.ReadBytes('\n')
	switch {
	case err == io.EOF:
		return nil, fmt.Errorf("%w: line 1: empty checkpoint (no header line)", ErrBadInput)
	case err != nil:
		return nil, err
	}
	h, _, _, err := ParseCheckpoint(text)
	if err != nil {
		return nil, err
	}
	c.Header, c.good = h, int64(len(text))
	return c, nil
}

// Records yields the records after the header, in file order, each
// decoded as it is reached; a torn last line (the writer was killed) ends
// them, a malformed line before it is an error naming its line. The
// strings records repeat are not shared: a resume keeps none of them.
func (c *CheckpointReader) Records() iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		for line, err := range c.Lines() {
			var r *Record
			if err == nil {
				r = new(Record)
				if jerr := json.Unmarshal(line, r); jerr != nil {
					c.done, c.good = true, c.good-int64(len(line)+1)
					yield(nil, fmt.Errorf("%w: line %d: not a schedule record: %w", ErrBadInput, c.line, jsonAt(line, jerr)))
					return
				}
			}
			if !yield(r, err) || err != nil {
				return
			}
		}
	}
}

// Lines yields the lines of the records after the header, without their
// newline, as Records reads them but not decoded (the bytes are reused:
// copy what you keep).
func (c *CheckpointReader) Lines() iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		for !c.done {
			text, err := c.br.ReadSlice('\n')
			if err == bufio.ErrBufferFull {
				var long []byte
				for err == bufio.ErrBufferFull {
					long = append(long, text...)
					text, err = c.br.ReadSlice('\n')
				}
				text = append(long, text...)
			}
			if err != nil { // io.EOF: what is left is torn, or nothing
				c.done = true
				if err != io.EOF {
					yield(nil, err)
				}
				return
			}
			c.line++
			c.good += int64(len(text))
			if !yield(text[:len(text)-1], nil) {
				return
			}
		}
	}
}

// Good is the length of the well-formed prefix read so far: once Records
// has run to its end, where a resume cuts a torn last line off and
// appends.
func (c *CheckpointReader) Good() int64 { return c.good }

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

// recordCheck verifies, a record at a time, that the records of a file
// are the first of the planned indices, each once, with known verdicts
// and a witness wherever the verdict got worse (what a resume or a merge
// needs to reproduce the summary). It reports as a check of the whole
// list would: more records than planned first, then the first bad record.
// what names the file in messages.
type recordCheck struct {
	what    string
	planned int
	index   func(j int) int
	n       int    // records seen
	best    string // the worst verdict so far
	err     error  // the first bad record's
}

func newRecordCheck(what string, planned int, index func(j int) int) *recordCheck {
	return &recordCheck{what: what, planned: planned, index: index, best: check.OK}
}

// add checks the next record, r; it reports whether r may be folded in
// (every record so far is good).
func (c *recordCheck) add(r *Record) bool {
	j := c.n
	c.n++
	if c.err != nil || j >= c.planned {
		return false
	}
	switch {
	case r == nil:
		c.err = fmt.Errorf("%w: %s: record %d is empty (null)", ErrBadInput, c.what, j+1)
	case r.Index != c.index(j):
		c.err = fmt.Errorf("%w: %s: record %d is schedule %d; want schedule %d (records are the planned schedules in order, each once)", ErrBadInput, c.what, j+1, r.Index, c.index(j))
	case !knownVerdict(r.Verdict):
		c.err = fmt.Errorf("%w: %s: schedule %d has verdict %q, which this simctl does not know", ErrBadInput, c.what, r.Index, r.Verdict)
	}
	if c.err != nil {
		return false
	}
	for _, k := range r.Kinds {
		if !knownVerdict(k) || k == check.OK {
			c.err = fmt.Errorf("%w: %s: schedule %d has finding kind %q, which this simctl does not know", ErrBadInput, c.what, r.Index, k)
			return false
		}
	}
	if check.Worse(r.Verdict, c.best) {
		if r.Witness == nil {
			c.err = fmt.Errorf("%w: %s: schedule %d has verdict %s but no witness", ErrBadInput, c.what, r.Index, r.Verdict)
			return false
		}
		c.best = r.Verdict
	}
	return true
}

// end says what is wrong with the records added, if anything.
func (c *recordCheck) end() error {
	if c.n > c.planned {
		return fmt.Errorf("%w: %s holds %d schedules; it plans %d", ErrBadInput, c.what, c.n, c.planned)
	}
	return c.err
}

// resume folds opt.Resume (the records of a checkpoint, as they are read)
// into the summary and returns the indices still to run and the worst
// verdict so far (which decides the records that carry a witness, as if
// the run had never stopped).
func resume(s Strategy, sum *Summary, m *merger, indices schedules, opt Options) (schedules, string, error) {
	if opt.Resume == nil {
		return indices, check.OK, nil
	}
	c := newRecordCheck("the checkpoint", indices.n, indices.at)
	for r, err := range opt.Resume {
		if err != nil {
			return indices, "", err
		}
		if _, ok := s.(Independent); !ok {
			return indices, "", fmt.Errorf("%w: strategy %s cannot resume: its schedules depend on each other (resume random or pct)", ErrBadInput, s.Name())
		}
		if !c.add(r) {
			continue
		}
		if opt.Shard.Count > 0 && !opt.RecordsElsewhere {
			sum.Records = append(sum.Records, r)
		}
		m.add(r)
	}
	if err := c.end(); err != nil {
		return indices, "", err
	}
	return indices.from(c.n), c.best, nil
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

// Records yields recs, in order, without an error: [Options.Resume] from
// records in memory.
func Records(recs []*Record) iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}
}
