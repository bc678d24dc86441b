package explore

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/ranks"
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

func (s Shard) owns(i int) bool { return s.Count <= 1 || i%s.Count == s.Index }

// Record is one schedule's contribution to a summary. Records that made the
// verdict of their run worse carry the witness and its findings.
type Record struct {
	Index    int             `json:"index"`
	Seed     uint64          `json:"seed"`
	Verdict  string          `json:"verdict"`
	Kinds    []string        `json:"kinds,omitempty"`
	OutHash  string          `json:"out_hash"`
	Outputs  []RankOutputs   `json:"outputs,omitempty"`
	Witness  *Witness        `json:"witness,omitempty"`
	Findings []ranks.Finding `json:"findings,omitempty"`
}

// ShardFileVersion is the version of [ShardFile].
const ShardFileVersion = 1

// ShardFile is what one shard writes: enough to merge, and to check that
// every shard explored the same thing.
type ShardFile struct {
	Version int `json:"version"`
	Exploration
	Budget   int       `json:"budget"`
	Outcomes bool      `json:"outcomes"`
	Shard    Shard     `json:"shard"`
	Records  []*Record `json:"records"`
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
	return &ShardFile{Version: ShardFileVersion, Exploration: sum.Exploration, Budget: budget, Outcomes: outcomes, Shard: sh, Records: sum.Records}
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
	}
	if m.progress != nil {
		m.progress(sum.Schedules)
	}
}

// Merge combines the files of every shard of one exploration into the
// summary a single machine would have produced for the same budget. The
// shards must agree on what they explored and cover 0..n-1 exactly once.
func Merge(files []*ShardFile) (*Summary, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("merge: no shard files")
	}
	f0 := files[0]
	n := f0.Shard.Count
	if n < 1 {
		return nil, fmt.Errorf("merge: %s: a split has at least one shard", f0.name())
	}
	seen := make([]*ShardFile, n) // the file of each shard index
	var recs []*Record
	for _, f := range files {
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
		}
		seen[f.Shard.Index] = f
		for _, r := range f.Records {
			if r == nil {
				return nil, fmt.Errorf("merge: %s holds an empty record (null)", f.name())
			}
			if r.Index%n != f.Shard.Index || r.Index < 0 || r.Index >= f.Budget {
				return nil, fmt.Errorf("merge: %s holds schedule %d, which is not its own", f.name(), r.Index)
			}
		}
		recs = append(recs, f.Records...)
	}
	for i, f := range seen {
		if f == nil {
			return nil, fmt.Errorf("merge: shard %d/%d is missing", i, n)
		}
	}
	slices.SortFunc(recs, func(a, b *Record) int { return a.Index - b.Index })
	sum := &Summary{Exploration: f0.Exploration, Verdict: check.OK, Findings: map[string]int{}}
	m := &merger{sum: sum, byHash: map[string]*Outcome{}, outcomes: f0.Outcomes}
	// A record carries a witness when it was the worst of its own shard so
	// far; a schedule that is the worst of the merged order so far is also
	// the worst of its shard so far, so every witness Merge needs is there.
	for _, r := range recs {
		if check.Worse(r.Verdict, sum.Verdict) && r.Witness == nil {
			return nil, fmt.Errorf("merge: schedule %d has verdict %s but no witness in its shard file", r.Index, r.Verdict)
		}
		m.add(r)
	}
	return sum, nil
}
