package format

import (
	"fmt"
	"strconv"
)

// Host values in the program form: what a step reads from the host, what
// it keeps on the device, and what the host copies in before each replay.
//
//	steps: carried            # the replays are successive steps of one run
//	host_scalars:
//	  - {name: step, value: 1}
//	tensors:
//	  - {name: pos, bytes: 8, init: [1]}
//	  - {name: tokens_in, bytes: 64, per_replay: [[5, 6], [7, 8]]}
//	programs:
//	  - ranks: all
//	    ops:
//	      - {kernel: add_step, reads: [one, out], writes: [out], scale: step}
//	      - {increment: pos}          # a device counter: pos += 1 on the stream
//	      - {advance: step}           # the host's step += 1 (issues nothing)
//
// A host scalar (ranks.HostScalar) is a kernel argument: a kernel with
// scale: NAME multiplies its weight by the scalar's value when the host
// issues it. In graph mode the program is captured once, so every replay
// runs with the value the capture read (frozen at capture); eager mode
// reads it at every issue. advance adds by (default 1) to it on the host.
//
// A device counter is a tensor that increment: adds by to on the device,
// as a kernel on its stream: graph replays run the kernel, so each replay
// sees the value the previous one left. A counter carries state from step
// to step, so a file with one declares steps: carried (unless its program
// has capture blocks, whose replays it writes out itself).
//
// steps says what the replays are. independent (the default): each graph
// replay is a step on inputs of its own and is checked against its own
// reference; eager mode issues the program once. carried: the replays are
// successive steps of one run that carry state (a counter, an
// accumulator): eager mode issues the program replays times in a row (the
// host scalars advancing as its advance ops say), graph mode captures it
// once and replays it replays times, and the reference runs every step,
// serialized (ranks.World.SetIndependentReplays).
//
// A per-replay input (per_replay: rows) is a tensor the host re-fills
// before each replay, as static_input.copy_(batch) before g.replay() does
// (ranks.World.InitPerReplay): replay k's chunk c holds
// row[k mod rows][c mod len(row)], on every rank. It belongs to
// independent steps; a one-pass (eager) world computes on the values of
// the replay it checks.

// HostScalarSpec is a host scalar a program's kernels may read.
type HostScalarSpec struct {
	Name  string
	Value int64
	pos   posMap
}

// Steps values.
const (
	StepsIndependent = "independent"
	StepsCarried     = "carried"
)

// Host-value op kinds.
const (
	// OpAdvance adds By to a host scalar on the host; it issues nothing.
	OpAdvance OpKind = "advance"
	// OpIncrement adds By to every chunk of a tensor on the device (a
	// kernel on its stream): a device counter.
	OpIncrement OpKind = "increment"
)

// MaxHostScalars bounds a file's host scalars.
const MaxHostScalars = 32

// maxHostValue bounds a host scalar's value and an advance or increment.
const maxHostValue = 1 << 30

func init() {
	opKinds = append(opKinds, OpAdvance, OpIncrement)
	opKeys = append(opKeys, "advance", "increment", "scale", "by", "launch")
	opAllowed[OpKernel] = append(opAllowed[OpKernel], "scale", "launch")
	opAllowed[OpAdvance] = []string{"advance", "by"}
	opAllowed[OpIncrement] = []string{"increment", "stream", "by", "time"}
}

// Carried reports whether s's replays are successive steps of one run.
func (s *Spec) Carried() bool { return s.Steps == StepsCarried }

// hostScalar returns the declaration of name, or nil.
func (s *Spec) hostScalar(name string) *HostScalarSpec {
	for i := range s.HostScalars {
		if s.HostScalars[i].Name == name {
			return &s.HostScalars[i]
		}
	}
	return nil
}

// hostTop reads the top-level steps: and host_scalars: keys.
func (d *decoder) hostTop(o *obj, s *Spec) {
	if v := o.get("steps"); v != nil {
		st := o.str("steps")
		switch st {
		case StepsIndependent, StepsCarried:
			s.Steps = st
		case "":
		default:
			d.add(posOf(v), "steps: %q; expected independent (each replay a step on inputs of its own) or carried (the replays are successive steps that carry state)", st)
		}
	}
	if v := o.get("host_scalars"); v != nil {
		for _, it := range d.seqAtMost(v, "host_scalars", MaxHostScalars, "") {
			ho := d.mapping(it, "host scalar", "name", "value")
			h := HostScalarSpec{pos: posMap{}}
			ho.record(h.pos)
			ho.require("name")
			h.Name = ho.name("name")
			h.Value = ho.int("value", -maxHostValue, maxHostValue)
			if h.Name != "" && s.hostScalar(h.Name) != nil {
				d.add(h.pos.at("name"), "host scalar %q declared twice", h.Name)
				continue
			}
			s.HostScalars = append(s.HostScalars, h)
		}
	}
}

// hostOp reads the keys of the host-value ops and a kernel's scale.
func (d *decoder) hostOp(o *obj, op *OpSpec) {
	switch op.Kind {
	case OpKernel:
		op.Scale = o.name("scale")
		if v := o.get("launch"); v != nil {
			op.Launch = o.str("launch")
			if op.Launch != "gemm" && op.Launch != "kernel" {
				d.add(posOf(v), "kernel launch: %q; expected gemm (its host launch costs a GEMM's) or kernel", op.Launch)
				op.Launch = ""
			}
		}
	case OpAdvance, OpIncrement:
		op.By = 1
		if o.has("by") {
			op.By = o.int("by", -maxHostValue, maxHostValue)
		}
		if v := o.get("time"); v != nil {
			op.TimeNs, op.TimeExpr = d.timeOrExpr(v, "increment time")
		}
	}
}

// perReplay reads a tensor's per_replay rows.
func (d *decoder) perReplay(o *obj, t *TensorSpec) {
	v := o.get("per_replay")
	if v == nil {
		return
	}
	rows := d.seq(v, "tensor per_replay", false)
	if len(rows) == 0 || len(rows) > MaxReplays {
		d.add(posOf(v), "tensor per_replay: %d rows; expected 1 to %d (one per replay)", len(rows), MaxReplays)
		return
	}
	for _, row := range rows {
		t.PerReplay = append(t.PerReplay, o.values("per_replay", row))
	}
}

// validateHost checks the host values: what each op names is declared, and
// what needs steps: carried has it.
func (s *Spec) validateHost(e *errs, managed map[string]bool) {
	if s.Graph != nil {
		// An op graph's form makes its own program: host values are the
		// program form's.
		for _, k := range []string{"steps", "host_scalars"} {
			if _, ok := s.pos[k]; ok {
				e.add(s.pos.at(k), "%s: host values are for programs; this file has a graph (%s), which does not read them", k, s.formName())
			}
		}
		for _, t := range s.Tensors {
			if len(t.PerReplay) > 0 {
				e.add(t.pos.at("per_replay"), "tensor %q: per_replay is for programs; this file has a graph (%s), which does not read it", t.Name, s.formName())
			}
		}
		return
	}
	if s.Steps != "" && s.GraphProgram() {
		e.add(s.pos.at("steps"), "steps: %s: this file's capture blocks and replay ops say what runs when, and the run is checked as one; steps is for a program captured whole (remove it)", s.Steps)
	}
	for _, t := range s.Tensors {
		if len(t.PerReplay) == 0 {
			continue
		}
		switch {
		case t.HasInit():
			e.add(t.pos.at("per_replay"), "tensor %q has per_replay and init: per_replay gives every replay's values; remove init", t.Name)
		case managed[t.Name]:
			e.add(t.pos.at("per_replay"), "tensor %q is allocated by an alloc op, so the host cannot re-fill it before each replay; give per_replay to a tensor declared without alloc", t.Name)
		case s.Carried():
			e.add(t.pos.at("per_replay"), "tensor %q: per_replay re-fills an input for independent steps; with steps: carried the program itself must write what each step reads", t.Name)
		}
	}
	for _, p := range s.AllPrograms() {
		for _, op := range p.Flat() {
			switch {
			case op.Kind == OpKernel && op.Scale != "" && s.hostScalar(op.Scale) == nil:
				e.add(op.pos.at("scale"), "kernel %q scales by undefined host scalar %q (declare it under host_scalars)", op.Name, op.Scale)
			case op.Kind == OpAdvance && s.hostScalar(op.Name) == nil:
				e.add(op.pos.at("name"), "advance of undefined host scalar %q (declare it under host_scalars)", op.Name)
			case op.Kind == OpIncrement && s.Tensor(op.Name) == nil:
				e.add(op.pos.at("name"), "increment of undefined tensor %q (declare it under tensors)", op.Name)
			case op.Kind == OpIncrement && !s.Carried() && !s.GraphProgram():
				e.add(op.pos.at("name"), "increment %q: a device counter carries state from step to step; declare steps: carried (each replay then continues the count)", op.Name)
			}
		}
	}
}

// Passes is how the host issues a rank's program: issue is how many times
// its ops are lowered in a row (carried steps in eager mode: one per
// step), copies how many times the lowered ops are repeated (a carried
// graph's reference runs the captured program once per replay, with the
// values it froze).
func (s *Spec) Passes(cfg Config, reference bool) (issue, copies int) {
	if !s.Carried() || s.GraphProgram() {
		return 1, 1
	}
	R := max(cfg.Replays, 1)
	if cfg.Mode != "graph" {
		return R, 1
	}
	if reference {
		return 1, R
	}
	return 1, 1
}

// RepeatOps is ops n times in a row.
func RepeatOps[T any](ops []T, n int) []T {
	if n <= 1 {
		return ops
	}
	out := make([]T, 0, len(ops)*n)
	for range n {
		out = append(out, ops...)
	}
	return out
}

// writeHostTop writes steps: and host_scalars: for MarshalSpec.
func writeHostTop(p func(int, string, ...any), s *Spec) {
	if s.Steps != "" {
		p(0, "steps: %s", s.Steps)
	}
	if len(s.HostScalars) > 0 {
		p(0, "host_scalars:")
		for _, h := range s.HostScalars {
			p(1, "- {name: %s, value: %d}", quote(h.Name), h.Value)
		}
	}
}

// timePart is an op's time key for MarshalSpec, if it has one.
func timePart(op OpSpec) []string {
	switch {
	case op.TimeExpr != nil:
		return []string{"time: " + strconv.Quote(op.TimeExpr.Src)}
	case op.TimeNs != 0:
		return []string{fmt.Sprintf("time: %dns", op.TimeNs)}
	}
	return nil
}
