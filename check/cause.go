package check

import (
	"fmt"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// Root cause: which read made a value wrong. A schedule and the program's
// reference (each rank's ops serialized in program order) are run again
// with their reads logged ([ranks.World.LogReads]); a read is wrong when
// the op whose bytes it saw is not the op whose bytes the same read saw in
// the reference. Starting from a corrupted output's last writer and going
// back through the ops whose bytes each op read, the first wrong read met
// is the cause: the op that read, the bytes, the op that wrote them, the
// op that should have, and the ordering edge that would have kept them
// apart.

// Cause explains one corrupted value in the program's words.
type Cause struct {
	// Text is the explanation, one sentence and the fix.
	Text string `json:"text"`
	// Output is the corrupted output the explanation starts from
	// ("rank 0 tensor y0[0]"); empty when no output differs at the end of
	// the run (a graph replay went wrong and a later one was right).
	Output string `json:"output,omitempty"`
	// Reader read Tensor[Chunk] on rank Rank and saw Writer's bytes;
	// they should have been Expected's ("" : the tensor's initial
	// value).
	Reader ranks.TaskRef `json:"reader"`
	Rank   int           `json:"rank"`
	Tensor string        `json:"tensor"`
	Chunk  int           `json:"chunk"`
	Writer ranks.TaskRef `json:"writer"`
	// ReaderCall and WriterCall are the collective calls Reader and
	// Writer are part of ("" for a plain kernel).
	ReaderCall string `json:"reader_call,omitempty"`
	WriterCall string `json:"writer_call,omitempty"`
	Expected   string `json:"expected_writer"`
	// Via is the tensor Writer wrote when it is not Tensor: the caching
	// allocator gave Tensor's freed block to Via.
	Via string `json:"via,omitempty"`
	// Edge is the missing ordering edge: the event, record_stream or
	// join that would have ordered Writer and Reader.
	Edge string `json:"edge"`
}

// Pair returns the cause's two ops, the reader and the writer, by name.
func (c *Cause) Pair() [2]string { return [2]string{c.Reader.Name, c.Writer.Name} }

// maxCauseReads bounds the read and write logs a root cause is looked
// for in (about 100 MiB for both runs' logs): a bigger run is not
// explained (its findings still are).
const maxCauseReads = 1 << 20

// RootCause runs the schedule (mode, ch) of p and p's reference again with
// their reads logged and explains the first wrong read behind a corrupted
// value; nil when it finds none (no read saw another op's bytes than in
// the reference).
func RootCause(p Program, mode sim.Mode, ch sim.Chooser) (*Cause, error) {
	cs, err := RootCauses(p, mode, ch)
	if err != nil || len(cs) == 0 {
		return nil, err
	}
	return cs[0], nil
}

// RootCauses is [RootCause] for each rank whose output differs, in rank
// order (one cause each, from the rank's first differing chunk); when no
// output differs, the first wrong read unordered with the write it saw.
func RootCauses(p Program, mode sim.Mode, ch sim.Chooser) ([]*Cause, error) {
	run := func(opt BuildOptions, eng *sim.Engine) (*Built, error) {
		opt.NoFold = true
		b, err := p.Build(opt, eng)
		if err != nil {
			return nil, err
		}
		if b.BuildFailed() {
			return nil, nil
		}
		b.World.LogReads(maxCauseReads)
		if _, err := b.World.Run(); err != nil {
			return nil, nil // a capture error: nothing to explain
		}
		return b, nil
	}
	ref, err := run(BuildOptions{Reference: true}, sim.NewEngine(sim.Timed, nil))
	if err != nil || ref == nil {
		return nil, err
	}
	defer ref.World.Release()
	got, err := run(BuildOptions{}, sim.NewEngine(mode, ch))
	if err != nil || got == nil {
		return nil, err
	}
	defer got.World.Release()
	return explainReads(got, ref), nil
}

// readKey identifies a read across two runs of one program: the reader
// (rank and op name), the chunk read (rank, tensor, chunk), and how many
// times before in the reader's graph replay that reader read that chunk.
type readKey struct {
	rank    int
	reader  string
	bufRank int
	buf     string
	chunk   int
	nth     int
}

// opKey names an op on a rank, across runs.
type opKey struct {
	rank int
	name string
}

func explainReads(got, ref *Built) (out []*Cause) {
	if got.World.ReadLogFull() || ref.World.ReadLogFull() {
		return nil // too big a run to explain: its findings still speak
	}
	greads, rreads := got.World.Reads(), ref.World.Reads()
	// The writer each read of the reference saw, by read.
	type seen struct {
		writer opKey // name "": the initial value
	}
	keyOf := func(w *ranks.World, reads []ranks.Read) []readKey {
		keys := make([]readKey, len(reads))
		nth := map[readKey]int{}
		for i, r := range reads {
			t := w.Task(r.Reader)
			k := readKey{rank: t.Rank, reader: t.Name, bufRank: r.Buf.Rank, buf: r.Buf.Name, chunk: r.Chunk}
			c := k
			c.nth = t.Replay // count within a replay: replays match the reference's one pass
			k.nth = nth[c]
			nth[c]++
			keys[i] = k
		}
		return keys
	}
	writerOf := func(w *ranks.World, r ranks.Read) opKey {
		if r.Writer < 0 {
			return opKey{}
		}
		t := w.Task(r.Writer)
		return opKey{t.Rank, t.Name}
	}
	rkeys := keyOf(ref.World, rreads)
	want := make(map[readKey]seen, len(rreads))
	for i, r := range rreads {
		want[rkeys[i]] = seen{writerOf(ref.World, r)}
	}
	gkeys := keyOf(got.World, greads)
	wrong := func(i int) (opKey, bool) {
		s, ok := want[gkeys[i]]
		if !ok {
			return opKey{}, false
		}
		return s.writer, s.writer != writerOf(got.World, greads[i])
	}
	// Each task's reads, in run order.
	byTask := map[int32][]int{}
	for i, r := range greads {
		byTask[r.Reader] = append(byTask[r.Reader], i)
	}
	// Tasks of the run by op, for naming the expected writer's stream.
	ops := map[opKey]int32{}
	calls := map[string]bool{}
	for id := range int32(got.World.NumTasks()) {
		t := got.World.Task(id)
		if _, ok := ops[opKey{t.Rank, t.Name}]; !ok {
			ops[opKey{t.Rank, t.Name}] = id
		}
		if c := got.World.TaskCall(id); c != "" {
			calls[c] = true
		}
	}
	// A cause's op's call: its own, or the call whose part it is by name
	// (a collective's copy kernels, "L0.ar.copy_in", run outside it).
	callOf := func(c *Cause) {
		part := func(name, call string) string {
			if call != "" {
				return call
			}
			for i := len(name) - 1; i > 0; i-- {
				if name[i] == '.' && calls[name[:i]] {
					return name[:i]
				}
			}
			return ""
		}
		c.ReaderCall = part(c.Reader.Name, c.ReaderCall)
		if c.Writer.Name != "" {
			c.WriterCall = part(c.Writer.Name, c.WriterCall)
		}
	}
	defer func() {
		for _, c := range out {
			callOf(c)
		}
	}()
	// Back from each rank's first corrupted output chunk, breadth first
	// through the ops whose bytes were read.
nextRank:
	for r := range got.Compare {
		if r >= len(ref.Compare) {
			break
		}
		for i, b := range got.Compare[r] {
			wb := ref.Compare[r][i]
			for c := range b.Vals {
				if c >= len(wb.Vals) || b.Vals[c].N == wb.Vals[c].N {
					continue
				}
				t, ok := got.World.LastWriter(b, c)
				if !ok {
					continue nextRank
				}
				id, ok := ops[opKey{t.Rank, t.Name}]
				if !ok {
					continue nextRank
				}
				if i, exp, ok := firstWrong(id, byTask, greads, wrong); ok {
					cause := describeCause(got.World, i, exp, ops)
					cause.Output = fmt.Sprintf("rank %d tensor %s[%d]", r, b.Name, c)
					cause.Text = fmt.Sprintf("%s is wrong because %s", cause.Output, cause.Text)
					out = append(out, cause)
				}
				continue nextRank
			}
		}
	}
	if len(out) > 0 {
		return out
	}
	// No output differs (or none leads to a wrong read): the first wrong
	// read that was not ordered after the write it saw.
	for i := range greads {
		if exp, bad := wrong(i); bad && !greads[i].Ordered {
			out = []*Cause{describeCause(got.World, i, exp, ops)}
			return out
		}
	}
	return nil
}

// firstWrong searches back from task start through the writers of what
// each task read (breadth first, each task once) for the first wrong read.
func firstWrong(start int32, byTask map[int32][]int, reads []ranks.Read, wrong func(int) (opKey, bool)) (int, opKey, bool) {
	seen := map[int32]bool{start: true}
	queue := []int32{start}
	for len(queue) > 0 && len(seen) < 100000 {
		id := queue[0]
		queue = queue[1:]
		for _, i := range byTask[id] {
			if exp, bad := wrong(i); bad {
				return i, exp, true
			}
		}
		for _, i := range byTask[id] {
			if w := reads[i].Writer; w >= 0 && !seen[w] {
				seen[w] = true
				queue = append(queue, w)
			}
		}
	}
	return 0, opKey{}, false
}

// describeCause writes the explanation of wrong read r, whose bytes should
// have been exp's.
func describeCause(w *ranks.World, i int, exp opKey, ops map[opKey]int32) *Cause {
	r := w.Reads()[i]
	x := w.Task(r.Reader)
	c := &Cause{Reader: x, ReaderCall: w.TaskCall(r.Reader), Rank: r.Buf.Rank, Tensor: r.Buf.Name, Chunk: r.Chunk, Expected: exp.name}
	on := func(t ranks.TaskRef) string {
		if t.Rank == x.Rank {
			return fmt.Sprintf("%s (stream %s)", t.Name, t.Stream)
		}
		return fmt.Sprintf("%s (rank %d, stream %s)", t.Name, t.Rank, t.Stream)
	}
	bytes := fmt.Sprintf("%s[%d]", r.Buf.Name, r.Chunk)
	if r.Buf.Rank != x.Rank {
		bytes = fmt.Sprintf("rank %d's %s", r.Buf.Rank, bytes)
	}
	should := "its initial bytes"
	if exp.name != "" {
		should = "the bytes " + exp.name + " wrote"
		if exp.rank != x.Rank {
			should = fmt.Sprintf("the bytes %s on rank %d wrote", exp.name, exp.rank)
		}
	}
	if r.Writer < 0 {
		c.Text = fmt.Sprintf("on rank %d %s read %s before anything wrote it; it should have read %s", x.Rank, on(x), bytes, should)
	} else {
		wt := w.Task(r.Writer)
		c.Writer, c.WriterCall = wt, w.TaskCall(r.Writer)
		wrote := "had written"
		if r.Via != nil {
			c.Via = r.Via.Name
			wrote = fmt.Sprintf("had written %s over (the caching allocator gave %s's freed block to %s)", r.Via.Name, r.Buf.Name, r.Via.Name)
		}
		c.Text = fmt.Sprintf("on rank %d %s read %s, which %s %s; it should have read %s", x.Rank, on(x), bytes, on(wt), wrote, should)
	}
	c.Edge = missingEdge(w, r, exp, ops, wroteBefore(w, i, exp))
	c.Text += ". Missing: " + c.Edge
	return c
}

// wroteBefore reports whether op exp wrote the chunk read i read before
// that read.
func wroteBefore(w *ranks.World, i int, exp opKey) bool {
	if exp.name == "" {
		return false
	}
	r := w.Reads()[i]
	for _, wr := range w.Writes() {
		if wr.Before > i {
			break
		}
		if wr.Buf == r.Buf && wr.Chunk == r.Chunk {
			if t := w.Task(wr.Writer); t.Rank == exp.rank && t.Name == exp.name {
				return true
			}
		}
	}
	return false
}

// missingEdge names the ordering that would have made read r see exp's
// bytes. When exp had written them before the read (expWrote), the
// writer whose bytes the read saw ran at the wrong time, over them: it
// must be ordered against the reader (after it when it comes later in
// program order, before the right write otherwise). When exp had not,
// the read came too early: the reader must wait for exp's write.
func missingEdge(w *ranks.World, r ranks.Read, exp opKey, ops map[opKey]int32, expWrote bool) string {
	x := w.Task(r.Reader)
	xn := w.TaskNode(r.Reader)
	// counterpart returns op name on the reader's rank (collectives run on
	// every rank), with its program position.
	counterpart := func(rank int, name string) (ranks.TaskRef, int, bool) {
		if id, ok := ops[opKey{x.Rank, name}]; ok {
			return w.Task(id), w.TaskNode(id), true
		}
		id, ok := ops[opKey{rank, name}]
		if !ok {
			return ranks.TaskRef{}, 0, false
		}
		return w.Task(id), w.TaskNode(id), true
	}
	// order says first must be done before second starts.
	order := func(first, second ranks.TaskRef, crossRank bool) string {
		every := ""
		if crossRank {
			every = ", on every rank"
		}
		if first.Rank == second.Rank && first.Stream != second.Stream {
			return fmt.Sprintf("an event recorded on stream %s after %s and waited on by stream %s before %s (a join of the two streams)%s",
				first.Stream, first.Name, second.Stream, second.Name, every)
		}
		return fmt.Sprintf("nothing makes %s wait until %s is done across ranks: a barrier or signal after %s that %s waits for", second.Name, first.Name, first.Name, second.Name)
	}
	var wt, peer ranks.TaskRef
	pn, ok := 0, false
	if r.Writer >= 0 {
		wt = w.Task(r.Writer)
		peer, pn, ok = counterpart(wt.Rank, wt.Name)
	}
	// The writer ran at the wrong time when the right bytes had been
	// written, or when it comes after the reader in program order.
	if r.Writer >= 0 && (expWrote || exp.name == "" || ok && pn > xn) {
		if r.Via != nil && wt.Rank == x.Rank {
			return fmt.Sprintf("a record_stream of %s on stream %s before %s is freed, so its block is not handed out again before %s is done; or %s",
				r.Buf.Name, x.Stream, r.Buf.Name, x.Name, order(x, wt, false))
		}
		if !ok {
			return fmt.Sprintf("nothing orders %s on rank %d against %s on rank %d: a barrier or signal between them", wt.Name, wt.Rank, x.Name, x.Rank)
		}
		cross := wt.Rank != x.Rank
		if peer.Rank == x.Rank && peer.Stream == x.Stream {
			// Ordered on each rank, not across: the writer's rank went on
			// while the reader's still read (or had not yet).
			if pn < xn {
				return fmt.Sprintf("nothing makes %s on rank %d read after %s on rank %d is done: a barrier or signal after %s that %s waits for", x.Name, x.Rank, wt.Name, wt.Rank, wt.Name, x.Name)
			}
			return fmt.Sprintf("nothing makes %s on rank %d wait until %s on rank %d has read rank %d's %s: a barrier or signal after %s that %s waits for (an exit barrier)",
				wt.Name, wt.Rank, x.Name, x.Rank, r.Buf.Rank, r.Buf.Name, x.Name, wt.Name)
		}
		if pn < xn {
			// The writer comes first: it must be done before the reader's
			// op starts (before the op that should have written the
			// bytes, when that comes first on the reader's stream).
			target := x
			if id, ok := ops[opKey{x.Rank, exp.name}]; ok {
				if et := w.Task(id); et.Stream == x.Stream && w.TaskNode(id) < xn {
					target = et
				}
			}
			return order(peer, target, cross)
		}
		return order(x, peer, cross)
	}
	// The right bytes were not there yet: the reader must wait for them.
	if exp.name == "" {
		return fmt.Sprintf("nothing writes %s before %s reads it", r.Buf.Name, x.Name)
	}
	et, _, ok := counterpart(exp.rank, exp.name)
	if !ok {
		return fmt.Sprintf("nothing orders %s after %s", x.Name, exp.name)
	}
	if et.Rank == x.Rank && et.Stream == x.Stream || exp.rank != x.Rank && exp.name == x.Name {
		// Ordered on the reader's rank, or the same collective on another
		// rank: the writer's rank must tell the reader's.
		return fmt.Sprintf("nothing makes %s on rank %d wait until %s on rank %d has written rank %d's %s: a signal from rank %d after that write, which rank %d waits for",
			x.Name, x.Rank, exp.name, exp.rank, r.Buf.Rank, r.Buf.Name, exp.rank, x.Rank)
	}
	return order(et, x, exp.rank != x.Rank)
}
