package report

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// Data is everything a report shows, as plain data: the HTML page embeds it
// as JSON and the trace is derived from it. It is a pure function of the
// scenario and the schedules traced.
type Data struct {
	Scenario    string     `json:"scenario"`
	Description string     `json:"description"`
	Variants    []*Variant `json:"variants"`
}

// Variant is one traced schedule of one scenario variant: its verdict, the
// per-rank stream lanes with every task's span, the flows between lanes,
// the findings placed on the lanes involved, and the values that differ
// from the reference.
type Variant struct {
	Name    string   `json:"name"`
	Doc     string   `json:"doc,omitempty"`
	Config  string   `json:"config"`
	Notes   []string `json:"notes,omitempty"`
	Expect  string   `json:"expect,omitempty"`
	Verdict string   `json:"verdict"` // of the traced schedule
	Met     bool     `json:"met"`
	// Schedules is how many schedules the variant's exploration ran (0 when
	// the variant was not explored, e.g. a single replayed witness).
	Schedules int `json:"schedules"`
	// Schedule says which schedule is traced: "nominal" or "seed N".
	Schedule string `json:"schedule"`
	// Deviations say, in words, where the traced schedule departs from
	// nominal (a replayed witness's choices: which step ran before which,
	// on which rank and stream); empty for nominal and seeded schedules.
	Deviations []string  `json:"deviations,omitempty"`
	Seed       *sim.Seed `json:"seed,omitempty"`
	TraceHash  string    `json:"trace_hash"`
	StepTimeNs int64     `json:"step_time_ns"` // of the traced schedule
	// NominalStepTimeNs is the nominal schedule's step time, the one
	// `simctl run` prints (equal to StepTimeNs when nominal is traced;
	// 0 when not known: a replayed witness alone).
	NominalStepTimeNs int64 `json:"nominal_step_time_ns"`
	EndNs             int64 `json:"end_ns"`

	Ranks    int         `json:"ranks"`
	Lanes    []Lane      `json:"lanes"`
	Colls    []string    `json:"colls"` // collective instances, in first-start order
	Spans    []Span      `json:"spans"`
	Issues   []Issue     `json:"issues"`
	Flows    []Flow      `json:"flows"`
	Findings []Finding   `json:"findings"`
	Values   []ValueDiff `json:"values"`
}

// Lane is one row of the timeline: a rank's host thread (Stream "host") or
// one of its streams.
type Lane struct {
	Rank   int    `json:"rank"`
	Stream string `json:"stream"`
	Host   bool   `json:"host,omitempty"`
}

// Span is one task on a lane: a kernel, an event record or wait.
type Span struct {
	Lane   int     `json:"lane"`
	Name   string  `json:"name"`
	Kind   string  `json:"kind"`
	Coll   int     `json:"coll"` // index into Variant.Colls, -1 if none
	Replay int     `json:"replay"`
	Start  int64   `json:"start"`
	End    int64   `json:"end"`
	Phases []Phase `json:"phases,omitempty"`
	// Findings lists the findings (indices into Variant.Findings) that name
	// this span: the racing pair, the consumer of another collective's
	// signal, the kernel that stored a corrupted value.
	Findings []int `json:"findings,omitempty"`
}

// Phase is a labelled stretch of a kernel's micro-program.
type Phase struct {
	Name  string `json:"name"`
	Start int64  `json:"start"`
	End   int64  `json:"end"`
}

// Issue is a host-thread step on a host lane.
type Issue struct {
	Lane int    `json:"lane"`
	At   int64  `json:"at"`
	Name string `json:"name"`
}

// Flow is an arrow between two spans (indices into Variant.Spans): an
// event record → wait ("event"), a signal put → wait ("signal"), an NCCL
// send → receive ("fifo"), or NCCL's implicit per-communicator order
// ("order"). Mismatch marks a signal or message consumed by another
// collective instance than the one that produced it.
type Flow struct {
	Kind     string `json:"kind"`
	Label    string `json:"label"`
	From     int    `json:"from"`
	To       int    `json:"to"`
	FromAt   int64  `json:"from_at"`
	ToAt     int64  `json:"to_at"`
	Mismatch bool   `json:"mismatch,omitempty"`
}

// Finding is a check's finding placed on the timeline: At is when it was
// detected (for corruption, when the wrong value was stored; for a dropped
// collective, when its kernel first completed; for a hang, the end of the
// run; -1 when unknown), Spans the spans it names, and Lanes the lanes it
// names where it has no span (the stuck streams of a hang).
type Finding struct {
	ranks.Finding
	At    int64 `json:"at"`
	Spans []int `json:"spans"`
	Lanes []int `json:"lanes"`
}

// ValueDiff is one output chunk whose value differs from the reference:
// expected and observed values with their provenance, the source terms
// missing from and extra in the observed value, and the span that stored it.
type ValueDiff struct {
	Rank         int      `json:"rank"`
	Tensor       string   `json:"tensor"`
	Chunk        int      `json:"chunk"`
	Expected     uint64   `json:"expected"`
	Observed     uint64   `json:"observed"`
	ExpectedProv string   `json:"expected_prov"`
	ObservedProv string   `json:"observed_prov"`
	Missing      []string `json:"missing"`
	Extra        []string `json:"extra"`
	WrittenBy    int      `json:"written_by"` // span index, -1 if unknown
	// Differing is how many chunks differ on this rank in all (only the
	// first, in program order, is listed).
	Differing int `json:"differing"`
	// Cause explains the value in the program's words (check.Cause's
	// text): which op read which bytes, whose they were and should have
	// been, and the missing ordering edge; empty when not found.
	Cause string `json:"cause"`
}

// Capture re-runs the schedule behind vr's verdict with the timeline on —
// the witness seed when exploration found something worse than nominal,
// otherwise the nominal schedule — and returns it as a report variant. It
// fails if the re-run does not reproduce the recorded trace hash.
func Capture(sc *scenarios.Scenario, vr *check.VariantReport) (*Variant, error) {
	mode, _ := vr.WitnessChooser()
	want := vr.TraceHash
	if vr.WitnessSeed != nil {
		want = vr.WitnessHash
	}
	v, err := ScheduleExplained(vr.Program, vr.Config, vr.Name, mode, func() sim.Chooser { _, ch := vr.WitnessChooser(); return ch })
	if err != nil {
		return nil, err
	}
	if v.Verdict != vr.Verdict {
		return nil, fmt.Errorf("variant %q: re-running the schedule gave verdict %s, exploration recorded %s", vr.Name, v.Verdict, vr.Verdict)
	}
	if want != "" && v.TraceHash != want {
		return nil, fmt.Errorf("variant %q: re-running the schedule gave trace %s, exploration recorded %s", vr.Name, v.TraceHash, want)
	}
	if vr.WitnessSeed != nil {
		s := *vr.WitnessSeed
		v.Seed = &s
		v.Schedule = fmt.Sprintf("seed %d", s)
		if vr.WitnessStrategy == check.StrategyPCT {
			v.Schedule = fmt.Sprintf("pct seed %d", s)
		}
	}
	v.Doc, v.Notes, v.Expect = vr.Doc, vr.Notes, vr.Expect
	v.Met, v.Schedules = vr.Met, vr.Schedules
	v.NominalStepTimeNs = vr.StepTimeNs
	return v, nil
}

// Schedule runs program p (with settings cfg) under chooser ch with the
// timeline on, judges it against the reference, and returns it as a report
// variant named name. Exploration and replay commands use it to show a
// witness schedule.
func Schedule(p check.Program, cfg check.Settings, name string, ch sim.Chooser) (*Variant, error) {
	return ScheduleMode(p, cfg, name, sim.Timed, ch)
}

// ScheduleMode is [Schedule] in a given engine mode: an untimed witness
// (PCT's, DPOR's) replays its choices in [sim.Untimed].
func ScheduleMode(p check.Program, cfg check.Settings, name string, mode sim.Mode, ch sim.Chooser) (*Variant, error) {
	ref, err := check.NewReference(p)
	if err != nil {
		return nil, err
	}
	o, err := check.RunScheduleOpt(p, ref, mode, ch, check.BuildOptions{Timeline: true})
	if err != nil {
		return nil, err
	}
	rb, err := p.Build(check.BuildOptions{Reference: true}, sim.NewEngine(sim.Timed, nil))
	if err != nil {
		return nil, err
	}
	rres, err := rb.World.Run()
	if err != nil {
		return nil, err
	}
	if rres.Hung || o.Result.Hung || o.Built.BuildFailed() {
		rb = nil // no values to compare, as in check
	}
	return FromOutcome(name, cfg, o, rb), nil
}

// ScheduleExplained is [ScheduleMode] with each differing value's root
// cause ([check.RootCauses]); newCh makes a fresh chooser of the schedule
// for each of the runs.
func ScheduleExplained(p check.Program, cfg check.Settings, name string, mode sim.Mode, newCh func() sim.Chooser) (*Variant, error) {
	v, err := ScheduleMode(p, cfg, name, mode, newCh())
	if err != nil || len(v.Values) == 0 {
		return v, err
	}
	causes, err := check.RootCauses(p, mode, newCh())
	if err != nil {
		return nil, err
	}
	addCauses(v.Values, causes)
	return v, nil
}

// addCauses puts each rank's root cause beside its first differing value.
// For a value whose provenance names the same terms expected and observed
// (a plain kernel's output is a source of its own), the missing and
// foreign "terms" are the bytes the cause names: whose they should have
// been and whose they were.
func addCauses(ds []ValueDiff, causes []*check.Cause) {
	for i := range ds {
		d := &ds[i]
		for _, c := range causes {
			if c.Output == "" || !strings.HasPrefix(c.Output, fmt.Sprintf("rank %d tensor %s[", d.Rank, d.Tensor)) {
				continue
			}
			d.Cause = c.Text
			if len(d.Missing) == 0 && len(d.Extra) == 0 {
				bytes := fmt.Sprintf("%s[%d]", c.Tensor, c.Chunk)
				if c.Expected != "" {
					d.Missing = []string{fmt.Sprintf("%s as %s wrote it", bytes, c.Expected)}
				} else {
					d.Missing = []string{bytes + " as first written"}
				}
				if c.Writer.Name != "" {
					w := fmt.Sprintf("%s as %s wrote it", bytes, c.Writer.Name)
					if c.Via != "" {
						w = fmt.Sprintf("%s as %s wrote %s over it", bytes, c.Writer.Name, c.Via)
					}
					d.Extra = []string{w}
				} else {
					d.Extra = []string{bytes + " before any write"}
				}
			}
			break
		}
	}
}

// FromOutcome turns a schedule's outcome, built with
// scenarios.BuildOptions{Timeline: true}, into a report variant. ref is the
// reference run's build (its Compare tensors give expected values); it may
// be nil.
func FromOutcome(name string, cfg check.Settings, o *check.Outcome, ref *check.Built) *Variant {
	w := o.Built.World
	v := &Variant{
		Name: name, Config: cfg.Summary(), Verdict: o.Verdict, Schedule: "nominal",
		TraceHash: o.TraceHash, StepTimeNs: int64(o.StepTime), NominalStepTimeNs: int64(o.StepTime),
		EndNs: int64(o.Result.End), Ranks: w.N,
		Notes: o.Built.Notes,
	}
	// Lanes: per rank, the host thread then each stream.
	laneOf := map[string]int{}
	for r := range w.N {
		laneOf[laneKey(r, "host", true)] = len(v.Lanes)
		v.Lanes = append(v.Lanes, Lane{Rank: r, Stream: "host", Host: true})
		for _, s := range w.Streams(r) {
			laneOf[laneKey(r, s, false)] = len(v.Lanes)
			v.Lanes = append(v.Lanes, Lane{Rank: r, Stream: s})
		}
	}
	// Spans, in start order (then lane, then name): the order a reader
	// scans a timeline in.
	raw := append([]ranks.Span(nil), w.Spans()...)
	sort.SliceStable(raw, func(i, j int) bool {
		a, b := raw[i], raw[j]
		if a.Start != b.Start {
			return a.Start < b.Start
		}
		if la, lb := laneOf[laneKey(a.Rank, a.Stream, false)], laneOf[laneKey(b.Rank, b.Stream, false)]; la != lb {
			return la < lb
		}
		return a.End < b.End
	})
	multi := hasReplays(raw)
	collOf := map[string]int{}
	spanOf := map[ranks.TaskRef]int{}
	for _, s := range raw {
		if s.Kind == "replay" {
			continue // the end-of-replay join: not an op
		}
		c := -1
		if s.Coll != "" {
			inst := s.Coll
			if multi {
				inst = fmt.Sprintf("%s#%d", s.Coll, s.Replay)
			}
			var ok bool
			if c, ok = collOf[inst]; !ok {
				c = len(v.Colls)
				collOf[inst] = c
				v.Colls = append(v.Colls, inst)
			}
		}
		sp := Span{Lane: laneOf[laneKey(s.Rank, s.Stream, false)], Name: s.Name, Kind: s.Kind, Coll: c, Replay: s.Replay, Start: int64(s.Start), End: int64(s.End)}
		for _, p := range s.Phases {
			sp.Phases = append(sp.Phases, Phase{p.Name, int64(p.Start), int64(p.End)})
		}
		spanOf[ranks.TaskRef{Rank: s.Rank, Stream: s.Stream, Name: s.Name, Replay: s.Replay, Start: s.Start}] = len(v.Spans)
		v.Spans = append(v.Spans, sp)
	}
	find := func(t ranks.TaskRef) int {
		if i, ok := spanOf[t]; ok {
			return i
		}
		return -1
	}
	for _, is := range w.Issues() {
		v.Issues = append(v.Issues, Issue{Lane: laneOf[laneKey(is.Rank, "host", true)], At: int64(is.At), Name: is.Name})
	}
	for _, f := range w.Flows() {
		from, to := find(f.From.TaskRef), find(f.To.TaskRef)
		if from < 0 || to < 0 {
			continue
		}
		v.Flows = append(v.Flows, Flow{Kind: f.Kind, Label: f.Label, From: from, To: to, FromAt: int64(f.From.At), ToAt: int64(f.To.At), Mismatch: f.Mismatch})
	}
	// Findings, most severe first as the verdict orders them, each placed
	// where the run detected it.
	marks := map[string]ranks.Mark{}
	for _, m := range w.Marks() {
		if _, dup := marks[m.Message]; !dup {
			marks[m.Message] = m
		}
	}
	var diffs []ValueDiff
	if ref != nil {
		diffs = valueDiffs(o.Built, ref, find)
	}
	for _, f := range sortFindings(o.Findings) {
		pf := Finding{Finding: f, At: -1, Spans: []int{}}
		if m, ok := marks[f.Message]; ok {
			pf.At = int64(m.At)
			for _, t := range m.Tasks {
				if i := find(t); i >= 0 {
					pf.Spans = append(pf.Spans, i)
				}
			}
		}
		if f.Kind == ranks.KindCorruption {
			for _, d := range diffs {
				if len(f.Ranks) == 1 && d.Rank == f.Ranks[0] && d.WrittenBy >= 0 && slices.Contains(f.Ops, d.Tensor) {
					pf.Spans = append(pf.Spans, d.WrittenBy)
					pf.At = v.Spans[d.WrittenBy].End
				}
			}
		}
		if len(pf.Spans) == 0 && f.Kind != ranks.KindHang {
			// No mark (a dropped collective): the first span of each named
			// kernel on each named rank.
			for _, r := range f.Ranks {
				for _, op := range f.Ops {
					for i, sp := range v.Spans {
						if sp.Name == op && v.Lanes[sp.Lane].Rank == r {
							pf.Spans = append(pf.Spans, i)
							if pf.At < 0 || sp.End < pf.At {
								pf.At = sp.End
							}
							break
						}
					}
				}
			}
		}
		if len(pf.Spans) == 0 {
			// Stuck tasks never complete, so they have no span: name the
			// lanes of the streams involved on the ranks involved.
			for _, r := range f.Ranks {
				for _, st := range f.Streams {
					if l, ok := laneOf[laneKey(r, st, false)]; ok && !slices.Contains(pf.Lanes, l) {
						pf.Lanes = append(pf.Lanes, l)
					}
				}
			}
			slices.Sort(pf.Lanes)
			if pf.At < 0 && f.Kind == ranks.KindHang {
				pf.At = v.EndNs
			}
		}
		if pf.Lanes == nil {
			pf.Lanes = []int{}
		}
		v.Findings = append(v.Findings, pf)
	}
	for i, f := range v.Findings {
		for _, s := range f.Spans {
			if sp := &v.Spans[s]; len(sp.Findings) == 0 || sp.Findings[len(sp.Findings)-1] != i {
				sp.Findings = append(sp.Findings, i)
			}
		}
	}
	v.Values = diffs
	// Empty lists are [] in JSON, never null: the page iterates them.
	v.Values = nonNil(v.Values)
	v.Findings = nonNil(v.Findings)
	v.Spans = nonNil(v.Spans)
	v.Flows = nonNil(v.Flows)
	v.Issues = nonNil(v.Issues)
	v.Colls = nonNil(v.Colls)
	v.Lanes = nonNil(v.Lanes)
	return v
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func laneKey(rank int, stream string, host bool) string {
	if host {
		return fmt.Sprintf("%d|host|", rank)
	}
	return fmt.Sprintf("%d|%s", rank, stream)
}

func hasReplays(spans []ranks.Span) bool {
	for _, s := range spans {
		if s.Replay > 0 {
			return true
		}
	}
	return false
}

// sortFindings orders findings most severe first, stably (as check does).
func sortFindings(fs []ranks.Finding) []ranks.Finding {
	out := append([]ranks.Finding(nil), fs...)
	sort.SliceStable(out, func(i, j int) bool { return check.Worse(out[i].Kind, out[j].Kind) })
	return out
}

// valueDiffs lists, per rank, the first output chunk (in program order) that
// differs from the reference, with provenance and the span that wrote it.
func valueDiffs(got, want *scenarios.Built, find func(ranks.TaskRef) int) []ValueDiff {
	var out []ValueDiff
	for r := range got.Compare {
		if r >= len(want.Compare) {
			break
		}
		first := -1
		for i, b := range got.Compare[r] {
			wb := want.Compare[r][i]
			for c := range b.Vals {
				if b.Vals[c].N == wb.Vals[c].N {
					continue
				}
				if first < 0 {
					first = len(out)
					d := ValueDiff{
						Rank: r, Tensor: b.Name, Chunk: c,
						Expected: wb.Vals[c].N, Observed: b.Vals[c].N,
						ExpectedProv: want.World.Srcs.Format(wb.Vals[c]),
						ObservedProv: got.World.Srcs.Format(b.Vals[c]),
						WrittenBy:    -1,
					}
					d.Missing, d.Extra = termDiff(want.World, wb.Vals[c], got.World, b.Vals[c])
					if t, ok := got.World.LastWriter(b, c); ok {
						d.WrittenBy = find(t)
					}
					out = append(out, d)
				}
				out[first].Differing++
			}
		}
	}
	return out
}

// termDiff returns the provenance terms of want missing from got and those
// of got not in want, by source name, sorted.
func termDiff(ww *ranks.World, want ranks.Value, gw *ranks.World, got ranks.Value) (missing, extra []string) {
	terms := func(w *ranks.World, v ranks.Value) map[string]int64 {
		m := map[string]int64{}
		for _, t := range w.Srcs.Terms(v) {
			m[w.Srcs.Name(t.Src)] += t.Coef
		}
		return m
	}
	a, b := terms(ww, want), terms(gw, got)
	name := func(n string, c int64) string {
		if c == 1 {
			return n
		}
		return fmt.Sprintf("%d·%s", c, n)
	}
	for _, k := range sortedKeys(a) {
		if d := a[k] - b[k]; d > 0 {
			missing = append(missing, name(k, d))
		}
	}
	for _, k := range sortedKeys(b) {
		if d := b[k] - a[k]; d > 0 {
			extra = append(extra, name(k, d))
		}
	}
	if missing == nil {
		missing = []string{}
	}
	if extra == nil {
		extra = []string{}
	}
	return missing, extra
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return provKey(ks[i]) < provKey(ks[j]) })
	return ks
}

// provKey sorts "r10:x" after "r9:x", grouping by tensor.
func provKey(s string) string {
	if i := strings.IndexByte(s, ':'); i > 1 && s[0] == 'r' {
		return fmt.Sprintf("%s|r%06s", s[i+1:], s[1:i])
	}
	return s
}

// Build captures the traced schedule of each variant report (from
// check.RunVariant) of scenario sc, in order; see [Capture]. A command that
// has one schedule to show (a witness it explored or replayed) builds
// Data{Scenario: sc.Name, Variants: []*Variant{v}} from [Schedule] instead.
func Build(sc *scenarios.Scenario, reports []*check.VariantReport) (*Data, error) {
	d := &Data{Scenario: sc.Name, Description: sc.Description}
	for _, vr := range reports {
		v, err := Capture(sc, vr)
		if err != nil {
			return nil, err
		}
		d.Variants = append(d.Variants, v)
	}
	return d, nil
}
