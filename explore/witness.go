package explore

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// WitnessVersion is the version of the witness file format.
const WitnessVersion = 1

// Witness is one schedule, recorded so it can be replayed bit for bit: the
// scenario (name and knob overrides), variant, strategy, seed and every
// choice the engine made.
type Witness struct {
	Version    int          `json:"version"`
	Scenario   string       `json:"scenario"`
	Variant    string       `json:"variant"`
	Sets       []string     `json:"sets"`
	Strategy   string       `json:"strategy"`
	Mode       string       `json:"mode"` // timed | untimed
	Seed       sim.Seed     `json:"seed"`
	Schedule   int          `json:"schedule"`
	Verdict    string       `json:"verdict"`
	Kinds      []string     `json:"kinds"`
	TraceHash  string       `json:"trace_hash"`
	Deviations int          `json:"deviations"`
	Choices    []sim.Choice `json:"choices"`
	// FineSteps: the schedule ran micro-op by micro-op (simctl
	// --fine-steps, [TargetOptions]); a replay does too.
	FineSteps bool `json:"fine_steps,omitempty"`
	// ScenarioSHA256 is the SHA-256 (hex) of the scenario file the
	// schedule ran: a built-in's embedded file or the user's file. A
	// replay says when the file it finds is not that one.
	ScenarioSHA256 string `json:"scenario_sha256,omitempty"`
	// ScenarioFile is the user's scenario file itself, when under
	// MaxEmbeddedScenario: a witness copied or moved away from it still
	// replays.
	ScenarioFile string `json:"scenario_file,omitempty"`
}

// MaxEmbeddedScenario is the largest scenario file a witness holds a copy
// of (1 MiB).
const MaxEmbeddedScenario = 1 << 20

// WitnessInfo is a witness without its choices, for summaries.
type WitnessInfo struct {
	Schedule   int      `json:"schedule"`
	Seed       sim.Seed `json:"seed"`
	Verdict    string   `json:"verdict"`
	Kinds      []string `json:"kinds"`
	TraceHash  string   `json:"trace_hash"`
	Deviations int      `json:"deviations"`
	Choices    int      `json:"choices"`
}

// Info summarises w.
func (w *Witness) Info() *WitnessInfo {
	return &WitnessInfo{Schedule: w.Schedule, Seed: w.Seed, Verdict: w.Verdict, Kinds: w.Kinds, TraceHash: w.TraceHash, Deviations: w.Deviations, Choices: len(w.Choices)}
}

func modeName(m sim.Mode) string {
	if m == sim.Untimed {
		return "untimed"
	}
	return "timed"
}

func newWitness(t *Target, s Strategy, sc *Schedule) *Witness {
	return &Witness{
		Version: WitnessVersion, Scenario: cmp.Or(t.Source, t.Scenario.Name), Variant: t.Variant, Sets: append([]string{}, t.Sets...),
		Strategy: s.Name(), Mode: modeName(s.Mode()), Seed: sim.Seed(sc.Seed), Schedule: sc.Index,
		Verdict: sc.Verdict, Kinds: sc.Kinds(), TraceHash: sc.TraceHash,
		Deviations: sim.Deviations(sc.Choices), Choices: trimChoices(sc.Choices),
		FineSteps: t.Config.FineSteps,
	}
}

// WitnessOf is the witness of schedule sc, which t ran (Target.Run) in
// mode: schedule index of an exploration by strategy (a name for people:
// how the schedule was made), seed its own seed.
func WitnessOf(t *Target, strategy string, mode sim.Mode, seed uint64, index int, sc *Schedule) *Witness {
	return &Witness{
		Version: WitnessVersion, Scenario: cmp.Or(t.Source, t.Scenario.Name), Variant: t.Variant, Sets: append([]string{}, t.Sets...),
		Strategy: strategy, Mode: modeName(mode), Seed: sim.Seed(seed), Schedule: index,
		Verdict: sc.Verdict, Kinds: sc.Kinds(), TraceHash: sc.TraceHash,
		Deviations: sim.Deviations(sc.Choices), Choices: trimChoices(sc.Choices),
		FineSteps: t.Config.FineSteps,
	}
}

// trimChoices drops trailing nominal choices: a replay makes the nominal
// choice past the end of the record, so the run is the same.
func trimChoices(cs []sim.Choice) []sim.Choice {
	n := len(cs)
	for n > 0 && cs[n-1].V == 0 {
		n--
	}
	return append([]sim.Choice{}, cs[:n]...)
}

// Marshal encodes w as indented JSON.
func (w *Witness) Marshal() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", " ")
	if err := enc.Encode(w); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ParseWitness decodes and validates a witness file.
func ParseWitness(data []byte) (*Witness, error) {
	var w Witness
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("%w: witness: %w", ErrBadInput, jsonAt(data, err))
	}
	if w.Version != WitnessVersion {
		return nil, fmt.Errorf("%w: witness version %d: want %d", ErrBadInput, w.Version, WitnessVersion)
	}
	if w.Mode != "timed" && w.Mode != "untimed" {
		return nil, fmt.Errorf("%w: witness mode %q: want timed or untimed", ErrBadInput, w.Mode)
	}
	for i, c := range w.Choices {
		if c.N < 1 || c.V < 0 || c.V >= c.N || c.D > sim.DecSchedule {
			return nil, fmt.Errorf("%w: witness choice %d (%+v): want 0 ≤ v < n and a known decision", ErrBadInput, i, c)
		}
	}
	return &w, nil
}

func (w *Witness) mode() sim.Mode {
	if w.Mode == "untimed" {
		return sim.Untimed
	}
	return sim.Timed
}

// Target resolves the witness's scenario, variant and overrides.
func (w *Witness) Target() (*Target, error) { return w.TargetFrom(nil) }

// TargetFrom is Target for a witness whose scenario may be a file (read is
// os.ReadFile in the command line).
func (w *Witness) TargetFrom(read scenarios.ReadFunc) (*Target, error) {
	return NewTargetWith(w.Scenario, w.Variant, w.Sets, read, TargetOptions{FineSteps: w.FineSteps})
}

// Replay runs the witness's schedule on t. Diverged counts recorded choices
// that no longer fit the run (0 when the program is unchanged).
func Replay(t *Target, w *Witness) (s *Schedule, diverged int, err error) {
	r := &sim.Replay{Choices: w.Choices}
	s, err = t.Run(w.mode(), r)
	if err != nil {
		return nil, 0, err
	}
	s.Explain()
	s.Index, s.Seed = w.Schedule, uint64(w.Seed)
	return s, r.Diverged, nil
}

// Shrink reduces w to fewer deviations from the nominal schedule (choices set
// back to 0) while the run still has a finding of kind w.Verdict: first the
// shortest prefix of choices that keeps it, then delta debugging over the
// remaining deviations (Zeller and Hildebrandt, "Simplifying and Isolating
// Failure-Inducing Input", TSE 2002). It runs at most maxRuns schedules and
// returns the smallest witness found with the number of runs spent.
func Shrink(t *Target, w *Witness, maxRuns int) (*Witness, int, error) {
	kind := w.Verdict
	runs := 0
	best := *w
	best.Choices = trimChoices(w.Choices)
	var actors []ranks.ActorID // per choice of best: the actor it picked
	// try runs choices cs, where a kept deviation picks the same actor as
	// in best when it is pending (so removing one deviation does not change
	// what the others mean); on success best becomes the recorded run.
	try := func(cs []sim.Choice) (bool, error) {
		if runs >= maxRuns {
			return false, nil
		}
		runs++
		ch := &shrinkChooser{choices: cs, actors: actors}
		s, err := t.Run(w.mode(), ch)
		if err != nil {
			return false, err
		}
		if !s.Has(kind) {
			return false, nil
		}
		rec := trimChoices(s.Choices)
		if actors != nil && sim.Deviations(rec) > sim.Deviations(best.Choices) {
			return false, nil
		}
		best.Choices, best.TraceHash, best.Verdict, best.Kinds = rec, s.TraceHash, s.Verdict, s.Kinds()
		actors = ch.got
		return true, nil
	}
	if ok, err := try(best.Choices); err != nil || !ok {
		if err != nil {
			return nil, runs, err
		}
		return nil, runs, fmt.Errorf("witness does not reproduce a %s finding", kind)
	}
	// 1. Shortest prefix (binary search over the positions of deviations).
	devs := deviationPositions(best.Choices)
	lo, hi := 0, len(devs) // keep devs[:hi] works; find least
	for lo < hi && runs < maxRuns {
		mid := (lo + hi) / 2
		cut := len(best.Choices)
		if mid < len(devs) {
			cut = devs[mid]
		}
		cs := append([]sim.Choice{}, best.Choices[:cut]...)
		ok, err := try(cs)
		if err != nil {
			return nil, runs, err
		}
		if ok {
			devs = deviationPositions(best.Choices)
			hi = min(mid, len(devs))
		} else {
			lo = mid + 1
		}
	}
	// 2. ddmin: remove chunks of deviations (set them to 0).
	n := 2
	for runs < maxRuns {
		devs = deviationPositions(best.Choices)
		if len(devs) == 0 {
			break
		}
		n = min(n, len(devs))
		size := (len(devs) + n - 1) / n
		reduced := false
		for start := 0; start < len(devs) && runs < maxRuns; start += size {
			cs := append([]sim.Choice{}, best.Choices...)
			for _, p := range devs[start:min(start+size, len(devs))] {
				cs[p].V = 0
			}
			ok, err := try(cs)
			if err != nil {
				return nil, runs, err
			}
			if ok {
				reduced = true
				break
			}
		}
		switch {
		case reduced:
			n = max(n-1, 2)
		case n >= len(devs):
			n = len(devs) + 1 // every single deviation is needed
		default:
			n = min(2*n, len(devs))
		}
		if n > len(devs) {
			break
		}
	}
	best.Deviations = sim.Deviations(best.Choices)
	return &best, runs, nil
}

// shrinkChooser replays choices; a non-zero schedule choice picks the item
// whose stable actor is actors[i] when it is pending.
type shrinkChooser struct {
	w       *ranks.World
	choices []sim.Choice
	actors  []ranks.ActorID
	pos     int
	got     []ranks.ActorID
}

func (c *shrinkChooser) Attach(w *ranks.World) { c.w = w }

func (c *shrinkChooser) Choose(d sim.Decision, n int) int {
	i := c.pos
	c.pos++
	c.got = append(c.got, 0)
	if i < len(c.choices) && c.choices[i].D == d && c.choices[i].V < n {
		return c.choices[i].V
	}
	return 0
}

func (c *shrinkChooser) ChooseItem(items []sim.Item) int {
	i := c.pos
	c.pos++
	v := 0
	if i < len(c.choices) && c.choices[i].V != 0 {
		v = c.choices[i].V
		if i < len(c.actors) && c.actors[i] != 0 {
			for k, it := range items {
				if c.w.ActorOf(it.Actor) == c.actors[i] {
					v = k
					break
				}
			}
		}
		if v >= len(items) {
			v = 0
		}
	}
	c.got = append(c.got, c.w.ActorOf(items[v].Actor))
	return v
}

func deviationPositions(cs []sim.Choice) []int {
	var out []int
	for i, c := range cs {
		if c.V != 0 {
			out = append(out, i)
		}
	}
	return out
}
