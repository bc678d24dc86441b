package check

import (
	"fmt"
	"hash/fnv"
	"strconv"
)

// Wrong values that are no race. A corruption finding says an output
// differs from a reference; that is the same word for two different bugs:
// a schedule-dependent race (some schedules right, some wrong, or wrong in
// different ways) and a logic bug in what the program computes (a
// replicated partial summed once per rank, a path captured twice), whose
// output is the same wrong value in every schedule and which no
// happens-before race explains. DESIGN.md's verdicts: the finding says
// whether every schedule gives it, and from which op. A [VariantReport]
// tallies the schedules it ran (nominal and explored) and says which
// kind of corruption it judged, in its Corruption field and at the end of
// each corruption finding's message.

// CorruptionSummary summarises a variant's corruption over the schedules it ran.
type CorruptionSummary struct {
	// Schedules is how many of the Of schedules run gave a corruption
	// finding.
	Schedules int `json:"schedules"`
	Of        int `json:"of"`
	// EverySchedule: every schedule run gave corruption. SameValues: and
	// the same outputs, every one of them.
	EverySchedule bool `json:"every_schedule"`
	SameValues    bool `json:"same_values"`
	// Race: some schedule run had a race or a mismatch, an order the
	// program leaves to the schedule.
	Race bool `json:"race"`
	// LogicBug: the same wrong outputs in every schedule run and no race
	// or mismatch in any: the program computes the wrong value whatever
	// the order (a logic bug, not a race).
	LogicBug bool `json:"logic_bug"`
	// Ops are the ops that last wrote the first wrong chunk of each
	// corrupted tensor of the judged schedule, in finding order.
	Ops []string `json:"ops,omitempty"`
}

// corruptTally collects what [CorruptionSummary] says, one schedule at a time.
type corruptTally struct {
	of, bad int
	race    bool
	out     uint64 // the outputs of the first corrupted schedule
	same    bool
}

// see tallies one schedule's outcome (before it is released).
func (c *corruptTally) see(o *Outcome) {
	c.of++
	corrupt := false
	for _, f := range o.Findings {
		switch f.Kind {
		case Corruption:
			corrupt = true
		case Race, Mismatch:
			c.race = true
		}
	}
	if !corrupt {
		return
	}
	h := outputsHash(o.Built)
	if c.bad == 0 {
		c.out, c.same = h, true
	} else if h != c.out {
		c.same = false
	}
	c.bad++
}

// outputsHash hashes b's compared tensors' values.
func outputsHash(b *Built) uint64 {
	h := fnv.New64a()
	var buf []byte
	if b == nil {
		return 0
	}
	for _, bufs := range b.Compare {
		for _, x := range bufs {
			for _, v := range x.Vals {
				buf = strconv.AppendUint(buf[:0], v.N, 10)
				buf = append(buf, ' ')
				h.Write(buf)
			}
			h.Write([]byte{';'})
		}
	}
	return h.Sum64()
}

// summary is the tally as a [CorruptionSummary], with the writers of best's
// corrupted tensors; nil when no schedule gave corruption. It ends each
// corruption finding of best with what it says.
func (c *corruptTally) summary(best *Outcome) *CorruptionSummary {
	if c.bad == 0 {
		return nil
	}
	s := &CorruptionSummary{Schedules: c.bad, Of: c.of, EverySchedule: c.bad == c.of, Race: c.race}
	s.SameValues = s.EverySchedule && c.same
	s.LogicBug = s.SameValues && !c.race
	seen := map[string]bool{}
	for i := range best.Findings {
		f := &best.Findings[i]
		if f.Kind != Corruption {
			continue
		}
		w := ""
		if len(f.Ranks) > 0 && len(f.Ops) > 0 {
			w = lastWriter(best.Built, f.Ranks[0], f.Ops[0])
		}
		if w != "" && !seen[w] {
			seen[w] = true
			s.Ops = append(s.Ops, w)
		}
		f.Message += s.say(w)
	}
	return s
}

// lastWriter is the op that last wrote rank's compared tensor name (its
// first chunk that has a writer), or "".
func lastWriter(b *Built, rank int, name string) string {
	if b == nil || b.World == nil || rank >= len(b.Compare) {
		return ""
	}
	for _, x := range b.Compare[rank] {
		if x.Name != name {
			continue
		}
		for c := range x.Vals {
			if t, ok := b.World.LastWriter(x, c); ok {
				return t.Name
			}
		}
	}
	return ""
}

// say is what a corruption finding's message ends with; writer is the op
// that last wrote its tensor ("": unknown).
func (s *CorruptionSummary) say(writer string) string {
	by := ""
	if writer != "" {
		by = fmt.Sprintf(" (its value last written by %q)", writer)
	}
	switch {
	case s.LogicBug:
		return fmt.Sprintf(" — the same wrong values in every schedule run (%d), and no race or mismatch in any: a logic bug in what the program computes%s, not a race", s.Of, by)
	case s.EverySchedule && s.SameValues:
		return fmt.Sprintf(" — the same wrong values in every schedule run (%d)%s, beside a race or mismatch", s.Of, by)
	case s.EverySchedule:
		return fmt.Sprintf(" — wrong in every schedule run (%d), with values that depend on the schedule%s", s.Of, by)
	}
	return fmt.Sprintf(" — wrong in %d of the %d schedules run: it depends on the schedule%s", s.Schedules, s.Of, by)
}
