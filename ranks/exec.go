package ranks

import (
	"fmt"
	"strings"

	"github.com/collsim/collsim/mutant"
	"github.com/collsim/collsim/ranks/findings"
)

// Finding kinds, in increasing severity (package findings).
const (
	KindRace       = findings.KindRace
	KindMismatch   = findings.KindMismatch
	KindCorruption = findings.KindCorruption
	KindDropped    = findings.KindDropped
	KindHang       = findings.KindHang
)

// Finding is one thing a check found ([findings.Finding]).
type Finding = findings.Finding

// report adds f to the run's findings (findings.Log.Add), noting where it
// was detected for the timeline.
func (w *World) report(f Finding) {
	w.noteFinding(&f)
	w.log.Add(f)
}

// exec performs one micro-op for task t. It returns false when the op cannot
// proceed (a spin on a signal or a FIFO) and t must block.
func (w *World) exec(t *task, in *Instr) bool {
	w.epOK = false // a new micro-op: its epoch is made at its first checked access
	in = w.shifted(t, in)
	w.noteTalk(t, in)
	switch in.Op {
	case OpCompute:
		for i := 0; i < in.N; i++ {
			var v Value
			for _, s := range in.Srcs {
				x := w.read(t, s.Buf, s.Lo+i)
				if in.Fresh {
					// A computation: its result is a new source, so the
					// operands' provenance is not needed, only the number.
					if s.Coef != 1 {
						x.N = scaleN(x.N, s.Coef)
					}
					v.N = addMod(v.N, x.N)
					continue
				}
				if s.Coef != 1 {
					x = w.scale(x, s.Coef)
				}
				v = w.add(v, x)
			}
			if in.Fresh {
				v.P = w.leaf(w.srcOf(in.Dst, in.DstLo+i))
			}
			w.write(t, in.Dst, in.DstLo+i, v)
		}
	case OpPut:
		pad := w.padOf(in.Pad)
		s := &pad.Slots[in.Slot]
		if s.val != 0 {
			w.blockOn(t, &s.waiters, in, pad.Rank)
			return false
		}
		w.checkSlot(t, &s.put, pendingMsg{pad: pad, slot: in.Slot}, "put")
		s.val, s.inst, s.by, s.vc = 1, t.inst, t.id, w.snapshot(t.lane) // release
		w.snapPool.Own(s.vc)
		s.sig = t.sig
		if mutant.On(mutant.ReplayDroppedFromSignal) {
			s.inst.Replay = 0
		}
		w.notePut(s)
		w.eng.Mix3(0x50, uint64(pad.Rank), uint64(in.Slot))
		w.wake(&s.waiters)
	case OpWait:
		pad := w.padOf(in.Pad)
		s := &pad.Slots[in.Slot]
		if s.val == 0 {
			w.blockOn(t, &s.waiters, in, in.Peer)
			return false
		}
		s.val = 0
		w.acquireVC(t.lane, s.vc)
		w.snapPool.Disown(s.vc, w.keepHistory) // read only by the wait that clears the slot
		s.vc = nil
		w.checkSlot(t, &s.wait, pendingMsg{pad: pad, slot: in.Slot}, "wait")
		if mutant.On(mutant.MismatchCheckOff) {
			// no ghost check
		} else if s.inst != t.inst {
			w.mismatchPad(t, s.by, s.inst, pad, in.Slot)
		} else if s.sig != t.sig && !mutant.On(mutant.PadSignatureCheckOff) {
			w.sigMismatch(t, s.by, s.sig, "signal", func() string { return padResource(pad, in.Slot) })
		}
		w.noteSignal(t, s, in)
		w.eng.Mix4(0x57, uint64(pad.Rank), uint64(in.Slot), uint64(s.by))
		w.wake(&s.waiters)
	case OpSend:
		f := w.fifoOf(in.Fifo)
		if f.Stepped {
			return w.execStepSend(t, in, f)
		}
		if f.inFlight() >= f.Cap {
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
		f.push(m)
		w.noteSend(f)
		w.eng.Mix3(0x53, uint64(f.Src), uint64(f.Dst))
		w.wake(&f.waiters)
	case OpRecv:
		f := w.fifoOf(in.Fifo)
		if f.Stepped {
			return w.execStepRecv(t, in, f)
		}
		if f.inFlight() == 0 {
			w.blockOn(t, &f.waiters, in, f.Src)
			return false
		}
		m := f.pop()
		w.noteRecv(t, f, m)
		if !mutant.On(mutant.RecvWithoutAcquire) {
			w.acquireVC(t.lane, m.vc)
		}
		w.snapPool.Disown(m.vc, w.keepHistory)
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
	case OpRecvSend:
		f, o := w.fifoOf(in.Fifo), w.fifoOf(in.Fwd)
		if f.Stepped || o.Stepped {
			return w.execStepRecvSend(t, in, f, o)
		}
		if f.inFlight() == 0 {
			w.blockOn(t, &f.waiters, in, f.Src)
			return false
		}
		if o.inFlight() >= o.Cap {
			w.blockOn(t, &o.waiters, in, o.Dst)
			t.blockFwd = true
			return false
		}
		m := f.pop()
		if f == o {
			c := *m // forwarding into the same FIFO may reuse m's slot
			m = &c
		}
		w.noteRecv(t, f, m)
		if !mutant.On(mutant.RecvWithoutAcquire) {
			w.acquireVC(t.lane, m.vc)
		}
		w.snapPool.Disown(m.vc, w.keepHistory)
		w.checkFifo(t, f, false)
		w.checkFifo(t, o, true)
		w.checkGhost(t, f, m)
		// The forwarded message is built in its slot of Fwd's ring: it is
		// in flight once the step is done (no copy of it passes the stack).
		fwd := o.slot()
		*fwd = msg{inst: t.inst, by: t.id, sig: t.sig}
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
		w.noteSend(o)
		w.eng.Mix3(0x53, uint64(o.Src), uint64(o.Dst))
		w.wake(&o.waiters)
	case OpDelay:
	case OpFlagPut:
		w.execFlagPut(t, in)
	case OpFlagWait:
		return w.execFlagWait(t, in)
	case OpFault:
		w.execFault(t, in)
	case OpIndex:
		w.execIndex(t, in)
	}
	return true
}

// Signal-pad slots and FIFOs are shared locations too, and are checked
// against happens-before like a buffer's chunks (DESIGN.md: every access,
// "tensor chunk, workspace, signal"). Their protocol is made of atomics: a
// put is a compare-and-swap that spins while the slot is set, a wait one
// that spins while it is clear, a send spins on a full FIFO and a receive
// on an empty one; a put and the wait that consumes it are a
// release/acquire pair, not a race. What the protocol cannot make safe is
// *who* uses a slot: when two puts into one slot (or two waits on it, two
// sends into one FIFO, two receives from it) are not ordered by
// happens-before, which wait consumes which put depends on timing, and a
// collective may take another's signal or data. That is the race reported
// here, at nominal timing, whether or not this schedule paired them wrongly
// (the mismatch finding says when it did). A properly synchronised barrier
// is no race: every rank's puts into a slot come from one lane in stream
// order, or from kernels that an event, a dependency or an acquired signal
// orders (ranks/pads_test.go has both cases). The put-to-wait and
// send-to-receive directions are not checked: the spin orders them, and a
// ring has no channel back from receiver to sender that could.

// checkSlot checks t's access (kind "put" or "wait") of a signal-pad slot
// against the slot's previous access of that kind, last, and makes t's the
// last one.
func (w *World) checkSlot(t *task, last *epoch, m pendingMsg, kind string) {
	if mutant.On(mutant.RaceDetectorOff) {
		return
	}
	if !w.hb(*last, w.vc[t.lane]) {
		w.syncRace(t, last.task, m, kind)
	}
	*last = w.epoch(t)
}

// checkFifo checks t's send into f (send) or receive from f against the
// previous one of its kind, naming the slot of f's ring it uses.
func (w *World) checkFifo(t *task, f *Fifo, send bool) {
	last, n, kind := &f.recv, &f.nRecvd, "receive"
	if send {
		last, n, kind = &f.send, &f.nSent, "send"
	}
	w.checkSlot(t, last, pendingMsg{fifo: f, slot: *n % max(f.Cap, 1)}, kind)
	*n++
}

// syncRace reports that t's access of a pad slot or FIFO (m names it) and
// task other's earlier access of the same kind are not ordered.
func (w *World) syncRace(t *task, other int32, m pendingMsg, kind string) {
	oName, oRank := w.taskNameIDOf(other)
	var res int32
	if m.pad != nil {
		res = w.slotNameID(m.pad, m.slot)
	} else {
		res = w.nameID("\x00fifo\x00" + m.fifo.Name)
	}
	key := raceDedupeKey{res: 1 + res, a: oName, b: w.taskNameID(t), kinds: uint16(kind[0])<<8 | uint16(kind[0]), same: oRank == t.rank}
	if !w.raceDedupe.Add(key, key.Hash()) {
		return
	}
	w.noteTasks(other, t.id)
	m.kind, m.t, m.other, m.prev, m.cur = pendingRace, t.id, other, kind, kind
	w.reportPending(Finding{
		Kind:    KindRace,
		Ranks:   uniqInts(oRank, t.rank),
		Ops:     []string{w.taskName(other), w.taskName(t.id)},
		Streams: []string{w.streamName(other), w.streamName(t.id)},
	}, m)
}

// checkGhost compares the ghost data of message m, received from f, with
// t's own: the call instance and the signature.
func (w *World) checkGhost(t *task, f *Fifo, m *msg) {
	if mutant.On(mutant.MismatchCheckOff) {
		return
	}
	if m.inst != t.inst || m.sig != t.sig {
		w.msgMismatch(t, f, m)
	}
}

func (w *World) msgMismatch(t *task, f *Fifo, m *msg) {
	if m.inst != t.inst {
		w.mismatchAt(t, m.by, m.inst, "NCCL", pendingMsg{fifo: f})
	} else {
		w.sigMismatch(t, m.by, m.sig, "NCCL", func() string { return fmt.Sprintf("NCCL connection %s", f.Name) })
	}
}

// scale returns c·v, its provenance node from w's slab.
func (w *World) scale(v Value, c int64) Value {
	if v.P == 0 {
		return Value{N: scaleN(v.N, c)}
	}
	return Value{N: scaleN(v.N, c), P: w.newProv(Prov{a: v.P, x: c})}
}

// scaleN returns c·n modulo Modulus.
func scaleN(n uint64, c int64) uint64 {
	cm := uint64(c % int64(Modulus))
	if c < 0 {
		cm = Modulus - uint64(-c%int64(Modulus))
	}
	return mulMod(n, cm)
}

// blockOn parks t on a waiter list while micro-op in cannot proceed (ws
// nil: the caller listed it); the reason is formatted only if a hang
// report needs it.
func (w *World) blockOn(t *task, ws *[]int32, in *Instr, peer int) {
	if ws != nil {
		*ws = w.appendI32(*ws, t.id)
	}
	t.blockIn, t.blockGen = in, false
	if t.gen != nil {
		t.blockIn, t.blockGen = nil, true // generated: made again when needed
	}
	t.blockFwd = false
	t.blockWho = t.blockWho[:0]
	if peer >= 0 {
		t.blockWho = append(t.blockWho, blockRef{rank: peer})
	}
}

// addWaiter puts task id on a waiter list once. A flag wait is on two
// lists (its flag's buffer and the one it compares against); woken by one,
// it stays on the other and may block again before that one wakes.
func (w *World) addWaiter(ws *[]int32, id int32) {
	for _, x := range *ws {
		if x == id {
			return
		}
	}
	*ws = w.appendI32(*ws, id)
}

// blockReason describes what t is blocked on.
func (t *task) blockReason() string {
	in := t.blockIn
	if t.blockGen {
		in = t.gen.At(t.pc, new(Instr))
	}
	if in == nil {
		return ""
	}
	switch in.Op {
	case OpPut:
		return fmt.Sprintf("put_signal to rank %d pad %q slot %d (still set)", in.Pad.Rank, in.Pad.Name, in.Slot)
	case OpWait:
		return fmt.Sprintf("wait_signal on own pad %q slot %d (for rank %d)", in.Pad.Name, in.Slot, in.Peer)
	case OpSend:
		if in.Fifo.Stepped {
			return in.Fifo.stepReason(true)
		}
		return fmt.Sprintf("send on %s (full)", in.Fifo.Name)
	case OpRecv:
		if in.Fifo.Stepped {
			return in.Fifo.stepReason(false)
		}
		return fmt.Sprintf("recv on %s (empty)", in.Fifo.Name)
	case OpRecvSend:
		if in.Fifo.Stepped {
			if t.blockFwd {
				return in.Fwd.stepReason(true)
			}
			return in.Fifo.stepReason(false)
		}
		if t.blockFwd {
			return fmt.Sprintf("send on %s (full)", in.Fwd.Name)
		}
		return fmt.Sprintf("recv on %s (empty)", in.Fifo.Name)
	case OpFlagWait:
		return flagWaitReason(in)
	}
	return in.Op.String()
}

// epoch is t's current access epoch. A micro-op's accesses all happen at
// one epoch (the lane's clock ticks only at a release, after them), so it is
// made once per micro-op (exec resets epOK).
func (w *World) epoch(t *task) epoch {
	if !w.epOK {
		w.dirty[t.lane] = true
		w.ep, w.epOK = epoch{lane: t.lane, clock: w.vc[t.lane].Get(t.lane), task: t.id}, true
	}
	return w.ep
}

// read and write take a buffer as a micro-op names it (a template's copy
// resolves it to its own, World.bufOf).
func (w *World) read(t *task, b *Buffer, c int) Value {
	b = w.bufOf(b)
	if !b.private {
		w.checkRead(t, b, c)
	}
	if w.rlog != nil {
		w.logRead(t, b, c)
	}
	v := b.Vals[c]
	w.eng.Mix2(uint64(b.id)<<20|uint64(c), v.N)
	return v
}

// checkRead checks a read of chunk c of b against its last write and
// records it in the chunk's shadow.
func (w *World) checkRead(t *task, b *Buffer, c int) {
	sh := &b.sh[c]
	cur := w.vc[t.lane]
	if !w.hb(sh.w, cur) {
		w.race(t, sh.w.task, b, c, "write", "read")
	}
	e := w.epoch(t)
	switch {
	case sh.r0.none():
		sh.r0 = e
	case sh.r0.lane == e.lane:
		sh.r0 = e
	default:
		var more []epoch
		if sh.more > 0 {
			more = w.mores[sh.more-1]
		}
		replaced := false
		for i := range more {
			if more[i].lane == e.lane {
				more[i] = e
				replaced = true
				break
			}
		}
		if !replaced {
			if sh.more == 0 {
				// Rare (a chunk read by three lanes since its
				// write): the list lives beside the shadow, which
				// stays 28 bytes.
				w.mores = append(w.mores, nil)
				sh.more = int32(len(w.mores))
			}
			w.mores[sh.more-1] = w.moreReader(more, e)
		}
	}
}

func (w *World) write(t *task, b *Buffer, c int, v Value) {
	b = w.bufOf(b)
	if w.rlog != nil {
		w.logWrite(t, b, c, nil)
	}
	if b.private {
		// Nothing to check; the writer is kept for LastWriter. (Its clock
		// is never compared: only its own lane touches the chunk.)
		if b.lastW == nil {
			b.lastW = w.int32s(len(b.Vals))[:len(b.Vals)]
		}
		b.lastW[c] = 1 + t.id
		b.Vals[c] = v
		w.eng.Mix2(uint64(b.id)<<20|uint64(c)|1<<63, v.N)
		if b.polled {
			w.storeWakes(b)
		}
		if b.Block != nil && b.Block.ov != nil {
			w.writeAliases(t, b, c, v)
		}
		return
	}
	w.checkWrite(t, b, c)
	b.Vals[c] = v
	w.eng.Mix2(uint64(b.id)<<20|uint64(c)|1<<63, v.N)
	if b.polled {
		w.storeWakes(b)
	}
	if b.Block != nil && b.Block.ov != nil {
		w.writeAliases(t, b, c, v)
	}
}

// storeWakes wakes the flag waits polling b after a plain store into it,
// whatever made the store: a kernel, a collective's receive, a host
// re-fill (flags.go, flagWoke).
func (w *World) storeWakes(b *Buffer) {
	if !mutant.On(mutant.WakeOnFlagStoresOnly) {
		w.flagWoke(b)
	}
}

// checkWrite checks a write of chunk c of b against the chunk's last write
// and reads, and makes it the chunk's last write.
func (w *World) checkWrite(t *task, b *Buffer, c int) {
	sh := &b.sh[c]
	cur := w.vc[t.lane]
	if !w.hb(sh.w, cur) {
		w.race(t, sh.w.task, b, c, "write", "write")
	}
	if !sh.r0.none() {
		if !w.hb(sh.r0, cur) {
			w.race(t, sh.r0.task, b, c, "read", "write")
		}
		if sh.more > 0 {
			for _, r := range w.mores[sh.more-1] {
				if !w.hb(r, cur) {
					w.race(t, r.task, b, c, "read", "write")
				}
			}
			w.mores[sh.more-1] = w.mores[sh.more-1][:0]
		}
	}
	sh.w = w.epoch(t)
	sh.r0 = noEpoch
}

// writeAliases carries a write of chunk c of b to the chunks of other
// tensors whose memory overlaps it (a caching allocator handed the
// addresses out again, alloc.go): it is checked against their accesses
// and their readers see the new value. A read needs no such step: every
// write to the memory reached its shadow.
func (w *World) writeAliases(t *task, b *Buffer, c int, v Value) {
	for _, r := range b.Block.ov[c] {
		o := w.bufs[r.buf]
		if w.rlog != nil {
			w.logWrite(t, o, int(r.chunk), b)
		}
		if o.private {
			if o.lastW == nil {
				o.lastW = w.int32s(len(o.Vals))[:len(o.Vals)]
			}
			o.lastW[r.chunk] = 1 + t.id
		} else {
			w.checkWrite(t, o, int(r.chunk))
		}
		o.Vals[r.chunk] = v
		w.eng.Mix2(uint64(o.id)<<20|uint64(r.chunk)|1<<63, v.N)
		if o.polled {
			w.storeWakes(o)
		}
	}
}

func (w *World) race(t *task, other int32, b *Buffer, c int, prev, cur string) {
	if mutant.On(mutant.RaceDetectorOff) {
		return
	}
	// Fast path: this pair of tasks already raced on this buffer with these
	// access kinds (every chunk of a copy races alike).
	fast := raceKey{buf: b.id, a: other, b: t.id, kinds: uint16(prev[0])<<8 | uint16(cur[0])}
	// A small direct-mapped cache in front of the set: most lookups are of
	// pairs seen a few chunks ago (the last one, for the next chunk of the
	// same racing copy).
	h := fast.Hash()
	rc := &w.raceCache[h>>26]
	if *rc == fast {
		return
	}
	*rc = fast
	if !w.raceSeen.Add(fast, h) {
		return
	}
	oName, oRank := w.taskNameIDOf(other)
	// One finding per (resource, op pair, access kinds, streams): the same
	// race on every rank and chunk is one bug. Names are interned, so the
	// key is a few integers.
	key := raceDedupeKey{res: w.bufNameID(b), a: oName, b: w.taskNameID(t), kinds: fast.kinds, same: oRank == t.rank}
	if !w.raceDedupe.Add(key, key.Hash()) {
		return
	}
	a, bn := w.taskName(other), w.taskName(t.id)
	w.noteTasks(other, t.id)
	w.reportPending(Finding{
		Kind:    KindRace,
		Ranks:   uniqInts(oRank, t.rank),
		Ops:     []string{a, bn},
		Streams: []string{w.streamName(other), w.streamName(t.id)},
	}, pendingMsg{kind: pendingRace, t: t.id, other: other, buf: b, chunk: c, prev: prev, cur: cur})
}

// mismatchPad is mismatch through slot of signal pad p; the resource is
// named only if the finding is new.
func (w *World) mismatchPad(t *task, by int32, got Instance, p *SignalPad, slot int) {
	w.mismatchAt(t, by, got, "signal", pendingMsg{pad: p, slot: slot})
}

// mismatchAt reports that t consumed data of instance got, produced by task
// by, through the resource m names (resKind: the first word of its name).
func (w *World) mismatchAt(t *task, by int32, got Instance, resKind string, m pendingMsg) {
	o := w.task(by)
	// One finding per (resource kind, call pair, stream pair), by interned
	// ids: a mismatched ring reports this on every message.
	key := mismatchKey{res: resKind == "signal", a: w.callIDOf(t.inst), b: w.callIDOf(got), sa: w.streamNameID(t), sb: w.streamNameID(o)}
	if w.mismatchSeen[key] {
		return
	}
	if w.mismatchSeen == nil {
		w.mismatchSeen = map[mismatchKey]bool{}
	}
	w.mismatchSeen[key] = true
	w.noteTasks(t.id, by)
	m.kind, m.t, m.other, m.got = pendingMismatch, t.id, by, got
	w.reportPending(Finding{
		Kind:    KindMismatch,
		Ranks:   uniqInts(t.rank, o.rank),
		Ops:     []string{w.taskName(t.id), w.taskName(by)},
		Streams: []string{w.streamName(t.id), w.streamName(by)},
	}, m)
}

// mismatchKey is a mismatch's dedupe key (mismatchAt).
type mismatchKey struct {
	res          bool // through a signal, not a FIFO
	a, b, sa, sb int32
}

// callIDOf is inst's interned call, or -1 for a kernel that is no
// collective call (callKey's "").
func (w *World) callIDOf(inst Instance) int32 {
	if inst.Call < 0 || int(inst.Call) >= len(w.calls) {
		return -1
	}
	return inst.Call
}

// streamNameID interns t's stream name, once per task.
func (w *World) streamNameID(t *task) int32 {
	if t.streamID == 0 {
		t.streamID = 1 + w.nameID(w.streamName(t.id))
	}
	return t.streamID
}

// callKey is the interned call name of inst, or "" for a kernel that is no
// collective call.
func (w *World) callKey(inst Instance) string {
	if inst.Call < 0 || int(inst.Call) >= len(w.calls) {
		return ""
	}
	return w.calls[inst.Call]
}

// raceDedupeKey is a race's dedupe key: the buffer's name, each task's
// (op, stream) name and the access kinds, interned ([World.nameID]).
type raceDedupeKey struct {
	res, a, b int32
	kinds     uint16
	same      bool
}

// nameID interns s.
func (w *World) nameID(s string) int32 {
	id, ok := w.names[s]
	if !ok {
		if w.names == nil {
			w.names = map[string]int32{}
		}
		id = int32(len(w.names))
		w.names[s] = id
	}
	return id
}

// padSlot is a pad and one of its slots.
type padSlot struct {
	pad  *SignalPad
	slot int
}

// slotNameID is the id of pad p's slot as a race resource: in a
// template's copy the template's (slotResIDs); otherwise its interned
// name, formatted once per pad and slot. syncRace asks on every unordered
// slot access, before its dedupe (a Sprintf each was a tenth of a buggy
// DPOR trace; once per slot and run, still 6 % of a buggy random one).
func (w *World) slotNameID(p *SignalPad, slot int) int32 {
	if p.id > 0 && int(p.id) <= len(w.slotRes) {
		if row := w.slotRes[p.id-1]; slot < len(row) {
			return row[slot]
		}
	}
	k := padSlot{p, slot}
	if id, ok := w.slotName[k]; ok {
		return id
	}
	id := w.nameID(fmt.Sprintf("\x00pad\x00%s\x00%d", p.Name, slot))
	if w.slotName == nil {
		w.slotName = map[padSlot]int32{}
	}
	w.slotName[k] = id
	return id
}

// slotResIDs gives every slot of a template's pads (by pad id, 1 + index
// in pads) its race-resource id for the template's copies, in place of
// slotNameID's interned name, which each copy would format and intern
// again on every run: slots of pads of one name share an id, as they
// share the name, and the ids are negative (at most -2), so that the
// resource of a dedupe key (1 + id) never meets a name's (1 + a name id,
// at least 1). Only equality of ids matters: they are never shown.
func slotResIDs(pads []*SignalPad) [][]int32 {
	type nameSlot struct {
		name string
		slot int
	}
	ids := map[nameSlot]int32{}
	out := make([][]int32, len(pads))
	for i, p := range pads {
		out[i] = make([]int32, len(p.Slots))
		for s := range p.Slots {
			k := nameSlot{p.Name, s}
			id, ok := ids[k]
			if !ok {
				id = -2 - int32(len(ids))
				ids[k] = id
			}
			out[i][s] = id
		}
	}
	return out
}

// taskNameID is t's (op, stream) name as an id, once per task: a kernel
// launch's comes from the plan, interned once for all of a template's
// copies; any other task's is interned in w, after the plan's ids.
func (w *World) taskNameID(t *task) int32 {
	if t.nameID == 0 {
		if t.op != nil && t.node >= 0 && t.op.Kind == Launch {
			t.nameID = w.plan.opName[t.rank][t.node]
		}
		if t.nameID == 0 {
			t.nameID = 1 + w.plan.names + w.nameID(w.taskName(t.id)+"\x00"+w.streamName(t.id))
		}
	}
	return t.nameID
}

// taskNameIDOf is taskNameID of task id and its rank, without the
// stand-in w.task builds for a retired task (its op, folded and rebound)
// when the plan names the task's op: a kernel launch, the other side of
// most races, checked on every unordered access before the dedupe.
func (w *World) taskNameIDOf(id int32) (int32, int) {
	if t := w.tasks[id]; t != nil {
		return w.taskNameID(t), t.rank
	}
	if who := w.lz.who[id]; who.name != 0 {
		return who.name, int(who.rank) // a launch's, kept as it retired
	}
	in := w.identOf(id)
	if in.node >= 0 {
		// The stand-in's node is the op's index, and taskNameID gives a
		// launch the plan's name, which is non-zero only for launches.
		if nid := w.plan.opName[in.rank][w.plan.nodes[in.rank][in.node].op]; nid != 0 {
			return nid, int(in.rank)
		}
	}
	o := w.task(id)
	return w.taskNameID(o), o.rank
}

// bufNameID interns b's name, once per buffer.
func (w *World) bufNameID(b *Buffer) int32 {
	for int(b.id) >= len(w.bufName) {
		w.bufName = append(w.bufName, 0)
	}
	if w.bufName[b.id] == 0 {
		w.bufName[b.id] = 1 + w.nameID(b.Name)
	}
	return w.bufName[b.id]
}

// raceKey identifies one racing pair of tasks on one buffer.
type raceKey struct {
	buf, a, b int32
	kinds     uint16
}

// Hash is the hash race() computes for a pair.
func (k raceKey) Hash() uint32 {
	return uint32(k.buf)*0x9e3779b1 ^ uint32(k.a)*0x85ebca6b ^ uint32(k.b)*0xc2b2ae35 ^ uint32(k.kinds)
}

// Hash is a race de-duplication key's hash.
func (k raceDedupeKey) Hash() uint32 {
	h := uint32(k.res)*0x9e3779b1 ^ uint32(k.a)*0x85ebca6b ^ uint32(k.b)*0xc2b2ae35 ^ uint32(k.kinds)*0x27d4eb2f
	if k.same {
		h ^= 0x165667b1
	}
	return h
}

func uniqInts(a, b int) []int {
	if a == b {
		return []int{a}
	}
	if a > b {
		a, b = b, a
	}
	return []int{a, b}
}

// hangFinding reports a hang when work remains with nothing pending: the
// blocked tasks and a wait-for cycle among them.
func (w *World) hangFinding() *Finding {
	var stuck []*task
	for _, t := range w.tasks {
		if t != nil && t.state != done { // nil: retired (retire.go), so done
			stuck = append(stuck, t)
		}
	}
	if len(stuck) == 0 {
		return nil
	}
	// Wait-for edges: a task waits for its unfinished deps; a blocked kernel
	// waits for the unfinished kernels of the peer that must signal it.
	edges := func(t *task) []int32 {
		var out []int32
		if t.state == pending {
			out = append(out, w.waitEdges(t)...)
			for _, d := range t.deps {
				if w.task(d).state != done {
					out = append(out, d)
				}
			}
			return out
		}
		for _, br := range t.blockWho {
			// the peer's host is blocked in a sync: it cannot issue the
			// matching work until the sync returns (hostsync.go)
			if s := w.hostSyncEdge(br.rank); s >= 0 {
				out = append(out, s)
			}
			// The precise partner first: the peer's side of the same call.
			if p := w.partner(stuck, t, br.rank); p >= 0 {
				out = append(out, p)
				continue
			}
			// a peer kernel kept off its GPU by residency comes first:
			// what it would send is held up by whoever holds its SMs
			for _, u := range stuck {
				if u.rank == br.rank && u.state == pending && u.heldBy > 0 {
					out = append(out, u.id)
				}
			}
			for _, u := range stuck {
				if u.rank == br.rank && u.state != pending && u.id != t.id {
					out = append(out, u.id)
				}
			}
			// a peer's work that never started is also what we wait for
			for _, u := range stuck {
				if u.rank == br.rank && u.state == pending && u.op != nil && u.op.Kind == Launch && u.op.Kernel.Coll != "" {
					out = append(out, u.id)
					break
				}
			}
		}
		if t.state == blocked && len(t.blockWho) == 0 {
			// waiting on own pad: any peer kernel sharing the pad could signal it
			for _, u := range stuck {
				if u.rank != t.rank && u.state != pending && u.op != nil && u.op.Kind == Launch && u.op.Kernel.Coll != "" {
					out = append(out, u.id)
				}
			}
		}
		return out
	}
	cycle := findCycle(stuck, edges)
	desc := func(id int32) string {
		t := w.tasks[id]
		s := fmt.Sprintf("rank %d %s: %s", t.rank, w.streamName(id), w.taskName(id))
		switch {
		case isSync(t):
			s += fmt.Sprintf(" blocks rank %d's host thread (it issues nothing until this returns)", t.rank)
		case t.state == blocked || (t.state == running && t.blockReason() != ""):
			s += " blocked on " + t.blockReason() + w.peerDone(stuck, t)
		case t.state == pending && t.heldBy > 0:
			s += " " + w.residencyReason(t)
		case t.state == pending:
			s += " waits for its dependencies"
		}
		return s
	}
	var parts []string
	var ranksSet []int
	var ops, streams []string
	seenRank := map[int]bool{}
	src := cycle
	if len(src) == 0 {
		for _, t := range stuck {
			if t.state != pending {
				src = append(src, t.id)
			}
		}
		if len(src) == 0 {
			src = append(src, stuck[0].id)
		}
	}
	for _, id := range src {
		parts = append(parts, desc(id))
		t := w.tasks[id]
		if !seenRank[t.rank] {
			seenRank[t.rank] = true
			ranksSet = append(ranksSet, t.rank)
		}
		ops = append(ops, w.taskName(id))
		streams = append(streams, w.streamName(id))
	}
	sortInts(ranksSet)
	msg := fmt.Sprintf("%d tasks can never finish", len(stuck))
	if len(cycle) > 0 {
		msg += "; wait-for cycle: " + strings.Join(parts, " → ") + " → (back to start)"
	} else {
		msg += ": " + strings.Join(parts, "; ")
	}
	return &Finding{Kind: KindHang, Message: msg, Ranks: ranksSet, Ops: ops, Streams: streams, Resource: "wait-for graph"}
}

func findCycle(nodes []*task, edges func(*task) []int32) []int32 {
	color := map[int32]int{}
	idx := map[int32]*task{}
	for _, t := range nodes {
		idx[t.id] = t
	}
	var stack []int32
	var found []int32
	var dfs func(id int32) bool
	dfs = func(id int32) bool {
		color[id] = 1
		stack = append(stack, id)
		t := idx[id]
		if t != nil {
			for _, n := range edges(t) {
				if color[n] == 1 {
					for i, s := range stack {
						if s == n {
							found = append([]int32(nil), stack[i:]...)
							return true
						}
					}
				}
				if color[n] == 0 && dfs(n) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[id] = 2
		return false
	}
	for _, t := range nodes {
		if color[t.id] == 0 && dfs(t.id) {
			return found
		}
	}
	return nil
}

func sortInts(a []int) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// execScratch is the micro-op being executed and the scratch its steps use.
type execScratch struct {
	scratch   Instr // the generated micro-op being executed (World.instr)
	probe     Instr // a generated micro-op WouldBlock looks at
	stepInstr Instr // NextStep's generated micro-op
	stepActs  []ActorID
	ep        epoch // the executing micro-op's epoch, when epOK (World.epoch)
	epOK      bool
}
