package sim

import (
	"fmt"
	"math/bits"

	"github.com/google/btree"
)

// Item is one pending event: actor Actor runs at time At. Items are totally
// ordered by (At, Key, Seq); Seq is assigned by the engine and strictly
// increases, so no two items compare equal (btree's ReplaceOrInsert would
// otherwise drop one).
type Item struct {
	At    Time
	Key   uint64 // tie-break key chosen by the model (stable across runs)
	Seq   uint64 // insertion sequence, assigned by Engine.Schedule
	Actor int32  // what to run; meaning is the model's
}

func itemLess(a, b Item) bool {
	if a.At != b.At {
		return a.At < b.At
	}
	if a.Key != b.Key {
		return a.Key < b.Key
	}
	return a.Seq < b.Seq
}

// Mode selects how the engine picks the next item.
type Mode uint8

const (
	// Timed pops the least item: the cost model decides the order, ties are
	// broken by key. This is the nominal schedule (and, with jitter, random).
	Timed Mode = iota
	// Untimed lets the chooser pick any pending item next (adversarial
	// scheduling: PCT, exhaustive search). Time still advances monotonically
	// for reporting.
	Untimed
)

// Engine is the event queue plus the clock, the chooser and the trace hash.
type Engine struct {
	q *btree.BTreeG[Item]
	// run is a sorted run of items beside the btree: in Timed mode an item
	// larger than every item in run is appended to it instead of inserted
	// into q, an item of a short run (fewer than smallQueue pending) is
	// inserted in place, and Next pops the lesser of the two heads.
	// Discrete-event models mostly schedule in increasing order (a lockstep
	// ring at time T schedules every rank's next step at T+d in key order)
	// or keep few items pending (tp8: 8 on average), so most items never
	// touch the btree; the order of pops is exactly q's order. In Untimed
	// mode run holds every pending item and q stays empty.
	run    []Item
	runAt  int // run[runAt:] are pending
	now    Time
	seq    uint64
	mode   Mode
	choose Chooser
	hash   uint64
	steps  uint64
	obs    func(it Item, chosen bool)
}

// SetObserver installs f, called with every item [Engine.Next] hands out,
// before the model runs it; chosen says whether the chooser picked it among
// several (false when it was the only candidate or the mode is Timed).
// Exploration strategies use it to see every step of a run, forced or not.
func (e *Engine) SetObserver(f func(it Item, chosen bool)) { e.obs = f }

// NewEngine returns an empty engine at time 0. A nil chooser means [Nominal].
func NewEngine(mode Mode, c Chooser) *Engine {
	if c == nil {
		c = Nominal{}
	}
	return &Engine{
		q:      btree.NewG[Item](32, itemLess),
		run:    make([]Item, 0, 64),
		mode:   mode,
		choose: c,
		hash:   fnvOffset,
	}
}

// Now is the current simulated time.
func (e *Engine) Now() Time { return e.now }

// Steps is the number of items executed so far.
func (e *Engine) Steps() uint64 { return e.steps }

// Len is the number of pending items.
func (e *Engine) Len() int { return e.q.Len() + len(e.run) - e.runAt }

// Mode reports the engine's scheduling mode.
func (e *Engine) Mode() Mode { return e.mode }

// Chooser returns the engine's chooser, for decisions the model makes (jitter,
// skew) that are not about queue order.
func (e *Engine) Chooser() Chooser { return e.choose }

// Schedule enqueues actor to run at time at (clamped to now) with tie-break key.
func (e *Engine) Schedule(at Time, key uint64, actor int32) {
	if at < e.now {
		at = e.now
	}
	e.seq++
	it := Item{At: at, Key: key, Seq: e.seq, Actor: actor}
	{
		if e.runAt == len(e.run) {
			e.run, e.runAt = append(e.run[:0], it), 0
			return
		}
		if len(e.run) == cap(e.run) && e.runAt >= len(e.run)/2 {
			// Full, and at least half popped: drop the popped prefix rather
			// than grow, so run stays within twice what is pending.
			e.run, e.runAt = e.run[:copy(e.run, e.run[e.runAt:])], 0
		}
		if itemLess(e.run[len(e.run)-1], it) {
			e.run = append(e.run, it)
			return
		}
		if e.mode == Untimed || len(e.run)-e.runAt < smallQueue {
			// A short queue is kept whole in run: a sorted insert into a
			// few items beats the btree's generic node operations. In
			// Untimed mode the whole queue is run, however long: every
			// step hands the chooser every pending item, run itself
			// (listing a btree cost more than the insert's copy).
			// it < run[last]: its place is the first item after it,
			// found by binary search in run[runAt:last]
			lo, hi := e.runAt, len(e.run)-1
			for lo < hi {
				m := int(uint(lo+hi) >> 1)
				if itemLess(it, e.run[m]) {
					hi = m
				} else {
					lo = m + 1
				}
			}
			i := lo
			if e.runAt > 0 && i-e.runAt < len(e.run)-i {
				// Nearer the head: move the items before it one slot
				// down, into the popped prefix (at the head, only the
				// slot), not the longer tail up.
				copy(e.run[e.runAt-1:i-1], e.run[e.runAt:i])
				e.runAt--
				e.run[i-1] = it
				return
			}
			e.run = append(e.run, Item{})
			copy(e.run[i+1:], e.run[i:len(e.run)-1])
			e.run[i] = it
			return
		}
	}
	e.q.ReplaceOrInsert(it)
}

// smallQueue is how many pending items run holds before an item that does
// not extend it goes to the btree.
const smallQueue = 32

// Continue is [Engine.Schedule] followed by [Engine.Next] without the queue
// round trip, for the case where the item would be the very next one out.
// When (at, key) orders before every pending item (Timed mode only: in
// Untimed mode the chooser must see every step), it advances the clock,
// counts the step, folds it into the trace hash and shows it to the observer
// exactly as Next would, and returns true: the caller runs actor at once.
// Otherwise it does nothing and returns false, and the caller schedules.
//
// A task running a string of micro-ops while no other actor is due first
// (a send followed by a receive at the same instant, say) then costs no
// btree insert and delete per micro-op; the schedule and every result are
// the same as through the queue.
func (e *Engine) Continue(at Time, key uint64, actor int32) bool {
	if e.mode != Timed {
		return false
	}
	if at < e.now {
		at = e.now
	}
	// Something pending first? run's head, then the btree's least (read in
	// place: this runs for nearly every micro-op, and usually says no).
	if e.runAt < len(e.run) {
		if h := &e.run[e.runAt]; h.At < at || h.At == at && h.Key <= key {
			return false
		}
	}
	if e.q.Len() > 0 {
		if m, _ := e.q.Min(); m.At < at || m.At == at && m.Key <= key {
			return false
		}
	}
	e.seq++
	e.now = at
	e.steps++
	e.Mix3(uint64(actor), uint64(e.now), key)
	if e.obs != nil {
		e.obs(Item{At: at, Key: key, Seq: e.seq, Actor: actor}, false)
	}
	return true
}

// Next removes and returns the next item to run and advances the clock to it.
// It returns false when the queue is empty.
func (e *Engine) Next() (Item, bool) {
	if e.Len() == 0 {
		return Item{}, false
	}
	var it Item
	chosen := false
	if e.mode == Untimed && len(e.run)-e.runAt > 1 {
		// Every pending item is in run, in queue order (Schedule); the
		// chooser reads them in place (Chooser.ChooseItem), capped so
		// that no append of its can reach run's spare room.
		chosen = true
		cands := e.run[e.runAt:len(e.run):len(e.run)]
		i := e.choose.ChooseItem(cands)
		if i < 0 || i >= len(cands) {
			panic(fmt.Sprintf("sim: chooser picked %d of %d items", i, len(cands)))
		}
		it = cands[i]
		// Remove run[runAt+i], moving the shorter side.
		k := e.runAt + i
		if i < len(e.run)-1-k {
			copy(e.run[e.runAt+1:k+1], e.run[e.runAt:k])
			e.runAt++
		} else {
			copy(e.run[k:], e.run[k+1:])
			e.run = e.run[:len(e.run)-1]
		}
	} else {
		if e.runAt == len(e.run) {
			it, _ = e.q.DeleteMin()
		} else if e.q.Len() == 0 {
			it = e.run[e.runAt] // the common case: everything pending is in run
			e.runAt++
		} else if m, ok := e.q.Min(); ok && itemLess(m, e.run[e.runAt]) {
			it, _ = e.q.DeleteMin()
		} else {
			it = e.run[e.runAt]
			e.runAt++
		}
	}
	if it.At > e.now {
		e.now = it.At
	}
	e.steps++
	e.Mix3(uint64(it.Actor), uint64(e.now), it.Key)
	if e.obs != nil {
		e.obs(it, chosen)
	}
	return it, true
}

// Mix folds words into the trace hash. The model calls it for every event
// whose content matters (what was read, written, signalled).
func (e *Engine) Mix(words ...uint64) {
	h := e.hash
	for _, w := range words {
		h = mix(h, w)
	}
	e.hash = h
}

// Mix2, Mix3 and Mix4 are [Engine.Mix] of two, three and four words,
// unrolled for the event loop's hot path (the same hash).
func (e *Engine) Mix2(a, b uint64)       { e.hash = mix(mix(e.hash, a), b) }
func (e *Engine) Mix3(a, b, c uint64)    { e.hash = mix(mix(mix(e.hash, a), b), c) }
func (e *Engine) Mix4(a, b, c, d uint64) { e.hash = mix(mix(mix(mix(e.hash, a), b), c), d) }

// mix is one multiply-rotate round per word (constants from splitmix64):
// order-sensitive and platform-independent, and 8× cheaper than byte-wise
// FNV on the event loop's hot path.
func mix(h, w uint64) uint64 {
	return bits.RotateLeft64(h^(w*0x9e3779b97f4a7c15), 29) * 0xbf58476d1ce4e5b9
}

// TraceHash is the hash of the canonical event sequence so far, as 16 hex digits.
func (e *Engine) TraceHash() string { return fmt.Sprintf("%016x", e.hash) }

// fnvOffset seeds the trace hash.
const fnvOffset = 14695981039346656037

// ScheduleItem is [Engine.Schedule] returning the item it enqueued, for a
// later [Engine.Cancel]: a model that learns before an item is due that it
// must happen at another time (a kernel whose progress rate changed when
// another kernel started beside it) cancels it and schedules again.
func (e *Engine) ScheduleItem(at Time, key uint64, actor int32) Item {
	e.Schedule(at, key, actor)
	return Item{At: max(at, e.now), Key: key, Seq: e.seq, Actor: actor}
}

// Cancel removes a pending item that [Engine.ScheduleItem] returned and
// reports whether it was pending. A cancelled item is never handed out, so
// it is no step and leaves no mark in the trace hash.
func (e *Engine) Cancel(it Item) bool {
	lo, hi := e.runAt, len(e.run)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if itemLess(e.run[m], it) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(e.run) && e.run[lo] == it {
		copy(e.run[lo:], e.run[lo+1:])
		e.run = e.run[:len(e.run)-1]
		return true
	}
	_, ok := e.q.Delete(it)
	return ok
}
