package ranks_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/ranks/cachealloc"
	"github.com/collsim/collsim/sim"
)

// The caching allocator's reuse rules, one per row: what the second malloc
// gets after the first tensor is freed.
func TestAllocatorReuseRules(t *testing.T) {
	type step struct {
		recordOn string // record_stream the first tensor on this stream
		sync     bool   // device synchronize after the free
	}
	tests := []struct {
		name      string
		caching   bool
		firstSize int64
		stream2   string
		size2     int64
		st        step
		reused    bool // y starts at x's address
	}{
		{"same stream, same size", true, 4096, "main", 4096, step{}, true},
		{"same stream, smaller size fits", true, 4096, "main", 1000, step{}, true},
		{"same stream, rounding makes it fit", true, 4000, "main", 4096, step{}, true},
		{"twice the size: the freed block merged with the free rest of its segment", true, 4096, "main", 8192, step{}, true},
		{"other stream's pool is not searched", true, 4096, "aux", 4096, step{}, false},
		{"small block not handed to a large request", true, 1 << 20, "main", 1<<20 + 1, step{}, false},
		{"large block not handed to a small request", true, 4 << 20, "main", 4096, step{}, false},
		{"record_stream defers the free", true, 4096, "main", 4096, step{recordOn: "aux"}, false},
		{"record_stream on the owning stream is a no-op", true, 4096, "main", 4096, step{recordOn: "main"}, true},
		{"record_stream then synchronize", true, 4096, "main", 4096, step{recordOn: "aux", sync: true}, true},
		{"no caching: fresh memory", false, 4096, "main", 4096, step{}, false},
		{"no caching, even after synchronize", false, 4096, "main", 4096, step{sync: true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := ranks.NewWorld(1, ranks.Config{}, sim.NewEngine(sim.Timed, nil))
			a := w.NewAllocator(0, tt.caching)
			x, err := a.Malloc("x", "main", tt.firstSize, 2)
			require.NoError(t, err)
			if tt.st.recordOn != "" {
				require.NoError(t, a.RecordStream(x, tt.st.recordOn))
			}
			require.NoError(t, a.Free(x))
			if tt.st.sync {
				a.Synchronize()
			}
			y, err := a.Malloc("y", tt.stream2, tt.size2, 2)
			require.NoError(t, err)
			require.Equal(t, tt.reused, x.Block.Ptr == y.Block.Ptr, "log: %v", a.Log)
			require.Equal(t, tt.reused, len(y.Block.Tensors) == 2, "overlap recorded: %v", y.Block.Tensors)
			if tt.reused {
				require.Contains(t, y.Describe(), "memory that [x y] held in turn")
			}
		})
	}
}

// Best fit is by size, then address; a block is split only when the rest
// is worth keeping; freed neighbours merge.
func TestAllocatorBestFitSplitMerge(t *testing.T) {
	w := ranks.NewWorld(1, ranks.Config{}, sim.NewEngine(sim.Timed, nil))
	a := w.NewAllocator(0, true)
	big, _ := a.Malloc("big", "main", 64<<10, 1)
	mid, _ := a.Malloc("mid", "main", 16<<10, 1)
	keep, _ := a.Malloc("keep", "main", 512, 1)
	require.NoError(t, a.Free(big))
	require.NoError(t, a.Free(mid))
	// big and mid merged into one 80 KiB block at the segment's start; the
	// rest of the segment lies after keep: the 80 KiB block is the best fit.
	got, err := a.Malloc("want", "main", 8<<10, 1)
	require.NoError(t, err)
	require.Equal(t, big.Block.Ptr, got.Block.Ptr, "the merged block, lowest address: %v", a.Log)
	require.Equal(t, int64(8<<10), got.Block.Bytes, "split: the rest stays free")
	next, _ := a.Malloc("next", "main", 72<<10, 1)
	require.Equal(t, big.Block.Ptr+8<<10, next.Block.Ptr, "the 72 KiB rest fits exactly")
	_ = keep
	// Large pool: a 3 MiB request takes a 20 MiB segment and splits it (the
	// rest is over 1 MiB); a 19.5 MiB request does not split off 512 KiB.
	l1, _ := a.Malloc("l1", "main", 3<<20, 1)
	require.Equal(t, cachealloc.AllocLargeSegment, l1.Block.Seg.Size)
	require.Equal(t, int64(3<<20), l1.Block.Bytes)
	require.NoError(t, a.Free(l1))
	l2, _ := a.Malloc("l2", "main", 39<<19, 1)
	require.Equal(t, cachealloc.AllocLargeSegment, l2.Block.Bytes, "rest of 512 KiB is not split off a large block")
	// 12 MiB: its own segment, rounded to 2 MiB.
	l3, _ := a.Malloc("l3", "main", 11<<20+1, 1)
	require.Equal(t, int64(12<<20), l3.Block.Seg.Size)
	// Errors.
	_, err = a.Malloc("zero", "main", 0, 1)
	require.ErrorIs(t, err, ranks.ErrAlloc)
	require.ErrorIs(t, a.Free(mid), ranks.ErrAlloc, "double free")
	require.ErrorIs(t, a.RecordStream(mid, "aux"), ranks.ErrAlloc)
}

// empty_cache returns wholly free segments to the driver; a capture's
// private pool serves only the capture; without caching, a malloc during
// capture is a capture error.
func TestAllocatorEmptyCacheAndCapture(t *testing.T) {
	w := ranks.NewWorld(1, ranks.Config{}, sim.NewEngine(sim.Timed, nil))
	a := w.NewAllocator(0, true)
	x, _ := a.Malloc("x", "main", 4096, 1)
	y, _ := a.Malloc("y", "main", 3<<20, 1)
	require.NoError(t, a.Free(x))
	a.EmptyCache()
	require.True(t, x.Block.Seg.Released)
	require.False(t, y.Block.Seg.Released, "a segment with a live block stays")
	x2, _ := a.Malloc("x2", "main", 4096, 1)
	require.NotEqual(t, x.Block.Seg, x2.Block.Seg)
	require.Len(t, x2.Block.Tensors, 1, "a released segment's memory is not aliased")

	require.NoError(t, a.Free(x2))
	a.BeginCapture()
	c1, _ := a.Malloc("c1", "main", 4096, 1)
	require.Positive(t, c1.Block.Seg.Pool, "capture allocations come from the private pool")
	require.NoError(t, a.Free(c1))
	c2, _ := a.Malloc("c2", "main", 4096, 1)
	require.Equal(t, c1.Block.Ptr, c2.Block.Ptr, "reused within the capture")
	a.EndCapture()
	after, _ := a.Malloc("after", "main", 4096, 1)
	require.Equal(t, x2.Block.Ptr, after.Block.Ptr, "after the capture: the default pool again")
	require.Empty(t, a.Findings)

	nc := w.NewAllocator(0, false)
	nc.BeginCapture()
	_, err := nc.Malloc("t", "main", 4096, 1)
	require.NoError(t, err)
	require.Len(t, nc.Findings, 1)
	require.Equal(t, ranks.KindCaptureError, nc.Findings[0].Kind)
	require.Contains(t, nc.Findings[0].Message, "cudaErrorStreamCaptureInvalidated")
}

// A use after free across streams: aux reads x late, main frees x and the
// next main allocation reuses its memory. Without a join the reuse is a race
// and aux reads main's new data; with record_stream the memory is not
// reused; with a join before the free the reuse is ordered. The reuse is
// by address: y is twice x's size and starts at x's address.
func TestAllocatorUseAfterFree(t *testing.T) {
	for _, mode := range []string{"none", "record_stream", "join"} {
		t.Run(mode, func(t *testing.T) {
			w := ranks.NewWorld(1, ranks.Config{LaunchCost: 100, EventCost: 100}, sim.NewEngine(sim.Timed, nil))
			a := w.NewAllocator(0, true)
			x, _ := a.Malloc("x", "main", 4096, 2)
			w.Init(x, func(int) uint64 { return 7 })
			sh, _ := a.Malloc("sh", "aux", 4096, 2)
			p := &ranks.Program{Streams: []string{"main", "aux"}, Events: []string{"fork", "join"}}
			p.Ops = append(p.Ops,
				ranks.HostOp{Kind: ranks.Record, Stream: 0, Event: 0},
				ranks.HostOp{Kind: ranks.Wait, Stream: 1, Event: 0},
				// aux: a long delay, then read x.
				ranks.HostOp{Kind: ranks.Launch, Stream: 1, Kernel: &ranks.KernelSpec{Name: "slow", Instrs: []ranks.Instr{{Op: ranks.OpDelay, Dur: 50000}}}},
				ranks.HostOp{Kind: ranks.Launch, Stream: 1, Kernel: &ranks.KernelSpec{Name: "sh_gemm", Instrs: []ranks.Instr{{Op: ranks.OpCompute, Dst: sh, N: 2, Srcs: []ranks.Src{{Buf: x, Coef: 3}}, Dur: 100}}}},
			)
			if mode == "record_stream" {
				require.NoError(t, a.RecordStream(x, "aux"))
			}
			if mode == "join" {
				p.Ops = append(p.Ops,
					ranks.HostOp{Kind: ranks.Record, Stream: 1, Event: 1},
					ranks.HostOp{Kind: ranks.Wait, Stream: 0, Event: 1})
			}
			require.NoError(t, a.Free(x))
			y, _ := a.Malloc("y", "main", 8192, 2)
			p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: 0, Kernel: &ranks.KernelSpec{Name: "y_fill", Instrs: []ranks.Instr{{Op: ranks.OpCompute, Dst: y, N: 2, Srcs: []ranks.Src{{Buf: y, Coef: 0}}, Fresh: true, Dur: 100}}}})
			w.SetProgram(0, p)
			res, err := w.Run()
			require.NoError(t, err)
			races := 0
			for _, f := range res.Findings {
				if f.Kind == ranks.KindRace && strings.Contains(f.Message, `tensor "x"`) {
					races++
					require.Contains(t, f.Message, "stream aux")
					require.Contains(t, f.Message, "stream main")
				}
			}
			switch mode {
			case "none":
				require.Equal(t, 1, races, "%v", res.Findings)
				require.Equal(t, x.Block.Ptr, y.Block.Ptr)
				// y's chunk 0 covers both of x's chunks: aux read main's
				// new data (0), not x's 7, in both.
				require.Equal(t, []uint64{0, 0}, []uint64{sh.Vals[0].N, sh.Vals[1].N})
			case "join":
				require.Zero(t, races, "%v", res.Findings)
				require.Equal(t, x.Block.Ptr, y.Block.Ptr, "reused, but ordered")
				require.Equal(t, uint64(21), sh.Vals[0].N)
			default:
				require.Zero(t, races, "%v", res.Findings)
				require.NotEqual(t, x.Block.Ptr, y.Block.Ptr)
				require.Equal(t, uint64(21), sh.Vals[0].N)
			}
		})
	}
}

func ExampleAllocator() {
	w := ranks.NewWorld(1, ranks.Config{}, sim.NewEngine(sim.Timed, nil))
	a := w.NewAllocator(0, true)
	x, _ := a.Malloc("x_norm", "main", 16384, 2)
	_ = a.Free(x)
	// Twice the size: the freed block merged back into the rest of its
	// segment, so the best fit starts at x_norm's address.
	y, _ := a.Malloc("rt_out", "main", 32768, 2)
	fmt.Println(x.Block.Ptr == y.Block.Ptr)
	for _, l := range a.Log {
		fmt.Println(l)
	}
	// Output:
	// true
	// malloc x_norm (16 KiB) on main: 0x7f0000000000 in segment #0 (2 MiB), new segment
	// free x_norm: 0x7f0000000000 back in stream main's pool
	// malloc rt_out (32 KiB) on main: 0x7f0000000000 in segment #0 (2 MiB), reuses a free block; overlaps freed x_norm
}
