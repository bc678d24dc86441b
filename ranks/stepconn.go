package ranks

import (
	"fmt"
	"slices"

	"github.com/collsim/collsim/mutant"
)

// Stepped connections: an NCCL connection's state as the library keeps it.
//
// A connection is a ring of NCCL_STEPS slots in the receiver's memory, a
// tail the sender stores (the last step it filled, plus one) and a head the
// receiver stores (the last step it consumed, plus one). Neither end keeps
// a queue: each keeps a step counter, conn->step, in device memory. A
// kernel's primitives read it when they set up the connection and write
// their own count back when they are done:
//
//   - NCCL src/device/prims_simple.h (NVIDIA/nccl 5067397): the constructor
//     loads `step = conn->step` (l.483 for a receive, l.530 for a send) and
//     the destructor stores `conn->step = step` (l.714); the slot of step s
//     is s % NCCL_STEPS and a receiver waits for the tail to pass its step
//     (waitPeer). RCCL has the same code: src/device/prims_simple.h
//     (ROCm/rccl 0cbce2a) l.572 `step = conn->step`, l.723
//     `conns[index]->step = step` in ~Primitives.
//   - The per-channel work counter is kept the same way, a plain load at
//     kernel entry and a store at its end (NCCL src/device/common.h l.378
//     and l.349; rocm/rccl #2179 quotes RCCL's).
//
// Between two kernels that run one after the other this is a queue: the
// second starts where the first stopped. Two kernels of one communicator
// resident at once on a GPU (RCCL's graph path leaves graphs captured apart
// unordered, see collectives.Comm.GraphUnordered) both read the same
// counter, fill or read the same slots, and the one that completes last
// writes its count over the other's: a lost increment. When both ends lost
// the same count the two calls finish with each other's data; when they
// did not, the receiver waits for a step its peer will not send until a
// later call: a hang (rocm/rccl #2179: "concurrent in-flight kernels on the
// same comm ... race the per-channel state").
//
// The model: a kernel marked StepConns loads every end it uses after its
// first micro-op (connLoad; an end its first micro-op uses is loaded by
// that micro-op, when it proceeds). A send uses step s = the kernel's
// cursor on the end, waits while s >= head + Cap (credits), fills
// slot s % Cap and stores tail = s+1; a receive of step r waits until
// tail > r and the slot has been filled, reads it without taking it (a
// second reader reads it too) and stores head = r+1; the task writes each
// cursor back when it completes. The tail and head are plain stores: a
// late store can move either back. Not modelled: the step rounding of a
// work item's slices (roundUp in the constructor) and a network proxy's own
// step count (net.cc keeps one per connection, resources->step, advanced by
// the host's count for each operation; see docs/concepts.md).

// stepped is a stepped connection's state (Fifo.Stepped).
type stepped struct {
	slots              []stepSlot
	tailStep, headStep int64    // the tail the sender stored, the head the receiver stored
	step               [2]int64 // conn->step of the send end (on Src) and of the receive end (on Dst)
}

// stepSlot is one slot of a stepped connection: the step that last filled
// it and its message.
type stepSlot struct {
	seq  int64
	full bool
	m    msg
}

// connCursor is a task's step on one end of a stepped connection.
type connCursor struct {
	f    *Fifo
	send bool
	v    int64
}

func endIx(send bool) int {
	if send {
		return 0
	}
	return 1
}

// ring is f's slots, made at first use.
func (f *Fifo) ring() []stepSlot {
	if f.slots == nil {
		f.slots = make([]stepSlot, max(f.Cap, 1))
	}
	return f.slots
}

// connAt is the step t's next use of f's send or receive end takes: its
// cursor, or the end's counter when t has not used the end yet (the load
// of conn->step at setup).
func (w *World) connAt(t *task, f *Fifo, send bool) int64 {
	for _, c := range w.conns[t.id] {
		if c.f == f && c.send == send {
			return c.v
		}
	}
	return f.step[endIx(send)]
}

// connSet sets t's cursor on f's end to v.
func (w *World) connSet(t *task, f *Fifo, send bool, v int64) {
	cs := w.conns[t.id]
	for i := range cs {
		if cs[i].f == f && cs[i].send == send {
			cs[i].v = v
			return
		}
	}
	if w.conns == nil {
		w.conns = map[int32][]connCursor{}
	}
	w.conns[t.id] = append(cs, connCursor{f: f, send: send, v: v})
}

// stepEnds calls f with each end of a stepped connection that t's kernel
// uses on its rank (a FIFO it sends into from this rank, or receives from
// on it), resolved to t's world.
func (w *World) stepEnds(t *task, fn func(f *Fifo, send bool)) {
	k := t.op.Kernel
	visit := func(q *Fifo) {
		if q == nil {
			return
		}
		f := w.fifoOf(q)
		if !f.Stepped {
			return
		}
		if f.Src == t.rank {
			fn(f, true)
		}
		if f.Dst == t.rank {
			fn(f, false)
		}
	}
	if k.Gen != nil {
		for _, q := range k.Gen.Refs().Fifos {
			visit(q)
		}
		return
	}
	seen := w.stepSeen[:0]
	for i := range k.Instrs {
		for _, q := range [2]*Fifo{k.Instrs[i].Fifo, k.Instrs[i].Fwd} {
			if q != nil && !slices.Contains(seen, q) {
				seen = append(seen, q)
				visit(q)
			}
		}
	}
	w.stepSeen = seen[:0]
}

// connLoad gives t a cursor on every end of a stepped connection its
// kernel uses that it has none on yet: the load of conn->step when the
// primitives set up (after the kernel's first micro-op, which may itself
// have used an end). A kernel whose first micro-op blocks on an end loads
// that end when the micro-op proceeds.
func (w *World) connLoad(t *task) {
	w.stepEnds(t, func(f *Fifo, send bool) {
		for _, c := range w.conns[t.id] {
			if c.f == f && c.send == send {
				return
			}
		}
		w.connSet(t, f, send, f.step[endIx(send)])
	})
}

// connWriteBack stores each of t's cursors into its end's counter: the
// primitives' destructor, at the kernel's completion.
func (w *World) connWriteBack(t *task) {
	cs, ok := w.conns[t.id]
	if !ok {
		return
	}
	for _, c := range cs {
		if !mutant.On(mutant.ConnStepShared) {
			c.f.step[endIx(c.send)] = c.v
		}
		w.eng.Mix4(0x43, uint64(c.f.Src), uint64(c.f.Dst), uint64(c.v))
	}
	delete(w.conns, t.id)
}

// connsOf appends the stepped connections whose counters t's completion
// writes back (Step.Conns).
func (w *World) connsOf(t *task, out []*Fifo) []*Fifo {
	for _, c := range w.conns[t.id] {
		out = append(out, c.f)
	}
	return out
}

// loadsOf appends the stepped connections whose counters t's first
// micro-op loads (Step.Conns).
func (w *World) loadsOf(t *task, out []*Fifo) []*Fifo {
	w.stepEnds(t, func(f *Fifo, _ bool) { out = append(out, f) })
	return out
}

// stepBlocks reports whether t's send into (send) or receive from f, a
// stepped connection, would spin now.
func (w *World) stepBlocks(t *task, f *Fifo, send bool) bool {
	v := w.connAt(t, f, send)
	if mutant.On(mutant.ConnStepShared) {
		// the mutant: one queue position per end, as if no two kernels
		// ever shared the counters
		v = f.step[endIx(send)]
	}
	if send {
		return v >= f.headStep+int64(len(f.ring()))
	}
	return f.tailStep <= v || !f.ring()[v%int64(len(f.ring()))].full
}

// stepSend fills t's next step of f with m (whose clock t already
// snapshot) and stores the tail.
func (w *World) stepSend(t *task, f *Fifo, m msg) {
	s := w.connAt(t, f, true)
	if mutant.On(mutant.ConnStepShared) {
		s = f.step[0]
		f.step[0]++
	}
	sl := &f.ring()[s%int64(len(f.slots))]
	if sl.full && sl.m.vc != nil {
		w.snapPool.Disown(sl.m.vc, w.keepHistory)
	}
	sl.seq, sl.full, sl.m = s, true, m
	f.tailStep = s + 1
	w.connSet(t, f, true, s+1)
}

// stepRecv returns the message of t's next step of f (the slot stays
// filled) and stores the head.
func (w *World) stepRecv(t *task, f *Fifo) *msg {
	r := w.connAt(t, f, false)
	if mutant.On(mutant.ConnStepShared) {
		r = f.step[1]
		f.step[1]++
	}
	sl := &f.ring()[r%int64(len(f.slots))]
	f.headStep = r + 1
	w.connSet(t, f, false, r+1)
	return &sl.m
}

// stepReason describes what a task blocked on a stepped connection waits
// for.
func (f *Fifo) stepReason(send bool) string {
	if send {
		return fmt.Sprintf("send on %s (no credit: its peer has not consumed the step a ring ago)", f.Name)
	}
	return fmt.Sprintf("recv on %s (its peer has not filled this step)", f.Name)
}

// execStepSend is OpSend into a stepped connection (exec).
func (w *World) execStepSend(t *task, in *Instr, f *Fifo) bool {
	if w.stepBlocks(t, f, true) {
		w.blockOn(t, &f.waiters, in, f.Dst)
		return false
	}
	w.checkFifo(t, f, true)
	m := msg{inst: t.inst, by: t.id, sig: t.sig}
	m.payload(in.N)
	for i := range in.N {
		var v Value
		for _, s := range in.Srcs {
			v = w.add(v, w.read(t, s.Buf, s.Lo+i))
		}
		m.set(i, v)
	}
	m.vc = w.snapshot(t.lane) // release
	w.snapPool.Own(m.vc)
	w.stepSend(t, f, m)
	w.noteSend(f)
	w.eng.Mix3(0x53, uint64(f.Src), uint64(f.Dst))
	w.wake(&f.waiters)
	return true
}

// execStepRecv is OpRecv from a stepped connection (exec).
func (w *World) execStepRecv(t *task, in *Instr, f *Fifo) bool {
	if w.stepBlocks(t, f, false) {
		w.blockOn(t, &f.waiters, in, f.Src)
		return false
	}
	m := w.stepRecv(t, f)
	w.noteRecv(t, f, m)
	if !mutant.On(mutant.RecvWithoutAcquire) {
		w.acquireVC(t.lane, m.vc)
	}
	w.checkFifo(t, f, false)
	w.checkGhost(t, f, m)
	for i := 0; i < in.N; i++ {
		v := m.val(i)
		for _, s := range in.Srcs {
			v = w.add(v, w.read(t, s.Buf, s.Lo+i))
		}
		w.write(t, in.Dst, in.DstLo+i, v)
	}
	w.eng.Mix4(0x52, uint64(f.Src), uint64(f.Dst), uint64(m.by))
	w.wake(&f.waiters)
	return true
}

// execStepRecvSend is OpRecvSend where either connection is stepped
// (exec): receive step r of f, forward the results as the next step of o.
func (w *World) execStepRecvSend(t *task, in *Instr, f, o *Fifo) bool {
	if w.anyBlocks(t, f, false) {
		w.blockOn(t, &f.waiters, in, f.Src)
		return false
	}
	if w.anyBlocks(t, o, true) {
		w.blockOn(t, &o.waiters, in, o.Dst)
		t.blockFwd = true
		return false
	}
	var m *msg
	if f.Stepped {
		m = w.stepRecv(t, f)
	} else {
		m = f.pop()
	}
	c := *m // o may be f, or its slot the one m is in
	m = &c
	w.noteRecv(t, f, m)
	if !mutant.On(mutant.RecvWithoutAcquire) {
		w.acquireVC(t.lane, m.vc)
	}
	if !f.Stepped {
		w.snapPool.Disown(m.vc, w.keepHistory)
	}
	w.checkFifo(t, f, false)
	w.checkFifo(t, o, true)
	w.checkGhost(t, f, m)
	fwd := msg{inst: t.inst, by: t.id, sig: t.sig}
	fwd.payload(in.N)
	for i := 0; i < in.N; i++ {
		v := m.val(i)
		for _, s := range in.Srcs {
			v = w.add(v, w.read(t, s.Buf, s.Lo+i))
		}
		if in.Dst != nil {
			w.write(t, in.Dst, in.DstLo+i, v)
		}
		fwd.set(i, v)
	}
	w.eng.Mix4(0x52, uint64(f.Src), uint64(f.Dst), uint64(m.by))
	w.wake(&f.waiters)
	fwd.vc = w.snapshot(t.lane) // release
	w.snapPool.Own(fwd.vc)
	if o.Stepped {
		w.stepSend(t, o, fwd)
	} else {
		o.push(fwd)
	}
	w.noteSend(o)
	w.eng.Mix3(0x53, uint64(o.Src), uint64(o.Dst))
	w.wake(&o.waiters)
	return true
}

// anyBlocks is stepBlocks for a stepped connection and the queue's test
// for another.
func (w *World) anyBlocks(t *task, f *Fifo, send bool) bool {
	switch {
	case f.Stepped:
		return w.stepBlocks(t, f, send)
	case send:
		return f.inFlight() >= f.Cap
	}
	return f.inFlight() == 0
}
