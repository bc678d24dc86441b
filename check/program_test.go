package check_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// scale is a one-rank program written straight against check's API, with no
// scenario behind it: y = w·x over two chunks (x = 1, 2), and whatever
// references it is given. It is a comparable value, as check.Program
// should be.
type scale struct {
	w    int64
	refs *check.References
}

func (p scale) Build(_ check.BuildOptions, eng *sim.Engine) (*check.Built, error) {
	w := ranks.NewWorld(1, ranks.Config{LaunchCost: 1, EventCost: 1}, eng)
	x := w.Alloc(0, "x", 64, 2)
	w.Init(x, func(c int) uint64 { return uint64(c + 1) })
	y := w.Alloc(0, "y", 64, 2)
	k := &ranks.KernelSpec{Name: "scale", Kind: "gemm", Instrs: []ranks.Instr{{Op: ranks.OpCompute, Phase: "gemm", Dst: y, N: 2,
		Srcs: []ranks.Src{{Buf: x, Coef: p.w}}, Fresh: true, Dur: 100}}}
	w.SetProgram(0, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{{Kind: ranks.Launch, Kernel: k}}})
	return &check.Built{World: w, Compare: [][]*ranks.Buffer{{y}}}, nil
}

func (p scale) References() (*check.References, error) { return p.refs, nil }

// toy is a scenario of scale programs: a variant's Sets name the weight.
type toy struct{ refs *check.References }

type settings string

func (s settings) Summary() string { return string(s) }

func (t toy) Setup(v check.Variant, extra []string) (check.Setup, error) {
	w := int64(2)
	for _, s := range append(append([]string(nil), v.Sets...), extra...) {
		if _, err := fmt.Sscanf(s, "w=%d", &w); err != nil {
			return check.Setup{}, fmt.Errorf("bad set %q", s)
		}
	}
	return check.Setup{Program: scale{w: w, refs: t.refs}, Settings: settings(fmt.Sprintf("w=%d", w)), Budget: 2, Seed: 1}, nil
}

// check judges a program by its references alone: each one decides the
// verdict of a run that agrees with its own serialized program.
func TestProgramReferences(t *testing.T) {
	model := &check.Model{Chunks: 2,
		Inputs:  []check.ModelInput{{Name: "x", Init: func(c int) uint64 { return uint64(c + 1) }}},
		Ops:     []check.ModelOp{{Name: "scale", Kind: "linear", Inputs: []string{"x"}, Output: "y", Weight: 2}},
		Outputs: []string{"y"}}
	tests := []struct {
		name    string
		refs    *check.References
		w       string
		want    string
		finding string
	}{
		{"none", nil, "w=3", check.OK, ""},
		{"expected, met", &check.References{Expected: []check.Expected{{Tensor: "y", Rank: 0, Values: []uint64{2, 4}}}}, "w=2", check.OK, ""},
		{"expected, missed", &check.References{Expected: []check.Expected{{Tensor: "y", Rank: 0, Values: []uint64{2, 4}}}}, "w=3", check.Corruption, "rank 0 tensor y[0]: expected 2 (an explicit expected value); observed 3"},
		{"expected, no such tensor", &check.References{Expected: []check.Expected{{Tensor: "z", Rank: 0, Values: []uint64{1}}}}, "w=2", check.Corruption, "no compared tensor \"z\""},
		{"variant, same", &check.References{Variants: []check.NamedProgram{{Name: "two", Program: scale{w: 2}}}}, "w=2", check.OK, ""},
		{"variant, differs", &check.References{Variants: []check.NamedProgram{{Name: "two", Program: scale{w: 2}}}}, "w=3", check.Corruption, "differs from variant two's reference: expected 2"},
		{"model, matches", &check.References{Model: model}, "w=2", check.OK, ""},
		{"model, differs", &check.References{Model: model}, "w=3", check.Corruption, "differs from the unsharded model run on one device: expected 2, observed 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := check.RunVariant(toy{refs: tt.refs}, check.Variant{Name: "v", Sets: []string{tt.w}}, check.Options{})
			require.NoError(t, err)
			require.Equal(t, tt.want, rep.Verdict, "%v", rep.Findings)
			if tt.finding != "" {
				found := false
				for _, f := range rep.Findings {
					found = found || strings.Contains(f.Message, tt.finding)
				}
				require.True(t, found, "no finding with %q in %v", tt.finding, rep.Findings)
			}
		})
	}
	_, err := check.RunVariant(toy{}, check.Variant{Name: "v", Sets: []string{"q"}}, check.Options{})
	require.ErrorContains(t, err, "bad set")
}

// RunVariant judges a variant of any front end that can make a
// check.Setup: here a one-rank program and an explicit expected value.
func ExampleRunVariant() {
	refs := &check.References{Expected: []check.Expected{{Tensor: "y", Rank: 0, Values: []uint64{2, 4}}}}
	for _, w := range []string{"w=2", "w=3"} {
		rep, _ := check.RunVariant(toy{refs: refs}, check.Variant{Name: w, Sets: []string{w}}, check.Options{})
		fmt.Println(rep.Name, rep.Verdict, rep.Config.Summary())
	}
	// Output:
	// w=2 ok w=2
	// w=3 corruption w=3
}
