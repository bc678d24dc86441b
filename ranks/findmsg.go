package ranks

import (
	"fmt"

	"github.com/collsim/collsim/ranks/findings"
)

// Race and mismatch findings are detected on the hot path of every schedule,
// but their messages are read only once the run has ended (and most
// schedules of an exploration are judged by kind alone). A finding is
// therefore reported with what its message is made of (a pendingMsg), and
// [World.Run] formats every message before it hands the findings out, so
// Result.Findings reads exactly as if each had been formatted on detection.
// A caller that judges runs by kind ([World.DeferMessages]: check.RunBuilt,
// which formats them on Outcome.Explain) skips even that. With
// Config.Timeline the message is formatted at once: the finding's Mark
// carries it.

type pendingKind uint8

const (
	pendingRace pendingKind = iota
	pendingMismatch
)

// pendingMsg is the message and resource of finding w.log.List[idx], not yet
// formatted. Everything it names is fixed when the finding is reported (task
// ids, a buffer, a call instance), so formatting later gives the same text.
type pendingMsg struct {
	idx  int
	kind pendingKind
	// the reporting task and the other task (race: the earlier access;
	// mismatch: the producer of the consumed data)
	t, other int32
	// race: the buffer and chunk (or the pad and slot, or the FIFO and
	// slot), and the access kinds
	buf       *Buffer
	chunk     int
	prev, cur string
	// mismatch: the instance the producer belongs to, and the resource it
	// went through: res, or when empty slot of pad
	got  Instance
	res  string
	fifo *Fifo
	pad  *SignalPad
	slot int
}

// format returns the finding's message and resource.
func (m *pendingMsg) format(w *World) (msg, res string) {
	t, o := w.task(m.t), w.task(m.other)
	switch m.kind {
	case pendingRace:
		where := ""
		switch {
		case m.pad != nil:
			res = padResource(m.pad, m.slot)
			where = res
		case m.fifo != nil:
			res = "NCCL connection " + m.fifo.Name
			where = fmt.Sprintf("%s slot %d", res, m.slot)
		default:
			res = m.buf.Describe()
			where = fmt.Sprintf("%s chunk %d", res, m.chunk)
		}
		msg = fmt.Sprintf("unordered %s/%s on %s: %s on rank %d stream %s and %s on rank %d stream %s are not ordered by happens-before",
			m.prev, m.cur, where, w.taskName(m.other), o.rank, w.streamName(m.other), w.taskName(m.t), t.rank, w.streamName(m.t))
	case pendingMismatch:
		res = m.res
		if m.fifo != nil {
			res = "NCCL connection " + m.fifo.Name
		}
		if m.pad != nil {
			res = padResource(m.pad, m.slot)
		}
		msg = fmt.Sprintf("%s on rank %d stream %s consumed data of another collective, %s from rank %d stream %s, through %s",
			w.callName(t.inst), t.rank, w.streamName(m.t), w.callName(m.got), o.rank, w.streamName(m.other), res)
	}
	return msg, res
}

// padResource names slot of a signal pad as a finding's resource.
func padResource(p *SignalPad, slot int) string {
	return fmt.Sprintf("signal pad %q on rank %d, slot %d", p.Name, p.Rank, slot)
}

// reportPending reports f, whose Message and Resource m gives.
func (w *World) reportPending(f Finding, m pendingMsg) {
	if w.cfg.Timeline {
		f.Message, f.Resource = m.format(w)
		w.report(f)
		return
	}
	n := len(w.log.List)
	w.report(f)
	if len(w.log.List) > n { // kept (under the cap)
		m.idx = n
		w.pending = append(w.pending, m)
	}
}

// formatPending fills in the messages of the findings reported so far.
func (w *World) formatPending() {
	for i := range w.pending {
		m := &w.pending[i]
		f := &w.log.List[m.idx]
		f.Message, f.Resource = m.format(w)
	}
	w.pending = w.pending[:0]
}

// DeferMessages makes [World.Run] hand out race and mismatch findings with
// their Message and Resource empty, to be filled in by
// [World.FormatMessages] if anybody reads them: an explorer judges most
// schedules by their findings' kinds and formats the few it shows.
func (w *World) DeferMessages() { w.deferMsgs = true }

// FormatMessages fills in the deferred messages of fs, the findings Run
// returned (or a copy of them, in the same order).
func (w *World) FormatMessages(fs []Finding) {
	if w.mem == nil {
		panic("ranks: World.FormatMessages called after Release")
	}
	for i := range w.pending {
		m := &w.pending[i]
		if m.idx < len(fs) {
			fs[m.idx].Message, fs[m.idx].Resource = m.format(w)
		}
	}
}

// findingState is what a run found so far: the findings under their caps,
// the counts, the de-duplication sets and the messages still to format.
type findingState struct {
	log      findings.Log // the findings, counted, capped and de-duplicated
	pending  []pendingMsg // findings whose messages are not yet formatted (findmsg.go)
	raceSeen findings.KeySet[raceKey]
	// a retired task's stand-in for its name in a report (World.nameView)
	nameScratch task
	// mismatches reported, by interned ids (exec.go)
	mismatchSeen map[mismatchKey]bool
	// recently looked-up keys, all in raceSeen (zero: empty; no real key is zero)
	raceCache [64]raceKey
	// races reported, by interned names (exec.go)
	raceDedupe findings.KeySet[raceDedupeKey]
	names      map[string]int32
	bufName    []int32 // per buffer id: 1 + its name's id, 0: not yet
	// per pad and slot: its interned race-resource name (syncRace)
	slotName map[padSlot]int32
	// a template copy's: per pad id and slot, the resource id the template
	// gave it (slotResIDs), shared read-only by the copies; nil otherwise
	slotRes [][]int32
	// deferMsgs: Run leaves race and mismatch messages to FormatMessages
	deferMsgs bool
}
