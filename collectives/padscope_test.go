package collectives_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

func TestSlotOffsets(t *testing.T) {
	tests := []struct{ ws, ch, gi, want int }{
		{3, 0, 0, 0}, {3, 0, 2, 2}, {3, 1, 0, 3}, {2, 0, 1, 1}, {2, 1, 1, 3}, {8, 7, 7, 63},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, collectives.Slot(tt.ws, tt.ch, tt.gi), "ws=%d ch=%d gi=%d", tt.ws, tt.ch, tt.gi)
	}
}

var groupA = collectives.Group{Name: "A", Ranks: []int{0, 1, 2}}
var groupB = collectives.Group{Name: "B", Ranks: []int{0, 2}}

func newAlloc(t *testing.T, scope collectives.PadScope) (*ranks.World, *collectives.SymmAlloc) {
	t.Helper()
	w := ranks.NewWorld(3, ranks.Config{LaunchCost: 100, EventCost: 100}, sim.NewEngine(sim.Timed, nil))
	hw, _ := ranks.ProfileFor("h100")
	a, err := collectives.NewSymmAlloc(w, "symm", []int{0, 1, 2}, 2, scope, hw)
	require.NoError(t, err)
	return w, a
}

// Groups {0,1,2} and {0,2} on one allocation: with one pad per allocation
// rank 2 signals rank 0's slot 1 in group B, the slot rank 0 waits on for
// rank 1 in group A. Per-group pads share nothing.
func TestPadAliases(t *testing.T) {
	_, a := newAlloc(t, collectives.PadPerAllocation)
	al := a.Aliases([]collectives.Group{groupA, groupB}, 1)
	require.Contains(t, al, "rank 0's pad slot 1: rank 1 of group A (world rank 1, channel 0) and rank 1 of group B (world rank 2, channel 0)")
	require.Same(t, a.Pad(groupA, 0), a.Pad(groupB, 0))

	_, a = newAlloc(t, collectives.PadPerGroup)
	require.Empty(t, a.Aliases([]collectives.Group{groupA, groupB}, 1))
	require.NotSame(t, a.Pad(groupA, 0), a.Pad(groupB, 0))
	require.Same(t, a.Pad(groupB, 1), a.Pad(groupB, 1), "a group's pad is allocated once")
}

// The two groups' one-shot all-reduces run concurrently; rank 1 starts
// late. With one pad per allocation a signal of group B completes group A's
// wait on rank 0: a mismatch, and rank 0's A result misses rank 1's input.
// With per-group pads every result is the sum over its group.
func TestPadScopeAllReduce(t *testing.T) {
	for _, scope := range []collectives.PadScope{collectives.PadPerAllocation, collectives.PadPerGroup} {
		t.Run(string(scope), func(t *testing.T) {
			w, a := newAlloc(t, scope)
			outs := map[[2]int]*ranks.Buffer{}
			for r := range 3 {
				p := &ranks.Program{Streams: []string{"a", "b"}}
				if r == 1 {
					p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Kernel: &ranks.KernelSpec{Name: "late", Instrs: []ranks.Instr{{Op: ranks.OpDelay, Dur: 20000}}}})
				}
				for gi, g := range []collectives.Group{groupA, groupB} {
					if gi == 1 && r == 1 {
						continue
					}
					in := w.Alloc(r, g.Name+".in", 64, 1)
					w.Init(in, func(int) uint64 { return uint64(1) << (4 * (r + 3*gi)) })
					out := w.Alloc(r, g.Name+".out", 64, 1)
					k, err := a.OneShot(r, g, g.Name, 1, gi, in, out)
					require.NoError(t, err)
					p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: gi, Kernel: k})
					outs[[2]int{r, gi}] = out
				}
				w.SetProgram(r, p)
			}
			res, err := w.Run()
			require.NoError(t, err)
			wantA := uint64(1 | 1<<4 | 1<<8)
			if scope == collectives.PadPerGroup {
				require.Empty(t, res.Findings)
				require.Equal(t, wantA, outs[[2]int{0, 0}].Vals[0].N)
				return
			}
			require.Positive(t, res.Counts[ranks.KindMismatch], "%v", res.Findings)
			require.NotEqual(t, wantA, outs[[2]int{0, 0}].Vals[0].N, "rank 0 read rank 1's copy before rank 1 wrote it")
		})
	}
}

func TestOneShotErrors(t *testing.T) {
	w, a := newAlloc(t, collectives.PadPerAllocation)
	in, out := w.Alloc(1, "in", 64, 1), w.Alloc(1, "out", 64, 1)
	_, err := a.OneShot(1, groupB, "x", 1, 0, in, out)
	require.ErrorContains(t, err, "rank 1 is not in group")
	_, err = a.OneShot(0, groupA, "x", 1000, 0, w.Alloc(0, "i", 64, 1), w.Alloc(0, "o", 64, 1))
	require.ErrorContains(t, err, "do not fit 512 pad slots")
	_, err = a.OneShot(0, groupA, "x", 1, 2, w.Alloc(0, "i", 64, 1), w.Alloc(0, "o", 64, 1))
	require.ErrorContains(t, err, "does not fit allocation")
	_, err = collectives.NewSymmAlloc(w, "bad", []int{0}, 1, "global", ranks.Profile{})
	require.ErrorContains(t, err, "pad scope")
}

func ExampleSlot() {
	// Rank 2 is rank 2 of group {0,1,2} and rank 1 of group {0,2}: with no
	// group id in the slot, its two signals land on different slots, and
	// slot 1 is also where rank 1 of the first group signals.
	fmt.Println(collectives.Slot(3, 0, 2), collectives.Slot(2, 0, 1), collectives.Slot(3, 0, 1))
	// Output: 2 1 1
}
