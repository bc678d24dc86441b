package scenarios

import (
	"fmt"
	"slices"
	"strings"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios/format"
	"github.com/collsim/collsim/scenarios/forms"
	"github.com/collsim/collsim/scenarios/knobs"
	"github.com/collsim/collsim/sim"
	"github.com/collsim/collsim/streamsched"
)

// lower is a validated spec being turned into worlds: the lowering of
// each of the format's sections to ranks' programs, memory and
// communicators (this file and lower_*.go).
type lower struct{ *Spec }

// ScenarioOf returns the runnable scenario of a validated spec. Its Build
// follows the spec's form: a Go graph form (package forms), the user op graph, or the
// per-rank programs.
func ScenarioOf(sp *Spec) *Scenario {
	s := lower{sp}
	s.KernelWeights() // before any build: builds only read it
	sc := &Scenario{Name: s.Name, Description: s.Description, Base: s.Base, Variants: append([]Variant(nil), s.Variants...), Compare: append([]Comparison(nil), s.Compare...), Spec: sp,
		GraphMatchesEager: slices.Contains(s.References, "eager")}
	switch {
	case s.Graph != nil && s.Graph.Builder != "":
		f, _ := forms.Lookup(s.Graph.Builder)
		sc.Build = f.Build
	case s.Graph != nil:
		sc.Build = s.buildGraph
	default:
		sc.Build = s.buildPrograms
	}
	return sc
}

func (s lower) world(cfg Config, opt BuildOptions, eng *sim.Engine, mode ranks.Mode) (*ranks.World, ranks.Profile, error) {
	hw, err := cfg.Profile()
	if err != nil {
		return nil, hw, err
	}
	if cfg.TP < 1 || cfg.TP > MaxRanks {
		return nil, hw, fmt.Errorf("ranks %d: expected 1..%d", cfg.TP, MaxRanks)
	}
	if cfg.Chunks < 1 || cfg.Chunks > MaxChunks {
		return nil, hw, fmt.Errorf("chunks %d: expected 1..%d", cfg.Chunks, MaxChunks)
	}
	replays := cfg.Replays
	if s.GraphProgram() {
		replays = 1 // the program's replay ops are its replays
	}
	w := ranks.NewWorld(cfg.TP, knobs.WorldConfig(cfg, hw, ranks.Config{Mode: mode, Replays: replays, Timeline: opt.Timeline, SMs: hw.SMs}), eng)
	// Each replay a step on inputs of its own, checked on its own
	// (ranks/replays.go), unless the file says its steps carry state
	// (spec_host.go).
	w.SetIndependentReplays(!s.Carried())
	return w, hw, nil
}

// comms makes the spec's communicators on w.
func (s lower) comms(w *ranks.World, cfg Config, hw ranks.Profile) (map[string]*collectives.Comm, error) {
	out := map[string]*collectives.Comm{}
	for _, c := range s.Comms {
		group, err := c.Ranks.Resolve(cfg.TP)
		if err != nil {
			return nil, fmt.Errorf("%w: communicator %q: %w", ErrBadKnob, c.Name, err)
		}
		ws := collectives.Workspace(cfg.Workspace)
		if c.Workspace != "" {
			ws = collectives.Workspace(c.Workspace)
		}
		cm := collectives.NewComm(w, c.Name, group, ws, hw, cfg.Chunks)
		// Size the symmetric workspace and signal pad for the largest call
		// (set before the first call; a file whose calls all fit the
		// defaults leaves them as they were).
		for _, p := range s.AllPrograms() {
			for _, op := range p.Flat() {
				if op.Comm != c.Name || !op.Kind.Collective() || op.Symmetric != "" {
					continue
				}
				tin, tout := s.Tensor(op.In), s.Tensor(op.Out)
				if tin != nil && tout != nil {
					cm.WorkspaceChunks = max(cm.WorkspaceChunks, tin.ChunksIn(cfg), tout.ChunksIn(cfg))
				}
				cm.PadSlots = max(cm.PadSlots, op.Blocks*len(group))
			}
		}
		cm.ImplicitOrder = cfg.NCCLOrder == "implicit" || cfg.NCCLOrder == "implicit-launch"
		cm.ImplicitLaunch = cfg.NCCLOrder == "implicit-launch"
		cm.StreamGuard = cfg.SymmGuard == "on"
		cm.GraphUnordered = cfg.NCCLOrder == "graph-unordered"
		cm.Coresident = cfg.NCCLCoresident == "on"
		out[c.Name] = cm
	}
	return out, nil
}

// buildGraph builds the user op graph like BuildMoE builds its own: place it
// with the placement knob, lower it through the stream helpers.
func (s lower) buildGraph(cfg Config, opt BuildOptions, eng *sim.Engine) (*Built, error) {
	strat, err := cfg.ParsedStrategy()
	if err != nil {
		return nil, err
	}
	sized, err := s.Sized(cfg)
	if err != nil {
		return nil, err
	}
	s = lower{sized}
	g := &streamsched.Graph{}
	produced := map[string]bool{}
	for _, op := range s.Graph.Ops {
		produced[op.Output] = true
		g.Ops = append(g.Ops, streamsched.Op{Name: op.Name, Kind: streamsched.OpKind(op.Kind), Inputs: op.Inputs, Output: op.Output,
			M: op.M, K: op.K, N: op.N, Experts: op.Experts, Comm: op.Comm, Time: sim.Time(op.TimeNs)})
	}
	flagged := false
	for _, t := range s.Tensors {
		g.Tensors = append(g.Tensors, streamsched.Tensor{Name: t.Name, Bytes: t.Bytes, Input: !produced[t.Name], Output: t.Output})
		flagged = flagged || t.Output
	}
	sched, mode, multi, err := forms.PlaceGraph(cfg, opt, g)
	if err != nil {
		return nil, err
	}
	w, hw, err := s.world(cfg, opt, eng, mode)
	if err != nil {
		return nil, err
	}
	comms, err := s.comms(w, cfg, hw)
	if err != nil {
		return nil, err
	}
	initv := func(tensor string, rank, chunk int) uint64 {
		if t := s.Tensor(tensor); t != nil {
			if v, ok := t.InitValue(rank, chunk); ok {
				return v
			}
		}
		return uint64(chunk + 1)
	}
	weights := map[string]int64{}
	for _, op := range s.Graph.Ops {
		if op.Weight != 0 {
			weights[op.Name] = op.Weight
		}
	}
	weight := func(op string, rank int) int64 {
		if w, ok := weights[op]; ok {
			return w
		}
		return s.KernelWeight(op, rank)
	}
	lo, err := streamsched.Lower(w, g, sched, comms, streamsched.LowerConfig{HW: hw, MultiStream: multi, Strategy: strat, Chunks: cfg.Chunks, Init: initv, Weight: weight})
	if err != nil {
		return nil, err
	}
	b := &Built{World: w}
	for r := range cfg.TP {
		var cmp []*ranks.Buffer
		for _, op := range g.Ops {
			if t := s.Tensor(op.Output); !flagged || (t != nil && t.Output) {
				cmp = append(cmp, lo.Tensors.Of(r, op.Output))
			}
		}
		b.Compare = append(b.Compare, cmp)
	}
	for _, op := range g.Ops {
		if st, ok := lo.Strategies[op.Name]; ok {
			b.Notes = append(b.Notes, fmt.Sprintf("%s → %s", op.Name, st))
		}
	}
	for _, l := range sched.Layers {
		if !l.Matched && l.Reason != "" && !opt.Reference {
			b.Notes = append(b.Notes, "transform skipped "+l.MoE+": "+l.Reason)
		}
	}
	return b, nil
}

// buildPrograms builds the explicit per-rank programs. The reference puts
// every op of a rank on its first stream, eager.
func (s lower) buildPrograms(cfg Config, opt BuildOptions, eng *sim.Engine) (*Built, error) {
	if _, err := cfg.ParsedStrategy(); err != nil {
		return nil, err
	}
	sized, err := s.Sized(cfg)
	if err != nil {
		return nil, err
	}
	s = lower{sized.Resized(cfg)} // a variant's patch may resize tensors (format/spec_patch.go)
	mode := ranks.Eager
	if cfg.Mode == "graph" && !opt.Reference && !s.GraphProgram() {
		mode = ranks.Graph // the whole program captured; with capture blocks the program says (spec_graphs.go)
	}
	w, hw, err := s.world(cfg, opt, eng, mode)
	if err != nil {
		return nil, err
	}
	n := cfg.TP
	bufs := make([]map[string]*ranks.Buffer, n)
	flagged := false
	managed := s.Managed()
	for r := range n {
		bufs[r] = map[string]*ranks.Buffer{}
		for i := range s.Tensors {
			t := &s.Tensors[i]
			flagged = flagged || t.Output
			if managed[t.Name] {
				continue // its alloc op takes it from the allocator
			}
			b := w.Alloc(r, t.Name, t.Bytes, t.ChunksIn(cfg))
			b.Output = t.Output
			if len(t.PerReplay) > 0 {
				perReplayInit(w, b, t)
			}
			if t.HasInit() {
				if _, ok := t.InitValue(r, 0); ok {
					w.Init(b, func(c int) uint64 { v, _ := t.InitValue(r, c); return v })
				}
			}
			bufs[r][t.Name] = b
		}
	}
	comms, err := s.comms(w, cfg, hw)
	if err != nil {
		return nil, err
	}
	symms, err := s.symmAllocs(w, cfg, hw)
	if err != nil {
		return nil, err
	}
	b := &Built{World: w, Compare: make([][]*ranks.Buffer, n)}
	noted := map[string]bool{}
	have := make([]bool, n)
	progs, err := s.ProgramsFor(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.CheckParams(cfg); err != nil {
		return nil, err
	}
	if !opt.Reference {
		b.Notes = append(b.Notes, s.symmNotes(progs, cfg, symms)...)
	}
	for _, p := range progs {
		rs, err := p.Ranks.Resolve(n)
		if err != nil {
			return nil, fmt.Errorf("%w: program: %w", ErrBadKnob, err)
		}
		for _, r := range rs {
			if have[r] {
				return nil, fmt.Errorf("%w: rank %d has two programs", ErrBadKnob, r)
			}
			have[r] = true
			prog, written, err := s.lowerProgram(w, cfg, hw, comms, symms, bufs[r], &p, r, opt.Reference, b, noted)
			if err != nil {
				return nil, err
			}
			w.SetProgram(r, prog)
			for _, t := range s.Tensors {
				// A freed tensor is gone from bufs: its block may hold
				// another tensor by the end.
				if x := bufs[r][t.Name]; x != nil && ((flagged && t.Output) || (!flagged && written[t.Name])) {
					b.Compare[r] = append(b.Compare[r], x)
				}
			}
		}
	}
	for r, ok := range have {
		if !ok {
			return nil, fmt.Errorf("%w: rank %d has no program: the file's programs do not cover a world of %d ranks", ErrBadKnob, r, n)
		}
	}
	return b, nil
}

func (s lower) lowerProgram(w *ranks.World, cfg Config, hw ranks.Profile, comms map[string]*collectives.Comm, symms map[string]*collectives.SymmAlloc,
	bufs map[string]*ranks.Buffer, p *ProgramSpec, r int, reference bool, b *Built, noted map[string]bool) (*ranks.Program, map[string]bool, error) {
	prog := &ranks.Program{Streams: append([]string(nil), p.Streams...), Events: append([]string(nil), p.Events...)}
	index := func(list []string, name, what string) (int, error) {
		if name == "" {
			return 0, nil
		}
		for i, x := range list {
			if x == name {
				return i, nil
			}
		}
		return 0, fmt.Errorf("rank %d: undefined %s %q", r, what, name)
	}
	buf := func(name string) (*ranks.Buffer, error) {
		if x, ok := bufs[name]; ok {
			return x, nil
		}
		return nil, fmt.Errorf("rank %d: undefined tensor %q", r, name)
	}
	written := map[string]bool{}
	issue, copies := s.Passes(cfg, reference)
	ops := format.GraphWork(format.RepeatOps(p.OpsFor(cfg), issue), cfg)
	gl := &graphLowering{reference: reference, graphs: map[string]*capturedGraph{}}
	issues := issueNames{}
	fills := 0
	hs := s.newHostState()
	if r == 0 && !reference {
		defer func() { b.Notes = append(b.Notes, hs.notes(s.Spec, cfg.Mode == "graph")...) }()
	}
	defer func() { prog.Ops = format.RepeatOps(prog.Ops, copies) }()
	mapped := s.newMapping(cfg, ops)
	gl.atReplay = mapped.atReplay
	var alloc *ranks.Allocator
	var managedSet map[string]bool // tensors an alloc op allocates, made at the first free or record_stream
	// A free that waits for record_stream events comes back when a malloc
	// finds them done, which only the run knows: such a rank's allocator
	// runs at run time (ranks/dynalloc.go), its calls carried by the host
	// ops they precede.
	rt := !reference && cfg.Mode != "graph" && cfg.Bug.Caching != "off" && copies == 1 && s.deferredFree(p, ops)
	var rtm runtimeMem
	if rt {
		managedSet = s.Managed()
		defer rtm.flush(prog)
		if r == 0 {
			b.Notes = append(b.Notes, "rank 0 allocator: runs as the host reaches each call: a block freed after record_stream is handed out again once a malloc finds the recorded streams' events complete (process_events)")
		}
	}
	for _, op := range ops {
		if (op.Kind == OpAlloc || op.Kind == OpEmptyCache) && alloc == nil && !rt {
			alloc = w.NewAllocator(r, cfg.Bug.Caching != "off")
		}
	}
	if alloc != nil && cfg.Mode == "graph" && !reference && !p.HasCaptures() {
		// Allocations during capture come from the graph's private pool.
		alloc.BeginCapture()
		defer alloc.EndCapture()
	}
	if alloc != nil {
		defer func() {
			if len(alloc.Findings) > 0 {
				b.Findings = append(b.Findings, alloc.Findings[0]) // the op that breaks the capture
			}
		}()
	}
	if alloc != nil && r == 0 && !reference {
		defer func() {
			for _, l := range alloc.Log {
				if len(b.Notes) < 8 && strings.Contains(l, "reuses") {
					b.Notes = append(b.Notes, "rank 0 allocator: "+l)
				}
			}
		}()
	}
	for _, op := range ops {
		st, err := index(p.Streams, op.Stream, "stream")
		if err != nil {
			return nil, nil, err
		}
		if reference {
			st = 0
		}
		if op.Kind.Comm() {
			op.Name = issues.name(op.Kind, op.Name)
		}
		if rt {
			rtm.attach(prog)
			if ok, err := rtm.lower(w, s, cfg, p, prog, r, &op, st, bufs, managedSet); ok {
				if err != nil {
					return nil, nil, fmt.Errorf("rank %d: %w", r, err)
				}
				continue
			}
		}
		if ok, err := gl.step(&op, prog, alloc, st); ok {
			if err != nil {
				return nil, nil, fmt.Errorf("rank %d: %w", r, err)
			}
			continue
		}
		mapped.capturing = gl.open != ""
		switch op.Kind {
		case OpFill:
			x, err := buf(op.Name)
			if err != nil {
				return nil, nil, err
			}
			dur, err := s.OpTime(&op, cfg, hw, hw.KStart+ranks.Bytes(x.Bytes, hw.HBM))
			if err != nil {
				return nil, nil, err
			}
			written[op.Name] = true
			fills++
			prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: st, Kernel: fillKernel(w, r, &op, x, fills, dur), Host: sim.Time(op.HostNs)})
		case OpAdvance:
			hs[op.Name].Advance(op.By)
		case OpIncrement:
			x, err := buf(op.Name)
			if err != nil {
				return nil, nil, err
			}
			dur, err := s.OpTime(&op, cfg, hw, hw.KStart+ranks.Bytes(2*x.Bytes, hw.HBM))
			if err != nil {
				return nil, nil, err
			}
			written[op.Name] = true
			k := incrementKernel(&op, x, counterOne(w, bufs, r, x, op.By), dur)
			prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: st, Kernel: k, Host: sim.Time(op.HostNs)})
		case OpSync:
			sst := -1
			if op.Name != SyncDevice {
				if sst, err = index(p.Streams, op.Name, "stream"); err != nil {
					return nil, nil, err
				}
				if reference {
					sst = 0
				}
			}
			prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Sync, Stream: sst, Host: sim.Time(op.HostNs)})
			if sst < 0 && alloc != nil {
				// Every deferred free's recorded uses are done.
				alloc.Synchronize()
			}
		case OpEmptyCache:
			// cudaFree synchronizes the device; release_cached_blocks
			// first waits for the deferred frees' events.
			prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Sync, Stream: -1, Host: sim.Time(op.HostNs)})
			alloc.EmptyCache()
		case OpAlloc:
			t := s.Tensor(op.Name)
			if t == nil {
				return nil, nil, fmt.Errorf("rank %d: undefined tensor %q", r, op.Name)
			}
			x, err := alloc.Malloc(t.Name, p.Streams[st], t.Bytes, t.ChunksIn(cfg))
			if err != nil {
				return nil, nil, err
			}
			x.Output = t.Output
			if vals := op.Values; len(vals) > 0 {
				w.Init(x, func(c int) uint64 { return vals[c%len(vals)] % ranks.Modulus })
			}
			bufs[t.Name] = x
		case OpFree, OpRecordStream:
			if managedSet == nil {
				managedSet = s.Managed()
			}
			if op.Kind == OpRecordStream && !managedSet[op.Name] {
				continue // a tensor that lives for the whole program: nothing to defer
			}
			x, err := buf(op.Name)
			if err != nil {
				return nil, nil, err
			}
			if op.Kind == OpFree {
				err = alloc.Free(x)
				delete(bufs, op.Name)
			} else {
				err = alloc.RecordStream(x, p.Streams[st])
			}
			if err != nil {
				return nil, nil, err
			}
		case OpRecord, OpWait:
			ev, err := index(p.Events, op.Name, "event")
			if err != nil {
				return nil, nil, err
			}
			kind := ranks.Record
			if op.Kind == OpWait {
				kind = ranks.Wait
			}
			prog.Ops = append(prog.Ops, ranks.HostOp{Kind: kind, Stream: st, Event: ev, Host: sim.Time(op.HostNs)})
		case OpRegister:
			mapped.mapped[op.Name] = true // the host opened its peers' handles
		case OpPut, OpAwait, OpReset:
			k, err := s.lowerFlagOp(cfg, hw, &op, r, bufs, symms, mapped)
			if err != nil {
				return nil, nil, err
			}
			prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: st, Kernel: k, Host: sim.Time(op.HostNs)})
		case OpKernel:
			if s.KernelRefs(&op) {
				k, err := s.lowerRefKernel(cfg, hw, &op, r, bufs, symms, mapped, written)
				if err != nil {
					return nil, nil, err
				}
				prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: st, Kernel: k, Host: sim.Time(op.HostNs)})
				continue
			}
			k := &ranks.KernelSpec{Name: op.Name, Kind: op.KernelKind(), Blocks: op.Blocks, Spins: op.Spin}
			var srcs []ranks.Src
			var srcLen []int // a ranged read's chunks (0: the whole tensor)
			var moved int64
			for i, entry := range op.Reads {
				name, lo, hi, ranged, _ := format.SplitChunkRange(entry)
				in, err := buf(name)
				if err != nil {
					return nil, nil, err
				}
				coef := int64(1)
				if i == 0 && !op.Sum {
					switch {
					case len(op.Weights) > 0:
						if r >= len(op.Weights) {
							return nil, nil, fmt.Errorf("%w: kernel %q: weight lists %d ranks; rank %d has none", ErrBadKnob, op.Name, len(op.Weights), r)
						}
						coef = op.Weights[r]
					case op.Whole:
						coef = s.WholeWeight(op.Name, cfg.TP)
					case op.Weight != 0:
						coef = op.Weight
					default:
						coef = s.KernelWeight(op.Name, r)
					}
					if op.Scale != "" {
						// A host scalar is a launch argument: read now,
						// at issue (eager) or at capture (graph).
						coef *= hs[op.Scale].Arg()
					}
				}
				srcs = append(srcs, ranks.Src{Buf: in, Lo: lo, Coef: coef})
				srcLen = append(srcLen, 0)
				if ranged {
					srcLen[len(srcLen)-1] = hi - lo
				}
				moved += spanBytes(in, lo, hi, ranged)
			}
			type span struct{ lo, n int }
			var outs []*ranks.Buffer
			var spans []span
			for _, entry := range op.Writes {
				name, lo, hi, ranged, _ := format.SplitChunkRange(entry)
				out, err := buf(name)
				if err != nil {
					return nil, nil, err
				}
				outs = append(outs, out)
				sp := span{0, out.Chunks()}
				if ranged {
					sp = span{lo, hi - lo}
				}
				spans = append(spans, sp)
				moved += spanBytes(out, lo, hi, ranged)
				written[name] = true
			}
			if parts, ok := s.MoECall(&op, cfg, hw); ok && len(outs) == 1 {
				// the routed experts' parts, each with its SMs (format/spec_expr.go)
				k := streamsched.MoEKernel(op.Name, outs[0], srcs, parts)
				k.Blocks, k.Spins = op.Blocks, op.Spin
				prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: st, Kernel: k, Host: sim.Time(op.HostNs)})
				continue
			}
			total, err := s.OpTime(&op, cfg, hw, hw.KStart+ranks.Bytes(moved, hw.HBM))
			if err != nil {
				return nil, nil, err
			}
			for i, out := range outs {
				sp := spans[i]
				short := false
				for _, l := range srcLen {
					short = short || (l > 0 && l < sp.n)
				}
				if !short {
					k.Instrs = append(k.Instrs, ranks.Instr{Op: ranks.OpCompute, Phase: "compute", Dst: out, DstLo: sp.lo, N: sp.n, Srcs: srcs, Fresh: !op.Sum,
						Dur: total / sim.Time(len(outs))})
					continue
				}
				// A read range shorter than the write repeats: chunk c of
				// the write takes chunk c mod len of the range, one chunk
				// at a time.
				for c := 0; c < sp.n; c++ {
					ss := make([]ranks.Src, len(srcs))
					for j, src := range srcs {
						ss[j] = src
						if srcLen[j] > 0 {
							ss[j].Lo = src.Lo + c%srcLen[j]
						} else {
							ss[j].Lo = src.Lo + c
						}
					}
					k.Instrs = append(k.Instrs, ranks.Instr{Op: ranks.OpCompute, Phase: "compute", Dst: out, DstLo: sp.lo + c, N: 1, Srcs: ss, Fresh: !op.Sum,
						Dur: total / sim.Time(len(outs)*sp.n)})
				}
			}
			k.Loads = loads(s.OpLoad(&op, cfg, hw, moved), len(k.Instrs))
			prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: st, Kernel: k, Host: sim.Time(op.HostNs)})
		case OpAllReduce, OpAllGather, OpReduceScatter, OpAllToAll, OpBroadcast:
			c, ok := comms[op.Comm]
			if !ok {
				return nil, nil, fmt.Errorf("%s %q: undefined communicator %q", op.Kind, op.Name, op.Comm)
			}
			in, err := buf(op.In)
			if err != nil {
				return nil, nil, err
			}
			out, err := buf(op.Out)
			if err != nil {
				return nil, nil, err
			}
			got := format.CallStrategy(cfg, hw, &op, c.Size(), in.Bytes, out.Bytes)
			var ks []*ranks.KernelSpec
			if a := symms[op.Symmetric]; a != nil {
				got = "symm-oneshot"
				var k *ranks.KernelSpec
				k, err = a.OneShot(r, collectives.Group{Name: c.Name, Ranks: c.Group}, op.Name, max(op.Blocks, 1), op.Offset, in, out)
				ks = []*ranks.KernelSpec{k}
			} else {
				// One kernel, or a split MULTIMEM all-reduce's copy-in,
				// multimem_all_reduce_ and copy-out (collectives/multimem.go).
				ks, err = c.Launches(r, collectives.Call{Name: op.Name, Op: format.CollOp(op.Kind), Strategy: got, In: in, Out: out, Root: op.Root, Blocks: op.Blocks})
			}
			if err != nil {
				return nil, nil, err
			}
			if !noted[op.Name] && !reference {
				noted[op.Name] = true
				b.Notes = append(b.Notes, fmt.Sprintf("%s → %s", op.Name, got))
			}
			written[op.Out] = true
			for j, k := range ks {
				h := ranks.HostOp{Kind: ranks.Launch, Stream: st, Kernel: k}
				if j == 0 { // the recorded gap is before the call's first launch
					h.Host = sim.Time(op.HostNs)
				}
				prog.Ops = append(prog.Ops, h)
			}
		case OpSend, OpRecv:
			c, ok := comms[op.Comm]
			if !ok {
				return nil, nil, fmt.Errorf("%s %q: undefined communicator %q", op.Kind, op.Name, op.Comm)
			}
			i := slices.Index(c.Group, r)
			peer := format.PeerIndex(op.Peer, i, c.Size())
			var k *ranks.KernelSpec
			if op.Kind == OpSend {
				in, err := buf(op.In)
				if err != nil {
					return nil, nil, err
				}
				k, err = c.Send(r, peer, op.Name, in)
				if err != nil {
					return nil, nil, err
				}
			} else {
				out, err := buf(op.Out)
				if err != nil {
					return nil, nil, err
				}
				k, err = c.Recv(r, peer, op.Name, out)
				if err != nil {
					return nil, nil, err
				}
				written[op.Out] = true
			}
			prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: st, Kernel: k, Host: sim.Time(op.HostNs)})
		default:
			return nil, nil, fmt.Errorf("rank %d: op with no kind", r)
		}
	}
	return prog, written, nil
}

// loads is l for each of n micro-ops that split a kernel's time evenly.
func loads(l ranks.Load, n int) []ranks.Load {
	out := make([]ranks.Load, n)
	for i := range out {
		out[i] = ranks.Load{SMs: l.SMs, Bytes: l.Bytes / int64(max(n, 1))}
	}
	return out
}

// spanBytes is the bytes of chunks [lo, hi) of b (all of it unless ranged).
func spanBytes(b *ranks.Buffer, lo, hi int, ranged bool) int64 {
	if !ranged || b.Chunks() == 0 {
		return b.Bytes
	}
	return b.Bytes * int64(hi-lo) / int64(b.Chunks())
}
