package check

import (
	"sync"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// template is the program of a reference's config, built once and copied for
// every schedule (see [ranks.Template]): every schedule of a config runs
// the same program, so only the world it runs in needs to be new.
type template struct {
	once  sync.Once
	built *Built          // the template's build (its world never runs)
	tmpl  *ranks.Template // nil: the config is built afresh each time
}

// Build returns p built on eng, ready to run: a copy of the reference's
// template when p is the reference's program, identical to what
// p.Build(BuildOptions{}, eng) returns, otherwise that build. ref may be
// nil.
func (ref *Reference) Build(p Program, eng *sim.Engine) (*Built, error) {
	if ref == nil || ref.prog != p {
		return p.Build(BuildOptions{}, eng)
	}
	t := &ref.tmpl
	t.once.Do(func() {
		b, err := p.Build(BuildOptions{}, sim.NewEngine(sim.Timed, nil))
		if err != nil {
			return // every schedule builds afresh and reports the error
		}
		if t.tmpl, err = ranks.NewTemplate(b.World); err == nil {
			t.built = b
		}
	})
	if t.tmpl == nil {
		return p.Build(BuildOptions{}, eng)
	}
	tb := t.built
	w := t.tmpl.Instantiate(eng)
	b := &Built{
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
