package collectives_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// allGatherWorld is an n-rank NCCL ring all-gather of one value chunk
// (2 KiB) per rank, alone on every rank's stream: every micro-op an event
// with fine, else one coarse loop (ranks/coarse.go).
func allGatherWorld(b *testing.B, n int, fine bool) *ranks.World {
	hw := ranks.Profiles["h200"]
	w := ranks.NewWorld(n, ranks.Config{Mode: ranks.Eager, LaunchCost: hw.Launch, EventCost: hw.EventOp, FineSteps: fine}, sim.NewEngine(sim.Timed, nil))
	group := make([]int, n)
	for i := range group {
		group[i] = i
	}
	comm := collectives.NewComm(w, "world", group, collectives.SharedWorkspace, hw, 1)
	for r := range n {
		in := w.Alloc(r, "in", 2<<10, 1)
		w.Init(in, func(int) uint64 { return uint64(r + 1) })
		out := w.Alloc(r, "out", int64(n)*2<<10, n)
		k, err := comm.Collective(r, collectives.Call{Name: "ag", Op: collectives.AllGather, Strategy: collectives.NCCL, In: in, Out: out})
		if err != nil {
			b.Fatal(err)
		}
		w.SetProgram(r, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{{Kind: ranks.Launch, Kernel: k}}})
	}
	return w
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRingAllGather512 runs a 512-rank ring all-gather (2 × 511 micro-ops
// a rank, 523 k in all) coarse and fine, each run a copy of one built world
// (ranks.Template, as exploration runs every schedule) made outside the
// timed part, and reports the engine's steps and the process's CPU time
// (user + system, the collector's included) per run.
func BenchmarkRingAllGather512(b *testing.B) {
	for _, fine := range []bool{false, true} {
		b.Run(fmt.Sprintf("fine=%v", fine), func(b *testing.B) {
			var cpu time.Duration
			var steps uint64
			runs := 0
			tm, err := ranks.NewTemplate(allGatherWorld(b, 512, fine))
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				b.StopTimer()
				w := tm.Instantiate(sim.NewEngine(sim.Timed, nil))
				b.StartTimer()
				c := cpuNow()
				res, err := w.Run()
				cpu += cpuNow() - c
				if err != nil || res.Hung || len(res.Findings) > 0 {
					b.Fatal(err, res.Findings)
				}
				if ran, _ := w.CoarseCalls(); (ran == 1) == fine {
					b.Fatalf("fine=%v, %d calls coarse", fine, ran)
				}
				steps, runs = res.Steps, runs+1
			}
			b.ReportMetric(float64(steps), "steps")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(runs), "cpu-ns/op")
		})
	}
}
