package scenarios

import (
	"fmt"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios/format"
	"github.com/collsim/collsim/sim"
)

// Lowering capture blocks and replays (format/spec_graphs.go) to the
// host ops of a rank's program.

// graphLowering is one rank's captures while its program is lowered.
type graphLowering struct {
	reference bool
	// open is the capture being recorded ("" when none), saved the ops
	// issued before it.
	open   string
	origin int
	saved  []ranks.HostOp
	graphs map[string]*capturedGraph
	// atReplay, when set, gives the kernel a replay issued now runs in
	// place of the captured one (spec_flags.go: peer addresses resolved at
	// the replay).
	atReplay func(*ranks.KernelSpec) *ranks.KernelSpec
}

// capturedGraph is what a capture recorded: its nodes (host ops over the
// program's streams and events), its origin stream, and the streams and
// events of its own it was given at its first replay.
type capturedGraph struct {
	ops     []ranks.HostOp
	origin  int
	streams map[int]int // program stream → the graph's own stream
	events  map[int]int
	replays int
}

// step handles the graph ops of the lowering (markers and replays),
// reporting whether op was one.
func (g *graphLowering) step(op *OpSpec, prog *ranks.Program, alloc *ranks.Allocator, origin int) (bool, error) {
	switch op.Kind {
	case format.OpCaptureBegin:
		g.open, g.origin, g.saved, prog.Ops = op.Name, origin, prog.Ops, nil
		if alloc != nil && !g.reference {
			alloc.BeginCapture() // the graph's private pool
		}
	case format.OpCaptureEnd:
		g.graphs[g.open] = &capturedGraph{ops: prog.Ops, origin: g.origin}
		g.open, prog.Ops, g.saved = "", g.saved, nil
		if alloc != nil && !g.reference {
			alloc.EndCapture()
		}
	case OpReplay:
		c := g.graphs[op.Name]
		if c == nil {
			return true, fmt.Errorf("replay of %q before its capture", op.Name)
		}
		g.replay(c, op, prog, origin)
	default:
		return false, nil
	}
	return true, nil
}

// replay appends one launch of c to prog: its nodes with their captured
// dependencies, the origin's on the launch stream, the rest on the graph's
// own streams, all issued at once.
func (g *graphLowering) replay(c *capturedGraph, op *OpSpec, prog *ranks.Program, launch int) {
	if op.Stream == "" {
		launch = c.origin
	}
	if c.streams == nil && !g.reference {
		c.streams, c.events = map[int]int{}, map[int]int{}
		for _, h := range c.ops {
			if h.Stream >= 0 && h.Stream != c.origin && c.streams[h.Stream] == 0 {
				c.streams[h.Stream] = len(prog.Streams)
				prog.Streams = append(prog.Streams, op.Name+"/"+prog.Streams[h.Stream])
			}
			if (h.Kind == ranks.Record || h.Kind == ranks.Wait) && c.events[h.Event] == 0 {
				c.events[h.Event] = len(prog.Events)
				prog.Events = append(prog.Events, op.Name+"/"+prog.Events[h.Event])
			}
		}
	}
	c.replays++
	for i, h := range c.ops {
		if k := h.Kernel; k != nil && k.Coll != "" && c.replays > 1 {
			// Each replay's collective is an instance of its own, as
			// graph mode's replay index makes it.
			kc := *k
			kc.Coll = fmt.Sprintf("%s#%d", k.Coll, c.replays)
			h.Kernel = &kc
		}
		if !g.reference {
			switch {
			case h.Stream == c.origin:
				h.Stream = launch
			case h.Stream >= 0:
				h.Stream = c.streams[h.Stream]
			}
			if h.Kind == ranks.Record || h.Kind == ranks.Wait {
				h.Event = c.events[h.Event]
			}
			if i > 0 {
				h.Host = 1 // one cudaGraphLaunch issues every node
			}
			if h.Kernel != nil && g.atReplay != nil {
				h.Kernel = g.atReplay(h.Kernel)
			}
			h.GraphNode = true // the device's gap between nodes (ranks.Config.GraphGap)
			if k := h.Kernel; k != nil && k.OrderPerContext && k.OrderKey != "" {
				// GroupStreamGuard's edges were captured among this graph's
				// own nodes; the replay runs no guard code, so nothing
				// orders it with eager pad ops or another replay
				// (GroupStreamGuard.cpp, init_: the wait is skipped across
				// capture contexts). RCCL's graph path is the same: a
				// graph's first NCCL node waits on nothing outside the
				// graph unless graph mixing is on (rccl
				// src/misc/strongstream.cc ncclStrongStreamAcquire).
				kc := *k
				kc.OrderKey = fmt.Sprintf("%s@%s#%d", k.OrderKey, op.Name, c.replays)
				h.Kernel = &kc
			}
		}
		prog.Ops = append(prog.Ops, h)
	}
}

// fillKernel is a fill's copy kernel: Values, staged in host memory (a
// buffer of its own on rank r, named so no tensor can share it), copied
// into t.
func fillKernel(w *ranks.World, r int, op *OpSpec, t *ranks.Buffer, seq int, dur sim.Time) *ranks.KernelSpec {
	host := w.Alloc(r, fmt.Sprintf("%s (host copy %d)", t.Name, seq), t.Bytes, t.Chunks())
	vals := op.Values
	w.Init(host, func(c int) uint64 { return vals[c%len(vals)] % ranks.Modulus })
	return &ranks.KernelSpec{Name: op.Name + ".fill", Kind: "copy", Instrs: []ranks.Instr{{Op: ranks.OpCompute, Phase: "copy", Dst: t, N: t.Chunks(),
		Srcs: []ranks.Src{{Buf: host, Coef: 1}}, Dur: dur}}}
}

// issueNames renames a collective, send or receive the host issues again
// (a carried step issued once per replay, an eager replay of a capture
// block): the k-th issue of NAME is NAME#k, the same on every rank, so
// each is an instance of its own (a send and a receive count apart).
type issueNames map[string]int

func (n issueNames) name(kind OpKind, name string) string {
	key := name
	if kind == OpSend || kind == OpRecv {
		key = string(kind) + "\x00" + name
	}
	n[key]++
	if k := n[key]; k > 1 {
		return fmt.Sprintf("%s#%d", name, k)
	}
	return name
}
