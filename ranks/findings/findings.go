package findings

// Finding kinds every world reports, in increasing severity.
const (
	KindRace       = "race"
	KindMismatch   = "mismatch"
	KindCorruption = "corruption"
	KindDropped    = "dropped"
	KindHang       = "hang"
)

// Finding is one thing a check found.
type Finding struct {
	Kind     string   `json:"kind"`
	Message  string   `json:"message"`
	Ranks    []int    `json:"ranks"`
	Ops      []string `json:"ops"`
	Streams  []string `json:"streams"`
	Resource string   `json:"resource"`
}

// Key identifies a finding up to rank and chunk, for de-duplication:
// its kind, resource and the parties' names.
type Key struct {
	Kind, Res, A, B, X string
}

// Log is one run's findings: every finding counted by kind ([Log.Counts]),
// at most Max of each kind kept, in the order reported.
type Log struct {
	// Max caps the findings kept per kind.
	Max int
	// List holds the kept findings, in the order reported.
	List []Finding
	// Counts counts every finding reported, kept or not, by kind.
	Counts map[string]int
	seen   map[Key]bool
	groups map[string]int // a group's finding: its index in List, -1 past the cap
}

// NewLog returns an empty log that keeps at most max findings per kind.
func NewLog(max int) Log {
	return Log{Max: max, Counts: map[string]int{}}
}

// Add counts f and keeps it when its kind is under the cap; it reports
// whether f was kept, at index len(List)-1.
func (l *Log) Add(f Finding) bool {
	l.Counts[f.Kind]++
	if l.Counts[f.Kind] > l.Max {
		return false
	}
	l.List = append(l.List, f)
	return true
}

// Full reports whether a finding of kind reported now would not be kept.
func (l *Log) Full(kind string) bool { return l.Counts[kind] >= l.Max }

// First reports whether k is seen for the first time, and marks it seen:
// a finding whose key was reported already is a duplicate.
func (l *Log) First(k Key) bool {
	if l.seen[k] {
		return false
	}
	if l.seen == nil {
		l.seen = map[Key]bool{}
	}
	l.seen[k] = true
	return true
}

// Group returns the kept finding of group, and whether group was reported
// at all: a nil finding for a reported group is one past its kind's cap.
// One finding of a group gathers what each report of it adds (a dropped
// collective lists every rank it dropped on).
func (l *Log) Group(group string) (*Finding, bool) {
	i, ok := l.groups[group]
	if !ok || i < 0 {
		return nil, ok
	}
	return &l.List[i], true
}

// AddGroup reports f as group's one finding: counted once for the group,
// and kept when its kind is under the cap.
func (l *Log) AddGroup(group string, f Finding) {
	if l.groups == nil {
		l.groups = map[string]int{}
	}
	if !l.Add(f) {
		// Remember it, so that later reports of the group do not count
		// it again: Counts is the number of groups, kept or not.
		l.groups[group] = -1
		return
	}
	l.groups[group] = len(l.List) - 1
}
