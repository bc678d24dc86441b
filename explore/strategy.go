package explore

import (
	"fmt"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/sim"
)

// Strategy generates the schedules of an exploration.
type Strategy interface {
	// Name is the strategy's command-line name.
	Name() string
	// Mode is the engine mode its schedules run in.
	Mode() sim.Mode
	// Begin returns the chooser of schedule i (0, 1, 2, … in order) and the
	// seed it derives from, or ok=false when the strategy has nothing left.
	Begin(i int) (ch sim.Chooser, seed uint64, ok bool)
	// End tells the strategy that schedule i, begun with Begin, ran.
	End(i int, s *Schedule) error
	// Complete reports whether the strategy has covered its whole space
	// (only exhaustive strategies ever do).
	Complete() bool
}

// Independent is implemented by strategies whose schedule i depends only on
// (seed, i): Begin may then be called for several i before their End, from
// several goroutines.
type Independent interface {
	Strategy
	independent()
}

// Names lists the strategies [New] knows.
var Names = []string{"random", "pct", "dpor"}

// New returns the strategy named name for target t with base seed seed.
func New(name string, t *Target, seed uint64) (Strategy, error) {
	switch name {
	case "random":
		return &Random{Seed: seed, PerMille: check.RandomPerMille}, nil
	case "pct":
		steps, err := nominalChoices(t)
		if err != nil {
			return nil, err
		}
		return &PCT{Seed: seed, Depth: 3, Steps: steps}, nil
	case "dpor":
		return &DPOR{}, nil
	}
	return nil, fmt.Errorf("%w: unknown strategy %q (want random, pct or dpor)", ErrBadInput, name)
}

// Random is seeded timing jitter on every duration and launch cost plus a
// start skew per rank, in Timed mode: schedule 0 is the nominal schedule,
// schedule i > 0 uses [sim.Random] seeded with [check.ScheduleSeed](Seed, i).
type Random struct {
	Seed     uint64
	PerMille int // probability of deviating at each decision
}

// Name implements [Strategy].
func (*Random) Name() string { return "random" }

// Mode implements [Strategy].
func (*Random) Mode() sim.Mode { return sim.Timed }

// Begin implements [Strategy].
func (r *Random) Begin(i int) (sim.Chooser, uint64, bool) {
	if i == 0 {
		return sim.Nominal{}, 0, true
	}
	s := check.ScheduleSeed(r.Seed, i)
	return sim.NewRandom(s, r.PerMille), s, true
}

// End implements [Strategy].
func (*Random) End(int, *Schedule) error { return nil }

// Complete implements [Strategy].
func (*Random) Complete() bool { return false }

func (*Random) independent() {}

// PCT is probabilistic concurrency testing in Untimed mode (Burckhardt et
// al., ASPLOS 2010, Algorithm 1): every actor gets a random priority ≥ Depth
// when it first becomes pending; the engine runs the pending item of highest
// priority; at Depth-1 random change points k₁…k_{d-1} in [1, Steps] the
// actor just chosen drops to priority d-i. Durations are not jittered (time
// does not order anything in Untimed mode).
type PCT struct {
	Seed  uint64
	Depth int // d: the bug depth targeted (≥ 1)
	Steps int // k: the expected number of scheduling decisions of a run
}

// Name implements [Strategy].
func (*PCT) Name() string { return "pct" }

// Mode implements [Strategy].
func (*PCT) Mode() sim.Mode { return sim.Untimed }

// Begin implements [Strategy].
func (p *PCT) Begin(i int) (sim.Chooser, uint64, bool) {
	s := check.ScheduleSeed(p.Seed, i)
	return sim.NewPCT(s, p.Depth, p.Steps), s, true
}

// End implements [Strategy].
func (*PCT) End(int, *Schedule) error { return nil }

// Complete implements [Strategy].
func (*PCT) Complete() bool { return false }

func (*PCT) independent() {}

// nominalChoices is the number of scheduling decisions of the nominal
// untimed run of t: PCT's k.
func nominalChoices(t *Target) (int, error) {
	c := &sim.Counter{}
	if _, err := t.Run(sim.Untimed, c); err != nil {
		return 0, err
	}
	return c.N, nil
}
