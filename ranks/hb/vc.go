package hb

import "sort"

// VC is a sparse vector clock over lanes (one lane per rank and stream): the
// happens-before relation. Event a happens before b iff a's epoch (lane,
// clock) is covered by b's clock. Only lanes a clock has heard of are stored,
// sorted by lane, so a rank in an 8-rank TP group of a 1024-rank world keeps
// about 16 entries, not 2048 (FastTrack's epochs for accesses, Flanagan &
// Freund, PLDI 2009; sparse clocks for the synchronisation objects).
//
// A world of at most [DenseLanes] lanes (a TP group with its streams) uses
// the dense form instead: d[lane] for every lane. Joins and copies are then
// short loops over a few words, with no merging and half the bytes of a
// full sparse clock. One world uses one form for all its clocks.
type VC struct {
	e []Entry
	d []uint32 // dense form: non-nil, one entry per lane
	// A short sparse snapshot is recycled once nothing holds it
	// (recycle.go): box is its capacity (0: never recycled), refs the
	// holders that keep it.
	refs int32
	box  int8
}

// DenseLanes is the largest world (in lanes) whose clocks are dense.
const DenseLanes = 32

// Entry is one lane's entry of a sparse clock.
type Entry struct {
	Lane int32
	C    uint32
}

// New returns the initial clock of lane: {lane: 1}.
func New(lane int32) *VC { return &VC{e: []Entry{{lane, 1}}} }

// Get returns the clock of lane (0 if unknown).
func (v *VC) Get(lane int32) uint32 {
	if v.d != nil {
		return v.d[lane]
	}
	e := v.e
	if len(e) <= 16 {
		// A TP group's clock: a linear scan beats the binary search.
		for _, x := range e {
			if x.Lane >= lane {
				if x.Lane == lane {
					return x.C
				}
				return 0
			}
		}
		return 0
	}
	i := sort.Search(len(e), func(i int) bool { return e[i].Lane >= lane })
	if i < len(e) && e[i].Lane == lane {
		return e[i].C
	}
	return 0
}

// Tick increments lane's own entry (which always exists for a lane's clock).
func (v *VC) Tick(lane int32) {
	if v.d != nil {
		v.d[lane]++
		return
	}
	e := v.e
	i := sort.Search(len(e), func(i int) bool { return e[i].Lane >= lane })
	if i < len(e) && e[i].Lane == lane {
		e[i].C++
		return
	}
	v.e = append(v.e, Entry{})
	copy(v.e[i+1:], v.e[i:])
	v.e[i] = Entry{lane, 1}
}

// Join sets v to the pointwise maximum of v and o.
func (v *VC) Join(o *VC) {
	if o == nil || o == Empty {
		return // (without touching v: a ring's releases are all empty)
	}
	if v.d != nil {
		if o.d == nil {
			return // the empty clock (Empty): nothing to learn
		}
		// max, not a compare and a store: which side is larger is close
		// to a coin toss per lane (a lane ahead in one clock, behind in
		// the other), and a mispredicted branch per lane cost more than
		// the join itself.
		d := v.d[:len(o.d)]
		for i, c := range o.d {
			d[i] = max(d[i], c)
		}
		return
	}
	v.JoinEntries(o.e)
}

// JoinEntries joins the sorted entries b of a sparse clock into sparse v.
func (v *VC) JoinEntries(b []Entry) {
	if len(b) == 0 {
		return
	}
	a := v.e
	// Fast path: v already covers o (no new lanes, no larger entries).
	covered := true
	for i, j := 0, 0; j < len(b); {
		switch {
		case i == len(a) || a[i].Lane > b[j].Lane:
			covered = false
		case a[i].Lane < b[j].Lane:
			i++
			continue
		default:
			if b[j].C > a[i].C {
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
			case i == len(a) || a[i].Lane > b[j].Lane:
				same = false
			case a[i].Lane < b[j].Lane:
				i++
			default:
				i++
				j++
			}
		}
		if same {
			for i, j := 0, 0; j < len(b); {
				if a[i].Lane < b[j].Lane {
					i++
					continue
				}
				if b[j].C > a[i].C {
					a[i].C = b[j].C
				}
				i++
				j++
			}
			return
		}
	}
	out := make([]Entry, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i].Lane < b[j].Lane:
			out = append(out, a[i])
			i++
		case a[i].Lane > b[j].Lane:
			out = append(out, b[j])
			j++
		default:
			out = append(out, Entry{a[i].Lane, max(a[i].C, b[j].C)})
			i++
			j++
		}
	}
	out = append(out, a[i:]...)
	v.e = append(out, b[j:]...)
}

// Clone returns an independent copy of v.
func (v *VC) Clone() *VC {
	if v.d != nil {
		return &VC{d: append([]uint32(nil), v.d...)}
	}
	return sparseCopy(v.e)
}

// sparseCopy returns a sparse clock holding a copy of entries e. A short
// one (a TP group's, with the carry filter: two or four entries) comes in
// one allocation with its entries.
func sparseCopy(e []Entry) *VC {
	switch n := len(e); {
	case n <= 2:
		b := &struct {
			v VC
			a [2]Entry
		}{}
		b.v.e = b.a[:copy(b.a[:], e)]
		return &b.v
	case n <= 4:
		b := &struct {
			v VC
			a [4]Entry
		}{}
		b.v.e = b.a[:copy(b.a[:], e)]
		return &b.v
	}
	return &VC{e: append([]Entry(nil), e...)}
}

// Empty is the clock of a release that carries nothing anybody can use.
var Empty = &VC{}

// NewDense returns the initial dense clock of lane in a world of nl lanes
// (a world carves its own from slabs, [VC.SetDense]).
func NewDense(lane, nl int32) *VC {
	v := &VC{d: make([]uint32, nl)}
	v.d[lane] = 1
	return v
}

// SetDense makes v the dense clock d (one entry per lane), for a clock
// carved from a slab.
func (v *VC) SetDense(d []uint32) { v.d = d }

// Dense is v's dense form, nil for a sparse clock.
func (v *VC) Dense() []uint32 { return v.d }

// Entries is v's sparse form, sorted by lane (nil for a dense clock).
func (v *VC) Entries() []Entry { return v.e }
