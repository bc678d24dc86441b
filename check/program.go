package check

import (
	"fmt"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// What the checker needs of a scenario, and nothing more. A front end (the
// scenario-file format in package scenarios, an imported trace) builds a
// [Program] for one configuration and names its [References]; check runs
// it, compares, and judges. check never sees a scenario, a knob or a file,
// like porcupine's CheckOperations(model, history).

// BuildOptions are how a world is built, independent of the program's
// knobs.
type BuildOptions struct {
	// Reference builds the reference program instead: the same ops, each
	// rank's ops serialized in program order on one stream, eager.
	Reference bool
	// Timeline records task spans (ranks.World.Spans) for timelines.
	Timeline bool
	// NoFold keeps every rank's own program (ranks.World.NoFold): the
	// world a folded build must run exactly as (tests).
	NoFold bool
}

// Built is a world ready to run, with what to compare afterwards.
type Built struct {
	World *ranks.World
	// Compare lists, per rank, the tensors to compare against the
	// reference, in program order.
	Compare [][]*ranks.Buffer
	// Notes are facts about the build worth reporting (strategies chosen,
	// transform decisions).
	Notes []string
	// Findings are what the build itself found (an engine that failed to
	// build); they join the run's findings.
	Findings []ranks.Finding
}

// BuildFailed reports whether the build found a build error or a capture
// error: the program never ran, so its outputs are not compared.
func (b *Built) BuildFailed() bool {
	for _, f := range b.Findings {
		if f.Kind == ranks.KindBuildError || f.Kind == ranks.KindCaptureError {
			return true
		}
	}
	return false
}

// Program is one configuration of a scenario as the checker sees it: it
// builds worlds to run (one per schedule, each on the engine it is given)
// and names what every run is compared with. Build must be deterministic:
// the same options and the same engine choices give the same world.
type Program interface {
	// Build builds the program on eng; with opt.Reference, its reference
	// program (each rank's ops serialized in program order on one
	// stream, eager).
	Build(opt BuildOptions, eng *sim.Engine) (*Built, error)
	// References lists the references every run is compared with besides
	// the serialized program; nil when there are none.
	References() (*References, error)
}

// References are what a program's runs are compared with besides its own
// serialized program. Each difference is a corruption finding that names
// the reference.
type References struct {
	// Model is the unsharded model the program shards, run on one device:
	// every rank's tensor named like a model output must equal it.
	Model *Model
	// Eager is the program's eager path, which its graph path must match
	// (set only when the program runs as a CUDA graph).
	Eager Program
	// Variants are other programs whose serialized reference outputs the
	// run must reproduce: the tensors compared (by rank and name) must be
	// equal. Name says which, in findings ("variant consistent").
	Variants []NamedProgram
	// Expected are explicit values: a rank's tensor must hold them at the
	// end of the run.
	Expected []Expected
}

// NamedProgram is a program with the name findings give it.
type NamedProgram struct {
	Name    string
	Program Program
}

// Expected is the value a tensor must hold on a rank at the end of the
// run: Values[c] for chunk c.
type Expected struct {
	Tensor string
	Rank   int
	Values []uint64
}

// Settings are a program's knob settings as reports show them (a
// scenario's Config): Summary is one line; JSON writes them in full.
type Settings interface {
	Summary() string
}

// Variant is one configuration of a scenario with the verdict its mechanics
// are expected to produce. Expect may list alternatives ("race|corruption").
// Sets are the front end's knob overrides; check only passes them back.
type Variant struct {
	Name   string
	Sets   []string // knob overrides applied to the scenario's base config
	Expect string
	Doc    string
}

// Setup is a variant made ready to run: its program, its settings, and how
// many schedules to explore from which seed.
type Setup struct {
	Program  Program
	Settings Settings
	Budget   int
	Seed     uint64
}

// Scenario is what [RunVariant] needs of a scenario: a variant's setup
// under extra knob overrides (bad overrides are an error).
type Scenario interface {
	Setup(v Variant, extra []string) (Setup, error)
}

// checkExpected reports, per rank and tensor, the first chunk that differs
// from an explicit expected value; details makes each finding's message.
func checkExpected(b *Built, exp []Expected) (out []ranks.Finding, details []func() string) {
	for _, e := range exp {
		if e.Rank < 0 || e.Rank >= len(b.Compare) {
			continue
		}
		var got *ranks.Buffer
		for _, t := range b.Compare[e.Rank] {
			if t.Name == e.Tensor {
				got = t
			}
		}
		res := fmt.Sprintf("rank %d tensor %q", e.Rank, e.Tensor)
		if got == nil {
			msg := fmt.Sprintf("rank %d has no compared tensor %q to hold the expected values", e.Rank, e.Tensor)
			out = append(out, ranks.Finding{Kind: ranks.KindCorruption, Ranks: []int{e.Rank}, Ops: []string{e.Tensor}, Resource: res, Message: msg})
			details = append(details, nil)
			continue
		}
		for c, v := range got.Vals {
			if c >= len(e.Values) || v.N == e.Values[c] {
				continue
			}
			out = append(out, ranks.Finding{Kind: ranks.KindCorruption, Ranks: []int{e.Rank}, Ops: []string{e.Tensor}, Resource: res})
			e, c, v, w := e, c, v, b.World
			details = append(details, func() string {
				return fmt.Sprintf("rank %d tensor %s[%d]: expected %d (an explicit expected value); observed %d = %s", e.Rank, e.Tensor, c, e.Values[c], v.N, w.Srcs.Format(v))
			})
			break
		}
	}
	return out, details
}

// compareByName reports, per rank, the first compared tensor chunk that
// differs from the tensor of the same name in want (another variant's
// reference run, recorded with its names), naming that variant; details
// makes each finding's message (the provenance of both values, want's
// read from the run rw rebuilds).
func compareByName(got *Built, want *refRecord, name string, rw *refWorlds) (out []ranks.Finding, details []func() string) {
	for r := range got.Compare {
		if r >= len(want.ranks) {
			break
		}
		wr := &want.ranks[r]
		bad := 0
		var first *ranks.Buffer
		fi, fc := 0, 0
		for _, b := range got.Compare[r] {
			wi := -1
			for i, n := range wr.names {
				if n == b.Name {
					wi = i
				}
			}
			if wi < 0 {
				continue
			}
			wvals := wr.vals(wi)
			for c := range min(len(b.Vals), len(wvals)) {
				if b.Vals[c].N == wvals[c] {
					continue
				}
				bad++
				if first == nil {
					first, fi, fc = b, wi, c
				}
			}
		}
		if first == nil {
			continue
		}
		out = append(out, ranks.Finding{
			Kind:     ranks.KindCorruption,
			Ranks:    []int{r},
			Ops:      []string{first.Name},
			Resource: fmt.Sprintf("rank %d tensor %q", r, first.Name),
		})
		r, g, w, tensor, gw := r, first.Vals[fc], wr.vals(fi)[fc], first.Name, got.World
		details = append(details, func() string {
			return fmt.Sprintf("rank %d tensor %s[%d] differs from variant %s's reference: expected %d = %s; observed %d = %s (%d chunks differ from it on rank %d)",
				r, tensor, fc, name, w, rw.provenance(want, r, fi, fc), g.N, gw.Srcs.Format(g), bad, r)
		})
	}
	return out, details
}
