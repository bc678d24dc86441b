package scenarios

import (
	"fmt"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// Lowering host values (format/spec_host.go): host scalars, device
// counters and per-replay inputs on the world.

// hostState is one rank's host scalars while its program is built.
type hostState map[string]*ranks.HostScalar

func (s lower) newHostState() hostState {
	hs := hostState{}
	for _, h := range s.HostScalars {
		hs[h.Name] = &ranks.HostScalar{Name: h.Name, V: h.Value}
	}
	return hs
}

// notes says which values the host scalars' readers saw (rank 0).
func (hs hostState) notes(s *Spec, captured bool) []string {
	var out []string
	for _, h := range s.HostScalars {
		if x := hs[h.Name]; x != nil && len(x.Reads) > 0 {
			out = append(out, x.Describe(captured))
		}
	}
	return out
}

// counterOne returns the constant buffer an increment of t by `by` adds on
// rank r, allocating it on first use. Its name cannot be a tensor's (it has
// spaces), so it never collides with one.
func counterOne(w *ranks.World, bufs map[string]*ranks.Buffer, r int, t *ranks.Buffer, by int64) *ranks.Buffer {
	name := fmt.Sprintf("%s += %d", t.Name, by)
	if b, ok := bufs[name]; ok {
		return b
	}
	b := w.Alloc(r, name, 8, t.Chunks())
	w.Init(b, func(int) uint64 { return uint64(by) % ranks.Modulus })
	bufs[name] = b
	return b
}

// incrementKernel is the device counter's kernel: t = t + by, in place.
func incrementKernel(op *OpSpec, t, one *ranks.Buffer, dur sim.Time) *ranks.KernelSpec {
	return &ranks.KernelSpec{Name: op.Name + ".increment", Kind: "increment", Instrs: []ranks.Instr{{Op: ranks.OpCompute, Phase: "increment", Dst: t, N: t.Chunks(),
		Srcs: []ranks.Src{{Buf: t, Coef: 1}, {Buf: one, Coef: 1}}, Fresh: true, Dur: dur}}}
}

// perReplayInit makes t's buffer b a per-replay input.
func perReplayInit(w *ranks.World, b *ranks.Buffer, t *TensorSpec) {
	rows := t.PerReplay
	w.InitPerReplay(b, func(k, c int) uint64 {
		row := rows[k%len(rows)]
		return row[c%len(row)]
	})
}
