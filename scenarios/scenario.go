package scenarios

import (
	"fmt"
	"sort"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios/forms"
	"github.com/collsim/collsim/sim"
)

// Variant is one configuration of a scenario with the verdict its mechanics
// are expected to produce. Expect may list alternatives ("race|corruption").
type Variant = check.Variant

// Scenario is a built-in scenario: a base config, variants, and a builder.
type Scenario struct {
	Name        string
	Description string
	Base        Config
	Variants    []Variant
	// Build constructs a world for cfg.
	Build func(cfg Config, opt BuildOptions, eng *sim.Engine) (*Built, error)
	// Compare lists step-time comparisons for the text report.
	Compare []Comparison
	// Unsharded, when set, names the model the scenario shards: the
	// reference is then also that model run on one device (see
	// [check.Model]).
	Unsharded func(cfg Config) (*check.Model, error)
	// GraphMatchesEager declares that the graph path must compute what the
	// eager path computes: in graph mode every schedule's outputs are also
	// compared with the eager path's (Build with mode=eager).
	GraphMatchesEager bool
	// Spec is the scenario-file form the scenario was made from, if any
	// (see Load and ExportYAML).
	Spec *Spec
}

// BuildOptions are how a world is built, independent of the scenario's
// knobs (the checker's, [check.BuildOptions]).
type BuildOptions = check.BuildOptions

// Built is a world ready to run, with what to compare afterwards
// ([check.Built]).
type Built = check.Built

var registry = map[string]*Scenario{}

// Register adds s to the built-ins.
func Register(s *Scenario) {
	if _, dup := registry[s.Name]; dup {
		panic("scenarios: duplicate " + s.Name)
	}
	registry[s.Name] = s
}

// Lookup returns the built-in named name.
func Lookup(name string) (*Scenario, bool) {
	s, ok := registry[name]
	return s, ok
}

// Names lists the built-ins, sorted.
func Names() []string {
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// VariantConfig returns the config of variant v with extra sets applied after
// the variant's own.
func (s *Scenario) VariantConfig(v Variant, extra []string) (Config, error) {
	c := s.Base
	if err := c.ApplySets(v.Sets); err != nil {
		return c, fmt.Errorf("variant %q: %w", v.Name, err)
	}
	if err := c.ApplySets(extra); err != nil {
		return c, err
	}
	if s.Spec != nil { // a Go builder declares no form; only a file's knobs are known
		if err := s.Spec.CheckSets(extra); err != nil {
			return c, err
		}
	}
	if err := s.CheckBudget(c); err != nil { // budget.go: before anything is built
		return c, err
	}
	return c, nil
}

// Variant returns the variant named name.
func (s *Scenario) Variant(name string) (Variant, bool) {
	for _, v := range s.Variants {
		if v.Name == name {
			return v, true
		}
	}
	return Variant{}, false
}

// BuildMoE builds a TP MoE scenario world from cfg ([forms.BuildMoE]).
var BuildMoE = forms.BuildMoE
