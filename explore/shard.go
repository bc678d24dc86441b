package explore

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// Shard is one of Count disjoint slices of a schedule space: the schedules
// whose index is ≡ Index (mod Count). Independent machines (a Kubernetes
// Indexed Job, a Slurm job array) each take one; [Merge] combines their
// files into the summary one machine would have produced.
type Shard struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

// ParseShard parses "i/n" with 0 ≤ i < n.
func ParseShard(s string) (Shard, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("shard %q: want i/n with 0 ≤ i < n (e.g. 0/4)", s)
	}
	return Shard{Index: i, Count: n}, nil
}

// Record is one schedule's contribution to a summary. Records that made the
// verdict of their run worse carry the witness and its findings.
type Record struct {
	Index    int             `json:"index"`
	Seed     sim.Seed        `json:"seed"`
	Verdict  string          `json:"verdict"`
	Kinds    []string        `json:"kinds,omitempty"`
	OutHash  string          `json:"out_hash"`
	Outputs  []RankOutputs   `json:"outputs,omitempty"`
	Witness  *Witness        `json:"witness,omitempty"`
	Findings []ranks.Finding `json:"findings,omitempty"`
	// FindingsTotal counts the witness's findings, including those past
	// the per-kind cap that Findings leaves out.
	FindingsTotal int `json:"findings_total,omitempty"`
}

// ShardFileVersion is the version of [ShardFile].
const ShardFileVersion = 1

// ShardFile is what one shard writes: enough to merge, and to check that
// every shard explored the same thing.
type ShardFile struct {
	Version int `json:"version"`
	Exploration
	Budget   int   `json:"budget"`
	Outcomes bool  `json:"outcomes"`
	Shard    Shard `json:"shard"`
	// Cut: the shard stopped (--time) before running every schedule it
	// owns; its records are then the first ones it owns.
	Cut bool `json:"cut,omitempty"`
	// Expect is the variant's expected verdict, for merge's exit status.
	Expect  string    `json:"expect,omitempty"`
	Records []*Record `json:"records"`
	// Source is where the file was read from (a path), for Merge's
	// messages; not part of the file.
	Source string `json:"-"`
}

// name is how Merge's messages call f: its path and shard, or its shard.
func (f *ShardFile) name() string {
	if f.Source != "" {
		return fmt.Sprintf("%s (shard %d/%d)", f.Source, f.Shard.Index, f.Shard.Count)
	}
	return fmt.Sprintf("shard %d/%d", f.Shard.Index, f.Shard.Count)
}

// NewShardFile packages a sharded run's summary.
func NewShardFile(sum *Summary, budget int, outcomes bool, sh Shard) *ShardFile {
	return &ShardFile{Version: ShardFileVersion, Exploration: sum.Exploration, Budget: budget, Outcomes: outcomes, Shard: sh, Cut: sum.Partial, Records: sum.Records}
}

// merger folds records, in schedule order, into a summary. Exploration and
// Merge share it, so a merged summary is the one a single machine prints.
type merger struct {
	sum      *Summary
	byHash   map[string]*Outcome
	outcomes bool
	progress func(int)
}

func (m *merger) add(r *Record) {
	sum := m.sum
	sum.Schedules++
	for _, k := range r.Kinds {
		sum.Findings[k]++
	}
	o, ok := m.byHash[r.OutHash]
	if !ok {
		o = &Outcome{Hash: r.OutHash, First: r.Index, Verdict: r.Verdict}
		if m.outcomes {
			o.Ranks = r.Outputs
		}
		m.byHash[r.OutHash] = o
		sum.Outcomes = append(sum.Outcomes, o)
	}
	o.Count++
	if check.Worse(r.Verdict, sum.Verdict) {
		sum.Verdict = r.Verdict
		sum.Witness = r.Witness
		sum.WitnessInfo = r.Witness.Info()
		sum.WitnessFindings = r.Findings
		sum.WitnessFindingsTotal = max(r.FindingsTotal, len(r.Findings))
		sum.WitnessFindingsTruncated = sum.WitnessFindingsTotal > len(r.Findings)
	}
	if m.progress != nil {
		m.progress(sum.Schedules)
	}
}

// owned is how many of the schedules 0..budget-1 shard i of n owns.
func owned(i, n, budget int) int {
	if i >= budget {
		return 0
	}
	return (budget-i-1)/n + 1
}

// Merge combines the files of every shard of one exploration into the
// summary a single machine would have produced for the same budget. The
// shards must agree on what they explored and cover 0..n-1 exactly once;
// each must hold every schedule it owns, in order, unless it says it was
// cut short (--time), and then the summary is Partial. It is a [Merging]
// of files in memory.
func Merge(files []*ShardFile) (*Summary, error) {
	g := NewMerging()
	for _, f := range files {
		p := g.File(f)
		for _, r := range f.Records {
			if p.Add(r) != nil {
				break
			}
		}
		p.End()
	}
	return g.Summary()
}

// A Merging combines the shard files of one exploration into the summary
// a single machine would have produced ([Merge]), a record at a time and
// the files in any order: its memory is that of the outcomes, whatever
// the number of records. Give each file's header to [Merging.File], the
// file's records, in file order, to the [ShardPart] it returns, end the
// part, and ask [Merging.Summary], which says what is wrong, if anything:
// first what the headers say (the files do not make one split of one
// exploration), then the first file whose records are not what it plans.
type Merging struct {
	parts []*ShardPart // ended
	acc   *fold
	cut   bool
}

// NewMerging starts a merge.
func NewMerging() *Merging { return &Merging{} }

// A ShardPart takes the records of one shard file.
type ShardPart struct {
	g     *Merging
	f     *ShardFile
	n     int          // the split's shards, as f says (0: f cannot be checked)
	check *recordCheck // nil: f cannot be checked
	acc   fold
	err   error
}

// File starts the part of the shard file whose header (all but its
// records) is f.
func (g *Merging) File(f *ShardFile) *ShardPart {
	p := &ShardPart{g: g, f: f, acc: newFold(f.Outcomes)}
	i0, n := f.Shard.Index, f.Shard.Count
	if n >= 1 && i0 >= 0 && i0 < n && f.Budget >= 0 {
		p.n = n
		p.check = newRecordCheck("merge: "+f.name(), owned(i0, n, f.Budget), func(j int) int { return i0 + j*n })
	}
	return p
}

// Add takes the file's next record. A record of another shard is an error
// at once; other faults are reported by End, as a check of the whole file
// would report them. After an error, nothing more is wanted.
func (p *ShardPart) Add(r *Record) error {
	f := p.f
	switch {
	case p.err != nil:
		return p.err
	case p.check == nil: // the headers' check says what is wrong
		return nil
	case r != nil && (r.Index%p.n != f.Shard.Index || r.Index < 0 || r.Index >= f.Budget):
		p.err = fmt.Errorf("merge: %s holds schedule %d, which is not its own", f.name(), r.Index)
		return p.err
	}
	if p.check.add(r) {
		p.acc.add(r)
	}
	return nil
}

// Header is the file's header.
func (p *ShardPart) Header() *ShardFile { return p.f }

// Failed reports whether Add has refused a record.
func (p *ShardPart) Failed() bool { return p.err != nil }

// End says that the file has no more records, and adds the part to the
// merge. Whether they were what the file plans (every schedule it owns,
// in order, or the first of them if it was cut short) is for Summary to
// say.
func (p *ShardPart) End() {
	g, f, c := p.g, p.f, p.check
	if p.err == nil && c != nil {
		planned := c.planned
		if p.err = c.end(); p.err == nil {
			switch {
			case c.n < planned && !f.Cut:
				p.err = fmt.Errorf("merge: %s holds %d of its %d schedules and does not say it was cut short (--time): truncated?", f.name(), c.n, planned)
			case c.n < planned:
				g.cut = true
			}
		}
	}
	if g.acc == nil {
		acc := p.acc
		g.acc = &acc
	} else {
		g.acc.absorb(&p.acc)
	}
	p.acc = fold{}
	g.parts = append(g.parts, p)
}

// Summary is the merged summary of the parts ended, or what is wrong with
// them. A record carries a witness when it was the worst of its own shard
// so far; the first schedule of the worst verdict overall is also the
// worst of its shard so far, so it carries the witness the summary needs.
func (g *Merging) Summary() (*Summary, error) {
	if len(g.parts) == 0 {
		return nil, fmt.Errorf("merge: no shard files")
	}
	f0 := g.parts[0].f
	n := f0.Shard.Count
	if n < 1 {
		return nil, fmt.Errorf("merge: %s: a split has at least one shard", f0.name())
	}
	if n > len(g.parts) {
		// n comes from a file: say what is missing without allocating n.
		given := map[int]bool{}
		for _, p := range g.parts {
			given[p.f.Shard.Index] = true
		}
		var missing []string
		for i := 0; i < n && len(missing) < 8; i++ {
			if !given[i] {
				missing = append(missing, fmt.Sprintf("%d/%d", i, n))
			}
		}
		more := ""
		if n-len(given) > len(missing) {
			more = fmt.Sprintf(" and %d more", n-len(given)-len(missing))
		}
		return nil, fmt.Errorf("merge: incomplete: a %d-way split needs %d shard files, %d given; missing shard %s%s", n, n, len(g.parts), strings.Join(missing, ", "), more)
	}
	if f0.Budget < 0 {
		return nil, fmt.Errorf("merge: %s: budget %d", f0.name(), f0.Budget)
	}
	seen := make([]*ShardFile, n) // the file of each shard index
	for _, p := range g.parts {
		f := p.f
		switch {
		case f.Version != ShardFileVersion:
			return nil, fmt.Errorf("merge: %s has version %d, want %d", f.name(), f.Version, ShardFileVersion)
		case !f.Exploration.Equal(f0.Exploration) || f.Budget != f0.Budget || f.Outcomes != f0.Outcomes:
			return nil, fmt.Errorf("merge: %s explored something else than %s (scenario, variant, sets, strategy, seed, budget and --outcomes must match)",
				f.name(), f0.name())
		case f.Shard.Count != n || f.Shard.Index < 0 || f.Shard.Index >= n:
			return nil, fmt.Errorf("merge: %s does not belong to a %d-way split", f.name(), n)
		case seen[f.Shard.Index] != nil:
			return nil, fmt.Errorf("merge: %s is given twice: %s is the same shard", f.name(), seen[f.Shard.Index].name())
		case f.Expect != f0.Expect:
			return nil, fmt.Errorf("merge: %s expects %q, %s expects %q", f.name(), f.Expect, f0.name(), f0.Expect)
		}
		seen[f.Shard.Index] = f
	}
	for i, f := range seen {
		if f == nil {
			return nil, fmt.Errorf("merge: incomplete: shard %d/%d is missing", i, n)
		}
	}
	for _, p := range g.parts {
		if p.err != nil {
			return nil, p.err
		}
	}
	sum := &Summary{Exploration: f0.Exploration, Verdict: check.OK, Findings: map[string]int{}}
	g.acc.into(sum)
	if g.cut {
		sum.Partial, sum.Planned = true, f0.Budget
	}
	return sum, nil
}

// fold gathers records in any order into what a [merger] makes of them in
// schedule order: the counts, each outcome with its first schedule (its
// verdict and outputs are those of that schedule), and the first schedule
// of the worst verdict, which is the one the merger's summary ends with
// as its witness.
type fold struct {
	schedules int
	findings  map[string]int
	byHash    map[string]*Outcome
	witness   *Record
	outcomes  bool // keep the outputs of each outcome
}

func newFold(outcomes bool) fold {
	return fold{findings: map[string]int{}, byHash: map[string]*Outcome{}, outcomes: outcomes}
}

func (f *fold) add(r *Record) {
	f.schedules++
	for _, k := range r.Kinds {
		f.findings[k]++
	}
	var ranks []RankOutputs
	if f.outcomes {
		ranks = r.Outputs
	}
	f.outcome(&Outcome{Hash: r.OutHash, Count: 1, First: r.Index, Verdict: r.Verdict, Ranks: ranks})
	f.witnessOf(r)
}

// outcome counts o's schedules in o's outcome, whose first schedule is the
// earlier of the two.
func (f *fold) outcome(o *Outcome) {
	x, ok := f.byHash[o.Hash]
	if !ok {
		f.byHash[o.Hash] = o
		return
	}
	if o.First < x.First {
		x.First, x.Verdict, x.Ranks = o.First, o.Verdict, o.Ranks
	}
	x.Count += o.Count
}

// witnessOf makes r the witness if its verdict is the worst so far, and
// the first of that verdict.
func (f *fold) witnessOf(r *Record) {
	if w := f.witness; r != nil && check.Worse(r.Verdict, check.OK) &&
		(w == nil || check.Worse(r.Verdict, w.Verdict) || r.Verdict == w.Verdict && r.Index < w.Index) {
		f.witness = r
	}
}

// absorb adds the fold o (of other schedules) into f.
func (f *fold) absorb(o *fold) {
	f.schedules += o.schedules
	for k, n := range o.findings {
		f.findings[k] += n
	}
	for _, x := range o.byHash {
		f.outcome(x)
	}
	f.witnessOf(o.witness)
}

// into writes the fold into sum, as merger.add would have left it: the
// outcomes in order of their first schedule.
func (f *fold) into(sum *Summary) {
	sum.Schedules = f.schedules
	maps.Copy(sum.Findings, f.findings)
	sum.Outcomes = slices.SortedFunc(maps.Values(f.byHash), func(a, b *Outcome) int { return a.First - b.First })
	if r := f.witness; r != nil {
		sum.Verdict = r.Verdict
		sum.Witness = r.Witness
		sum.WitnessInfo = r.Witness.Info()
		sum.WitnessFindings = r.Findings
		sum.WitnessFindingsTotal = max(r.FindingsTotal, len(r.Findings))
		sum.WitnessFindingsTruncated = sum.WitnessFindingsTotal > len(r.Findings)
	}
}
