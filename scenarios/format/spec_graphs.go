package format

import (
	"fmt"
	"slices"

	"github.com/goccy/go-yaml/ast"
)

// CUDA graphs inside a program. A program may capture some of its ops into
// named graphs and replay them among eager ops:
//
//	ops:
//	  - {alloc: x}
//	  - {fill: x, values: [3, 4]}        # eager: the host copies the input in
//	  - capture: step                     # torch.cuda.graph(g): nothing runs
//	    ops:
//	      - {kernel: norm, reads: [x], writes: [y]}
//	      - ...
//	  - {replay: step}                    # g.replay() on the capture's stream
//	  - {kernel: sample, reads: [y], writes: [z]}   # eager work between replays
//	  - {replay: step}
//
// Several captures per rank, eager ops between them (piecewise graphs), a
// capture of only part of the program, and replays interleaved with eager
// work all follow from two ops. What each means depends on the mode knob:
//
//   - mode: graph. A capture block is captured, not run: its kernels are
//     made then (a kernel's host scalar is read then, and frozen), its
//     allocations come from the graph's private pool (without caching the
//     first one invalidates the capture), and CUDA's capture rules apply
//     to its ops (a sync inside is an error; every stream it forks must be
//     joined back into its origin stream, the block's stream:, by default
//     the program's first). A replay issues every captured node at once
//     (one cudaGraphLaunch: no host gap between nodes) with the captured
//     dependencies: the nodes on the origin stream go on the replay's
//     stream (stream:, by default the origin) behind the work issued there
//     before it, and every other stream of the capture becomes a stream of
//     the graph's own ("step/aux"), so eager work queued on aux does not
//     order the graph's aux nodes; events recorded inside are the graph's
//     own edges. Eager work issued after a replay on its stream waits for
//     the whole graph.
//   - mode: eager. A capture block defines the step and runs nothing; each
//     replay issues its ops eagerly, there, on their own streams (the same
//     Python function called each step): host scalars are read at every
//     replay.
//
// The serialized reference runs every op on the first stream in issue
// order, a replay as the ops the graph captured. With capture blocks the
// program itself says when graphs run, so the world runs it as an eager
// host program (the whole-program graph mode, without capture blocks, is
// unchanged).

// Graph op kinds.
const (
	// OpCapture is a capture block (Capture holds its ops).
	OpCapture OpKind = "capture"
	// OpReplay launches a captured graph.
	OpReplay OpKind = "replay"
	// OpFill is a host-to-device copy of explicit values into a tensor
	// (static_input.copy_(batch)): a copy kernel on its stream from host
	// memory holding Values.
	OpFill OpKind = "fill"
)

// CaptureSpec is a capture block: the ops captured into graph Name.
type CaptureSpec struct {
	Ops []OpSpec
}

// MaxCaptures bounds the capture blocks of one program.
const MaxCaptures = 32

func init() {
	opKinds = append(opKinds, OpReplay, OpFill)
	opKeys = append(opKeys, "capture", "replay", "fill", "values")
	opAllowed[OpReplay] = []string{"replay", "stream"}
	opAllowed[OpFill] = []string{"fill", "stream", "values", "time"}
	opAllowed[OpAlloc] = append(opAllowed[OpAlloc], "init")
	opKeys = append(opKeys, "init")
}

// captureBlock reads a capture block: capture: NAME, its ops, and
// optionally stream: (its origin stream) and when:.
func (d *decoder) captureBlock(o *obj, op *OpSpec) {
	for _, k := range o.order {
		if k != "capture" && k != "ops" && k != "when" && k != "stream" {
			d.add(o.kpos[k], "key %q does not apply to a capture block; expected capture, ops, stream, when", k)
		}
	}
	op.Kind, op.Capture = OpCapture, &CaptureSpec{}
	op.Name = o.name("capture")
	op.pos["name"] = op.pos["capture"]
	op.Stream = o.name("stream")
	if v := o.get("when"); v != nil {
		op.When = d.when(v)
	}
	v := o.get("ops")
	if v == nil {
		d.add(o.at, "capture: missing required key \"ops\"")
		return
	}
	items := d.seq(v, "capture ops", false)
	if len(items) > MaxOps {
		d.add(posOf(v), "capture ops: %d; at most %d", len(items), MaxOps)
		items = nil
	}
	for _, it := range items {
		if m, ok := it.(*ast.MappingNode); ok && (hasKey(m, "repeat") || hasKey(m, "capture") || hasKey(m, "replay")) {
			d.add(posOf(it), "a capture block holds plain ops: no repeat, capture or replay inside it")
			continue
		}
		op.Capture.Ops = append(op.Capture.Ops, d.op(it))
	}
}

// fillOp reads a fill's values, or an alloc's init.
func (d *decoder) fillOp(o *obj, op *OpSpec) {
	if op.Kind == OpAlloc {
		if v := o.get("init"); v != nil {
			op.Values = o.values("init", v)
		}
		return
	}
	if op.Kind != OpFill {
		return
	}
	o.require("values")
	if v := o.get("values"); v != nil {
		op.Values = o.values("values", v)
	}
	if v := o.get("time"); v != nil {
		op.TimeNs, op.TimeExpr = d.timeOrExpr(v, "fill time")
	}
}

// HasCaptures reports whether p holds a capture block.
func (p *ProgramSpec) HasCaptures() bool {
	for i := range p.Ops {
		if p.Ops[i].Kind == OpCapture {
			return true
		}
	}
	return false
}

// GraphProgram reports whether any program of s captures graphs of its
// own: the world then runs every program as an eager host program.
func (s *Spec) GraphProgram() bool {
	for i := range s.Programs {
		if s.Programs[i].HasCaptures() {
			return true
		}
	}
	return false
}

// capture returns the capture block named name in ops, or nil.
func captureOf(ops []OpSpec, name string) *OpSpec {
	for i := range ops {
		if ops[i].Kind == OpCapture && ops[i].Name == name {
			return &ops[i]
		}
	}
	return nil
}

// Markers the lowering sees around a capture block's ops.
const (
	OpCaptureBegin OpKind = "capture-begin"
	OpCaptureEnd   OpKind = "capture-end"
)

// GraphWork is ops as the host issues them under cfg: in graph mode a
// capture block becomes its ops between a begin and an end marker and a
// replay stays a replay; in eager mode (and everything eager) a capture
// block disappears and each replay becomes the block's ops.
func GraphWork(ops []OpSpec, cfg Config) []OpSpec {
	has := false
	for i := range ops {
		has = has || ops[i].Kind == OpCapture || ops[i].Kind == OpReplay
	}
	if !has {
		return ops
	}
	var out []OpSpec
	blocks := map[string][]OpSpec{}
	for _, op := range ops {
		switch op.Kind {
		case OpCapture:
			var in []OpSpec
			for _, x := range op.Capture.Ops {
				if x.holds(cfg) {
					in = append(in, x)
				}
			}
			blocks[op.Name] = in
			if cfg.Mode == "graph" {
				out = append(out, OpSpec{Kind: OpCaptureBegin, Name: op.Name, Stream: op.Stream, pos: op.pos})
				out = append(out, in...)
				out = append(out, OpSpec{Kind: OpCaptureEnd, Name: op.Name, Stream: op.Stream, pos: op.pos})
			}
		case OpReplay:
			// A replay of a block when: leaves out issues nothing.
			if _, ok := blocks[op.Name]; ok && cfg.Mode == "graph" {
				out = append(out, op)
			} else {
				out = append(out, blocks[op.Name]...)
			}
		default:
			out = append(out, op)
		}
	}
	return out
}

// validateGraphs checks a program's captures and replays: names unique,
// every replay after its capture, events not shared between a capture and
// the eager ops (inside a capture they are the graph's own edges).
func (s *Spec) validateGraphs(e *errs, p *ProgramSpec) {
	seen := map[string]bool{}
	inside := map[string]string{} // event → the capture recording or waiting on it
	n := 0
	for _, op := range p.Ops {
		switch op.Kind {
		case OpCapture:
			n++
			if n == MaxCaptures+1 {
				e.add(op.pos.at("name"), "more than %d capture blocks in one program", MaxCaptures)
			}
			if seen[op.Name] {
				e.add(op.pos.at("name"), "capture %q defined twice in this program; give each graph its own name", op.Name)
			}
			seen[op.Name] = true
			for _, in := range op.Capture.Ops {
				if in.Kind == OpRecord || in.Kind == OpWait {
					inside[in.Name] = op.Name
				}
				if in.Kind == OpFill || in.Kind == OpEmptyCache {
					e.add(in.pos.at("name"), "%s %q inside capture %q: the host cannot do that while capturing; put it before the capture block", in.Kind, in.Name, op.Name)
				}
			}
		case OpReplay:
			if !seen[op.Name] {
				if captureOf(p.Ops, op.Name) != nil {
					e.add(op.pos.at("name"), "replay of %q before its capture block; capture it first", op.Name)
				} else {
					e.add(op.pos.at("name"), "replay of undefined graph %q; capture it first with a capture: %s block", op.Name, op.Name)
				}
			}
		case OpRepeat:
			for _, in := range op.Repeat.Ops {
				if in.Kind == OpReplay && !seen[in.Name] {
					e.add(in.pos.at("name"), "replay of %q before its capture block; capture it first", in.Name)
				}
			}
		}
	}
	device := "" // the first op that queues device work
	for _, op := range p.Flat() {
		if op.Kind == OpFill && op.Name != "" && s.Tensor(op.Name) == nil {
			e.add(op.pos.at("name"), "fill of undefined tensor %q (declare it under tensors)", op.Name)
		}
		if op.Kind == OpAlloc && len(op.Values) > 0 && device != "" {
			e.add(op.pos.at("init"), "alloc %q with init after %s: init gives a program input its values before anything runs; once device work is queued, copy values in with a fill op", op.Name, device)
		}
		switch op.Kind {
		case OpAlloc, OpFree, OpRecordStream, OpAdvance, OpRepeat, "":
		default:
			if device == "" {
				device = fmt.Sprintf("%s %q", op.Kind, op.Name)
			}
		}
	}
	if len(inside) == 0 {
		return
	}
	for _, op := range p.Ops {
		ops := []OpSpec{op}
		if op.Repeat != nil {
			ops = op.Repeat.Ops
		}
		for _, x := range ops {
			if (x.Kind == OpRecord || x.Kind == OpWait) && inside[x.Name] != "" {
				e.add(x.pos.at("name"), "%s of %q outside capture %q, which records or waits on it: an event inside a capture is an edge of the graph; give the eager ops an event of their own", x.Kind, x.Name, inside[x.Name])
			}
		}
	}
}

// checkCaptures applies the capture rules to each capture block of p, as a
// program of its own whose first stream is the block's origin.
func (s *Spec) checkCaptures(cfg Config, p *ProgramSpec, commRanks map[string][]int, report func(Pos, string)) {
	for _, op := range p.Ops {
		if op.Kind != OpCapture || !op.holds(cfg) {
			continue
		}
		sub := ProgramSpec{Ranks: p.Ranks, Events: p.Events, pos: p.pos}
		sub.Streams = append(sub.Streams, p.Streams...)
		if i := slices.Index(sub.Streams, op.Stream); i > 0 {
			sub.Streams[0], sub.Streams[i] = sub.Streams[i], sub.Streams[0]
		}
		for _, in := range op.Capture.Ops {
			if in.Stream == "" && op.Stream != "" {
				in.Stream = p.Streams[0]
			}
			sub.Ops = append(sub.Ops, in)
		}
		s.checkCapture(cfg, &sub, commRanks, report)
	}
}

// graphLen is how many ops a replay of name issues (for the limits).
func graphLen(p *ProgramSpec, name string, cfg Config) int {
	c := captureOf(p.Ops, name)
	if c == nil {
		return 1
	}
	n := 0
	for _, x := range c.Capture.Ops {
		if x.holds(cfg) {
			n++
		}
	}
	return n
}

// opIssues is how many ops op issues when the host reaches it: a replay
// issues its graph's ops, anything else one.
func opIssues(p *ProgramSpec, op *OpSpec, cfg Config) int {
	if op.Kind == OpReplay {
		return graphLen(p, op.Name, cfg)
	}
	return 1
}

// writeCapture writes a capture block for MarshalSpec (3 levels in, as a
// program's ops are).
func writeCapture(p func(int, string, ...any), op OpSpec) {
	p(3, "- capture: %s", quote(op.Name))
	if op.Stream != "" {
		p(4, "stream: %s", quote(op.Stream))
	}
	if len(op.When) > 0 {
		p(4, "when: %s", whenLine(op.When))
	}
	if len(op.Capture.Ops) == 0 {
		p(4, "ops: []")
		return
	}
	p(4, "ops:")
	for _, in := range op.Capture.Ops {
		p(5, "- %s", opLine(in))
	}
}

// replaysUnread reports whether the replays knob changes nothing in s: its
// programs say where graphs replay (capture blocks), its steps are
// independent, and no repeat count or expression names replays.
func (s *Spec) replaysUnread() bool {
	if !s.GraphProgram() || s.Carried() {
		return false
	}
	for _, t := range s.Tensors {
		if slices.Contains(t.BytesExpr.names(), "replays") {
			return false
		}
	}
	for _, p := range s.AllPrograms() {
		for _, op := range p.Flat() {
			if op.Repeat != nil && op.Repeat.CountKnob == "replays" || slices.Contains(op.TimeExpr.names(), "replays") {
				return false
			}
		}
	}
	return true
}
