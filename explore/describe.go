package explore

import (
	"cmp"
	"fmt"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// Deviation is one recorded choice of a witness that differs from the
// nominal choice, said in words.
type Deviation struct {
	// Choice is the index of the choice in the witness's record.
	Choice int `json:"choice"`
	// Decision is what was chosen: schedule (which pending step runs
	// next), jitter (a duration) or skew (a host thread's start).
	Decision string `json:"decision"`
	// AtNs is the simulated time of the choice.
	AtNs int64 `json:"at_ns"`
	// Text says what happened instead of the nominal step: which step ran
	// before which, on which rank and stream.
	Text string `json:"text"`
}

func (d Deviation) String() string {
	return fmt.Sprintf("choice %d at %.3fµs: %s", d.Choice, float64(d.AtNs)/1000, d.Text)
}

// Explain replays w on t and says what each of its deviations from nominal
// did. It is one more run of the witness's schedule, with every step read
// as it is taken; the run's trace hash is checked against the witness's.
func Explain(t *Target, w *Witness) ([]Deviation, error) {
	d := &describer{replay: sim.Replay{Choices: w.Choices}}
	eng := sim.NewEngine(w.mode(), d)
	b, err := t.ref.Build(t.program(), eng)
	if err != nil {
		return nil, err
	}
	d.world, d.eng = b.World, eng
	if w.mode() == sim.Timed {
		// A jitter is chosen while a step runs: say what the step was
		// about to do before it changes the world.
		eng.SetObserver(func(it sim.Item, _ bool) { d.cur = b.World.StepWords(it.Actor) })
	}
	o, err := check.RunBuilt(b, t.ref)
	if err != nil {
		return nil, err
	}
	defer o.Release()
	if o.TraceHash != w.TraceHash {
		return d.out, fmt.Errorf("explaining the witness ran trace %s, the witness records %s", o.TraceHash, w.TraceHash)
	}
	return d.out, nil
}

// describer replays recorded choices and, for each non-nominal one, says
// what it did while the world's state still shows the steps involved.
type describer struct {
	replay sim.Replay
	world  *ranks.World
	eng    *sim.Engine
	pos    int    // index of the next choice
	skews  int    // skew choices so far: the k-th is rank k's
	cur    string // the running step, in words (timed mode, for jitter)
	out    []Deviation
}

func (d *describer) add(dec sim.Decision, text string) {
	d.out = append(d.out, Deviation{Choice: d.pos, Decision: dec.String(), AtNs: int64(d.eng.Now()), Text: text})
}

func (d *describer) Choose(dec sim.Decision, n int) int {
	v := d.replay.Choose(dec, n)
	switch dec {
	case sim.DecSkew:
		if v != 0 {
			d.add(dec, fmt.Sprintf("rank %d's host thread starts %.3fµs late (nominal: on time)", d.skews, float64(ranks.SkewOf(v))/1000))
		}
		d.skews++
	case sim.DecJitter:
		if v != 0 {
			d.add(dec, fmt.Sprintf("%s takes ×%.2f its nominal time", cmp.Or(d.cur, "a host thread's first step"), float64(ranks.JitterPerMille(v))/1000))
		}
	default:
		if v != 0 {
			d.add(dec, fmt.Sprintf("option %d of %d instead of 0", v, n))
		}
	}
	d.pos++
	return v
}

func (d *describer) ChooseItem(items []sim.Item) int {
	v := d.replay.ChooseItem(items)
	if v != 0 && v < len(items) {
		d.add(sim.DecSchedule, fmt.Sprintf("%s ran before %s (nominal order: the other way round)",
			d.world.StepWords(items[v].Actor), d.world.StepWords(items[0].Actor)))
	}
	d.pos++
	return v
}
