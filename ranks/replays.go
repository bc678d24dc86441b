package ranks

import "github.com/collsim/collsim/mutant"

// Every replay checked (DESIGN.md, "Replays: each replay is checked against
// its own reference; a corrupted replay is never hidden by a clean later
// one").
//
// A CUDA graph replayed R times computes R steps. A real program copies
// each step's inputs into the graph's static input tensors before it
// launches the graph again (CUDA graphs read fixed addresses: PyTorch's
// torch.cuda.graphs docs, "static_input.copy_(data)" before
// "g.replay()"), so every replay computes on inputs of its own, and
// what one replay leaves in its outputs is what that step produced.
//
// The world models that with per-replay inputs: a tensor whose chunks are
// re-filled at the end of each replay on its rank (by the replay's join
// task: the writes are ordered after every node of the replay and before
// every node of the next, and race-checked like any write) with the next
// replay's values. Each rank's watched tensors (the ones the verdict
// compares) are copied at the same point, before the re-fill, so a replay
// that corrupted its outputs is seen even when a later one is clean. A
// one-pass world (the eager reference) runs on the inputs of one replay
// ([World.SetInputReplay]), so a checker builds one reference per replay.
//
// Which tensors are per-replay inputs: those given [World.InitPerReplay]
// (a scenario file's per-replay tensors), and, in a world whose builder
// says its replays are independent steps ([World.SetIndependentReplays]),
// every tensor set with [World.Init] that no kernel writes (the program's
// inputs and weights; memory a kernel writes may carry state from one
// replay to the next and is left alone). A program whose replays carry
// state (a counter, an accumulator) and whose reference runs every replay
// in one pass does not derive them: its replays are not independent. A derived input's value
// in replay k is its initial value plus (R-1-k)·h(rank, name, chunk): the
// last replay computes on the initial values, so a graph's final state is
// exactly what it was before per-replay inputs, and only earlier replays
// see other values.

// replayInput is one per-replay input tensor of a run.
type replayInput struct {
	b    *Buffer
	f    func(replay, chunk int) uint64 // explicit (InitPerReplay), or nil
	base []uint64                       // derived: the initial values
}

// value is chunk c's value in replay k of R.
func (in *replayInput) value(k, R, c int) uint64 {
	if in.f != nil {
		return in.f(k, c) % Modulus
	}
	return addMod(in.base[c], mulMod(uint64(R-1-k), replayMix(in.b.Rank, in.b.Name, c)))
}

// replayMix is a fixed nonzero value per (rank, tensor name, chunk): the
// step by which a derived input changes from one replay to the next. It
// uses names, not ids, so a reference world built apart agrees.
func replayMix(rank int, name string, c int) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h = (h ^ uint64(name[i])) * 1099511628211
	}
	h = (h ^ uint64(rank)*0x9e3779b97f4a7c15 ^ uint64(c)*0xbf58476d1ce4e5b9) * 1099511628211
	return 1 + (h>>8)%1000
}

// explicitInput is a tensor given [World.InitPerReplay].
type explicitInput struct {
	id int32
	f  func(replay, chunk int) uint64
}

// InitPerReplay makes b a per-replay input: in graph replay k its chunk c
// holds f(k, c) (re-filled at the end of replay k-1 on b's rank); a
// one-pass world holds the values of the replay [World.SetInputReplay]
// chose (by default the last). Each chunk is a fresh source, as with
// [World.Init]. This is the hook a scenario file's per-replay tensor
// maps onto.
func (w *World) InitPerReplay(b *Buffer, f func(replay, chunk int) uint64) {
	k := w.cfg.Replays - 1
	if w.inputReplay > 0 {
		k = w.inputReplay - 1
	}
	w.Init(b, func(c int) uint64 { return f(k, c) })
	b.inited = false
	w.explicitIn = append(w.explicitIn, explicitInput{id: b.id, f: f})
}

// SetIndependentReplays says whether w's graph replays are independent
// steps of one program, its reference one pass of one replay (true), or
// carry state from one to the next (a counter, an accumulator) with a
// reference that runs them all. Independent replays are each checked
// against their own reference, and every tensor set with [World.Init]
// that a kernel reads as data and none writes becomes a per-replay input,
// with values derived from the replay index; a tensor a flag op reads (a
// put's data, the value a wait compares against) is part of a protocol
// and keeps its values, as does one nothing reads. Call it before Run; by
// default replays are not independent.
func (w *World) SetIndependentReplays(on bool) { w.deriveInputs = on }

// IndependentReplays reports what [World.SetIndependentReplays] set.
func (w *World) IndependentReplays() bool { return w.deriveInputs }

// SetInputReplay makes a one-pass world (eager mode, or a reference) run
// on the inputs of graph replay k (0-based) of a world of Config.Replays
// replays: a checker builds the reference of each replay this way. Call it
// before Run; by default a one-pass world runs on the last replay's.
func (w *World) SetInputReplay(k int) { w.inputReplay = k + 1 }

// WatchReplays makes a graph world of more than one replay copy each
// rank's bufs[rank] at the end of every replay but the last (whose values
// are the final state), for [World.ReplayValues]. Call it before Run.
func (w *World) WatchReplays(bufs [][]*Buffer) {
	if w.cfg.Mode != Graph || w.cfg.Replays < 2 {
		return
	}
	w.watch = bufs
}

// ReplayValues returns rank's watched tensors (WatchReplays' bufs[rank],
// their chunks one after another) as replay k left them, or nil when they
// were not copied (the last replay, a replay that never finished, or
// nothing watched).
func (w *World) ReplayValues(rank, k int) []Value {
	if rank >= len(w.snaps) || k >= len(w.snaps[rank]) {
		return nil
	}
	return w.snaps[rank][k]
}

// InputReplays is how many graph replays w's inputs are made for
// (Config.Replays, whatever the mode: a one-pass reference of a graph
// program has as many, one of which it runs on).
func (w *World) InputReplays() int { return w.cfg.Replays }

// ReplayInputs reports how many tensors of the run are per-replay inputs
// (known once it ran).
func (w *World) ReplayInputs() int { return len(w.rin) }

// setupReplayInputs finds the run's per-replay inputs and gives them the
// values of the first replay (graph) or of the chosen one (one pass).
func (w *World) setupReplayInputs() {
	R := w.cfg.Replays
	if R < 2 {
		return
	}
	explicit := map[int32]func(int, int) uint64{}
	for _, e := range w.explicitIn {
		explicit[e.id] = e.f
	}
	cls := w.replayClasses()
	for _, b := range w.bufs {
		in := replayInput{b: b, f: explicit[b.id]}
		if in.f == nil {
			if !w.deriveInputs || !b.inited || b.Block != nil || b.Sym != nil || cls[b.id] != clsData {
				continue
			}
			in.base = make([]uint64, len(b.Vals))
			for c, v := range b.Vals {
				in.base[c] = v.N
			}
		}
		w.rin = append(w.rin, in)
	}
	k := R - 1
	switch {
	case w.cfg.Mode == Graph:
		k = 0
	case w.inputReplay > 0:
		k = w.inputReplay - 1
	}
	for i := range w.rin {
		in := &w.rin[i]
		for c := range in.b.Vals {
			in.b.Vals[c].N = in.value(k, R, c)
		}
	}
	if w.watch != nil {
		w.snaps = make([][][]Value, w.N)
	}
}

// How the kernels touch a buffer that is its own storage (no Block):
// written by one, read by one as data, read by one as a flag protocol's
// value. A derived replay input is read as data and nothing else.
const (
	clsWritten uint8 = 1 << iota
	clsData
	clsProto
)

// replayClasses returns, per buffer id, how the kernels touch the buffer
// (clsWritten, clsData, clsProto; only for buffers without a Block). It
// depends on the programs alone, so a template's copy takes the
// template's, decided once in NewTemplate (listing every kernel's
// micro-ops was a sixteenth of a random tp8 schedule).
func (w *World) replayClasses() []uint8 {
	if t := w.tmpl; t != nil && t.replayCls != nil {
		return t.replayCls
	}
	var written locSet // storage a kernel writes
	var data locSet    // storage a kernel reads as data (not as a flag protocol's value)
	var proto locSet   // storage a flag op reads: a put's data, a wait's comparand
	var v opView
	var scratch Instr
	for _, p := range w.progs {
		if p == nil {
			continue
		}
		for i, op := range p.Ops {
			if op.Kind != Launch || op.Kernel == nil {
				continue
			}
			k := v.kernel(p, i) // a folded rank's, renamed (fold.go)
			// a template's copy runs the template's micro-ops: resolve the
			// buffers they name to the copy's own
			if k.listed(&scratch, func(in *Instr) {
				if in.Dst != nil {
					written.add(w.bufOf(in.Dst).storage())
				}
				reads := &data
				if in.Op == OpFlagPut || in.Op == OpFlagWait {
					reads = &proto
				}
				for _, src := range in.Srcs {
					reads.add(w.bufOf(src.Buf).storage())
				}
			}) {
				continue
			}
			for _, b := range k.Gen.Refs().Buffers { // which it reads and writes is not said: all
				written.add(w.bufOf(b).storage())
				data.add(w.bufOf(b).storage())
			}
		}
	}
	cls := make([]uint8, len(w.bufs))
	for _, b := range w.bufs {
		if b.Block != nil {
			continue
		}
		if written.has(b.storage()) {
			cls[b.id] |= clsWritten
		}
		if data.has(b.storage()) {
			cls[b.id] |= clsData
		}
		if proto.has(b.storage()) {
			cls[b.id] |= clsProto
		}
	}
	return cls
}

// replayDone is called when rank's graph replay k has finished (its join
// task t completes): it copies the watched tensors and re-fills the
// inputs with replay k+1's values, as writes of t.
func (w *World) replayDone(t *task) {
	k, R := int(t.replay), w.cfg.Replays
	if k >= R-1 {
		return
	}
	if w.snaps != nil && t.rank < len(w.watch) {
		n := 0
		for _, b := range w.watch[t.rank] {
			n += len(b.Vals)
		}
		snap := make([]Value, 0, n)
		for _, b := range w.watch[t.rank] {
			snap = append(snap, w.bufOf(b).Vals...)
		}
		for len(w.snaps[t.rank]) <= k {
			w.snaps[t.rank] = append(w.snaps[t.rank], nil)
		}
		w.snaps[t.rank][k] = snap
	}
	if mutant.On(mutant.ReplayInputsFixed) {
		return
	}
	w.epOK = false
	for i := range w.rin {
		in := &w.rin[i]
		if in.b.Rank != t.rank {
			continue
		}
		for c := range in.b.Vals {
			v := in.b.Vals[c]
			v.N = in.value(k+1, R, c)
			w.write(t, in.b, c, v)
		}
	}
}

// replayState is the per-replay inputs and replay snapshots.
type replayState struct {
	inputReplay  int             // 1 + SetInputReplay's replay; 0: the last
	deriveInputs bool            // DeriveReplayInputs
	explicitIn   []explicitInput // InitPerReplay's tensors (a template's copies share them)
	rin          []replayInput   // the run's per-replay inputs
	watch        [][]*Buffer     // per rank: the tensors copied at each replay's end
	snaps        [][][]Value     // per rank and replay: their copies
}
