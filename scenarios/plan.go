package scenarios

import (
	"hash/fnv"
	"sort"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// collPlan is a small multi-communicator program: per rank, a list of steps
// (compute kernels and collective calls) on named streams. The hang
// scenarios are built from it.
type collPlan struct {
	n       int
	streams []string
	comms   []commSpec
	// progs[r] is rank r's host program order; ref[r] the intended
	// program (every collective in one consistent order), which the
	// reference run serializes on one stream.
	progs, ref [][]cstep
	replays    int // graph mode: replays of the captured graph
}

type commSpec struct {
	name     string
	group    []int
	strategy collectives.Strategy
	implicit bool
	// graphUnordered: nccl-order=graph-unordered (Comm.GraphUnordered)
	graphUnordered bool
}

// cstep is one host step: a compute kernel of duration work, or a
// collective call.
type cstep struct {
	stream int
	work   sim.Time
	name   string // kernel name (compute) or call name (collective)
	comm   string
	op     collectives.Op
	bytes  int64 // per block
	chunks int   // per block
	blocks int
}

// callInit is the deterministic input value of a call's tensor on a rank.
func callInit(call string, r, c int) uint64 {
	h := fnv.New32a()
	h.Write([]byte(call))
	return uint64(h.Sum32()%9973) + uint64(100*r+c+1)
}

// build lowers the plan onto a world. With opt.Reference the ref programs
// run eagerly on one stream instead.
func (p *collPlan) build(hw ranks.Profile, opt BuildOptions, eng *sim.Engine, mode ranks.Mode) (*Built, error) {
	progs := p.progs
	if opt.Reference {
		progs, mode = p.ref, ranks.Eager
	}
	w := ranks.NewWorld(p.n, ranks.Config{Mode: mode, Replays: p.replays, LaunchCost: hw.Launch, EventCost: hw.EventOp, Timeline: opt.Timeline, SMs: hw.SMs}, eng)
	w.SetIndependentReplays(true) // each replay a step on inputs of its own, checked on its own (ranks/replays.go)
	comms := map[string]*collectives.Comm{}
	specs := map[string]commSpec{}
	for _, cs := range p.comms {
		c := collectives.NewComm(w, cs.name, cs.group, collectives.SharedWorkspace, hw, 1)
		c.ImplicitOrder = cs.implicit
		c.GraphUnordered = cs.graphUnordered
		// Size the symmetric workspace and pad for the largest call.
		for _, prog := range [][][]cstep{p.progs, p.ref} {
			for _, steps := range prog {
				for _, st := range steps {
					if st.comm == cs.name {
						c.WorkspaceChunks = max(c.WorkspaceChunks, len(cs.group)*st.chunks)
						c.PadSlots = max(c.PadSlots, len(cs.group)*max(1, st.blocks))
					}
				}
			}
		}
		comms[cs.name], specs[cs.name] = c, cs
	}
	b := &Built{World: w}
	for r := range p.n {
		// Tensors in a canonical order (sorted call names) so the run and
		// the reference compare the same tensors position by position.
		type pair struct{ in, out *ranks.Buffer }
		tensors := map[string]pair{}
		var names []string
		for _, st := range progs[r] {
			if st.comm != "" {
				names = append(names, st.name)
			}
		}
		sort.Strings(names)
		byName := map[string]cstep{}
		for _, st := range progs[r] {
			byName[st.name] = st
		}
		var cmp []*ranks.Buffer
		for _, name := range names {
			st := byName[name]
			g := len(specs[st.comm].group)
			ic, oc := st.chunks, st.chunks
			switch st.op {
			case collectives.ReduceScatter:
				ic = g * st.chunks
			case collectives.AllGather:
				oc = g * st.chunks
			case collectives.AllToAll:
				ic, oc = g*st.chunks, g*st.chunks
			}
			in := w.Alloc(r, name+".in", st.bytes*int64(ic/st.chunks), ic)
			w.Init(in, func(c int) uint64 { return callInit(name, r, c) })
			out := w.Alloc(r, name+".out", st.bytes*int64(oc/st.chunks), oc)
			out.Output = true
			tensors[name] = pair{in, out}
			cmp = append(cmp, out)
		}
		b.Compare = append(b.Compare, cmp)
		prog := &ranks.Program{Streams: p.streams}
		if opt.Reference {
			prog.Streams = p.streams[:1]
		}
		for _, st := range progs[r] {
			var k *ranks.KernelSpec
			if st.comm == "" {
				k = &ranks.KernelSpec{Name: st.name, Kind: "compute", Instrs: []ranks.Instr{{Op: ranks.OpDelay, Phase: "compute", Dur: st.work}}}
			} else {
				cs := specs[st.comm]
				t := tensors[st.name]
				var err error
				k, err = comms[st.comm].Collective(r, collectives.Call{Name: st.name, Op: st.op, Strategy: cs.strategy, In: t.in, Out: t.out, Blocks: st.blocks})
				if err != nil {
					return nil, err
				}
			}
			stream := st.stream
			if opt.Reference {
				stream = 0
			}
			prog.Ops = append(prog.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: stream, Kernel: k})
		}
		w.SetProgram(r, prog)
	}
	return b, nil
}
