package collectives

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// TestMultimemGenMatchesList checks the generated multimem_all_reduce_
// kernel against the list multimemAllReduce writes out: every micro-op of
// every rank, field by field, for group sizes 1 to 9, 1 to 8 blocks, chunk
// counts that leave some blocks empty, and again after a Rebind onto the
// same world (the identity).
func TestMultimemGenMatchesList(t *testing.T) {
	hw := ranks.Profiles["h100"]
	id := ranks.Rebinding{
		Buffer: func(b *ranks.Buffer) *ranks.Buffer { return b },
		Fifo:   func(f *ranks.Fifo) *ranks.Fifo { return f },
		Pad:    func(p *ranks.SignalPad) *ranks.SignalPad { return p },
	}
	for _, n := range []int{1, 2, 3, 8, 9} {
		for _, blocks := range []int{1, 2, 3, 8} {
			for _, chunks := range []int{1, 4, 16} {
				t.Run(fmt.Sprintf("n=%d/blocks=%d/chunks=%d", n, blocks, chunks), func(t *testing.T) {
					w := ranks.NewWorld(2*n, ranks.Config{}, sim.NewEngine(sim.Timed, nil))
					group := make([]int, n)
					for i := range group {
						group[i] = 2*i + 1
					}
					c := NewComm(w, "g", group, PerCallWorkspace, hw, chunks)
					c.PadSlots = MultimemMaxBlocks * n
					for i, r := range group {
						in := w.Alloc(r, "in", 1<<20, chunks)
						call := Call{Name: "ar", Op: AllReduce, Strategy: Multimem, In: in, Out: in}
						ws := c.workspace(call.Name)
						want := c.multimemAllReduce(i, call, ws, blocks)
						g := c.multimemGen(nil, i, call, ws, blocks)
						for _, gen := range []ranks.InstrGen{g, g.Rebind(id)} {
							k := &ranks.KernelSpec{Gen: gen}
							require.Equal(t, len(want), k.Len())
							got := k.Expand()
							for pc := range want {
								require.Equal(t, want[pc], got[pc], "rank %d pc %d", i, pc)
							}
						}
					}
				})
			}
		}
	}
}
