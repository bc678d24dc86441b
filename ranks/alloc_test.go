package ranks_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks"
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
		chunks2   int
		st        step
		reused    bool
	}{
		{"same stream, same size", true, 4096, "main", 4096, 2, step{}, true},
		{"same stream, smaller size fits", true, 4096, "main", 1000, 2, step{}, true},
		{"same stream, rounding makes it fit", true, 4000, "main", 4096, 2, step{}, true},
		{"same stream, larger size does not fit", true, 4096, "main", 8192, 2, step{}, false},
		{"other stream's pool is not searched", true, 4096, "aux", 4096, 2, step{}, false},
		{"small block not handed to a large request", true, 1 << 20, "main", 1<<20 + 1, 2, step{}, false},
		{"large block not handed to a small request", true, 4 << 20, "main", 4096, 2, step{}, false},
		{"more chunks than the block holds", true, 4096, "main", 4096, 4, step{}, false},
		{"record_stream defers the free", true, 4096, "main", 4096, 2, step{recordOn: "aux"}, false},
		{"record_stream on the owning stream is a no-op", true, 4096, "main", 4096, 2, step{recordOn: "main"}, true},
		{"record_stream then synchronize", true, 4096, "main", 4096, 2, step{recordOn: "aux", sync: true}, true},
		{"no caching: fresh memory", false, 4096, "main", 4096, 2, step{}, false},
		{"no caching, even after synchronize", false, 4096, "main", 4096, 2, step{sync: true}, false},
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
			y, err := a.Malloc("y", tt.stream2, tt.size2, tt.chunks2)
			require.NoError(t, err)
			require.Equal(t, tt.reused, x.Block == y.Block, "log: %v", a.Log)
			if tt.reused {
				// Same memory: a write through y is what x reads.
				w.Init(y, func(c int) uint64 { return uint64(100 + c) })
				require.Equal(t, y.Vals[0].N, x.Vals[0].N)
				require.Contains(t, y.Describe(), "which held [x y] in turn")
			}
		})
	}
}

func TestAllocatorBestFitAndErrors(t *testing.T) {
	w := ranks.NewWorld(1, ranks.Config{}, sim.NewEngine(sim.Timed, nil))
	a := w.NewAllocator(0, true)
	big, _ := a.Malloc("big", "main", 64<<10, 1)
	mid, _ := a.Malloc("mid", "main", 16<<10, 1)
	require.NoError(t, a.Free(big))
	require.NoError(t, a.Free(mid))
	got, err := a.Malloc("want", "main", 8<<10, 1)
	require.NoError(t, err)
	require.Same(t, mid.Block, got.Block, "smallest fitting block first")

	require.ErrorIs(t, a.Free(mid), ranks.ErrAlloc, "double free")
	require.ErrorIs(t, a.RecordStream(big, "aux"), ranks.ErrAlloc, "record_stream after free")
	_, err = a.Malloc("zero", "main", 0, 1)
	require.ErrorIs(t, err, ranks.ErrAlloc)
}

// A use after free across streams: aux reads x late, main frees x and the
// next main allocation reuses its block. Without a join the reuse is a race
// and aux reads main's new data; with record_stream the block is not reused;
// with a join before the free the reuse is ordered.
func TestAllocatorUseAfterFree(t *testing.T) {
	for _, mode := range []string{"none", "record_stream", "join"} {
		t.Run(mode, func(t *testing.T) {
			w := ranks.NewWorld(1, ranks.Config{LaunchCost: 100, EventCost: 100}, sim.NewEngine(sim.Timed, nil))
			a := w.NewAllocator(0, true)
			x, _ := a.Malloc("x", "main", 4096, 1)
			w.Init(x, func(int) uint64 { return 7 })
			sh, _ := a.Malloc("sh", "aux", 4096, 1)
			p := &ranks.Program{Streams: []string{"main", "aux"}, Events: []string{"fork", "join"}}
			p.Ops = append(p.Ops,
				ranks.HostOp{Kind: ranks.Record, Stream: 0, Event: 0},
				ranks.HostOp{Kind: ranks.Wait, Stream: 1, Event: 0},
				// aux: a long delay, then read x.
				ranks.HostOp{Kind: ranks.Launch, Stream: 1, Kernel: &ranks.KernelSpec{Name: "slow", Instrs: []ranks.Instr{{Op: ranks.OpDelay, Dur: 50000}}}},
				ranks.HostOp{Kind: ranks.Launch, Stream: 1, Kernel: &ranks.KernelSpec{Name: "sh_gemm", Instrs: []ranks.Instr{{Op: ranks.OpCompute, Dst: sh, N: 1, Srcs: []ranks.Src{{Buf: x, Coef: 3}}, Dur: 100}}}},
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
			y, _ := a.Malloc("y", "main", 4096, 1)
			p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: 0, Kernel: &ranks.KernelSpec{Name: "y_fill", Instrs: []ranks.Instr{{Op: ranks.OpCompute, Dst: y, N: 1, Srcs: []ranks.Src{{Buf: y, Coef: 0}}, Fresh: true, Dur: 100}}}})
			w.SetProgram(0, p)
			res, err := w.Run()
			require.NoError(t, err)
			races := 0
			for _, f := range res.Findings {
				if f.Kind == ranks.KindRace && strings.Contains(f.Message, "block #0") {
					races++
					require.Contains(t, f.Message, "stream aux")
					require.Contains(t, f.Message, "stream main")
				}
			}
			switch mode {
			case "none":
				require.Equal(t, 1, races, "%v", res.Findings)
				require.Same(t, x.Block, y.Block)
				require.Equal(t, uint64(0), sh.Vals[0].N, "aux read main's new data, not x's 7")
			default:
				require.Zero(t, races, "%v", res.Findings)
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
	y, _ := a.Malloc("rt_out", "main", 16384, 2)
	fmt.Println(x.Block == y.Block)
	for _, l := range a.Log {
		fmt.Println(l)
	}
	// Output:
	// true
	// malloc x_norm (16384 B) on main: new block #0 (16384 B)
	// free x_norm: block #0 back in stream main's pool
	// malloc rt_out (16384 B) on main: reuses block #0 (16384 B, last held x_norm)
}
