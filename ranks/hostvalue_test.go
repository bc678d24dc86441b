package ranks_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// runSteps runs a program that adds step·one into acc for each of 3 steps,
// step being a host scalar passed as a launch argument: eager builds (and
// reads the scalar) once per step; graph captures once and replays 3 times.
func runSteps(t *testing.T, mode ranks.Mode) (uint64, []int64) {
	t.Helper()
	const steps = 3
	w := ranks.NewWorld(1, ranks.Config{Mode: mode, Replays: steps, LaunchCost: 10, EventCost: 10}, sim.NewEngine(sim.Timed, nil))
	one := w.Alloc(0, "one", 8, 1)
	w.Init(one, func(int) uint64 { return 1 })
	acc := w.Alloc(0, "acc", 8, 1)
	step := &ranks.HostScalar{Name: "step", V: 1}
	p := &ranks.Program{Streams: []string{"main"}}
	body := func() {
		p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Kernel: &ranks.KernelSpec{Name: "add_step", Instrs: []ranks.Instr{{
			Op: ranks.OpCompute, Dst: acc, N: 1, Dur: 10, Srcs: []ranks.Src{{Buf: acc, Coef: 1}, {Buf: one, Coef: step.Arg()}}}}}})
	}
	if mode == ranks.Graph {
		body() // capture
	} else {
		for range steps {
			body()
			step.Advance(1)
		}
	}
	w.SetProgram(0, p)
	_, err := w.Run()
	require.NoError(t, err)
	return acc.Vals[0].N, step.Reads
}

func TestHostScalarFrozenAtCapture(t *testing.T) {
	eager, er := runSteps(t, ranks.Eager)
	graph, gr := runSteps(t, ranks.Graph)
	require.Equal(t, uint64(1+2+3), eager)
	require.Equal(t, []int64{1, 2, 3}, er)
	require.Equal(t, uint64(1+1+1), graph, "every replay reads the value captured in replay 1")
	require.Equal(t, []int64{1}, gr)
}

func ExampleHostScalar() {
	step := &ranks.HostScalar{Name: "step", V: 1}
	_ = step.Arg() // read while capturing
	step.Advance(1)
	fmt.Println(step.Describe(true))
	// Output: host scalar step read [1] at capture; every replay reuses the captured value
}
