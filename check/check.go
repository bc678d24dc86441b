package check

import (
	"errors"
	"fmt"
	"strings"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// Verdicts.
const (
	OK         = "ok"
	Race       = ranks.KindRace
	Mismatch   = ranks.KindMismatch
	Corruption = ranks.KindCorruption
	Dropped    = ranks.KindDropped
	Hang       = ranks.KindHang
	// InvalidAccess: a kernel touched memory its rank never mapped (a
	// peer's buffer that was never registered): CUDA's illegal memory
	// access, which ends the process. It ran, so it ranks below the
	// verdicts where nothing ran.
	InvalidAccess = ranks.KindInvalidAccess
	// CaptureError: the CUDA graph capture was invalidated (a cudaMalloc
	// without the caching allocator, a host synchronize): no graph, nothing
	// ran.
	CaptureError = ranks.KindCaptureError
	// BuildError: the program never ran (an engine failed to build). It is
	// the most severe: nothing about the run can be trusted or measured.
	BuildError = ranks.KindBuildError
	// ReferenceHang: a reference run hangs — the serialized program (each
	// rank's ops in program order on one stream), the eager path or
	// another variant's serialized program — so the run's values could not
	// be compared with it. It is the mildest finding: where the serialized
	// program hangs, every schedule is compared with the nominal schedule
	// instead, so schedules whose outputs differ still give corruption.
	ReferenceHang = "reference-hang"
)

var severity = map[string]int{OK: 0, ReferenceHang: 1, Race: 2, Mismatch: 3, Corruption: 4, Dropped: 5, Hang: 6, InvalidAccess: 7, CaptureError: 8, BuildError: 9}

// Worse reports whether verdict a is more severe than b.
func Worse(a, b string) bool { return severity[a] > severity[b] }

// Meets reports whether verdict v meets expectation expect ("race|corruption"
// accepts either).
func Meets(v, expect string) bool {
	if expect == "" {
		return true
	}
	for _, e := range strings.Split(expect, "|") {
		if strings.TrimSpace(e) == v {
			return true
		}
	}
	return false
}

// Reference is the reference run of a program: its memory, to compare with.
// It keeps a record of each reference run's compared tensors, never the
// run's world (refrecord.go).
type Reference struct {
	rec *refRecord // the reference run's compared tensors
	err error
	// hangs are the reference runs that hung (ReferenceHang findings),
	// added to every schedule's findings.
	hangs []ranks.Finding
	extra *extraRefs // unsharded model, eager path, variants, values (family.go)
	// replays are the records of graph replays 0…R-2 when each replay
	// computes on inputs of its own (replays.go); rec is the last's.
	replays []*refRecord

	prog Program
	tmpl template // the program, for every schedule (instance.go)
}

// NewReference builds and runs the reference program of p, and the
// references p declares.
func NewReference(p Program) (*Reference, error) {
	b, err := p.Build(BuildOptions{Reference: true}, sim.NewEngine(sim.Timed, nil))
	if err != nil {
		return nil, err
	}
	res, err := b.World.Run()
	if err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	ref := &Reference{rec: newRefRecord(b, p, -1, false), prog: p}
	// What the replays' references need of the run, then the world goes:
	// one reference world alive at a time, none once this returns.
	R, independent, perReplay := b.World.InputReplays(), b.World.IndependentReplays(), b.World.ReplayInputs() > 0
	releaseBuilt(b)
	if ref.extra, ref.hangs, err = newExtraRefs(p); err != nil {
		return nil, err
	}
	if res.Hung {
		if err := ref.nominalBaseline(p, res.Findings[len(res.Findings)-1]); err != nil {
			return nil, err
		}
	} else if err := ref.buildReplayRefs(p, R, independent, perReplay); err != nil {
		return nil, err
	}
	return ref, nil
}

// refHangFinding is the ReferenceHang finding of a reference run that
// ended in hang (its ranks, ops and streams), said in msg.
func refHangFinding(hang ranks.Finding, resource, msg string) ranks.Finding {
	return ranks.Finding{Kind: ReferenceHang, Message: msg, Resource: resource,
		Ranks: append([]int{}, hang.Ranks...), Ops: append([]string{}, hang.Ops...), Streams: append([]string{}, hang.Streams...)}
}

// nominalBaseline is what a reference compares with when the serialized
// program hangs (why says how): the program's own nominal schedule, run
// once. Every schedule is then compared with it, so schedules whose
// outputs differ from each other still give corruption; and the hang is a
// ReferenceHang finding of every schedule. Where the nominal schedule
// does not finish either, nothing is compared.
func (ref *Reference) nominalBaseline(p Program, hang ranks.Finding) error {
	const serialized = "the reference program (each rank's ops serialized in program order on one stream) hangs"
	why := hang.Message
	f := refHangFinding(hang, "the reference program", serialized+", so outputs are compared with the nominal schedule's instead: "+why)
	defer func() { ref.hangs = append([]ranks.Finding{f}, ref.hangs...) }()
	b, err := p.Build(BuildOptions{}, sim.NewEngine(sim.Timed, nil))
	if err != nil {
		return err
	}
	defer releaseBuilt(b)
	res, err := b.World.Run()
	var ce *ranks.CaptureError
	if errors.As(err, &ce) || (err == nil && (res.Hung || b.BuildFailed())) {
		ref.err = errors.New("no outputs to compare with")
		f.Message = serialized + ", and the nominal schedule does not finish either: outputs are compared with nothing: " + why
		return nil
	}
	if err != nil {
		return err
	}
	ref.rec = newRefRecord(b, p, -1, false)
	ref.rec.nominal = true
	return nil
}

// Outcome is what one schedule produced.
type Outcome struct {
	Verdict   string
	Findings  []ranks.Finding
	TraceHash string
	StepTime  sim.Time
	Steps     uint64
	Built     *Built
	Result    *ranks.Result

	// explain fills in what is costly to write and only needed for the
	// schedule a report shows: the provenance of corrupted values.
	explain []func()
}

// Explain completes the messages of o's findings (the provenance of expected
// and observed values). Call it on the outcomes a report keeps; exploring
// thousands of schedules skips the formatting for the rest.
func (o *Outcome) Explain() {
	for _, f := range o.explain {
		f()
	}
	o.explain = nil
}

// Release ends o's life: o's world and anything that points into it (its
// buffers, values, unformatted messages) are not used again, and the
// world's memory serves the next schedule of the same reference's config
// (see [ranks.World.Release]). What o holds by value stays: the verdict,
// the findings (with the messages Explain filled in), hashes and counts.
func (o *Outcome) Release() {
	o.explain = nil
	if o.Built != nil {
		o.Built.World.Release()
		o.Built = nil
	}
}

// RunSchedule builds p with chooser ch, runs it and judges it against ref
// (nil: no reference). Corruption messages get the provenance of their
// values only when [Outcome.Explain] is called.
func RunSchedule(p Program, ref *Reference, mode sim.Mode, ch sim.Chooser) (*Outcome, error) {
	b, err := ref.Build(p, sim.NewEngine(mode, ch))
	if err != nil {
		return nil, err
	}
	return RunBuilt(b, ref)
}

// RunScheduleOpt is RunSchedule with build options (a timeline, say), for
// a schedule that is shown: its findings are explained in full.
func RunScheduleOpt(p Program, ref *Reference, mode sim.Mode, ch sim.Chooser, opt BuildOptions) (*Outcome, error) {
	b, err := p.Build(opt, sim.NewEngine(mode, ch))
	if err != nil {
		return nil, err
	}
	o, err := RunBuilt(b, ref)
	if err == nil {
		o.Explain()
	}
	return o, err
}

// RunBuilt runs a world already built (for callers that need the world before
// it runs, such as explorers that inspect it at every step) and judges it
// against ref.
func RunBuilt(b *Built, ref *Reference) (*Outcome, error) {
	b.World.DeferMessages() // most schedules are judged by kind: messages on Explain
	for _, f := range b.Findings {
		if f.Kind == CaptureError {
			// A capture the allocation pattern invalidates: nothing runs.
			o := &Outcome{Built: b, Result: &ranks.Result{}, Verdict: CaptureError}
			o.Findings = append(o.Findings, b.Findings...)
			return o, nil
		}
	}
	if ref != nil && len(ref.replays) > 0 {
		b.World.WatchReplays(b.Compare) // every replay checked (replays.go)
	}
	res, err := b.World.Run()
	var ce *ranks.CaptureError
	if errors.As(err, &ce) {
		// The driver invalidates the capture at the op that breaks a
		// capture rule (a host synchronize, work on a stream outside the
		// capture): a capture-error finding, not a failed command.
		o := &Outcome{Built: b, Result: &ranks.Result{}, Verdict: CaptureError}
		o.Findings = append(o.Findings, b.Findings...)
		o.Findings = append(o.Findings, ranks.Finding{Kind: CaptureError, Ranks: []int{ce.Rank}, Message: ce.Error(), Resource: fmt.Sprintf("rank %d's graph capture", ce.Rank)})
		return o, nil
	}
	if err != nil {
		return nil, err
	}
	o := &Outcome{TraceHash: res.TraceHash, StepTime: res.StepTime, Steps: res.Steps, Built: b, Result: res, Verdict: OK}
	o.Findings = append(o.Findings, b.Findings...)
	off := len(o.Findings)
	o.Findings = append(o.Findings, res.Findings...)
	o.explain = append(o.explain, func() { b.World.FormatMessages(o.Findings[off : off+len(res.Findings)]) })
	// The reference runs a message's expected provenance is read from,
	// rebuilt when Explain first asks, gone with the explanation steps.
	rw := &refWorlds{}
	if !res.Hung && !b.BuildFailed() && ref != nil && ref.err == nil {
		rfs, rdetails, bad := compareReplays(b, ref, rw)
		fs, details := compare(b, ref.rec, rw)
		// A rank whose earlier replay went wrong is reported at that
		// replay: the first bad one.
		for i := 0; i < len(fs); i++ {
			if bad[fs[i].Ranks[0]] {
				fs, details = append(fs[:i:i], fs[i+1:]...), append(details[:i:i], details[i+1:]...)
				i--
			}
		}
		fs, details = append(rfs, fs...), append(rdetails, details...)
		base := len(o.Findings)
		o.Findings = append(o.Findings, fs...)
		for i, d := range details {
			o.explain = append(o.explain, func() { o.Findings[base+i].Message, o.Findings[base+i].Resource = d() })
		}
	}
	if ref != nil {
		o.Findings = append(o.Findings, ref.hangs...)
	}
	if !res.Hung && ref != nil {
		fs, details := ref.extra.findings(b, rw)
		base := len(o.Findings)
		o.Findings = append(o.Findings, fs...)
		for i, d := range details {
			if d != nil {
				o.explain = append(o.explain, func() { o.Findings[base+i].Message = d() })
			}
		}
	}
	for _, f := range o.Findings {
		if Worse(f.Kind, o.Verdict) {
			o.Verdict = f.Kind
		}
	}
	return o, nil
}

// compare reports, per rank, the first tensor chunk (in program order) whose
// value differs from the reference's record. Like the world's race and
// mismatch findings, its findings carry their kind, rank and tensor at
// once; the second result makes, for each, its message (expected and
// observed values with the provenance of both, the expected one read
// from the reference run rw rebuilds) and resource, when
// [Outcome.Explain] asks.
func compare(got *Built, want *refRecord, rw *refWorlds) ([]ranks.Finding, []func() (message, resource string)) {
	var out []ranks.Finding
	var details []func() (message, resource string)
	for r := range got.Compare {
		if r >= len(want.ranks) {
			break
		}
		wr := &want.ranks[r]
		bad := 0
		var gv ranks.Value
		var wv uint64
		var first *ranks.Buffer
		fi, fc := 0, 0
		for i, b := range got.Compare[r] {
			wvals := wr.vals(i)
			for c := range b.Vals {
				if b.Vals[c].N == wvals[c] {
					continue
				}
				bad++
				if first == nil {
					first, fi, fc, gv, wv = b, i, c, b.Vals[c], wvals[c]
				}
			}
		}
		if bad == 0 {
			continue
		}
		r, name := r, first.Name
		out = append(out, ranks.Finding{
			Kind:  ranks.KindCorruption,
			Ranks: []int{r},
			Ops:   []string{name},
		})
		gw := got.World
		details = append(details, func() (message, resource string) {
			return fmt.Sprintf("rank %d tensor %s[%d]: expected %d = %s; observed %d = %s (%d chunks differ from %s on rank %d)",
					r, name, fc, wv, rw.provenance(want, r, fi, fc), gv.N, gw.Srcs.Format(gv), bad, want.what(), r),
				fmt.Sprintf("rank %d tensor %q", r, name)
		})
	}
	return out, details
}

// Options control a variant run.
type Options struct {
	Extra []string // --set overrides, applied after the variant's
	// MaxFindings caps the findings of each kind a schedule keeps (0: the
	// world's default, 32); VariantReport.FindingsTotal counts them all.
	MaxFindings int
	// Stop, when set, is asked before each explored schedule; once it
	// says true no further schedule starts and the report is Partial
	// (simctl run --time: the caller reads the clock, check does not).
	Stop func() bool
}

// VariantReport is the judged result of one variant.
type VariantReport struct {
	Name       string          `json:"name"`
	Config     Settings        `json:"config"`
	Expect     string          `json:"expect"`
	Verdict    string          `json:"verdict"`
	Met        bool            `json:"met"`
	Schedules  int             `json:"schedules"`
	StepTimeNs int64           `json:"step_time_ns"`
	Findings   []ranks.Finding `json:"findings"`
	// FindingsTotal counts every finding of the judged schedule, including
	// those past the per-kind cap (Options.MaxFindings) that Findings
	// leaves out; FindingsTruncated says that some were left out.
	FindingsTotal     int  `json:"findings_total"`
	FindingsTruncated bool `json:"findings_truncated"`
	// BaseSeed is the seed the explored schedules derive from (the
	// scenario's seed knob): schedule i's own seed is ScheduleSeed(BaseSeed, i).
	BaseSeed uint64 `json:"seed"`
	// Partial: Options.Stop ended the exploration after Schedules of the
	// Planned schedules (nominal included).
	Partial     bool      `json:"partial,omitempty"`
	Planned     int       `json:"planned,omitempty"`
	WitnessSeed *sim.Seed `json:"witness_seed"`
	// WitnessSchedule is the index (1-based) of the explored schedule that
	// first gave the verdict, 0 when the nominal schedule did.
	WitnessSchedule int `json:"witness_schedule"`
	// WitnessStrategy is how the witness schedule was made: "random"
	// (Timed, seeded jitter and skew) or "pct" (Untimed, PCT priorities);
	// empty when the nominal schedule gave the verdict.
	WitnessStrategy string `json:"witness_strategy,omitempty"`
	// PCTSteps is the k a PCT witness was made with (the decisions of the
	// nominal untimed run); 0 unless WitnessStrategy is "pct".
	PCTSteps  int    `json:"pct_steps,omitempty"`
	TraceHash string `json:"trace_hash"`
	// RootCause explains the first corrupted value of the judged schedule
	// in the program's words (cause.go); nil without a corruption or when
	// no read saw another op's bytes than in the reference.
	RootCause *Cause `json:"root_cause,omitempty"`
	// Corruption says, when a schedule gave corruption, in how many of
	// the schedules run, with which values and whether beside a race: a
	// logic bug or a race (wrongvalue.go).
	Corruption *CorruptionSummary `json:"corruption,omitempty"`
	// Groups are Findings by kind, op pair and resource, the root cause's
	// first (group.go).
	Groups []Group `json:"groups"`

	// Program is the variant's program as it ran, for re-running a
	// schedule of it (a report's timeline).
	Program       Program        `json:"-"`
	Doc           string         `json:"-"`
	Notes         []string       `json:"notes,omitempty"` // build and transform notes ("skipped: mid-branch collective")
	Counts        map[string]int `json:"-"`               // every finding per kind, kept or not
	WitnessHash   string         `json:"-"`
	NominalResult string         `json:"-"`
}

// ScheduleSeed derives the seed of exploration schedule i from the base seed
// (splitmix64), so schedules are independent and reproducible.
func ScheduleSeed(base uint64, i int) uint64 {
	z := base + uint64(i)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// RandomPerMille is how often a random schedule deviates from nominal at a
// decision.
const RandomPerMille = 300

// PCTDepth is the bug depth the PCT schedules of [RunVariant] target.
const PCTDepth = 3

// Exploration strategies of [RunVariant]'s schedules (VariantReport's
// WitnessStrategy).
const (
	StrategyRandom = "random"
	StrategyPCT    = "pct"
)

// MixedSchedule returns the strategy, engine mode and chooser of
// exploration schedule i ≥ 1 of [RunVariant] with base seed base: odd
// schedules are seeded random timing (jitter and rank skew, Timed mode),
// even ones PCT (Untimed mode: any enabled micro-op may go next, with
// PCT's priorities; steps is PCT's k, the decisions of a nominal untimed
// run). Each is seeded with [ScheduleSeed](base, i). The two have
// different blind spots: random timing rarely reverses an order the cost
// model makes likely (a spinning kernel that takes the GPU first on every
// rank), PCT ignores durations and skew. Half each, a variant's verdict
// does not hang on which one a command picks by default.
func MixedSchedule(base uint64, i, steps int) (strategy string, mode sim.Mode, ch sim.Chooser, seed uint64) {
	seed = ScheduleSeed(base, i)
	if i%2 == 0 {
		return StrategyPCT, sim.Untimed, sim.NewPCT(seed, PCTDepth, steps), seed
	}
	return StrategyRandom, sim.Timed, sim.NewRandom(seed, RandomPerMille), seed
}

// WitnessChooser returns the engine mode and a fresh chooser of the
// schedule behind r's verdict: the witness when exploration found
// something worse than nominal, otherwise the nominal schedule.
func (r *VariantReport) WitnessChooser() (sim.Mode, sim.Chooser) {
	switch {
	case r.WitnessSeed == nil:
		return sim.Timed, sim.Nominal{}
	case r.WitnessStrategy == StrategyPCT:
		return sim.Untimed, sim.NewPCT(uint64(*r.WitnessSeed), PCTDepth, r.PCTSteps)
	}
	return sim.Timed, sim.NewRandom(uint64(*r.WitnessSeed), RandomPerMille)
}

// RunVariant runs the nominal schedule of variant v plus cfg.Budget
// explored schedules, half seeded random timing and half PCT
// ([MixedSchedule]), and judges the worst.
func RunVariant(sc Scenario, v Variant, opt Options) (*VariantReport, error) {
	su, err := sc.Setup(v, opt.Extra)
	if err != nil {
		return nil, err
	}
	p := su.Program
	ref, err := NewReference(p)
	if err != nil {
		return nil, err
	}
	rep := &VariantReport{Name: v.Name, Config: su.Settings, Program: p, Expect: v.Expect, Doc: v.Doc, Counts: map[string]int{}, BaseSeed: su.Seed}
	nom, err := runCapped(p, ref, sim.Timed, sim.Nominal{}, opt.MaxFindings)
	if err != nil {
		return nil, err
	}
	rep.Notes = append(rep.Notes, nom.Built.Notes...)
	rep.Schedules = 1
	rep.StepTimeNs = int64(nom.StepTime)
	rep.TraceHash = nom.TraceHash
	rep.NominalResult = nom.Verdict
	var tally corruptTally
	tally.see(nom)
	best := nom
	steps := 0
	if su.Budget >= 2 {
		// PCT's k: the scheduling decisions of the nominal untimed run.
		cnt := &sim.Counter{}
		o, err := RunSchedule(p, ref, sim.Untimed, cnt)
		if err != nil {
			return nil, err
		}
		o.Release()
		steps = cnt.N
	}
	for i := 1; i <= su.Budget; i++ {
		if opt.Stop != nil && opt.Stop() {
			rep.Partial, rep.Planned = true, su.Budget+1
			break
		}
		strategy, mode, ch, seed := MixedSchedule(su.Seed, i, steps)
		o, err := runCapped(p, ref, mode, ch, opt.MaxFindings)
		if err != nil {
			return nil, err
		}
		rep.Schedules++
		tally.see(o)
		if Worse(o.Verdict, best.Verdict) {
			best = o
			ws := sim.Seed(seed)
			rep.WitnessSeed = &ws
			rep.WitnessStrategy, rep.PCTSteps = strategy, 0
			if strategy == StrategyPCT {
				rep.PCTSteps = steps
			}
			rep.WitnessHash = o.TraceHash
			rep.WitnessSchedule = i
		}
	}
	best.Explain()
	rep.Corruption = tally.summary(best) // after Explain: it ends the corruption messages
	rep.Verdict = best.Verdict
	rep.Findings = sortFindings(best.Findings)
	if rep.Findings == nil {
		rep.Findings = []ranks.Finding{}
	}
	rep.Counts = findingTotals(best)
	for _, n := range rep.Counts {
		rep.FindingsTotal += n
	}
	rep.FindingsTruncated = rep.FindingsTotal > len(rep.Findings)
	rep.Met = Meets(rep.Verdict, rep.Expect)
	if rep.Counts[Corruption] > 0 {
		mode, ch := rep.WitnessChooser()
		if rep.RootCause, err = RootCause(p, mode, ch); err != nil {
			return nil, err
		}
	}
	if rep.Groups = GroupFindings(rep.Findings, rep.RootCause); rep.Groups == nil {
		rep.Groups = []Group{}
	}
	return rep, nil
}

// sortFindings orders findings most severe first, stably.
func sortFindings(fs []ranks.Finding) []ranks.Finding {
	out := append([]ranks.Finding(nil), fs...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && severity[out[j].Kind] > severity[out[j-1].Kind]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
