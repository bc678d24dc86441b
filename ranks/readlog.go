package ranks

// The read log: every chunk a task read and the task whose write it read,
// for explaining a corrupted value (check's root cause). It is off on
// every run but the one or two a report explains: World.read and
// World.write test one pointer.

// Read is one read of one chunk: the task that read it, the task whose
// write it read, and whether that write happens-before the read.
type Read struct {
	Reader int32 // task id ([World.Task] names it)
	// Writer is the task whose write the read saw; -1: the chunk's
	// initial value.
	Writer int32
	Buf    *Buffer // the buffer read
	Chunk  int
	// Via is the buffer Writer wrote when that was another tensor whose
	// memory overlaps Buf (a caching allocator handed Buf's freed block
	// out again); nil when Writer wrote Buf itself.
	Via *Buffer
	// Ordered: Writer's write happens-before the read (always, for a
	// buffer only one lane touches).
	Ordered bool
	N       uint64 // the value read
}

// Write is one write of one chunk (directly or through an overlapping
// tensor), logged by LogReads.
type Write struct {
	Writer int32 // task id
	Buf    *Buffer
	Chunk  int
	// Before is how many reads the log held when the write happened:
	// the write came after Reads()[Before-1] and before Reads()[Before].
	Before int
}

// readLog is a run's read log (LogReads).
type readLog struct {
	reads  []Read
	writes []Write
	limit  int  // most reads and writes kept, each
	full   bool // one was not kept: the log is incomplete
	// via[{buf, chunk}] is the buffer whose write last reached the chunk
	// through an overlap (writeAliases); absent after a direct write.
	via map[aliasRef]*Buffer
}

// LogReads makes w keep a log of every read and write (World.Reads,
// World.Writes), at most limit of each: past it the log stops
// ([World.ReadLogFull]), so a big run costs bounded memory. It keeps
// every task (KeepHistory) and runs every collective micro-op by
// micro-op, so the log sees every read. Call it before Run.
func (w *World) LogReads(limit int) {
	w.rlog = &readLog{via: map[aliasRef]*Buffer{}, limit: limit}
	w.keepHistory = true
}

// ReadLogFull reports whether the read log reached its limit and left
// reads or writes out.
func (w *World) ReadLogFull() bool { return w.rlog != nil && w.rlog.full }

// Reads returns the read log, in the order the reads happened (nil
// unless LogReads was called).
func (w *World) Reads() []Read {
	if w.rlog == nil {
		return nil
	}
	return w.rlog.reads
}

// Writes returns the writes of the run, in order (nil unless LogReads was
// called).
func (w *World) Writes() []Write {
	if w.rlog == nil {
		return nil
	}
	return w.rlog.writes
}

// Task names task id of this world's run (a [Read]'s Reader or Writer).
func (w *World) Task(id int32) TaskRef { return w.ref(id) }

// NumTasks is how many tasks the run made; after a run with LogReads
// (which retires none), [World.Task] names each id below it.
func (w *World) NumTasks() int { return len(w.tasks) }

// TaskCall returns the collective call task id runs part of (its name
// without a replay number), or "" for a task outside any collective.
func (w *World) TaskCall(id int32) string {
	t := w.tasks[id]
	if t.inst.Call < 0 || int(t.inst.Call) >= len(w.calls) {
		return ""
	}
	return w.calls[t.inst.Call]
}

// TaskNode returns the index of task id's op in its rank's lowered
// program: program order on one rank.
func (w *World) TaskNode(id int32) int { return int(w.tasks[id].node) }

// logRead records t's read of chunk c of b (b already resolved).
func (w *World) logRead(t *task, b *Buffer, c int) {
	if len(w.rlog.reads) >= w.rlog.limit {
		w.rlog.full = true
		return
	}
	r := Read{Reader: t.id, Writer: -1, Buf: b, Chunk: c, Ordered: true, N: b.Vals[c].N}
	switch {
	case b.private:
		if b.lastW != nil && b.lastW[c] > 0 {
			r.Writer = b.lastW[c] - 1
		}
	case !b.sh[c].w.none():
		r.Writer = b.sh[c].w.task
		r.Ordered = w.hb(b.sh[c].w, w.vc[t.lane])
	}
	r.Via = w.rlog.via[aliasRef{b.id, int32(c)}]
	w.rlog.reads = append(w.rlog.reads, r)
}

// logWrite records that t wrote chunk c of b directly (via is nil) or,
// through an overlap, by a write to via.
func (w *World) logWrite(t *task, b *Buffer, c int, via *Buffer) {
	if len(w.rlog.writes) < w.rlog.limit {
		w.rlog.writes = append(w.rlog.writes, Write{Writer: t.id, Buf: b, Chunk: c, Before: len(w.rlog.reads)})
	} else {
		w.rlog.full = true
	}
	k := aliasRef{b.id, int32(c)}
	if via == nil {
		delete(w.rlog.via, k)
		return
	}
	w.rlog.via[k] = via
}
