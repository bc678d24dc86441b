package check

import (
	"sync"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// template is the program of a reference's config, built once and copied for
// every schedule (see [ranks.Template]): every schedule of a config runs
// the same program, so only the world it runs in needs to be new.
type template struct {
	once  sync.Once
	built *scenarios.Built // the template's build (its world never runs)
	tmpl  *ranks.Template  // nil: the config is built afresh each time
}

// Build returns cfg of sc built on eng, ready to run: a copy of the
// reference's template when sc and cfg are the reference's, identical to
// what sc.Build(cfg, scenarios.BuildOptions{}, eng) returns, otherwise that
// build. ref may be nil.
func (ref *Reference) Build(sc *scenarios.Scenario, cfg scenarios.Config, eng *sim.Engine) (*scenarios.Built, error) {
	if ref == nil || ref.sc != sc || ref.cfg != cfg {
		return sc.Build(cfg, scenarios.BuildOptions{}, eng)
	}
	t := &ref.tmpl
	t.once.Do(func() {
		b, err := sc.Build(cfg, scenarios.BuildOptions{}, sim.NewEngine(sim.Timed, nil))
		if err != nil {
			return // every schedule builds afresh and reports the error
		}
		if t.tmpl, err = ranks.NewTemplate(b.World); err == nil {
			t.built = b
		}
	})
	if t.tmpl == nil {
		return sc.Build(cfg, scenarios.BuildOptions{}, eng)
	}
	tb := t.built
	w := t.tmpl.Instantiate(eng)
	b := &scenarios.Built{
		World: w,
		// Full slice expressions: an append by one schedule's caller
		// copies, never writes into another's.
		Notes:    tb.Notes[:len(tb.Notes):len(tb.Notes)],
		Findings: tb.Findings[:len(tb.Findings):len(tb.Findings)],
	}
	if tb.Compare != nil {
		b.Compare = make([][]*ranks.Buffer, len(tb.Compare))
		for r, bufs := range tb.Compare {
			cmp := make([]*ranks.Buffer, len(bufs))
			for i, x := range bufs {
				cmp[i] = w.Buffer(x)
			}
			b.Compare[r] = cmp
		}
	}
	return b, nil
}
