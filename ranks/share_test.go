package ranks_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// shareGPU is a small GPU for the tests: 100 SMs, 1 GB/s per ns (1e12
// bytes/s), every kernel keeping 10 % of the SMs it wants.
var shareGPU = &ranks.Share{SMs: 100, Keep: 100, HBM: 1e12}

// together runs kernels on one GPU, each on a stream of its own, issued
// 1 ns apart from time 0, and returns how long each one ran.
func together(t require.TestingT, share *ranks.Share, mode sim.Mode, ks ...kdef) []sim.Time {
	w := ranks.NewWorld(1, ranks.Config{Mode: ranks.Eager, LaunchCost: 1, EventCost: 1, Timeline: true, Share: share}, sim.NewEngine(mode, nil))
	p := &ranks.Program{}
	for i, k := range ks {
		p.Streams = append(p.Streams, fmt.Sprint("s", i))
		p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: i, Kernel: &ranks.KernelSpec{
			Name: fmt.Sprint("k", i), Kind: "gemm", Instrs: []ranks.Instr{{Op: ranks.OpDelay, Dur: k.alone}}, Loads: []ranks.Load{k.load}}})
	}
	w.SetProgram(0, p)
	_, err := w.Run()
	require.NoError(t, err)
	ends := make([]sim.Time, len(ks))
	for _, s := range w.Spans() {
		var i int
		fmt.Sscanf(s.Name, "k%d", &i)
		ends[i] = s.End - s.Start
	}
	return ends
}

func TestShareSemantics(t *testing.T) {
	us := sim.Microsecond
	full := ranks.Load{SMs: 100}
	tests := []struct {
		name string
		ks   []kdef
		want []sim.Time // each kernel's end, ±2 ns
	}{
		{"a lone kernel runs as long as alone", []kdef{{full, 10 * us}}, []sim.Time{10 * us}},
		{"a kernel without a load ignores the others", []kdef{{full, 10 * us}, {ranks.Load{}, 10 * us}}, []sim.Time{10 * us, 10 * us}},
		// the first gets 90 of its SMs (the second keeps 10): it ends at
		// 10/0.9 µs; the second did 10 % of that meanwhile and finishes
		// the rest alone; together they take the sum, as on one GPU
		{"two full-GPU kernels take the sum", []kdef{{full, 10 * us}, {full, 10 * us}}, []sim.Time{11111, 20 * us}},
		{"kernels that fit side by side do not slow", []kdef{{ranks.Load{SMs: 60}, 10 * us}, {ranks.Load{SMs: 40}, 10 * us}}, []sim.Time{10 * us, 10 * us}},
		// 40 SMs of 60 wanted after the first's 60 (the first keeps them:
		// 6 kept + 54 in start order; the second 6 kept + 34 left)
		{"a later kernel gets what is left", []kdef{{ranks.Load{SMs: 60}, 10 * us}, {ranks.Load{SMs: 60}, 10 * us}}, []sim.Time{10 * us, 13333}},
		// each moves 6 KB/ns alone, 12 together on a 10 KB/ns... here 1 KB/ns:
		// 600 B/ns each, 1200 on 1000: both ×1.2
		{"bandwidth is shared in proportion", []kdef{{ranks.Load{SMs: 10, Bytes: 6_000_000}, 10 * us}, {ranks.Load{SMs: 10, Bytes: 6_000_000}, 10 * us}}, []sim.Time{12 * us, 12 * us}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := together(t, shareGPU, sim.Timed, tc.ks...)
			for i := range got {
				require.InDelta(t, float64(tc.want[i]), float64(got[i]), 2, "kernel %d ends: %v", i, got)
			}
		})
	}
	t.Run("no share without a Share or in the untimed engine", func(t *testing.T) {
		for _, got := range [][]sim.Time{
			together(t, nil, sim.Timed, kdef{full, 10 * us}, kdef{full, 10 * us}),
			together(t, shareGPU, sim.Untimed, kdef{full, 10 * us}, kdef{full, 10 * us}),
		} {
			require.InDelta(t, float64(10*us), float64(got[0]), 2)
			require.InDelta(t, float64(10*us), float64(got[1]), 2)
		}
	})
}

// Work conservation in the engine: kernels that each fill the GPU, started
// together, finish together after the sum of their times alone, however
// the rates changed on the way; and a kernel's end never comes earlier for
// one more co-runner.
func TestShareWorkConservation(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 6).Draw(t, "n")
		var ks []kdef
		var sum sim.Time
		for i := range n {
			d := sim.Time(rapid.IntRange(100, 100_000).Draw(t, fmt.Sprint("d", i)))
			ks = append(ks, kdef{ranks.Load{SMs: 100}, d})
			sum += d
		}
		ends := together(t, shareGPU, sim.Timed, ks...)
		last := sim.Time(0)
		for _, e := range ends {
			last = max(last, e)
		}
		if d := last - sum; d < -sim.Time(n) || d > sim.Time(4*n) {
			t.Fatalf("makespan %d, sum of times alone %d (%v)", last, sum, ends)
		}
		extra := kdef{ranks.Load{SMs: rapid.IntRange(1, 100).Draw(t, "sms+")}, sim.Time(rapid.IntRange(100, 100_000).Draw(t, "d+"))}
		more := together(t, shareGPU, sim.Timed, append(ks, extra)...)
		for i := range ends {
			if more[i] < ends[i]-1 {
				t.Fatalf("kernel %d ends at %d with one more co-runner, %d without", i, more[i], ends[i])
			}
		}
	})
}

// A replayed graph starts a kernel node GraphGap after the node it depends
// on ends; eager launches on a stream do not pay it (their gap is in the
// launch and KStart).
func TestGraphGap(t *testing.T) {
	for _, mode := range []ranks.Mode{ranks.Graph, ranks.Eager} {
		w := ranks.NewWorld(1, ranks.Config{Mode: mode, LaunchCost: 1, EventCost: 1, Timeline: true, GraphGap: 550}, sim.NewEngine(sim.Timed, nil))
		k := func(name string) *ranks.KernelSpec {
			return &ranks.KernelSpec{Name: name, Kind: "gemm", Instrs: []ranks.Instr{{Op: ranks.OpDelay, Dur: 1000}}}
		}
		w.SetProgram(0, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{
			{Kind: ranks.Launch, Kernel: k("a")}, {Kind: ranks.Launch, Kernel: k("b")}}})
		_, err := w.Run()
		require.NoError(t, err)
		var a, b ranks.Span
		for _, s := range w.Spans() {
			switch s.Name {
			case "a":
				a = s
			case "b":
				b = s
			}
		}
		want := a.End
		if mode == ranks.Graph {
			want += 550
		}
		require.Equal(t, want, b.Start, "mode %v: b starts", mode)
	}
}

// The same without a timeline, where graph-mode tasks are made when they
// become ready (retire.go): the run ends GraphGap later.
func TestGraphGapLazy(t *testing.T) {
	end := func(gap sim.Time) sim.Time {
		w := ranks.NewWorld(1, ranks.Config{Mode: ranks.Graph, LaunchCost: 1, EventCost: 1, GraphGap: gap}, sim.NewEngine(sim.Timed, nil))
		k := func(name string) *ranks.KernelSpec {
			return &ranks.KernelSpec{Name: name, Kind: "gemm", Instrs: []ranks.Instr{{Op: ranks.OpDelay, Dur: 1000}}}
		}
		w.SetProgram(0, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{
			{Kind: ranks.Launch, Kernel: k("a")}, {Kind: ranks.Launch, Kernel: k("b")}}})
		res, err := w.Run()
		require.NoError(t, err)
		return res.End
	}
	require.Equal(t, end(0)+550, end(550))
}
