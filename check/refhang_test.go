package check_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// waitsForLater is a one-rank program whose aux stream spins on a flag
// that an op issued later on main sets, then writes y = 3·x, while main
// writes y = 5·x after its put: the two writes race, so schedules end
// with either value. Serialized (every op on one stream in program
// order, as a reference is built) the wait comes first and nothing ever
// sets the flag: the reference hangs. With noPut nothing sets it in any
// schedule either.
type waitsForLater struct{ noPut bool }

func (p waitsForLater) Build(opt check.BuildOptions, eng *sim.Engine) (*check.Built, error) {
	w := ranks.NewWorld(1, ranks.Config{LaunchCost: 1000, EventCost: 1}, eng)
	fl := w.Alloc(0, "fl", 64, 1)
	x := w.Alloc(0, "x", 64, 1)
	w.Init(x, func(int) uint64 { return 1 })
	y := w.Alloc(0, "y", 64, 1)
	aux := 1
	if opt.Reference {
		aux = 0
	}
	k := func(name string, in ...ranks.Instr) *ranks.KernelSpec {
		return &ranks.KernelSpec{Name: name, Instrs: in}
	}
	ops := []ranks.HostOp{
		{Kind: ranks.Launch, Stream: aux, Kernel: k("wait", ranks.Instr{Op: ranks.OpFlagWait, Dur: 100, Dst: fl, N: 1, Cmp: ranks.FlagEq, Slot: 1, Peer: -1})},
		{Kind: ranks.Launch, Stream: aux, Kernel: k("kA", ranks.Instr{Op: ranks.OpCompute, Dur: 1000, Dst: y, N: 1, Srcs: []ranks.Src{{Buf: x, Coef: 3}}, Fresh: true})},
	}
	if !p.noPut {
		ops = append(ops, ranks.HostOp{Kind: ranks.Launch, Kernel: k("put", ranks.Instr{Op: ranks.OpFlagPut, Dur: 100, Dst: fl, N: 1, Slot: 1, Peer: -1})})
	}
	ops = append(ops, ranks.HostOp{Kind: ranks.Launch, Kernel: k("kB", ranks.Instr{Op: ranks.OpCompute, Dur: 1000, Dst: y, N: 1, Srcs: []ranks.Src{{Buf: x, Coef: 5}}, Fresh: true})})
	w.SetProgram(0, &ranks.Program{Streams: []string{"main", "aux"}, Ops: ops})
	return &check.Built{World: w, Compare: [][]*ranks.Buffer{{y}}}, nil
}

func (waitsForLater) References() (*check.References, error) { return nil, nil }

// one is a check.Scenario of one program, explored with budget schedules.
type one struct {
	p      check.Program
	budget int
}

func (o one) Setup(check.Variant, []string) (check.Setup, error) {
	return check.Setup{Program: o.p, Settings: settings(""), Budget: o.budget, Seed: 1}, nil
}

// TestReferenceHangIsAFinding: a reference run that hangs is a finding of
// its own (reference-hang), never an error that ends the command, and
// never turns comparison off: where the serialized program hangs, every
// schedule is compared with the nominal schedule, so schedules whose
// outputs differ give corruption; a reference the file declares (another
// variant's serialized program, the eager path) that hangs is left out
// of the comparison and said.
func TestReferenceHangIsAFinding(t *testing.T) {
	hanging := waitsForLater{noPut: true}
	tests := []struct {
		name    string
		p       check.Program
		budget  int
		want    string
		finding string
	}{
		{"serialized reference hangs, schedules differ", waitsForLater{}, 20, check.Corruption, "hangs, so outputs are compared with the nominal schedule's instead"},
		{"serialized reference and every schedule hang", hanging, 2, check.Hang, "the nominal schedule does not finish either"},
		{"a variant's reference hangs", scale{w: 2, refs: &check.References{Variants: []check.NamedProgram{{Name: "stuck", Program: hanging}}}}, 2, check.ReferenceHang,
			`the serialized program of variant "stuck" (references: variant) hangs`},
		{"the eager path hangs", scale{w: 2, refs: &check.References{Eager: hanging}}, 2, check.ReferenceHang, "the eager path (references: eager) hangs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := check.RunVariant(one{tt.p, tt.budget}, check.Variant{Name: "v"}, check.Options{})
			require.NoError(t, err)
			require.Equal(t, tt.want, rep.Verdict, "%v", rep.Findings)
			found := false
			for _, f := range rep.Findings {
				found = found || (f.Kind == check.ReferenceHang && strings.Contains(f.Message, tt.finding))
			}
			require.True(t, found, "no reference-hang finding with %q in %v", tt.finding, rep.Findings)
		})
	}
}
