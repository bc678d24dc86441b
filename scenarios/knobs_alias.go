package scenarios

import "github.com/collsim/collsim/scenarios/knobs"

// Config is every knob a scenario understands ([knobs.Config]): a
// scenario's base and every variant's settings.
type Config = knobs.Config

// ErrBadKnob wraps every knob error ([knobs.ErrBadKnob]).
var ErrBadKnob = knobs.ErrBadKnob

// KnobHelp lists the knobs with their help text ([knobs.Help]).
func KnobHelp() string { return knobs.Help() }

// KnobKeys lists every --set key, in the knob table's order ([knobs.Keys]).
func KnobKeys() []string { return knobs.Keys() }

// KnobValues lists the values an enumerated knob accepts ([knobs.Values]).
func KnobValues(key string) []string { return knobs.Values(key) }

// EnumKnobs lists the keys of the enumerated knobs, sorted ([knobs.Enums]).
func EnumKnobs() []string { return knobs.Enums() }
