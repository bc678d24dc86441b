package collectives_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// famCase is one collective run: op, strategy, a communicator over group
// inside a world of n ranks, block size B, calls back to back.
type famCase struct {
	op       collectives.Op
	s        collectives.Strategy
	n        int // world size
	groups   [][]int
	B        int   // per-rank block (chunks)
	bytes    int64 // bytes per block
	calls    int
	root     int
	blocks   int
	implicit bool
}

func inChunks(op collectives.Op, g, B int) int {
	switch op {
	case collectives.ReduceScatter, collectives.AllToAll:
		return g * B
	}
	return B
}

func outChunks(op collectives.Op, g, B int) int {
	switch op {
	case collectives.AllGather, collectives.AllToAll:
		return g * B
	}
	return B
}

func initVal(r, k, c int) uint64 { return uint64(1 + 7*r + 131*c + 10007*k) }

// ideal is the collective's definition over the group's inputs.
func ideal(op collectives.Op, group []int, root, B, k, gi, c int) uint64 {
	switch op {
	case collectives.AllReduce:
		var s uint64
		for _, r := range group {
			s += initVal(r, k, c)
		}
		return s
	case collectives.AllGather:
		return initVal(group[c/B], k, c%B)
	case collectives.ReduceScatter:
		var s uint64
		for _, r := range group {
			s += initVal(r, k, gi*B+c)
		}
		return s
	case collectives.AllToAll:
		return initVal(group[c/B], k, gi*B+c%B)
	case collectives.Broadcast:
		return initVal(group[root], k, c)
	}
	panic("op")
}

// runFamily runs fc on every group (disjoint sub-communicators share the
// world) and returns the outputs per (rank, call) and the result.
func runFamily(t require.TestingT, fc famCase, ch sim.Chooser) (map[[2]int]*ranks.Buffer, *ranks.Result) {
	hw := ranks.Profiles["b200"]
	w := ranks.NewWorld(fc.n, ranks.Config{Mode: ranks.Eager, LaunchCost: hw.Launch, EventCost: hw.EventOp}, sim.NewEngine(sim.Timed, ch))
	outs := map[[2]int]*ranks.Buffer{}
	progs := make([]*ranks.Program, fc.n)
	for r := range progs {
		progs[r] = &ranks.Program{Streams: []string{"main"}}
	}
	for gi, group := range fc.groups {
		g := len(group)
		comm := collectives.NewComm(w, fmt.Sprintf("c%d", gi), group, collectives.SharedWorkspace, hw, fc.B)
		comm.WorkspaceChunks = g * fc.B
		comm.PadSlots = max(1, fc.blocks) * g
		comm.ImplicitOrder = fc.implicit
		for _, r := range group {
			for k := range fc.calls {
				ic, oc := inChunks(fc.op, g, fc.B), outChunks(fc.op, g, fc.B)
				in := w.Alloc(r, fmt.Sprintf("in%d", k), fc.bytes*int64(ic/fc.B), ic)
				w.Init(in, func(c int) uint64 { return initVal(r, k, c) })
				out := w.Alloc(r, fmt.Sprintf("out%d", k), fc.bytes*int64(oc/fc.B), oc)
				ks, err := comm.Collective(r, collectives.Call{Name: fmt.Sprintf("c%d.%s%d", gi, fc.op, k), Op: fc.op, Strategy: fc.s, In: in, Out: out, Root: fc.root, Blocks: fc.blocks})
				require.NoError(t, err)
				progs[r].Ops = append(progs[r].Ops, ranks.HostOp{Kind: ranks.Launch, Kernel: ks})
				outs[[2]int{r, k}] = out
			}
		}
	}
	for r, p := range progs {
		w.SetProgram(r, p)
	}
	res, err := w.Run()
	require.NoError(t, err)
	return outs, res
}

func checkIdeal(t require.TestingT, fc famCase, outs map[[2]int]*ranks.Buffer, res *ranks.Result) {
	require.False(t, res.Hung, "hang: %v", res.Findings)
	require.Empty(t, res.Findings)
	for _, group := range fc.groups {
		for gi, r := range group {
			for k := range fc.calls {
				out := outs[[2]int{r, k}]
				for c := range out.Chunks() {
					want := ideal(fc.op, group, fc.root, fc.B, k, gi, c) % ranks.Modulus
					require.Equal(t, want, out.Vals[c].N, "%s/%s rank %d call %d chunk %d", fc.op, fc.s, r, k, c)
				}
			}
		}
	}
}

func iota(lo, n, stride int) []int {
	g := make([]int, n)
	for i := range g {
		g[i] = lo + i*stride
	}
	return g
}

// Every collective under every algorithm that implements it equals its
// ideal semantics, on 2–16 ranks.
func TestFamilyEqualsIdeal(t *testing.T) {
	for _, op := range collectives.Ops {
		for _, s := range collectives.Strategies {
			if !collectives.Supports(op, s) {
				continue
			}
			for n := 2; n <= 16; n++ {
				fc := famCase{op: op, s: s, n: n, groups: [][]int{iota(0, n, 1)}, B: 2, bytes: 4096, calls: 2, root: n / 2}
				t.Run(fmt.Sprintf("%s/%s/n=%d", op, s, n), func(t *testing.T) {
					outs, res := runFamily(t, fc, nil)
					checkIdeal(t, fc, outs, res)
				})
			}
		}
	}
}

// Sub-communicators: TP=4 × SP=2 on 8 ranks. TP groups are {0..3}, {4..7};
// SP groups {0,4}, {1,5}, … Each group's calls see only its members.
func TestFamilySubCommunicators(t *testing.T) {
	tp := [][]int{iota(0, 4, 1), iota(4, 4, 1)}
	var sp [][]int
	for i := range 4 {
		sp = append(sp, []int{i, i + 4})
	}
	for _, op := range collectives.Ops {
		for _, s := range collectives.Strategies {
			if !collectives.Supports(op, s) {
				continue
			}
			for name, groups := range map[string][][]int{"tp4": tp, "sp2": sp} {
				fc := famCase{op: op, s: s, n: 8, groups: groups, B: 2, bytes: 4096, calls: 2, root: 1}
				t.Run(fmt.Sprintf("%s/%s/%s", op, s, name), func(t *testing.T) {
					outs, res := runFamily(t, fc, nil)
					checkIdeal(t, fc, outs, res)
				})
			}
		}
	}
}

// Large messages go through NCCL connections in slot-sized pieces and
// symmetric kernels may use several blocks; both still equal the ideal.
func TestFamilyPiecesAndBlocks(t *testing.T) {
	for _, op := range collectives.Ops {
		for _, s := range collectives.Strategies {
			if !collectives.Supports(op, s) {
				continue
			}
			fc := famCase{op: op, s: s, n: 4, groups: [][]int{iota(0, 4, 1)}, B: 5, bytes: 3 << 20, calls: 2, root: 3, blocks: 3}
			t.Run(fmt.Sprintf("%s/%s", op, s), func(t *testing.T) {
				outs, res := runFamily(t, fc, nil)
				checkIdeal(t, fc, outs, res)
			})
		}
	}
}

// Property: under any seeded timing jitter and rank skew, ordered calls on
// one stream equal the ideal semantics, with no finding, on the whole world
// or on disjoint sub-communicators running side by side.
func TestFamilyPropertyAnySchedule(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		op := rapid.SampledFrom(collectives.Ops).Draw(rt, "op")
		var ss []collectives.Strategy
		for _, s := range collectives.Strategies {
			if collectives.Supports(op, s) {
				ss = append(ss, s)
			}
		}
		s := rapid.SampledFrom(ss).Draw(rt, "strategy")
		n := rapid.IntRange(2, 16).Draw(rt, "n")
		// Sub-communicators: the whole world, or k groups of n/k ranks,
		// contiguous (TP-like) or strided (SP-like).
		groups := [][]int{iota(0, n, 1)}
		if k := rapid.SampledFrom([]int{1, 2, 3, 4}).Draw(rt, "groups"); k > 1 && n%k == 0 && n/k >= 2 {
			groups = nil
			strided := rapid.Bool().Draw(rt, "strided")
			for g := range k {
				if strided {
					groups = append(groups, iota(g, n/k, k))
				} else {
					groups = append(groups, iota(g*(n/k), n/k, 1))
				}
			}
		}
		root := rapid.IntRange(0, len(groups[0])-1).Draw(rt, "root")
		fc := famCase{op: op, s: s, n: n, groups: groups,
			B:      rapid.IntRange(1, 4).Draw(rt, "B"),
			bytes:  rapid.SampledFrom([]int64{1024, 1 << 20}).Draw(rt, "bytes"),
			calls:  rapid.IntRange(1, 3).Draw(rt, "calls"),
			root:   root,
			blocks: rapid.IntRange(1, 3).Draw(rt, "blocks"),
		}
		seed := rapid.Uint64().Draw(rt, "seed")
		outs, res := runFamily(rt, fc, sim.NewRandom(seed, 300))
		checkIdeal(rt, fc, outs, res)
	})
}

// Bad shapes and unsupported pairs are errors, not panics.
func TestFamilyBadInput(t *testing.T) {
	hw := ranks.Profiles["b200"]
	w := ranks.NewWorld(4, ranks.Config{}, sim.NewEngine(sim.Timed, nil))
	comm := collectives.NewComm(w, "c", []int{0, 1, 2, 3}, collectives.SharedWorkspace, hw, 2)
	a2 := w.Alloc(0, "a2", 64, 2)
	a3 := w.Alloc(0, "a3", 64, 3)
	a8 := w.Alloc(0, "a8", 64, 8)
	for _, tc := range []struct {
		call collectives.Call
		rank int
		want string
	}{
		{collectives.Call{Name: "x", Op: collectives.AllReduce, Strategy: collectives.NCCL, In: a2, Out: a3}, 0, "want equal"},
		{collectives.Call{Name: "x", Op: collectives.AllGather, Strategy: collectives.NCCL, In: a2, Out: a2}, 0, "want 8"},
		{collectives.Call{Name: "x", Op: collectives.ReduceScatter, Strategy: collectives.NCCL, In: a3, Out: a2}, 0, "want 8"},
		{collectives.Call{Name: "x", Op: collectives.AllToAll, Strategy: collectives.NCCL, In: a3, Out: a3}, 0, "divisible"},
		{collectives.Call{Name: "x", Op: collectives.AllToAll, Strategy: collectives.Multimem, In: a8, Out: a8}, 0, "does not implement"},
		{collectives.Call{Name: "x", Op: collectives.Broadcast, Strategy: collectives.NCCL, In: a2, Out: a2, Root: 4}, 0, "root 4 out of range"},
		{collectives.Call{Name: "x", Op: collectives.AllReduce, Strategy: collectives.NCCL, In: a2, Out: a2}, 7, "not in communicator"},
		{collectives.Call{Name: "x", Op: collectives.AllGather, Strategy: collectives.P2POneShot, In: a2, Out: a8}, 0, "workspace"},
		{collectives.Call{Name: "x", Op: collectives.AllReduce, Strategy: collectives.Multimem, In: a2, Out: a2, Blocks: 9}, 0, "signal pad"}, // a pad holds 8 blocks of slots (collectives.MultimemMaxBlocks)
		{collectives.Call{Name: "x", Op: "gather", Strategy: collectives.NCCL, In: a2, Out: a2}, 0, "unknown op"},
	} {
		_, err := comm.Collective(tc.rank, tc.call)
		require.ErrorContains(t, err, tc.want)
	}
	_, err := collectives.ParseOp("gather")
	require.ErrorContains(t, err, "want allreduce")
}

// A ring step carries more slot-sized pieces than a connection has slots
// (NCCLSteps = 8 slots of 512 KiB): an 8 MiB all-gather block is 16
// pieces. The pieces alternate send and receive, as NCCL's runRing does
// chunk by chunk, so the step completes; sending every piece before the
// first receive deadlocked every rank on a full connection. 16 chunks
// show that capping the pieces at the chunk count would not be enough.
func TestRingStepLongerThanConnection(t *testing.T) {
	for _, op := range collectives.Ops {
		for _, n := range []int{2, 4} {
			for _, B := range []int{4, 16} {
				for _, bytes := range []int64{8 << 20, 32 << 20} {
					fc := famCase{op: op, s: collectives.NCCL, n: n, groups: [][]int{iota(0, n, 1)}, B: B, bytes: bytes, calls: 1, root: n - 1}
					t.Run(fmt.Sprintf("%s/n=%d/B=%d/%dMiB", op, n, B, bytes>>20), func(t *testing.T) {
						outs, res := runFamily(t, fc, nil)
						checkIdeal(t, fc, outs, res)
					})
				}
			}
		}
	}
}
