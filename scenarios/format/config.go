package format

import (
	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios/knobs"
)

// Config is a scenario's configuration: every knob ([knobs.Config]).
type Config = knobs.Config

// Variant is one configuration of a scenario with the verdict its
// mechanics are expected to produce ([check.Variant]).
type Variant = check.Variant

// ErrBadKnob is the error of a knob value out of its range.
var ErrBadKnob = knobs.ErrBadKnob
