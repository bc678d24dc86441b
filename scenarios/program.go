package scenarios

import (
	"fmt"
	"strings"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/sim"
)

// The scenario as the checker sees it. check takes a [check.Program] and
// its [check.References] and knows nothing of scenarios, knobs or files;
// this file makes one from a scenario and a configuration.

// Setup makes variant v ready to run under extra knob overrides (applied
// after the variant's own): its program, settings, budget and seed. It is
// [check.Scenario]'s method, so check.RunVariant takes a *Scenario.
func (s *Scenario) Setup(v Variant, extra []string) (check.Setup, error) {
	cfg, err := s.VariantConfig(v, extra)
	if err != nil {
		return check.Setup{}, err
	}
	return check.Setup{Program: s.program(cfg, extra), Settings: &cfg, Budget: cfg.Budget, Seed: cfg.Seed}, nil
}

// Program is configuration cfg of s as the checker runs it; extra are the
// overrides cfg was made with (see [Scenario.VariantConfig]), which a
// reference to another variant applies to that variant too.
func (s *Scenario) Program(cfg Config, extra []string) check.Program { return s.program(cfg, extra) }

func (s *Scenario) program(cfg Config, extra []string) program {
	return program{sc: s, cfg: cfg, extra: strings.Join(extra, "\x00")}
}

// program is one configuration of a scenario: [check.Program]. It is a
// comparable value, so two programs of the same scenario, configuration
// and overrides are equal (check reuses a reference's template for them).
type program struct {
	sc    *Scenario
	cfg   Config
	extra string // the overrides cfg was made with, NUL-separated, for references to other variants
}

// sets are the overrides p was made with.
func (p program) sets() []string {
	if p.extra == "" {
		return nil
	}
	return strings.Split(p.extra, "\x00")
}

// Build builds the configuration on eng.
func (p program) Build(opt check.BuildOptions, eng *sim.Engine) (*check.Built, error) {
	return p.sc.Build(p.cfg, opt, eng)
}

// References are the scenario's references besides the serialized
// program: its unsharded model, the eager path (graph mode), and what a
// scenario file lists (spec_refs.go).
func (p program) References() (*check.References, error) {
	sc, cfg := p.sc, p.cfg
	refs := &check.References{}
	if sc.Unsharded != nil {
		m, err := sc.Unsharded(cfg)
		if err != nil {
			return nil, fmt.Errorf("unsharded model: %w", err)
		}
		refs.Model = m
	}
	if sc.GraphMatchesEager && cfg.Mode == "graph" {
		ec := cfg
		ec.Mode = "eager"
		refs.Eager = sc.program(ec, p.sets())
	}
	if sc.Spec != nil {
		if err := (lower{sc.Spec}).references(p, refs); err != nil {
			return nil, err
		}
	}
	if refs.Model == nil && refs.Eager == nil && len(refs.Variants) == 0 && len(refs.Expected) == 0 {
		return nil, nil
	}
	return refs, nil
}
