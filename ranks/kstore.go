package ranks

import "github.com/collsim/collsim/ranks/slab"

// KernelStore is where a builder makes one rank's kernels when it expects
// to drop them: a data-parallel replica's rank is built only for
// [World.Fold] to check it against its proto's, and once folded its own
// kernels are garbage. Then [KernelStore.Reset] lets the next rank's
// kernels take their place instead of asking the allocator again: at
// TP=8 × DP=512 that is 4,088 ranks' kernels made in one rank's memory.
//
// The store hands out kernels and slices in order; after a Reset it hands
// out the same ones again, in the same order, each cleared (or a new one
// when a request is larger than the one it replaces). The next replica's
// rank asks for the same kinds and sizes in the same order, so each request
// finds its own. Nothing handed out may be used after the Reset that
// reuses it: call Reset only when nothing references the kernels any more
// (Fold reported true), and give a rank that keeps its kernels a new store.
//
// A nil *KernelStore allocates everything afresh.
type KernelStore struct {
	kernels []*KernelSpec
	nk      int
	instrs  slab.Seq[Instr]
	srcs    slab.Seq[Src]
	loads   slab.Seq[Load]
}

// Kernel returns a zero kernel. gen is the generator its previous holder
// had (nil for a new one): the kernel at the same place of the previous
// rank's program, so a builder may set it anew for this kernel, when it is
// of the kind the kernel needs, instead of allocating one.
func (s *KernelStore) Kernel() (k *KernelSpec, gen InstrGen) {
	if s == nil {
		return new(KernelSpec), nil
	}
	if s.nk < len(s.kernels) {
		k = s.kernels[s.nk]
		gen = k.Gen
		*k = KernelSpec{}
	} else {
		k = new(KernelSpec)
		s.kernels = append(s.kernels, k)
	}
	s.nk++
	return k, gen
}

// Instrs returns n zero micro-ops (nil for none, as Srcs and Loads).
func (s *KernelStore) Instrs(n int) []Instr {
	if s == nil {
		return slab.Fresh[Instr](n)
	}
	return s.instrs.Get(n)
}

// Srcs returns n zero sources.
func (s *KernelStore) Srcs(n int) []Src {
	if s == nil {
		return slab.Fresh[Src](n)
	}
	return s.srcs.Get(n)
}

// Loads returns n zero loads.
func (s *KernelStore) Loads(n int) []Load {
	if s == nil {
		return slab.Fresh[Load](n)
	}
	return s.loads.Get(n)
}

// Reset makes everything handed out so far available again, to be handed
// out in the same order.
func (s *KernelStore) Reset() {
	if s == nil {
		return
	}
	s.nk = 0
	s.instrs.Reset()
	s.srcs.Reset()
	s.loads.Reset()
}
