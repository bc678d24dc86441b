package sim

import (
	"math/bits"
	"math/rand/v2"
)

// Decision names what a choice is about. It is recorded with the choice so a
// witness file is readable and a replay can detect drift.
type Decision uint8

const (
	// DecJitter picks a duration multiplier for one micro-op or launch.
	DecJitter Decision = iota
	// DecSkew picks a start offset for one rank's host thread.
	DecSkew
	// DecSchedule picks which pending item runs next (Untimed mode only).
	DecSchedule
)

func (d Decision) String() string {
	switch d {
	case DecJitter:
		return "jitter"
	case DecSkew:
		return "skew"
	case DecSchedule:
		return "schedule"
	}
	return "decision?"
}

// Chooser makes every nondeterministic decision of a run. Choice 0 is always
// the nominal one (no jitter, no skew, the least item), so a schedule's
// "deviations" are its non-zero choices.
type Chooser interface {
	// Choose returns a value in [0, n).
	Choose(d Decision, n int) int
	// ChooseItem returns an index into items (sorted by the queue order).
	// items is the engine's queue itself, read in place: a chooser reads
	// it during the call and neither keeps nor changes it.
	ChooseItem(items []Item) int
}

// Nominal always makes choice 0: the cost model's schedule.
type Nominal struct{}

// Choose implements [Chooser].
func (Nominal) Choose(Decision, int) int { return 0 }

// ChooseItem implements [Chooser].
func (Nominal) ChooseItem([]Item) int { return 0 }

// Random deviates from nominal with probability PerMille/1000 per decision,
// drawing uniformly among the non-nominal choices. All randomness comes from
// its seed; there is no global RNG.
type Random struct {
	pcg      rand.PCG
	PerMille int
}

// NewRandom returns a Random seeded with seed.
func NewRandom(seed uint64, perMille int) *Random {
	r := &Random{PerMille: perMille}
	r.pcg.Seed(seed, seed^0x9e3779b97f4a7c15)
	return r
}

// Choose implements [Chooser].
func (r *Random) Choose(_ Decision, n int) int {
	if n <= 1 || r.intN(1000) >= r.PerMille {
		return 0
	}
	return 1 + r.intN(n-1)
}

// ChooseItem implements [Chooser].
func (r *Random) ChooseItem(items []Item) int { return r.intN(len(items)) }

// intN is rand.New(&r.pcg).IntN(n): the same draws and the same values
// (math/rand/v2's uint64n, Lemire's multiply and reject, which its 32-bit
// path reproduces exactly), called on the PCG itself rather than through a
// Rand's Source interface: a random schedule draws once or twice per
// micro-op. n > 0.
func (r *Random) intN(n int) int {
	u := uint64(n)
	if u&(u-1) == 0 { // a power of two: mask
		return int(r.pcg.Uint64() & (u - 1))
	}
	hi, lo := bits.Mul64(r.pcg.Uint64(), u)
	if lo < u {
		thresh := -u % u
		for lo < thresh {
			hi, lo = bits.Mul64(r.pcg.Uint64(), u)
		}
	}
	return int(hi)
}

// Choice is one recorded decision.
type Choice struct {
	D Decision `json:"d"`
	N int      `json:"n"` // number of options offered
	V int      `json:"v"` // option taken
}

// Recorder wraps a Chooser and records every decision, so the run can be
// replayed with [Replay].
type Recorder struct {
	Inner   Chooser
	Choices []Choice
}

// Choose implements [Chooser].
func (r *Recorder) Choose(d Decision, n int) int {
	v := r.Inner.Choose(d, n)
	r.Choices = append(r.Choices, Choice{D: d, N: n, V: v})
	return v
}

// ChooseItem implements [Chooser].
func (r *Recorder) ChooseItem(items []Item) int {
	v := r.Inner.ChooseItem(items)
	r.Choices = append(r.Choices, Choice{D: DecSchedule, N: len(items), V: v})
	return v
}

// Replay replays recorded choices in order. Past the end of the record, or
// where the recorded option no longer exists, it makes the nominal choice and
// counts a divergence.
type Replay struct {
	Choices  []Choice
	pos      int
	Diverged int
}

func (r *Replay) next(d Decision, n int) int {
	if r.pos >= len(r.Choices) {
		r.pos++
		return 0
	}
	c := r.Choices[r.pos]
	r.pos++
	if c.D != d || c.V >= n {
		r.Diverged++
		return 0
	}
	return c.V
}

// Choose implements [Chooser].
func (r *Replay) Choose(d Decision, n int) int { return r.next(d, n) }

// ChooseItem implements [Chooser].
func (r *Replay) ChooseItem(items []Item) int { return r.next(DecSchedule, len(items)) }

// Deviations counts the non-nominal choices in cs.
func Deviations(cs []Choice) int {
	n := 0
	for _, c := range cs {
		if c.V != 0 {
			n++
		}
	}
	return n
}
