package check

import (
	"fmt"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// What a reference keeps of its run (issue #17: memory that does not grow
// with history).
//
// Judging a schedule needs, of a reference run, only its compared tensors'
// final chunk values. The run's world (every buffer, provenance node,
// kernel and lowered program of every rank) used to stay alive for the
// whole command, beside every schedule's: at 1024 ranks × 61 layers that
// is about 800 MiB per reference run, and a graph of two replays on
// inputs of their own has two of them. A reference now keeps a
// [refRecord] of each run (12 bytes a compared chunk) and releases the
// world.
//
// The one thing a record cannot answer is the provenance of an expected
// value ("expected 5 = r0:L0.sh_y[1] + r1:L0.sh_y[1]"), which a corruption
// message prints: the provenance is a node of the world's table, and
// copying it for every chunk (flattened terms and source names: 1.3
// million provenances at 1024 × 61) costs about 70 MiB and 1.5 s of CPU
// per reference run, for messages that a run without corruption never
// writes. The record keeps each chunk's provenance handle instead
// ([ranks.ProvRef]: 4 bytes), and explaining an outcome's corruption
// rebuilds the reference run, once per explanation ([refWorlds]): a
// program's build is deterministic (see [Program]), so the rebuilt world
// holds the same values with the same handles, which it checks before
// formatting anything. The rebuild costs a reference run, paid only for
// a schedule a report shows with a corruption to explain.

// refRecord is what judging needs of one reference run once its world is
// released: per rank, the compared tensors' chunk values and provenance
// handles in program order, and how to rebuild the run when a message
// needs the provenance spelled out.
type refRecord struct {
	ranks []refRank

	// The run, again: prog built as a reference (BuildOptions.Reference)
	// on a nominal Timed engine, on the inputs of graph replay `replay`
	// when replay ≥ 0 ([ranks.World.SetInputReplay]).
	prog   Program
	replay int
	// nominal: the record is of the program's nominal schedule, not of
	// its serialized reference (which hangs: Reference.nominalBaseline).
	nominal bool
}

// what names the run rec records, for messages.
func (rec *refRecord) what() string {
	if rec.nominal {
		return "the nominal schedule (the serialized reference hangs)"
	}
	return "the reference"
}

// refRank is one rank's compared tensors: tensor i's chunks are
// n[off[i]:off[i+1]] (values) and p[off[i]:off[i+1]] (provenance handles).
type refRank struct {
	off   []int32
	n     []uint64
	p     []ranks.ProvRef
	names []string // tensor names, kept for comparison by name (variants); nil otherwise
}

// tensors is how many tensors r compares.
func (r *refRank) tensors() int { return len(r.off) - 1 }

// vals is tensor i's chunk values.
func (r *refRank) vals(i int) []uint64 { return r.n[r.off[i]:r.off[i+1]] }

// newRefRecord records b's compared tensors (with their names when
// byName), after b's run; b is the reference run of prog on the inputs of
// replay (-1: the default inputs). It copies what it keeps: nothing in
// the record points into b.
func newRefRecord(b *Built, prog Program, replay int, byName bool) *refRecord {
	rec := &refRecord{ranks: make([]refRank, len(b.Compare)), prog: prog, replay: replay}
	tensors, chunks := 0, 0
	for _, bufs := range b.Compare {
		tensors += len(bufs)
		for _, x := range bufs {
			chunks += len(x.Vals)
		}
	}
	// One backing array of each kind for every rank: a few allocations,
	// whatever the world's size.
	off := make([]int32, 0, tensors+len(b.Compare))
	n := make([]uint64, 0, chunks)
	p := make([]ranks.ProvRef, 0, chunks)
	var names []string
	if byName {
		names = make([]string, 0, tensors)
	}
	for r, bufs := range b.Compare {
		o0, c0, t0 := len(off), len(n), len(names)
		off = append(off, 0)
		for _, x := range bufs {
			for _, v := range x.Vals {
				n = append(n, v.N)
				p = append(p, v.P)
			}
			off = append(off, int32(len(n)-c0))
			if byName {
				names = append(names, x.Name)
			}
		}
		rr := &rec.ranks[r]
		rr.off, rr.n, rr.p = off[o0:len(off):len(off)], n[c0:len(n):len(n)], p[c0:len(p):len(p)]
		if byName {
			rr.names = names[t0:len(names):len(names)]
		}
	}
	return rec
}

// runReference builds and runs prog as a reference (serialized; or, not
// serialized, its nominal schedule) on the inputs of replay (-1: the
// default inputs).
func runReference(prog Program, replay int, serialized bool) (*Built, *ranks.Result, error) {
	b, err := prog.Build(BuildOptions{Reference: serialized}, sim.NewEngine(sim.Timed, nil))
	if err != nil {
		return nil, nil, err
	}
	if replay >= 0 {
		b.World.SetInputReplay(replay)
	}
	res, err := b.World.Run()
	if err != nil {
		return nil, nil, err
	}
	return b, res, nil
}

// releaseBuilt ends a reference world's life once its record is made:
// nothing keeps it, and its memory is the collector's again.
func releaseBuilt(b *Built) {
	b.World.Release()
	b.World, b.Compare = nil, nil
}

// matches reports whether b's compared tensors hold exactly what rec
// recorded: values and provenance handles.
func (rec *refRecord) matches(b *Built) bool {
	if len(b.Compare) != len(rec.ranks) {
		return false
	}
	for r, bufs := range b.Compare {
		rr := &rec.ranks[r]
		if len(bufs) != rr.tensors() {
			return false
		}
		for i, x := range bufs {
			o := int(rr.off[i])
			if len(x.Vals) != int(rr.off[i+1])-o {
				return false
			}
			for c, v := range x.Vals {
				if v.N != rr.n[o+c] || v.P != rr.p[o+c] {
					return false
				}
			}
		}
	}
	return true
}

// refWorlds are the reference runs rebuilt to explain one outcome (see
// the top of this file): each record's run is rebuilt at most once, when
// a message first asks for its provenance. Only the outcome's
// explanation steps hold x, and [Outcome.Explain] drops them once run,
// so the rebuilt worlds go with them. Not safe for concurrent use; each
// outcome has its own.
type refWorlds struct {
	built map[*refRecord]*rebuilt
}

type rebuilt struct {
	b   *Built
	why string // why there is no world to read provenance from
}

// provenance formats the provenance of chunk c of tensor i on rank r of
// rec's run, exactly as the run's world would ([ranks.Sources.Format]).
func (x *refWorlds) provenance(rec *refRecord, r, i, c int) string {
	if x.built == nil {
		x.built = map[*refRecord]*rebuilt{}
	}
	rb := x.built[rec]
	if rb == nil {
		rb = &rebuilt{}
		b, res, err := runReference(rec.prog, rec.replay, !rec.nominal)
		switch {
		case err != nil:
			rb.why = err.Error()
		case res.Hung:
			rb.why = "it hangs"
		case !rec.matches(b):
			rb.why = "its values differ from the first run's"
		default:
			rb.b = b
		}
		if rb.b == nil && b != nil {
			b.World.Release()
		}
		x.built[rec] = rb
	}
	if rb.b == nil {
		return fmt.Sprintf("(provenance unavailable: the reference run, rebuilt, is not the one judged against: %s)", rb.why)
	}
	return rb.b.World.Srcs.Format(rb.b.Compare[r][i].Vals[c])
}
