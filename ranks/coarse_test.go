package ranks

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/collsim/collsim/sim"
)

// TestPropRingEndsClosedForm: the O(n) longest-path form of the ring's end
// times equals the step-by-step recurrence it solves, for any start times,
// durations (the first step longer or shorter than the others, or zero)
// and FIFO depth.
func TestPropRingEndsClosedForm(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(2, 40).Draw(rt, "n")
		cp := rapid.IntRange(2, 10).Draw(rt, "cap")
		a := sim.Time(rapid.IntRange(0, 5000).Draw(rt, "a"))
		b := sim.Time(rapid.IntRange(0, 5000).Draw(rt, "b"))
		spread := rapid.IntRange(0, 200000).Draw(rt, "spread")
		start := make([]sim.Time, n)
		for i := range start {
			start[i] = sim.Time(rapid.IntRange(0, spread).Draw(rt, fmt.Sprintf("s%d", i)))
		}
		require.Equal(rt, ringEndsNaive(start, a, b, cp), ringEnds(start, a, b, cp))
	})
}

// TestRingEndsTogether: ranks that start together end together, after the
// first step and 2n−2 more (a 512-rank ring at NCCL's depth of 8).
func TestRingEndsTogether(t *testing.T) {
	start := make([]sim.Time, 512)
	for _, e := range ringEnds(start, 1500, 1200, 8) {
		require.Equal(t, sim.Time(1500+1022*1200), e)
	}
}

// TestPropRingSumsOrder: the rank-by-rank sums equal the segment-by-segment
// chains they reorder, values and provenance, for uneven segments (some
// empty) and inputs with uninitialised chunks.
func TestPropRingSumsOrder(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 12).Draw(rt, "n")
		chunks := rapid.IntRange(0, 3*n).Draw(rt, "chunks")
		w := NewWorld(n, Config{}, sim.NewEngine(sim.Timed, nil))
		ins := make([][]Value, n)
		for r := range n {
			b := w.Alloc(r, "in", 1<<10, chunks)
			for c := range chunks {
				if rapid.IntRange(0, 5).Draw(rt, fmt.Sprintf("init%d.%d", r, c)) > 0 {
					b.Vals[c] = Value{N: uint64(r*100 + c), P: w.leaf(w.srcOf(b, c))}
				}
			}
			ins[r] = b.Vals
		}
		seg := make([]int, n+1)
		for s := range seg {
			seg[s] = s * chunks / n
		}
		fast, naive := w.ringSums(ins, seg), w.ringSumsNaive(ins, seg)
		require.Len(rt, fast, len(naive))
		for c := range naive {
			require.Equal(rt, naive[c].N, fast[c].N, "chunk %d", c)
			require.Equal(rt, w.Srcs.Terms(naive[c]), w.Srcs.Terms(fast[c]), "chunk %d", c)
			if fast[c].P != 0 { // both walks of a list node
				require.Equal(rt, w.Srcs.Terms(naive[c]), w.provTab.memoTerms(fast[c].P), "chunk %d", c)
			}
			require.Equal(rt, naive[c].P == 0, fast[c].P == 0, "chunk %d", c)
		}
	})
}

// TestPropLastPops: the receive times a list call leaves for the next one
// on its FIFO are the last cap of those before it and its own, oldest
// first, as a plain append of the two would give.
func TestPropLastPops(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cp := rapid.IntRange(1, 8).Draw(rt, "cap")
		prev := rapid.SliceOfN(rapid.Int64Range(0, 1000), 0, cp).Draw(rt, "prev")
		n := rapid.IntRange(0, 3*cp).Draw(rt, "popped")
		lf := &listFifo{cap: cp, poppedAt: make([]sim.Time, cp)}
		all := []sim.Time{}
		for _, x := range prev {
			lf.prev = append(lf.prev, sim.Time(x))
			all = append(all, sim.Time(x))
		}
		for k := range n {
			lf.poppedAt[k%cp] = sim.Time(2000 + k)
			lf.nPopped++
			all = append(all, sim.Time(2000+k))
		}
		require.Equal(rt, all[max(0, len(all)-cp):], lf.lastPops())
	})
}
