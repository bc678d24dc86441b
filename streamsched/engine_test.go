package streamsched_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/streamsched"
)

// chain builds a graph of ops applied in sequence, each reading the
// previous output (the first reads x).
func chain(kinds ...streamsched.OpKind) *streamsched.Graph {
	g := &streamsched.Graph{Tensors: []streamsched.Tensor{{Name: "x", Bytes: 1024, Input: true}}}
	in := "x"
	for i, k := range kinds {
		name := fmt.Sprintf("op%d_%s", i, k)
		g.Tensors = append(g.Tensors, streamsched.Tensor{Name: name, Bytes: 1024})
		op := streamsched.Op{Name: name, Kind: k, Inputs: []string{in}, Output: name, M: 8, K: 64, N: 64}
		if streamsched.IsCollective(k) {
			op.Comm = "c"
		}
		g.Ops = append(g.Ops, op)
		in = name
	}
	return g
}

const (
	gemm = streamsched.GEMM
	shuf = streamsched.Shuffle
	pw   = streamsched.Pointwise
	ar   = streamsched.AllReduce
	a2a  = streamsched.AllToAll
	tch  = streamsched.TorchOp
)

func TestPartitionEngines(t *testing.T) {
	for _, tc := range []struct {
		name    string
		kinds   []streamsched.OpKind
		opt     streamsched.EngineOptions
		engines []string // per engine: its op count and flags
		calls   int
		errNode string
	}{
		{"torch op splits engines", []streamsched.OpKind{gemm, tch, gemm, ar}, streamsched.EngineOptions{}, []string{"1 ops gemm", "2 ops coll gemm"}, 3, ""},
		{"gemm-free collective engine is multi-device", []streamsched.OpKind{gemm, tch, ar, pw}, streamsched.EngineOptions{}, []string{"1 ops gemm", "2 ops coll md"}, 3, ""},
		{"workaround moves collectives out", []streamsched.OpKind{gemm, shuf, a2a, shuf, gemm}, streamsched.EngineOptions{TorchExecuted: []streamsched.OpKind{a2a}}, []string{"2 ops gemm", "2 ops gemm"}, 3, ""},
		{"small engine: no Myelin", []streamsched.OpKind{gemm, shuf, a2a, shuf, gemm}, streamsched.EngineOptions{MyelinMinOps: 6}, []string{"5 ops coll gemm"}, 1, ""},
		{"large engine: fused collective fails", []streamsched.OpKind{gemm, shuf, a2a, shuf, gemm}, streamsched.EngineOptions{MyelinMinOps: 5}, []string{"5 ops coll gemm foreign"}, 1, "{ForeignNode[[SHUFFLE]-[op1_shuffle]...[SHUFFLE]-[op3_shuffle]]}"},
		{"collective alone is not fused", []streamsched.OpKind{gemm, a2a, gemm}, streamsched.EngineOptions{MyelinMinOps: 1}, []string{"3 ops coll gemm"}, 1, ""},
		{"Myelin maps collectives (hypothetical)", []streamsched.OpKind{gemm, shuf, a2a, shuf, gemm}, streamsched.EngineOptions{MyelinMinOps: 5, MyelinComm: true}, []string{"5 ops coll gemm foreign"}, 1, ""},
		{"standalone collectives", []streamsched.OpKind{gemm, shuf, ar, pw}, streamsched.EngineOptions{Standalone: true}, []string{"2 ops gemm", "1 ops coll md", "1 ops"}, 3, ""},
		{"promote all (hypothetical)", []streamsched.OpKind{gemm, ar}, streamsched.EngineOptions{PromoteAll: true}, []string{"2 ops coll gemm md"}, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := streamsched.PartitionEngines(chain(tc.kinds...), tc.opt)
			require.NoError(t, err)
			var got []string
			for _, e := range p.Engines {
				s := fmt.Sprintf("%d ops", len(e.Ops))
				if len(e.Collectives) > 0 {
					s += " coll"
				}
				if e.GEMMs > 0 {
					s += " gemm"
				}
				if e.MultiDevice {
					s += " md"
				}
				if len(e.Foreign) > 0 {
					s += " foreign"
				}
				got = append(got, s)
			}
			require.Equal(t, tc.engines, got)
			require.Len(t, p.Segments, tc.calls)
			if tc.errNode == "" {
				require.Empty(t, p.BuildErrors)
				return
			}
			require.Len(t, p.BuildErrors, 1)
			require.Equal(t, ranks.KindBuildError, p.BuildErrors[0].Kind)
			require.Equal(t, tc.errNode, p.BuildErrors[0].Resource)
		})
	}
}

func TestPartitionRejectsBadGraph(t *testing.T) {
	g := chain(gemm)
	g.Ops[0].Inputs = []string{"nowhere"}
	_, err := streamsched.PartitionEngines(g, streamsched.EngineOptions{})
	require.ErrorContains(t, err, `reads tensor "nowhere" before it is produced`)
}

// PartitionEngines splits a graph into engines and PyTorch ops and reports
// what the TensorRT builder makes of each engine.
func ExamplePartitionEngines() {
	g := chain(gemm, shuf, streamsched.AllToAll, shuf, gemm, streamsched.TorchOp, streamsched.AllReduce, pw)
	p, _ := streamsched.PartitionEngines(g, streamsched.EngineOptions{MyelinMinOps: 5})
	for _, s := range p.Segments {
		if s.Engine == nil {
			fmt.Println(s.Name)
			continue
		}
		fmt.Printf("%s: %d ops, multi-device %v, %d ForeignNodes\n", s.Name, len(s.Engine.Ops), s.Engine.MultiDevice, len(s.Engine.Foreign))
	}
	for _, f := range p.BuildErrors {
		fmt.Println(f.Resource)
	}
	// Output:
	// _run_on_acc_0: 5 ops, multi-device false, 1 ForeignNodes
	// _run_on_gpu_0(op5_torch)
	// _run_on_acc_1: 2 ops, multi-device true, 0 ForeignNodes
	// {ForeignNode[[SHUFFLE]-[op1_shuffle]...[SHUFFLE]-[op3_shuffle]]}
}
