package explore

import (
	"fmt"
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
// cut short (--time), and then the summary is Partial.
func Merge(files []*ShardFile) (*Summary, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("merge: no shard files")
	}
	f0 := files[0]
	n := f0.Shard.Count
	if n < 1 {
		return nil, fmt.Errorf("merge: %s: a split has at least one shard", f0.name())
	}
	if n > len(files) {
		// n comes from a file: say what is missing without allocating n.
		given := map[int]bool{}
		for _, f := range files {
			given[f.Shard.Index] = true
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
		return nil, fmt.Errorf("merge: incomplete: a %d-way split needs %d shard files, %d given; missing shard %s%s", n, n, len(files), strings.Join(missing, ", "), more)
	}
	if f0.Budget < 0 {
		return nil, fmt.Errorf("merge: %s: budget %d", f0.name(), f0.Budget)
	}
	seen := make([]*ShardFile, n) // the file of each shard index
	var recs []*Record
	cut := false
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
		planned := owned(f.Shard.Index, n, f.Budget)
		for _, r := range f.Records {
			if r != nil && (r.Index%n != f.Shard.Index || r.Index < 0 || r.Index >= f.Budget) {
				return nil, fmt.Errorf("merge: %s holds schedule %d, which is not its own", f.name(), r.Index)
			}
		}
		i0 := f.Shard.Index
		if err := checkRecords("merge: "+f.name(), f.Records, planned, func(j int) int { return i0 + j*n }); err != nil {
			return nil, err
		}
		switch {
		case len(f.Records) < planned && !f.Cut:
			return nil, fmt.Errorf("merge: %s holds %d of its %d schedules and does not say it was cut short (--time): truncated?", f.name(), len(f.Records), planned)
		case len(f.Records) < planned:
			cut = true
		}
		if f.Expect != f0.Expect {
			return nil, fmt.Errorf("merge: %s expects %q, %s expects %q", f.name(), f.Expect, f0.name(), f0.Expect)
		}
		recs = append(recs, f.Records...)
	}
	for i, f := range seen {
		if f == nil {
			return nil, fmt.Errorf("merge: incomplete: shard %d/%d is missing", i, n)
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
	if cut {
		sum.Partial, sum.Planned = true, f0.Budget
	}
	return sum, nil
}
