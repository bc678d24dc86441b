package scenarios

import (
	"fmt"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// deferredFree reports whether program p (its ops as lowered, ops) frees a
// tensor that record_stream marked as used by a stream other than the one
// it was allocated on: that free waits for events, and whether a later
// malloc finds them complete is decided by the run (ranks/dynalloc.go).
func (s lower) deferredFree(p *ProgramSpec, ops []OpSpec) bool {
	managed := s.Managed()
	allocOn := map[string]string{}
	used := map[string]bool{}
	stream := func(op *OpSpec) string {
		if op.Stream == "" && len(p.Streams) > 0 {
			return p.Streams[0]
		}
		return op.Stream
	}
	for i := range ops {
		op := &ops[i]
		switch op.Kind {
		case OpAlloc:
			allocOn[op.Name] = stream(op)
			delete(used, op.Name)
		case OpRecordStream:
			if on, ok := allocOn[op.Name]; ok && managed[op.Name] && stream(op) != on {
				used[op.Name] = true
			}
		case OpFree:
			if used[op.Name] {
				return true
			}
		}
	}
	return false
}

// runtimeMem lowers one rank's allocator ops into calls its host makes at
// run time ([ranks.MemCall]): each call goes with the next host op the
// program issues (attach), and a free with record_stream uses issues one
// event record on each used stream (insert_events).
type runtimeMem struct {
	calls []ranks.MemCall
	at    int              // index of the op the queued calls go with
	allOn map[string]int   // live tensor → the stream it was allocated on
	uses  map[string][]int // live tensor → streams record_stream named, other than its own, in call order
	bufs  map[*ranks.Buffer]bool
	frees int
}

func (m *runtimeMem) queue(prog *ranks.Program, c ranks.MemCall) {
	if len(m.calls) == 0 {
		m.at = len(prog.Ops)
	}
	m.calls = append(m.calls, c)
}

// attach gives the queued calls to the first op issued after them.
func (m *runtimeMem) attach(prog *ranks.Program) {
	if len(m.calls) > 0 && len(prog.Ops) > m.at {
		prog.Ops[m.at].Mem = append(prog.Ops[m.at].Mem, m.calls...)
		m.calls = nil
	}
}

// flush attaches what is queued at the end of the lowering. Calls after the
// program's last op are dropped: no op runs after them, so the blocks they
// hand out or take back are touched by nothing.
func (m *runtimeMem) flush(prog *ranks.Program) {
	m.attach(prog)
	m.calls = nil
}

// lower handles op when it is an allocator op, reporting whether it was.
func (m *runtimeMem) lower(w *ranks.World, s lower, cfg Config, p *ProgramSpec, prog *ranks.Program, r int, op *OpSpec, st int,
	bufs map[string]*ranks.Buffer, managed map[string]bool) (bool, error) {
	if m.allOn == nil {
		m.allOn, m.uses, m.bufs = map[string]int{}, map[string][]int{}, map[*ranks.Buffer]bool{}
	}
	switch op.Kind {
	case OpAlloc:
		t := s.Tensor(op.Name)
		if t == nil {
			return true, fmt.Errorf("undefined tensor %q", op.Name)
		}
		x, err := w.AllocDeferred(r, t.Name, t.Bytes, t.ChunksIn(cfg))
		if err != nil {
			return true, err
		}
		x.Output = t.Output
		if vals := op.Values; len(vals) > 0 {
			w.Init(x, func(c int) uint64 { return vals[c%len(vals)] % ranks.Modulus })
		}
		bufs[t.Name] = x
		m.bufs[x] = true
		m.allOn[t.Name] = st
		delete(m.uses, t.Name)
		m.queue(prog, ranks.MemCall{Kind: ranks.MemMalloc, Buf: x, Stream: p.Streams[st], Bytes: t.Bytes})
	case OpFree, OpRecordStream:
		if op.Kind == OpRecordStream && !managed[op.Name] {
			return true, nil // a tensor that lives for the whole program: nothing to defer
		}
		x, ok := bufs[op.Name]
		if !ok {
			return true, fmt.Errorf("undefined tensor %q", op.Name)
		}
		if !m.bufs[x] {
			return true, fmt.Errorf("%w: %s of %q, which is not a live tensor of rank %d", ranks.ErrAlloc, op.Kind, op.Name, r)
		}
		if op.Kind == OpRecordStream {
			m.queue(prog, ranks.MemCall{Kind: ranks.MemRecordStream, Buf: x, Stream: p.Streams[st]})
			if st != m.allOn[op.Name] && !contains(m.uses[op.Name], st) {
				m.uses[op.Name] = append(m.uses[op.Name], st)
			}
			return true, nil
		}
		delete(bufs, op.Name)
		delete(m.bufs, x)
		c := ranks.MemCall{Kind: ranks.MemFree, Buf: x}
		uses := m.uses[op.Name]
		for k := range uses {
			c.Events = append(c.Events, len(prog.Ops)+k)
		}
		m.queue(prog, c)
		m.frees++
		for _, u := range uses {
			// insert_events: cudaEventRecord on each used stream, an event
			// of its own that nothing waits on.
			prog.Events = append(prog.Events, fmt.Sprintf("free#%d %s (record_stream %s)", m.frees, op.Name, p.Streams[u]))
			prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Record, Stream: u, Event: len(prog.Events) - 1, FreeEvent: true})
		}
		m.attach(prog)
		delete(m.uses, op.Name)
		delete(m.allOn, op.Name)
	case OpEmptyCache:
		// cudaFree synchronizes the device; release_cached_blocks first
		// waits for the deferred frees' events.
		prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Sync, Stream: -1, Host: sim.Time(op.HostNs)})
		m.queue(prog, ranks.MemCall{Kind: ranks.MemEmptyCache})
	default:
		return false, nil
	}
	return true, nil
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
