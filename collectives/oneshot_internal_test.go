package collectives

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// TestOneShotGenMatchesList checks the generated one-shot all-reduce
// against the stored list it replaced (oneShotList): every micro-op of
// every rank, field by field, for both one-shot strategies and group
// sizes from 1 to 9, per-call and shared workspaces, and again after a
// Rebind onto the same world (the identity).
func TestOneShotGenMatchesList(t *testing.T) {
	hw := ranks.Profiles["h100"]
	for _, n := range []int{1, 2, 3, 8, 9} {
		for _, s := range []Strategy{Multimem, P2POneShot} {
			for _, ws := range []Workspace{SharedWorkspace, PerCallWorkspace} {
				t.Run(fmt.Sprintf("n=%d/%s/%v", n, s, ws), func(t *testing.T) {
					w := ranks.NewWorld(2*n, ranks.Config{}, sim.NewEngine(sim.Timed, nil))
					group := make([]int, n)
					for i := range group {
						group[i] = 2*i + 1 // world ranks differ from group indices
					}
					c := NewComm(w, "g", group, ws, hw, 4)
					id := ranks.Rebinding{
						Buffer: func(b *ranks.Buffer) *ranks.Buffer { return b },
						Fifo:   func(f *ranks.Fifo) *ranks.Fifo { return f },
						Pad:    func(p *ranks.SignalPad) *ranks.SignalPad { return p },
					}
					for _, call := range []string{"ar0", "ar1"} {
						for i, r := range group {
							in, out := w.Alloc(r, "in", 1<<20, 4), w.Alloc(r, "out", 1<<20, 4)
							want := c.oneShotList(i, call, s, in, out)
							g := c.oneShot(i, call, s, in, out)
							for _, gen := range []ranks.InstrGen{g, g.Rebind(id)} {
								k := &ranks.KernelSpec{Gen: gen}
								require.Equal(t, len(want), k.Len())
								got := k.Expand()
								for pc := range want {
									require.Equal(t, want[pc], got[pc], "rank %d pc %d", i, pc)
								}
							}
						}
					}
				})
			}
		}
	}
}
