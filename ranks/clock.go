package ranks

import "sort"

// VC is a sparse vector clock over lanes (one lane per rank and stream): the
// happens-before relation. Event a happens before b iff a's epoch (lane,
// clock) is covered by b's clock. Only lanes a clock has heard of are stored,
// sorted by lane, so a rank in an 8-rank TP group of a 1024-rank world keeps
// about 16 entries, not 2048 (FastTrack's epochs for accesses, Flanagan &
// Freund, PLDI 2009; sparse clocks for the synchronisation objects).
type VC struct {
	e []clockEntry
}

type clockEntry struct {
	lane int32
	c    uint32
}

// newVC returns the initial clock of lane: {lane: 1}.
func newVC(lane int32) *VC { return &VC{e: []clockEntry{{lane, 1}}} }

// get returns the clock of lane (0 if unknown).
func (v *VC) get(lane int32) uint32 {
	e := v.e
	if len(e) <= 16 {
		// A TP group's clock: a linear scan beats the binary search.
		for _, x := range e {
			if x.lane >= lane {
				if x.lane == lane {
					return x.c
				}
				return 0
			}
		}
		return 0
	}
	i := sort.Search(len(e), func(i int) bool { return e[i].lane >= lane })
	if i < len(e) && e[i].lane == lane {
		return e[i].c
	}
	return 0
}

// tick increments lane's own entry (which always exists for a lane's clock).
func (v *VC) tick(lane int32) {
	e := v.e
	i := sort.Search(len(e), func(i int) bool { return e[i].lane >= lane })
	if i < len(e) && e[i].lane == lane {
		e[i].c++
		return
	}
	v.e = append(v.e, clockEntry{})
	copy(v.e[i+1:], v.e[i:])
	v.e[i] = clockEntry{lane, 1}
}

// join sets v to the pointwise maximum of v and o.
func (v *VC) join(o *VC) {
	if o == nil || len(o.e) == 0 {
		return
	}
	a, b := v.e, o.e
	// Fast path: v already covers o (no new lanes, no larger entries).
	covered := true
	for i, j := 0, 0; j < len(b); {
		switch {
		case i == len(a) || a[i].lane > b[j].lane:
			covered = false
		case a[i].lane < b[j].lane:
			i++
			continue
		default:
			if b[j].c > a[i].c {
				covered = false
			}
			i++
		}
		if !covered {
			break
		}
		j++
	}
	if covered {
		return
	}
	if len(a) >= len(b) {
		// Same lanes (the common case inside a group): update in place.
		same := true
		for i, j := 0, 0; j < len(b) && same; {
			switch {
			case i == len(a) || a[i].lane > b[j].lane:
				same = false
			case a[i].lane < b[j].lane:
				i++
			default:
				i++
				j++
			}
		}
		if same {
			for i, j := 0, 0; j < len(b); {
				if a[i].lane < b[j].lane {
					i++
					continue
				}
				if b[j].c > a[i].c {
					a[i].c = b[j].c
				}
				i++
				j++
			}
			return
		}
	}
	out := make([]clockEntry, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i].lane < b[j].lane:
			out = append(out, a[i])
			i++
		case a[i].lane > b[j].lane:
			out = append(out, b[j])
			j++
		default:
			out = append(out, clockEntry{a[i].lane, max(a[i].c, b[j].c)})
			i++
			j++
		}
	}
	out = append(out, a[i:]...)
	v.e = append(out, b[j:]...)
}

// clone returns an independent copy of v.
func (v *VC) clone() *VC { return &VC{e: append([]clockEntry(nil), v.e...)} }

// snapshot returns an immutable copy of lane's clock to hand to others (a
// completed task, a signal, a message) and starts a new epoch of the lane.
// A lane that neither accessed memory nor acquired anything since its last
// snapshot hands out that one again and keeps its epoch: nothing it did can
// tell the two apart, and the common case (event records, waits, a run of
// puts) then allocates nothing.
func (w *World) snapshot(lane int32) *VC {
	if !w.dirty[lane] && w.snap[lane] != nil {
		return w.snap[lane]
	}
	s := w.vc[lane].clone()
	w.vc[lane].tick(lane)
	w.snap[lane], w.dirty[lane] = s, false
	return s
}

// acquireVC joins o into lane's clock (a wait that consumed a signal, a
// message received, a dependency that finished).
func (w *World) acquireVC(lane int32, o *VC) {
	w.vc[lane].join(o)
	w.dirty[lane] = true
}
