package collectives_test

import (
	"fmt"
	"testing"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// Comm.Collective returns one rank's kernel for a call; run every rank's
// kernel and the outputs hold the collective's result.
func ExampleComm_Collective() {
	hw := ranks.Profiles["h100"]
	w := ranks.NewWorld(4, ranks.Config{Mode: ranks.Eager, LaunchCost: hw.Launch}, sim.NewEngine(sim.Timed, nil))
	comm := collectives.NewComm(w, "tp", []int{0, 1, 2, 3}, collectives.SharedWorkspace, hw, 1)
	outs := make([]*ranks.Buffer, 4)
	for r := range 4 {
		in := w.Alloc(r, "x", 4096, 1)
		w.Init(in, func(int) uint64 { return uint64(10 * (r + 1)) })
		outs[r] = w.Alloc(r, "y", 4*4096, 4)
		k, err := comm.Collective(r, collectives.Call{Name: "ag", Op: collectives.AllGather, Strategy: collectives.NCCL, In: in, Out: outs[r]})
		if err != nil {
			panic(err)
		}
		w.SetProgram(r, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{{Kind: ranks.Launch, Kernel: k}}})
	}
	res, _ := w.Run()
	for c := range 4 {
		fmt.Print(outs[2].Vals[c].N, " ")
	}
	fmt.Println(len(res.Findings), "findings")
	// Output: 10 20 30 40 0 findings
}

// Cost is the α–β time of one call on an idle machine.
func ExampleCost() {
	hw := ranks.Profiles["b200"]
	for _, s := range []collectives.Strategy{collectives.NCCL, collectives.NCCLTree, collectives.Multimem} {
		t, _ := collectives.Cost(collectives.AllReduce, s, 8, 1<<20, 1, hw)
		fmt.Printf("%-9s %v ns\n", s, int64(t))
	}
	// Output:
	// nccl      17661 ns
	// nccl-tree 14621 ns
	// multimem  8527 ns
}

func BenchmarkRingAllReduce8(b *testing.B) {
	fc := famCase{op: collectives.AllReduce, s: collectives.NCCL, n: 8, groups: [][]int{iota(0, 8, 1)}, B: 4, bytes: 1 << 20, calls: 4}
	for b.Loop() {
		runFamily(b, fc, nil)
	}
}

func BenchmarkSymmetricAllToAll8(b *testing.B) {
	fc := famCase{op: collectives.AllToAll, s: collectives.P2POneShot, n: 8, groups: [][]int{iota(0, 8, 1)}, B: 1, bytes: 1 << 20, calls: 4}
	for b.Loop() {
		runFamily(b, fc, nil)
	}
}
