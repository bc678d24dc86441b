package format

import (
	"fmt"
	"slices"
	"strings"

	"github.com/collsim/collsim/scenarios/knobs"
)

// Which knobs a file's form reads. A knob a form does not read would change
// nothing, so a file (or a variant) that sets it is told so at its line
// instead of having it silently ignored. Setting such a knob to its default
// value is accepted: it changes nothing either way, and exports written
// before this check listed every knob.

// commonKnobs are read by every form.
var commonKnobs = []string{"arch", "tp", "chunks", "seed", "budget", "sms", "jitter"}

// formKnobs lists what each graph builder reads besides commonKnobs. A new
// graph form must add its row (TestEveryFormDeclaresItsKnobs).
var formKnobs = map[string][]string{
	"moe":        {"dp", "mode", "replays", "phase", "strategy", "workspace", "symm-guard", "placement", "order", "shared", "layers", "tokens", "hidden"},
	"trt-dit":    {"strategy", "engines", "layers", "tokens", "hidden"},
	"trt-moe-ep": {"strategy", "engines", "layers", "tokens", "hidden"},
}

// graphOpsKnobs and programKnobs are what a user op graph and per-rank
// programs read.
var (
	graphOpsKnobs = []string{"mode", "replays", "phase", "strategy", "workspace", "symm-guard", "placement"}
	programKnobs  = []string{"mode", "replays", "strategy", "workspace", "symm-guard", "nccl-order", "nccl-coresident"}
)

// UsedKnobs is the set of knobs s's form reads.
func (s *Spec) UsedKnobs() map[string]bool {
	used := map[string]bool{}
	add := func(keys []string) {
		for _, k := range keys {
			used[k] = true
		}
	}
	add(commonKnobs)
	for _, t := range s.Tensors {
		add(t.BytesExpr.names())
	}
	switch {
	case s.Graph != nil && s.Graph.Builder != "":
		add(formKnobs[s.Graph.Builder])
	case s.Graph != nil:
		add(graphOpsKnobs)
	default:
		add(programKnobs)
		if len(s.Managed()) > 0 {
			used["caching"] = true
		}
		for _, p := range s.AllPrograms() {
			for _, op := range p.Flat() {
				for _, c := range op.When {
					used[c.Key] = true
				}
				for _, name := range op.TimeExpr.names() {
					used[name] = true
				}
				if op.Repeat != nil && op.Repeat.CountKnob != "" {
					used[op.Repeat.CountKnob] = true
				}
			}
		}
		for _, sy := range s.Symm {
			if sy.Pad == "" {
				used["pad"] = true
			}
		}
		for _, ps := range s.patches {
			if len(ps) > 0 {
				used["patch"] = true
			}
		}
		if s.replaysUnread() {
			delete(used, "replays")
		}
	}
	return used
}

// knobDefault is knob key's value when a file leaves it out.
func knobDefault(key string) string {
	c := DefaultConfig()
	for _, k := range knobs.All() {
		if k.Key() == key {
			return k.Get(&c)
		}
	}
	return ""
}

// unusedKnob says why setting key to value does nothing in s, or "" when
// the form reads it (or the value is the default).
func (s *Spec) unusedKnob(used map[string]bool, key, value string) string {
	if used[key] || value == knobDefault(key) {
		return ""
	}
	if key == "pad" && len(s.Symm) > 0 {
		// every allocation gives its own pad: (used has no pad otherwise)
		var fixed []string
		for _, sy := range s.Symm {
			fixed = append(fixed, fmt.Sprintf("%q (pad: %s, line %d)", sy.Name, sy.Pad, sy.pos.at("pad").Line))
		}
		return fmt.Sprintf("knob \"pad\" would change nothing: every symmetric allocation of this file fixes its own pad scope (%s); leave pad: out of an allocation for the knob to choose it", strings.Join(fixed, ", "))
	}
	var names []string
	for k := range used {
		names = append(names, k)
	}
	slices.Sort(names)
	return fmt.Sprintf("knob %q is not read by this file's form (%s), so it would change nothing; knobs it reads: %s", key, s.formName(), strings.Join(names, ", "))
}

// formName names s's form for messages.
func (s *Spec) formName() string {
	switch {
	case s.Graph != nil && s.Graph.Builder != "":
		return "graph builder " + s.Graph.Builder
	case s.Graph != nil:
		return "graph ops"
	}
	return "programs"
}

// validateKnobs reports every knob the file or a variant sets that its form
// does not read, at the knob's line.
func (s *Spec) validateKnobs(e *errs) {
	if s.Graph != nil && s.Graph.Builder != "" {
		if _, ok := formKnobs[s.Graph.Builder]; !ok {
			return // an unknown builder is reported by the parser
		}
	}
	used := s.UsedKnobs()
	for _, p := range s.Params {
		if p.Name != "" && !used[p.Name] {
			e.add(p.pos.at("name"), "param %q is never used: name it in an op's when: or a repeat count", p.Name)
		}
	}
	for _, p := range s.AllPrograms() {
		for _, op := range p.Flat() {
			for _, c := range op.When {
				if knobs.Get(&s.Base, c.Key) == "" {
					e.add(op.pos.at("when"), "%s %q: when %s: the knob has no default value, so the base configuration would decide nothing; set it under knobs:", op.Kind, op.Name, c.Key)
				}
			}
		}
	}
	for _, k := range s.written {
		at := s.pos.at("knobs." + k)
		if k == "patch" {
			e.add(at, "knob patch is made by a variant's patch: list, not set in the file")
			continue
		}
		if top, ok := topKeyOf(k); ok {
			at = s.pos.at(top)
		}
		if msg := s.unusedKnob(used, k, s.knobValue(k)); msg != "" {
			e.add(at, "%s", msg)
		}
	}
	for i, v := range s.Variants {
		vp := s.variantPos(i)
		for _, set := range v.Sets {
			k, val, _ := strings.Cut(set, "=")
			if s.param(k) != nil {
				continue // reported above when unused
			}
			if k == "patch" {
				continue // a patch on a graph file is reported by Validate
			}
			if msg := s.unusedKnob(used, k, val); msg != "" {
				e.add(vp.at("set."+k), "variant %q: %s", v.Name, msg)
			}
		}
	}
}

// knobValue is the base value of knob key.
func (s *Spec) knobValue(key string) string {
	for _, k := range knobs.All() {
		if k.Key() == key {
			return k.Get(&s.Base)
		}
	}
	return ""
}

// CheckSets reports the first of sets (KEY=VALUE, as given to --set) that
// names a knob s's form does not read. Sets were already applied, so every
// key is a known knob or a declared param. The format's exception holds
// here too: an unread knob set to its default value changes nothing and is
// accepted, so one rule decides what a file, a variant and a command line may
// set, and a script that pins a knob across every scenario keeps working.
func (s *Spec) CheckSets(sets []string) error {
	if s.Graph != nil && s.Graph.Builder != "" {
		if _, ok := formKnobs[s.Graph.Builder]; !ok {
			return nil // an unknown builder is reported by the parser
		}
	}
	used := s.UsedKnobs()
	for _, set := range sets {
		k, v, _ := strings.Cut(set, "=")
		k, v = knobs.Canonical(strings.TrimSpace(k)), strings.TrimSpace(v) // ranks=4 is tp=4, as in a file
		if k == "patch" || s.param(k) != nil {
			continue // a patch is checked when it is applied; params are declared by the file
		}
		if msg := s.unusedKnob(used, k, v); msg != "" {
			msg = strings.Replace(msg, "this file's form", fmt.Sprintf("scenario %s's form", s.Name), 1)
			return fmt.Errorf("%w: %s: %s", ErrBadKnob, set, msg)
		}
	}
	return nil
}

// Summary is cfg.Summary() with only the knobs s's form reads: a programs
// file neither places ops (placement) nor stacks layers, so its config line
// does not say placement=single layers=1 (simctl show --lowered writes such
// files from graphs that did).
func (s *Spec) Summary(cfg Config) string {
	if (s.Graph != nil && s.Graph.Builder != "") || cfg.Issue != "" || cfg.Engines != "" {
		return cfg.Summary()
	}
	used := s.UsedKnobs()
	var parts []string
	for _, kv := range [][2]string{{"tp", fmt.Sprint(cfg.TP)}, {"arch", cfg.Arch}, {"mode", cfg.Mode}, {"phase", cfg.Phase},
		{"strategy", cfg.Strategy}, {"workspace", cfg.Workspace}, {"placement", cfg.Placement}, {"layers", fmt.Sprint(cfg.Layers)}} {
		if used[kv[0]] {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	return strings.Join(parts, " ")
}
