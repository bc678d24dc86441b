package collectives_test

import (
	"fmt"
	"testing"

	"github.com/collsim/collsim/perf"
)

// BenchmarkRingAllReduce512 is a 512-rank NCCL ring all-reduce of 1 MiB with
// one value chunk per rank segment.
func BenchmarkRingAllReduce512(b *testing.B) {
	for _, n := range []int{64, 512} {
		b.Run(fmt.Sprintf("ranks=%d", n), func(b *testing.B) {
			for b.Loop() {
				w, err := perf.RingWorld(n, 1<<20, n)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := w.Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
