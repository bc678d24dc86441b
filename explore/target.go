package explore

import (
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// ErrBadInput wraps every error caused by what the caller asked for (an
// unknown scenario, variant or knob; a malformed witness).
var ErrBadInput = errors.New("bad input")

// Target is one variant of one scenario with knob overrides, and its
// reference outputs.
type Target struct {
	Scenario *scenarios.Scenario
	// Source is what the user named: a built-in's name or a scenario file's
	// path. Witness files record it, so a replay finds the same scenario.
	Source  string
	Variant string
	Sets    []string
	Config  scenarios.Config
	// Program is Config as the checker runs it (check.Program); nil:
	// Scenario.Program(Config, Sets).
	Program check.Program
	// Provenance keeps every schedule's output values with their
	// provenance (Schedule.Outputs, for --outcomes); off, only their hash
	// is kept.
	Provenance bool
	// MaxFindings caps the findings of each kind a schedule keeps (0: the
	// world's default, 32); a witness's findings total counts them all.
	MaxFindings int
	ref         *check.Reference
	// released schedules' choice records, for the next schedules to
	// record into (a record is ~1,300 choices for a tp8 layer)
	choices struct {
		sync.Mutex
		free [][]sim.Choice
	}
}

// NewTarget resolves scenario name and variant (empty: the first variant) with
// sets applied after the variant's own, and runs the reference.
func NewTarget(name, variant string, sets []string) (*Target, error) {
	return NewTargetFrom(name, variant, sets, nil)
}

// NewTargetFrom is NewTarget for a built-in name or, with read, a scenario
// file path (read is os.ReadFile in the command line; nil: built-ins only).
func NewTargetFrom(name, variant string, sets []string, read scenarios.ReadFunc) (*Target, error) {
	return NewTargetWith(name, variant, sets, read, TargetOptions{})
}

// TargetOptions are how a target's worlds are built, besides its knobs.
type TargetOptions struct {
	// FineSteps builds every world micro-op by micro-op
	// ([scenarios.Config.FineSteps], the command line's --fine-steps):
	// the nominal schedule's trace hash and step count change where a
	// collective would have run as one coarse step; nothing else does.
	FineSteps bool
}

// NewTargetWith is NewTargetFrom with options.
func NewTargetWith(name, variant string, sets []string, read scenarios.ReadFunc, o TargetOptions) (*Target, error) {
	sc, ok := scenarios.Lookup(name)
	if !ok {
		if read == nil {
			return nil, fmt.Errorf("%w: unknown scenario %q (built-ins: %s)", ErrBadInput, name, strings.Join(scenarios.Names(), ", "))
		}
		var err error
		if sc, err = scenarios.Resolve(name, read); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadInput, err)
		}
	}
	sc = sc.WithFineSteps(o.FineSteps)
	if variant == "" && len(sc.Variants) > 0 {
		variant = sc.Variants[0].Name
	}
	v, ok := sc.Variant(variant)
	if !ok {
		names := make([]string, len(sc.Variants))
		for i, v := range sc.Variants {
			names[i] = v.Name
		}
		return nil, fmt.Errorf("%w: scenario %q has no variant %q (variants: %s)", ErrBadInput, name, variant, strings.Join(names, ", "))
	}
	cfg, err := sc.VariantConfig(v, sets)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadInput, err)
	}
	prog := sc.Program(cfg, sets)
	ref, err := check.NewReference(prog)
	if err != nil {
		return nil, err
	}
	return &Target{Scenario: sc, Source: name, Variant: variant, Sets: append([]string(nil), sets...), Config: cfg, Program: prog, ref: ref}, nil
}

// Attacher is implemented by choosers that need to see the world before it
// runs (to inspect pending steps, or to observe every step through
// [sim.Engine.SetObserver]).
type Attacher interface {
	Attach(w *ranks.World)
}

// RankOutputs is one rank's output tensors: values per chunk and, for
// reports, their provenance.
type RankOutputs struct {
	Rank       int                 `json:"rank"`
	Outputs    map[string][]uint64 `json:"outputs"`
	Provenance map[string][]string `json:"provenance,omitempty"`
}

// Schedule is what one explored schedule produced.
type Schedule struct {
	Index     int
	Seed      uint64
	Verdict   string
	Findings  []ranks.Finding
	TraceHash string
	OutHash   string
	Outputs   []RankOutputs // with Target.Provenance only
	Choices   []sim.Choice
	Steps     uint64

	explain func()
	release func()
	total   func() int // every finding, kept or not (before release)
}

// FindingsTotal counts s's findings, including those past the world's
// per-kind cap that Findings leaves out; len(Findings) once s is released.
func (s *Schedule) FindingsTotal() int {
	if s.total != nil {
		return s.total()
	}
	return len(s.Findings)
}

// Release hands s's world (see [check.Outcome.Release]) and its choice
// record back for the next schedule: s keeps its verdict, findings (with
// the messages Explain filled in), hashes and outputs; Choices becomes
// nil. Explore releases every schedule once it is merged (a witness copies
// the choices it needs first).
func (s *Schedule) Release() {
	if r := s.release; r != nil {
		s.explain, s.release = nil, nil
		r()
	}
}

// Explain completes the messages of s's findings (the provenance of
// corrupted values); summaries call it on the schedules they keep.
func (s *Schedule) Explain() {
	if s.explain != nil {
		s.explain()
		s.explain = nil
	}
}

// Kinds returns the distinct finding kinds of s, most severe first.
func (s *Schedule) Kinds() []string {
	var out []string
	for _, k := range kindOrder {
		for _, f := range s.Findings {
			if f.Kind == k {
				out = append(out, k)
				break
			}
		}
	}
	return out
}

// Has reports whether s has a finding of kind.
func (s *Schedule) Has(kind string) bool {
	for _, f := range s.Findings {
		if f.Kind == kind {
			return true
		}
	}
	return false
}

// kindOrder is the finding kinds, most severe first.
var kindOrder = []string{check.InvalidAccess, check.Hang, check.Dropped, check.Corruption, check.Mismatch, check.Race, check.ReferenceHang}

// program is the target's program: Program, or its scenario's Config.
func (t *Target) program() check.Program {
	if t.Program != nil {
		return t.Program
	}
	return t.Scenario.Program(t.Config, t.Sets)
}

// Run builds the target with chooser ch in mode, runs it and judges it.
func (t *Target) Run(mode sim.Mode, ch sim.Chooser) (*Schedule, error) {
	rec := &sim.Recorder{Inner: ch, Choices: t.takeChoices()}
	eng := sim.NewEngine(mode, rec)
	b, err := t.ref.Build(t.program(), eng) // a copy of the config's template
	if err != nil {
		return nil, err
	}
	if t.MaxFindings > 0 {
		b.World.SetMaxFindings(t.MaxFindings)
	}
	if a, ok := ch.(Attacher); ok {
		a.Attach(b.World)
	}
	o, err := check.RunBuilt(b, t.ref)
	if err != nil {
		return nil, err
	}
	s := &Schedule{Verdict: o.Verdict, Findings: o.Findings, TraceHash: o.TraceHash, Choices: rec.Choices, Steps: o.Steps, explain: o.Explain}
	s.total = func() int {
		n := 0
		for _, c := range check.FindingTotals(o) {
			n += c
		}
		return n
	}
	s.release = func() {
		s.total = nil
		o.Release()
		t.putChoices(s.Choices)
		s.Choices = nil
	}
	s.Outputs, s.OutHash = outputs(b, t.Provenance)
	return s, nil
}

// takeChoices returns an empty choice record, with the room of a released
// schedule's when there is one.
func (t *Target) takeChoices() []sim.Choice {
	c := &t.choices
	c.Lock()
	defer c.Unlock()
	if k := len(c.free); k > 0 {
		r := c.free[k-1]
		c.free[k-1] = nil
		c.free = c.free[:k-1]
		return r[:0]
	}
	return nil
}

func (t *Target) putChoices(r []sim.Choice) {
	if cap(r) == 0 {
		return
	}
	c := &t.choices
	c.Lock()
	c.free = append(c.free, r)
	c.Unlock()
}

// outputs hashes every rank's output tensors (Buffer.Output, in allocation
// order) and, with keep, collects them with their provenance. A program
// that marks no tensor as an output is judged on every tensor the verdict
// compares (b.Compare: each rank's, in program order), so its outcomes are
// those tensors: schedules with different verdicts never share an outcome
// for want of anything to hash. The hash is FNV-1a of "rank|name|[v0 v1
// …];" per tensor, written with strconv: the same bytes fmt's "%d|%s|%v;"
// wrote, at a fraction of the cost (it ran for every schedule).
func outputs(b *scenarios.Built, keep bool) ([]RankOutputs, string) {
	w := b.World
	var byRank []RankOutputs
	if keep {
		byRank = make([]RankOutputs, w.N)
		for r := range byRank {
			byRank[r] = RankOutputs{Rank: r, Outputs: map[string][]uint64{}, Provenance: map[string][]string{}}
		}
	}
	h := fnv.New64a()
	var line []byte
	add := func(b *ranks.Buffer) {
		line = strconv.AppendInt(line[:0], int64(b.Rank), 10)
		line = append(append(append(line, '|'), b.Name...), '|', '[')
		for c, v := range b.Vals {
			if c > 0 {
				line = append(line, ' ')
			}
			line = strconv.AppendUint(line, v.N, 10)
		}
		h.Write(append(line, ']', ';'))
		if !keep {
			return
		}
		vals := make([]uint64, len(b.Vals))
		prov := make([]string, len(b.Vals))
		for c, v := range b.Vals {
			vals[c], prov[c] = v.N, w.Srcs.Format(v)
		}
		byRank[b.Rank].Outputs[b.Name] = vals
		byRank[b.Rank].Provenance[b.Name] = prov
	}
	marked := false
	for _, b := range w.Buffers() {
		if !b.Output || b.Sym != nil {
			continue
		}
		marked = true
		add(b)
	}
	if !marked {
		for _, bufs := range b.Compare {
			for i, x := range bufs {
				if !slices.Contains(bufs[:i], x) { // an in-place op lists its tensor again
					add(x)
				}
			}
		}
	}
	// Every replay is checked (check/replays.go): what an earlier replay
	// left in the compared tensors is part of the outcome too.
	for r := range b.Compare {
		for k := 0; ; k++ {
			vs := w.ReplayValues(r, k)
			if vs == nil {
				break
			}
			line = strconv.AppendInt(append(line[:0], 'r'), int64(k), 10)
			line = append(strconv.AppendInt(append(line, '|'), int64(r), 10), '|', '[')
			for c, v := range vs {
				if c > 0 {
					line = append(line, ' ')
				}
				line = strconv.AppendUint(line, v.N, 10)
			}
			h.Write(append(line, ']', ';'))
		}
	}
	return byRank, fmt.Sprintf("%016x", h.Sum64())
}
