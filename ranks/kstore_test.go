package ranks

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestKernelStoreReuses: after Reset a store hands out the same kernels
// and slices again, in the order it first did, cleared (a kernel with the
// generator it had, for its maker to reuse); a request larger than the
// one it replaces gets a new slice; a nil store allocates.
func TestKernelStoreReuses(t *testing.T) {
	var s KernelStore
	gen := &opsGen{}
	make1 := func() (*KernelSpec, InstrGen, []Instr, []Src) {
		k, old := s.Kernel()
		k.Name, k.Gen = "k", gen
		ins, srcs := s.Instrs(2), s.Srcs(3)
		ins[1].N, srcs[2].Lo = 7, 5
		return k, old, ins, srcs
	}
	k1, old, ins1, srcs1 := make1()
	require.Nil(t, old)
	s.Reset()
	k2, old, ins2, srcs2 := make1()
	require.Same(t, k1, k2)
	require.Equal(t, InstrGen(gen), old, "the kernel's last generator comes back")
	require.Same(t, &ins1[0], &ins2[0])
	require.Same(t, &srcs1[0], &srcs2[0])

	s.Reset()
	k, _ := s.Kernel()
	require.Equal(t, KernelSpec{}, *k, "cleared")
	require.Equal(t, make([]Instr, 2), s.Instrs(2))
	big := s.Srcs(4)
	require.NotSame(t, &srcs1[0], &big[0], "larger than the one it replaces")
	require.Equal(t, make([]Src, 4), big)
	require.Nil(t, s.Loads(0))

	var none *KernelStore
	a, _ := none.Kernel()
	b, _ := none.Kernel()
	require.NotSame(t, a, b)
	none.Reset()
}

// opsGen is a generator for tests: its micro-ops listed.
type opsGen struct{ ops []Instr }

func (g *opsGen) Len() int                   { return len(g.ops) }
func (g *opsGen) At(pc int, _ *Instr) *Instr { return &g.ops[pc] }
func (g *opsGen) Refs() Refs                 { return Refs{} }
func (g *opsGen) Rebind(Rebinding) InstrGen  { return g }
