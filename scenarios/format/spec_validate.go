package format

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios/forms"
	"github.com/collsim/collsim/scenarios/knobs"
)

// Validate checks everything that ties the parts of a spec together before
// anything runs: which form it uses, that names are unique, that every
// stream, event, tensor and communicator an op names is declared, that no
// wait comes before a record of its event, that a collective's communicator
// includes every rank that calls it, that every rank has exactly one
// program, and that each variant's knobs keep all of that true. It reports
// every problem it finds, each with its file position, as an [ErrorList].
func (s *Spec) Validate() error {
	e := &errs{file: s.File}
	if s.pos == nil {
		s.pos = posMap{}
	}
	s.validateForm(e)
	if slices.Contains(s.References, "eager") && (s.Graph == nil || s.Graph.Builder == "") {
		flagged := false
		for _, t := range s.Tensors {
			flagged = flagged || t.Output
		}
		if !flagged {
			e.add(s.pos.at("references.eager"), "references: eager compares the outputs of two builds; mark the tensors to compare with output: true")
		}
	}
	s.validateKnobs(e)
	tensors := s.validateTensors(e)
	comms := s.validateComms(e)
	if s.Graph != nil && s.Graph.Builder == "" {
		s.validateGraph(e, tensors, comms)
	}
	s.validateRefs(e, tensors) // spec_refs.go
	managed := s.Managed()
	s.validateHost(e, managed)
	for name := range managed {
		if t := tensors[name]; t != nil && t.HasInit() {
			key := "init"
			if len(t.InitPerRank) > 0 {
				key = "init_per_rank"
			}
			e.add(t.pos.at(key), "tensor %q is allocated by an alloc op, so it starts with whatever its block last held; remove %s and write it with a kernel", name, key)
		}
	}
	for i := range s.Programs {
		s.validateProgram(e, &s.Programs[i], tensors, comms)
		s.validateGraphs(e, &s.Programs[i])
	}
	s.patched, s.weights = nil, nil
	for i := range s.patches {
		if len(s.patches[i]) > 0 && s.Graph != nil {
			e.add(s.variantPos(i).at("set.patch"), "variant %q: a patch changes programs, and this file has a graph", s.Variants[i].Name)
		}
	}
	s.validateResizes(e)
	if s.Graph == nil {
		s.patchAll(func(p Pos, msg string) { e.add(p, "%s", msg) })
		for _, name := range sortedKeys(s.patched) {
			for i := range s.patched[name] {
				s.validateProgram(e, &s.patched[name][i], tensors, comms)
			}
		}
	}
	s.KernelWeights() // made once the patches are, before any build
	baseMsgs := map[string]bool{}
	s.validateConfig(s.Base, func(p Pos, msg string) {
		baseMsgs[msg] = true
		e.add(p, "%s", msg)
	})
	seen := map[string]bool{}
	for i, v := range s.Variants {
		vp := s.variantPos(i)
		if v.Name != "" && seen[v.Name] {
			e.add(vp.at("name"), "variant %q defined twice", v.Name)
		}
		seen[v.Name] = true
		cfg, err := s.VariantConfig(v)
		if err != nil {
			e.add(vp.at("set"), "variant %q: %s", v.Name, knobMsg(err))
			continue
		}
		if len(v.Sets) == 0 {
			continue
		}
		at := vp.at("set")
		s.validateConfig(cfg, func(_ Pos, msg string) {
			if !baseMsgs[msg] {
				e.add(at, "variant %q: with %s, %s", v.Name, strings.Join(v.Sets, " "), msg)
			}
		})
	}
	return e.err()
}

// VariantConfig is the base config with v's overrides applied.
func (s *Spec) VariantConfig(v Variant) (Config, error) {
	c := s.Base
	err := c.ApplySets(v.Sets)
	return c, err
}

func (s *Spec) variantPos(i int) posMap {
	if i < len(s.varPos) && s.varPos[i] != nil {
		return s.varPos[i]
	}
	return s.pos
}

func (s *Spec) validateForm(e *errs) {
	switch {
	case s.Graph == nil && len(s.Programs) == 0:
		e.add(s.pos.at(""), "scenario %q has no work: expected a graph (builder: moe, or ops) or programs", s.Name)
	case s.Graph != nil && len(s.Programs) > 0:
		e.add(s.pos.at("programs"), "expected either graph or programs, not both")
	case s.Graph != nil && s.Graph.Builder != "":
		for _, k := range []string{"communicators", "tensors"} {
			if _, ok := s.pos[k]; ok {
				e.add(s.pos.at(k), "%s: graph builder %s makes its own tensors and communicators; remove this key", k, s.Graph.Builder)
			}
		}
	case s.Graph != nil && len(s.Graph.Ops) == 0:
		e.add(s.Graph.pos.at("ops"), "graph ops: expected at least one op")
	}
}

func (s *Spec) validateTensors(e *errs) map[string]*TensorSpec {
	out := map[string]*TensorSpec{}
	for i := range s.Tensors {
		t := &s.Tensors[i]
		if t.Name == "" {
			continue
		}
		if _, dup := out[t.Name]; dup {
			e.add(t.pos.at("name"), "tensor %q defined twice", t.Name)
			continue
		}
		out[t.Name] = t
	}
	return out
}

func (s *Spec) validateComms(e *errs) map[string]*CommSpec {
	out := map[string]*CommSpec{}
	for i := range s.Comms {
		c := &s.Comms[i]
		if c.Name == "" {
			continue
		}
		if _, dup := out[c.Name]; dup {
			e.add(c.pos.at("name"), "communicator %q defined twice", c.Name)
			continue
		}
		out[c.Name] = c
	}
	return out
}

func (s *Spec) validateGraph(e *errs, tensors map[string]*TensorSpec, comms map[string]*CommSpec) {
	produced := map[string]string{}
	names := map[string]bool{}
	for _, op := range s.Graph.Ops {
		produced[op.Output] = ""
	}
	// A tensor produced by an op is not a graph input; walk in order.
	have := map[string]bool{}
	for n := range tensors {
		if _, p := produced[n]; !p {
			have[n] = true
		}
	}
	done := map[string]string{}
	for _, op := range s.Graph.Ops {
		if op.Name != "" && names[op.Name] {
			e.add(op.pos.at("name"), "graph op %q defined twice", op.Name)
		}
		names[op.Name] = true
		for i, in := range op.Inputs {
			at := op.pos.at(item("inputs", i))
			switch {
			case tensors[in] == nil:
				e.add(at, "graph op %q reads undefined tensor %q (declare it under tensors)", op.Name, in)
			case !have[in]:
				e.add(at, "graph op %q reads tensor %q before the op that produces it; ops are listed in program order", op.Name, in)
			}
		}
		if op.Output != "" {
			switch {
			case tensors[op.Output] == nil:
				e.add(op.pos.at("output"), "graph op %q writes undefined tensor %q (declare it under tensors)", op.Name, op.Output)
			case done[op.Output] != "":
				e.add(op.pos.at("output"), "graph op %q writes tensor %q, already produced by %q; each tensor has one producer", op.Name, op.Output, done[op.Output])
			}
			done[op.Output] = op.Name
			have[op.Output] = true
		}
		switch op.Kind {
		case "allreduce":
			if len(op.Inputs) != 1 {
				e.add(op.pos.at("inputs"), "graph op %q: an allreduce has exactly one input, got %d", op.Name, len(op.Inputs))
			}
			if op.Comm == "" {
				e.add(op.pos.at(""), "graph op %q: an allreduce needs comm", op.Name)
			} else if comms[op.Comm] == nil {
				e.add(op.pos.at("comm"), "graph op %q uses undefined communicator %q", op.Name, op.Comm)
			}
		case "gemm", "moe", "add":
			if len(op.Inputs) == 0 {
				e.add(op.pos.at("inputs"), "graph op %q: expected at least one input", op.Name)
			}
			if op.Comm != "" {
				e.add(op.pos.at("comm"), "graph op %q: comm applies to allreduce ops only", op.Name)
			}
		}
	}
}

func (s *Spec) validateProgram(e *errs, p *ProgramSpec, tensors map[string]*TensorSpec, comms map[string]*CommSpec) {
	streams := map[string]bool{}
	for _, st := range p.Streams {
		if streams[st] {
			e.add(p.pos.at("streams"), "stream %q listed twice", st)
		}
		streams[st] = true
	}
	events := map[string]bool{}
	for _, ev := range p.Events {
		if events[ev] {
			e.add(p.pos.at("events"), "event %q listed twice", ev)
		}
		events[ev] = true
	}
	tensor := func(op *OpSpec, field, name, role string) {
		if i := strings.IndexByte(field, '#'); i >= 0 {
			role = field[:i]
		}
		if name != "" && tensors[name] == nil {
			e.add(op.pos.at(field), "%s %q %s undefined tensor %q (declare it under tensors)", op.Kind, op.Name, role, name)
		}
	}
	flat := p.Flat()
	for i := range flat {
		op := &flat[i]
		if op.Kind == "" {
			continue
		}
		if op.Stream != "" && !streams[op.Stream] {
			e.add(op.pos.at("stream"), "%s %q on undefined stream %q; this program's streams: %s", op.Kind, op.Name, op.Stream, strings.Join(p.Streams, ", "))
		}
		switch op.Kind {
		case OpPut, OpAwait, OpReset, OpRegister:
			s.validateFlagOp(e, op, tensors)
		case OpKernel:
			s.validateKernelRefs(e, op, tensors)
			for i, n := range slices.Concat(op.Reads, op.Writes) {
				field, role := item("reads", i), "reads"
				if i >= len(op.Reads) {
					field, role = item("writes", i-len(op.Reads)), "writes"
				}
				if _, ok := s.ParseMemRef(n); ok {
					continue
				}
				name, _, _, ranged, ok := SplitChunkRange(n)
				switch {
				case !ok:
					e.add(op.pos.at(field), "kernel %q %s %q: a chunk range is [LO:HI] with 0 <= LO < HI <= %d", op.Name, role, n, MaxTensorChunks)
				case ranged && s.KernelRefs(op):
					e.add(op.pos.at(field), "kernel %q %s %q: chunk ranges are for kernels over tensors; this one names a symmetric allocation", op.Name, role, n)
				}
				tensor(op, field, name, role)
			}
		case OpAllReduce, OpAllGather, OpReduceScatter, OpAllToAll, OpBroadcast, OpSend, OpRecv:
			if op.Kind != OpRecv {
				tensor(op, "in", op.In, "reads")
			}
			if op.Kind != OpSend {
				tensor(op, "out", op.Out, "writes")
			}
			if op.Comm != "" && comms[op.Comm] == nil {
				e.add(op.pos.at("comm"), "%s %q uses undefined communicator %q", op.Kind, op.Name, op.Comm)
			}
			if op.Symmetric != "" && s.Symmetric(op.Symmetric) == nil {
				e.add(op.pos.at("symmetric"), "%s %q uses undefined symmetric allocation %q (declare it under symmetric)", op.Kind, op.Name, op.Symmetric)
			}
		case OpSync:
			if op.Name != SyncDevice && !slices.Contains(p.Streams, op.Name) {
				e.add(op.pos.at("name"), "sync of undefined stream %q; expected one of this program's streams, or %q", op.Name, SyncDevice)
			}
		case OpRecord:
			if !events[op.Name] {
				e.add(op.pos.at("name"), "record of undefined event %q; declare it under this program's events", op.Name)
			}
		case OpWait:
			if !events[op.Name] {
				e.add(op.pos.at("name"), "wait on undefined event %q; declare it under this program's events", op.Name)
			}
		}
	}
}

// validateConfig checks what depends on the knobs: rank ranges, every rank
// having one program, collectives' communicators including their callers,
// limits.
func (s *Spec) validateConfig(cfg Config, report func(Pos, string)) {
	if !s.validateExprs(cfg, report) {
		return
	}
	s, _ = s.Sized(cfg)
	n := cfg.TP
	if n > MaxRanks {
		report(s.pos.at("ranks"), fmt.Sprintf("ranks: %d; at most %d", n, MaxRanks))
		return
	}
	if cfg.Replays > MaxReplays {
		report(s.pos.at("replays"), fmt.Sprintf("replays: %d; at most %d", cfg.Replays, MaxReplays))
	}
	if cfg.Chunks > MaxChunks {
		report(s.pos.at("chunks"), fmt.Sprintf("chunks: %d; at most %d", cfg.Chunks, MaxChunks))
	}
	progs, _ := s.ProgramsFor(cfg)
	for _, p := range progs {
		for _, op := range p.Flat() {
			if len(op.Weights) > 0 && len(op.Weights) < n {
				report(op.pos.at("weight"), fmt.Sprintf("kernel %q: weight lists %d ranks; the world has %d (one weight per rank)", op.Name, len(op.Weights), n))
			}
		}
	}
	replays := 1
	if cfg.Mode == "graph" {
		replays = max(cfg.Replays, 1)
	}
	if s.Graph != nil && s.Graph.Builder != "" {
		if f, ok := forms.Lookup(s.Graph.Builder); ok {
			if tasks := f.Tasks(cfg, replays); tasks > MaxTasks {
				report(s.pos.at("graph"), fmt.Sprintf("about %d ops to run (ranks × layers × ops per layer × replays); at most %d", tasks, MaxTasks))
			}
		}
		return
	}
	if s.Graph != nil {
		if tasks := cfg.TP * len(s.Graph.Ops) * 3 * replays; tasks > MaxTasks {
			report(s.pos.at("graph"), fmt.Sprintf("about %d ops to run (ranks × ops × replays, with stream markers); at most %d", tasks, MaxTasks))
		}
	}
	for _, sy := range s.Symm {
		if _, err := sy.Ranks.Resolve(n); err != nil {
			report(sy.pos.at("ranks"), fmt.Sprintf("symmetric %q: %v", sy.Name, err))
		}
	}
	commRanks := map[string][]int{}
	for _, c := range s.Comms {
		rs, err := c.Ranks.Resolve(n)
		if err != nil {
			report(c.pos.at("ranks"), fmt.Sprintf("communicator %q: %v", c.Name, err))
			continue
		}
		commRanks[c.Name] = rs
	}
	for _, t := range s.Tensors {
		if s.Graph != nil && t.Chunks > 0 {
			report(t.pos.at("chunks"), fmt.Sprintf("tensor %q: chunks applies to tensors of programs; an op graph's tensors use the chunks knob", t.Name))
		}
		if len(t.InitPerRank) > n {
			report(t.pos.at("init_per_rank"), fmt.Sprintf("tensor %q: init_per_rank has %d rows but the world has %d ranks", t.Name, len(t.InitPerRank), n))
		}
	}
	progs, err := s.ProgramsFor(cfg)
	if err != nil {
		report(s.pos.at("variants"), knobMsg(err))
		return
	}
	if len(progs) == 0 {
		return
	}
	owner := make([]int, n)
	for i := range owner {
		owner[i] = -1
	}
	tasks := 0
	managed := s.Managed()
	for pi, p := range progs {
		for _, op := range p.Ops {
			if r := op.Repeat; r != nil && r.CountKnob != "" {
				if _, err := strconv.Atoi(knobs.Get(&cfg, r.CountKnob)); err != nil {
					report(op.pos.at("repeat"), fmt.Sprintf("repeat count: knob %s is %q, not an integer", r.CountKnob, knobs.Get(&cfg, r.CountKnob)))
				}
			}
		}
		if k := p.ExpandedLen(cfg) * replays; k > MaxTasks {
			report(p.pos.at("ops"), fmt.Sprintf("%d ops to run per rank (repeated blocks expanded, over replays); at most %d", k, MaxTasks))
			// Its ranks have this program, too long as it is: the
			// error is its length, not a rank without a program.
			if rs, err := p.Ranks.Resolve(n); err == nil {
				for _, r := range rs {
					if owner[r] < 0 {
						owner[r] = pi
					}
				}
			}
			continue
		}
		issue, _ := s.Passes(cfg, false)
		ops := GraphWork(RepeatOps(p.OpsFor(cfg), issue), cfg)
		// Names and event order as one step issues them, a graph once.
		once := cfg
		once.Mode = "graph"
		checkOrder(&p, GraphWork(p.OpsFor(cfg), once), report)
		s.validateLifetime(ops, managed, report)
		rs, err := p.Ranks.Resolve(n)
		if err != nil {
			report(p.pos.at("ranks"), fmt.Sprintf("program: %v", err))
			continue
		}
		tasks += len(rs) * len(ops) * replays
		for i := range ops {
			s.checkKernelChunks(cfg, &ops[i], report)
		}
		for _, r := range rs {
			if owner[r] >= 0 {
				report(p.pos.at("ranks"), fmt.Sprintf("rank %d has two programs (this one and the one at line %d)", r, progs[owner[r]].pos.at("").Line))
				continue
			}
			owner[r] = pi
			for i := range ops {
				s.checkCall(cfg, &ops[i], r, commRanks, report)
				s.checkFlags(cfg, &ops[i], r, report)
			}
		}
	}
	if tasks > MaxTasks {
		report(s.pos.at("programs"), fmt.Sprintf("%d ops to run (over all ranks and replays); at most %d", tasks, MaxTasks))
	}
	for r, o := range owner {
		if o < 0 {
			report(s.pos.at("programs"), fmt.Sprintf("rank %d has no program; give it one (ops: [] leaves it idle)", r))
		}
	}
	if cfg.Mode == "graph" {
		for i := range progs {
			if progs[i].ExpandedLen(cfg)*replays > MaxTasks {
				continue // said above; expanding it is what the limit prevents
			}
			if progs[i].HasCaptures() {
				s.checkCaptures(cfg, &progs[i], commRanks, report)
			} else {
				s.checkCapture(cfg, &progs[i], commRanks, report)
			}
		}
	}
}

// checkKernelChunks checks that a kernel can compute its writes chunk by
// chunk: every tensor it reads has at least the chunks of every tensor it
// writes (a longer read contributes its first chunks). A shorter one has
// no chunk to give: it was accepted, then failed the run.
func (s *Spec) checkKernelChunks(cfg Config, op *OpSpec, report func(Pos, string)) {
	if op.Kind != OpKernel || s.KernelRefs(op) {
		return
	}
	for _, n := range slices.Concat(op.Reads, op.Writes) {
		if t := s.Tensor(baseName(n)); t != nil {
			if _, hi := KernelSpan(n, t, cfg); hi > t.ChunksIn(cfg) {
				report(op.pos.at("name"), fmt.Sprintf("kernel %q names %q: %q has %d chunks", op.Name, n, t.Name, t.ChunksIn(cfg)))
				return
			}
		}
	}
	for _, wn := range op.Writes {
		wt := s.Tensor(baseName(wn))
		if wt == nil {
			continue
		}
		wlo, whi := KernelSpan(wn, wt, cfg)
		for _, rn := range op.Reads {
			rt := s.Tensor(baseName(rn))
			if rt == nil {
				continue
			}
			if rlo, rhi := KernelSpan(rn, rt, cfg); rhi-rlo >= whi-wlo || rn != rt.Name {
				continue // a read range shorter than the write repeats
			}
			if wn != wt.Name {
				report(op.pos.at("reads"), fmt.Sprintf("kernel %q reads %q (%d chunks) and writes %q: a kernel computes chunk by chunk, so every whole tensor it reads needs at least the chunks it writes", op.Name, rn, rt.ChunksIn(cfg), wn))
				return
			}
			report(op.pos.at("reads"), fmt.Sprintf("kernel %q reads %q (%d chunks) and writes %q (%d chunks): a kernel computes chunk by chunk, so every tensor it reads needs at least the chunks of those it writes; give %q chunks: %d, or write a tensor of %d",
				op.Name, rn, rt.ChunksIn(cfg), wn, wt.ChunksIn(cfg), rn, wt.ChunksIn(cfg), rt.ChunksIn(cfg)))
			return
		}
	}
}

// checkCapture applies CUDA's stream-capture rules to a program, as graph
// mode will when it captures it (ranks.CheckCapture decides; this says it
// at the op's line): a stream takes part only after it waits on an event
// recorded in the capture, and every op must be joined back into the
// origin (first) stream by the end (cudaErrorStreamCaptureUnjoined).
func (s *Spec) checkCapture(cfg Config, p *ProgramSpec, commRanks map[string][]int, report func(Pos, string)) {
	ops := p.OpsFor(cfg)
	if len(p.Streams) == 0 || len(ops) == 0 {
		return
	}
	hw, err := cfg.Profile()
	if err != nil {
		return
	}
	index := func(names []string, name string) int {
		for i, x := range names {
			if x == name {
				return i
			}
		}
		return -1
	}
	stream := func(name string) int {
		if name == "" {
			return 0
		}
		return index(p.Streams, name)
	}
	// The program as the capture sees it: kinds, streams, events, and the
	// NCCL all-reduces' communicator order. An op the rest of validation
	// reports (an unknown stream or event) ends the check there.
	prog := &ranks.Program{Streams: p.Streams, Events: p.Events}
	var at []int // at[i] is the index in p.Ops of prog.Ops[i]
	for oi, op := range ops {
		if op.Kind.memory() || op.Kind == OpRegister || op.Kind == OpAdvance {
			continue // the allocator, registration and host scalars act on the host: nothing is captured
		}
		at = append(at, oi)
		h := ranks.HostOp{Stream: stream(op.Stream), Event: -1}
		switch op.Kind {
		case OpSync, OpEmptyCache:
			// What it synchronizes does not matter: no sync can be captured.
			h.Kind = ranks.Sync
			if h.Stream >= 0 {
				h.Stream = -1
			}
		case OpRecord, OpWait:
			h.Kind, h.Event = ranks.Record, index(p.Events, op.Name)
			if op.Kind == OpWait {
				h.Kind = ranks.Wait
			}
		case OpKernel, OpIncrement, OpAllReduce, OpAllGather, OpReduceScatter, OpAllToAll, OpBroadcast, OpSend, OpRecv, OpPut, OpAwait, OpReset:
			h.Kind, h.Kernel = ranks.Launch, &ranks.KernelSpec{Name: op.Name}
			group := commRanks[op.Comm]
			tin, tout := s.Tensor(op.In), s.Tensor(op.Out)
			switch {
			case len(group) == 0:
			case op.Kind == OpSend || op.Kind == OpRecv:
				h.Kernel.OrderKey = ncclOrderKey(cfg, op.Comm)
			case op.Kind.Collective() && tin != nil && tout != nil && op.Symmetric == "":
				st := CallStrategy(cfg, hw, &op, len(group), tin.Bytes, tout.Bytes)
				if st == collectives.NCCL || st == collectives.NCCLTree {
					h.Kernel.OrderKey = ncclOrderKey(cfg, op.Comm)
				}
			}
		}
		if h.Stream < 0 && h.Kind != ranks.Sync || op.Kind == "" {
			h.Stream = -2 // reported elsewhere: the check ends here
		}
		prog.Ops = append(prog.Ops, h)
	}
	v := ranks.CheckCapture(prog)
	if v == nil {
		return
	}
	op := ops[at[v.Op]]
	st := p.Streams[max(stream(op.Stream), 0)]
	switch v.Rule {
	case ranks.CaptureSync:
		report(op.pos.at("name"), fmt.Sprintf("in graph mode, %s %q: a host synchronize cannot be captured into a CUDA graph (cudaErrorStreamCaptureUnsupported); use eager mode", op.Kind, op.Name))
	case ranks.CaptureRecordOutside:
		report(op.pos.at("stream"), fmt.Sprintf("in graph mode, record of %q on stream %q, which is not part of the capture yet: a stream joins the capture by first waiting on an event recorded on a captured stream", op.Name, st))
	case ranks.CaptureLaunchOutside:
		report(op.pos.at("stream"), fmt.Sprintf("in graph mode, %s %q runs on stream %q, which never joined the capture: wait on an event recorded on %q first", op.Kind, op.Name, st, p.Streams[0]))
	case ranks.CaptureUnjoined:
		report(op.pos.at("name"), fmt.Sprintf("in graph mode, %s %q on stream %q is never joined back into the origin stream %q: record an event after it and wait on it from %q (CUDA would fail the capture with cudaErrorStreamCaptureUnjoined)",
			op.Kind, op.Name, st, p.Streams[0], p.Streams[0]))
	}
}

// checkCall checks what a collective, send or receive needs on rank r under
// cfg: its communicator includes r; its tensors' chunks fit the op's shape
// for the group's size (collectives.Comm.Collective's rules); the strategy
// it resolves to implements the op; blocks only for a symmetric-memory
// kernel; a broadcast's root and a transfer's peer are other members.
func (s *Spec) checkCall(cfg Config, op *OpSpec, r int, commRanks map[string][]int, report func(Pos, string)) {
	if !op.Kind.Comm() {
		return
	}
	group, ok := commRanks[op.Comm]
	if !ok {
		return
	}
	i := slices.Index(group, r)
	if i < 0 {
		report(op.pos.at("comm"), fmt.Sprintf("%s %q on rank %d uses communicator %q, which does not include rank %d (its ranks: %v)", op.Kind, op.Name, r, op.Comm, r, group))
		return
	}
	n := len(group)
	if op.Kind == OpSend || op.Kind == OpRecv {
		if op.Peer == "" {
			return
		}
		if p := PeerIndex(op.Peer, i, n); p < 0 || p >= n || p == i {
			report(op.pos.at("peer"), fmt.Sprintf("%s %q on rank %d: peer %s is communicator index %d; expected the index of another of %q's %d ranks %v", op.Kind, op.Name, r, op.Peer, p, op.Comm, n, group))
		}
		return
	}
	tin, tout := s.Tensor(op.In), s.Tensor(op.Out)
	if tin == nil || tout == nil {
		return
	}
	ci, co := tin.ChunksIn(cfg), tout.ChunksIn(cfg)
	if op.Symmetric != "" {
		if ci != co {
			report(op.pos.at("out"), fmt.Sprintf("%s %q: in %q has %d chunks, out %q %d; expected equal", op.Kind, op.Name, op.In, ci, op.Out, co))
		}
		s.checkSymmCall(cfg, op, group, report)
		return
	}
	switch op.Kind {
	case OpAllReduce, OpBroadcast:
		if ci != co {
			report(op.pos.at("out"), fmt.Sprintf("%s %q: in %q has %d chunks, out %q %d; expected equal", op.Kind, op.Name, op.In, ci, op.Out, co))
		}
	case OpAllGather:
		if co != n*ci {
			report(op.pos.at("out"), fmt.Sprintf("allgather %q: out %q has %d chunks; expected %d (communicator %q's %d ranks × in's %d): give it chunks: %d", op.Name, op.Out, co, n*ci, op.Comm, n, ci, n*ci))
		}
	case OpReduceScatter:
		if ci != n*co {
			report(op.pos.at("in"), fmt.Sprintf("reducescatter %q: in %q has %d chunks; expected %d (communicator %q's %d ranks × out's %d): give it chunks: %d", op.Name, op.In, ci, n*co, op.Comm, n, co, n*co))
		}
	case OpAllToAll:
		if ci != co || ci%n != 0 {
			report(op.pos.at("out"), fmt.Sprintf("alltoall %q: in %q has %d chunks, out %q %d; expected equal and a multiple of communicator %q's %d ranks", op.Name, op.In, ci, op.Out, co, op.Comm, n))
		}
	}
	if op.Kind == OpBroadcast && op.Root >= n {
		report(op.pos.at("root"), fmt.Sprintf("broadcast %q: root %d; expected an index into communicator %q's %d ranks (0..%d)", op.Name, op.Root, op.Comm, n, n-1))
	}
	hw, err := cfg.Profile()
	if err != nil {
		return
	}
	st := CallStrategy(cfg, hw, op, n, tin.Bytes, tout.Bytes)
	if !collectives.Supports(CollOp(op.Kind), st) {
		report(op.pos.at("strategy"), fmt.Sprintf("%s %q: strategy %s does not implement %s; expected one of %s", op.Kind, op.Name, st, op.Kind, supporting(CollOp(op.Kind))))
	}
	if op.Blocks > 0 && (st == collectives.NCCL || st == collectives.NCCLTree) {
		report(op.pos.at("blocks"), fmt.Sprintf("%s %q: blocks applies to symmetric-memory kernels, and this call resolves to %s; remove blocks or name a symmetric strategy", op.Kind, op.Name, st))
	}
	if op.Kind == OpAllReduce && st == collectives.Multimem && op.Blocks > collectives.MultimemMaxBlocks {
		report(op.pos.at("blocks"), fmt.Sprintf("allreduce %q: %d blocks; this call resolves to multimem, whose multimem_all_reduce_ launches at most %d (expected 1..%d)", op.Name, op.Blocks, collectives.MultimemMaxBlocks, collectives.MultimemMaxBlocks))
	}
}

// supporting lists the strategies that implement op.
func supporting(op collectives.Op) string {
	var out []string
	for _, st := range collectives.Strategies {
		if collectives.Supports(op, st) {
			out = append(out, string(st))
		}
	}
	return strings.Join(out, ", ")
}

// ncclOrderKey is the NCCL ordering domain of communicator comm under cfg,
// as collectives.Comm orders its kernels: its own, or one for every
// communicator with nccl-order implicit.
func ncclOrderKey(cfg Config, comm string) string {
	if cfg.NCCLOrder == "implicit" || cfg.NCCLOrder == "implicit-launch" {
		return "nccl:implicit"
	}
	return "nccl:" + comm
}

// Managed lists the tensors some alloc op allocates: their storage comes
// from the rank's caching allocator while they are live, and they exist
// only between their alloc and their free.
func (s *Spec) Managed() map[string]bool {
	out := map[string]bool{}
	for _, p := range s.AllPrograms() {
		for _, op := range p.Flat() {
			if op.Kind == OpAlloc {
				out[op.Name] = true
			}
		}
	}
	return out
}

// opTensors lists the tensors op uses, with the field each is named in.
func opTensors(op *OpSpec) (names, fields []string) {
	for i, r := range op.Reads {
		names, fields = append(names, baseName(r)), append(fields, item("reads", i))
	}
	for i, w := range op.Writes {
		names, fields = append(names, baseName(w)), append(fields, item("writes", i))
	}
	if op.In != "" {
		names, fields = append(names, op.In), append(fields, "in")
	}
	if op.Out != "" {
		names, fields = append(names, op.Out), append(fields, "out")
	}
	if f := op.Flag; f != nil {
		names, fields = append(names, f.Flag), append(fields, "flag")
		if f.From != "" {
			names, fields = append(names, f.From), append(fields, "from")
		}
		if f.Against != "" {
			names, fields = append(names, f.Against), append(fields, "against")
		}
	}
	if op.Kind == OpIncrement || op.Kind == OpFill {
		names, fields = append(names, op.Name), append(fields, "name")
	}
	return names, fields
}

// validateLifetime walks a program in host order and checks that every
// allocator-managed tensor is used only while it is live: allocated once,
// used after its alloc, freed once, never used after its free (the host
// dropped it), and not an output when it is freed (its block may hold
// another tensor by the end).
func (s *Spec) validateLifetime(ops []OpSpec, managed map[string]bool, report func(Pos, string)) {
	e := reporter(report)
	const (
		unborn = iota
		live
		dead
	)
	state := map[string]int{}
	line := map[string]int{}
	for i := range ops {
		op := &ops[i]
		if op.Kind.memory() && s.Tensor(op.Name) == nil {
			e.add(op.pos.at("name"), "%s of undefined tensor %q (declare it under tensors)", op.Kind, op.Name)
			continue
		}
		switch op.Kind {
		case OpAlloc:
			if state[op.Name] == live {
				e.add(op.pos.at("name"), "alloc of %q, already allocated at line %d and not freed since; free it first", op.Name, line[op.Name])
				continue
			}
			state[op.Name], line[op.Name] = live, op.pos.at("name").Line
		case OpFree, OpRecordStream:
			switch state[op.Name] {
			case unborn:
				if !managed[op.Name] && op.Kind == OpRecordStream {
					// A tensor no alloc op allocates lives for the whole
					// program: it is never freed, so marking a stream's use
					// of it defers nothing (tensor.record_stream on a
					// parameter is legal and does nothing either).
					continue
				}
				if !managed[op.Name] {
					e.add(op.pos.at("name"), "%s of %q, which no alloc op allocates; only tensors from alloc have a lifetime", op.Kind, op.Name)
				} else {
					e.add(op.pos.at("name"), "%s of %q before its alloc", op.Kind, op.Name)
				}
				continue
			case dead:
				e.add(op.pos.at("name"), "%s of %q, already freed at line %d", op.Kind, op.Name, line[op.Name])
				continue
			}
			if op.Kind == OpFree {
				state[op.Name], line[op.Name] = dead, op.pos.at("name").Line
				if t := s.Tensor(op.Name); t.Output {
					e.add(op.pos.at("name"), "free of %q, an output: an output is compared at the end, when its block may hold another tensor; keep it live", op.Name)
				}
			}
		default:
			names, fields := opTensors(op)
			for j, name := range names {
				if !managed[name] {
					continue
				}
				switch state[name] {
				case unborn:
					e.add(op.pos.at(fields[j]), "%s %q uses tensor %q before its alloc", op.Kind, op.Name, name)
				case dead:
					e.add(op.pos.at(fields[j]), "%s %q uses tensor %q after its free at line %d: the host no longer holds it", op.Kind, op.Name, name, line[name])
				}
			}
		}
	}
}

// reporter adapts a report function to the errs.add shape.
type reporter func(Pos, string)

func (r reporter) add(p Pos, format string, a ...any) { r(p, fmt.Sprintf(format, a...)) }

// checkOrder checks what depends on the order of a program's ops as one
// configuration issues them: a wait binds to a record issued before it,
// and a collective's name is issued once (a send and a receive may share
// one).
func checkOrder(p *ProgramSpec, ops []OpSpec, report func(Pos, string)) {
	e := reporter(report)
	recorded := map[string]bool{}
	colls := map[string]string{}
	for i := range ops {
		op := &ops[i]
		switch {
		case op.Kind == OpRecord:
			recorded[op.Name] = true
		case op.Kind == OpWait:
			if slices.Contains(p.Events, op.Name) && !recorded[op.Name] {
				e.add(op.pos.at("name"), "wait on event %q, which is never recorded before it: a wait binds to the most recent record issued before it, so this one would order nothing", op.Name)
			}
		case op.Kind.Comm():
			class := "collective"
			if op.Kind == OpSend || op.Kind == OpRecv {
				class = string(op.Kind)
			}
			if prev, dup := colls[op.Name]; dup && (prev == class || prev == "collective" || class == "collective") {
				e.add(op.pos.at("name"), "%s %q issued twice in one program; a collective's name identifies it across ranks, give each call its own name (a send and a receive may share one)", op.Kind, op.Name)
			}
			colls[op.Name] = class
		}
	}
}
