package collectives_test

import (
	"fmt"
	"testing"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// ringWorld builds n ranks doing one NCCL ring all-reduce of bytes with
// chunks value chunks per rank (values and race detection on).
func ringWorld(n int, bytes int64, chunks int) *ranks.World {
	hw := ranks.Profiles["h100"]
	w := ranks.NewWorld(n, ranks.Config{Mode: ranks.Eager, LaunchCost: hw.Launch, EventCost: hw.EventOp}, sim.NewEngine(sim.Timed, nil))
	group := make([]int, n)
	for i := range group {
		group[i] = i
	}
	comm := collectives.NewComm(w, "world", group, collectives.SharedWorkspace, hw, chunks)
	for r := range n {
		in := w.Alloc(r, "in", bytes, chunks)
		w.Init(in, func(c int) uint64 { return uint64(r*chunks + c) })
		out := w.Alloc(r, "out", bytes, chunks)
		k, err := comm.AllReduce(r, "ar", collectives.NCCL, in, out)
		if err != nil {
			panic(err)
		}
		w.SetProgram(r, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{{Kind: ranks.Launch, Kernel: k}}})
	}
	return w
}

// BenchmarkRingAllReduce512 is a 512-rank NCCL ring all-reduce of 1 MiB with
// one value chunk per rank segment.
func BenchmarkRingAllReduce512(b *testing.B) {
	for _, n := range []int{64, 512} {
		b.Run(fmt.Sprintf("ranks=%d", n), func(b *testing.B) {
			for b.Loop() {
				w := ringWorld(n, 1<<20, n)
				if _, err := w.Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
