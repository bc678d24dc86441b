package ranks_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// replayWorld is one rank that doubles its input into out, captured and
// replayed three times (graph) or run once (eager), with out watched.
func replayWorld(t *testing.T, mode ranks.Mode, init func(w *ranks.World, in *ranks.Buffer)) (*ranks.World, *ranks.Buffer) {
	t.Helper()
	w := ranks.NewWorld(1, ranks.Config{Mode: mode, Replays: 3, LaunchCost: 1000}, sim.NewEngine(sim.Timed, nil))
	in := w.Alloc(0, "in", 64, 2)
	init(w, in)
	out := w.Alloc(0, "out", 64, 2)
	k := &ranks.KernelSpec{Name: "double", Instrs: []ranks.Instr{{Op: ranks.OpCompute, Dur: 100, Dst: out, N: 2, Srcs: []ranks.Src{{Buf: in, Coef: 2}}}}}
	w.SetProgram(0, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{{Kind: ranks.Launch, Kernel: k}}})
	w.WatchReplays([][]*ranks.Buffer{{out}})
	return w, out
}

func ns(vs []ranks.Value) []uint64 {
	var out []uint64
	for _, v := range vs {
		out = append(out, v.N)
	}
	return out
}

// TestEveryReplayOnItsOwnInputs: a per-replay input holds f(k, c) in
// replay k (re-filled between replays, ordered and race-checked: a clean
// program reports nothing), each replay's outputs are copied before the
// next overwrites them, and a one-pass world runs on the inputs of the
// replay SetInputReplay picks (by default the last).
func TestEveryReplayOnItsOwnInputs(t *testing.T) {
	f := func(k, c int) uint64 { return uint64(10*k + c + 1) }
	t.Run("explicit", func(t *testing.T) {
		w, out := replayWorld(t, ranks.Graph, func(w *ranks.World, in *ranks.Buffer) { w.InitPerReplay(in, f) })
		res, err := w.Run()
		require.NoError(t, err)
		require.Empty(t, res.Findings)
		require.Equal(t, []uint64{2, 4}, ns(w.ReplayValues(0, 0)))
		require.Equal(t, []uint64{22, 24}, ns(w.ReplayValues(0, 1)))
		require.Nil(t, w.ReplayValues(0, 2), "the last replay is the final state")
		require.Equal(t, []uint64{42, 44}, ns(out.Vals))
		require.Equal(t, 1, w.ReplayInputs())
	})
	t.Run("one pass", func(t *testing.T) {
		for k, want := range map[int][]uint64{-1: {42, 44}, 0: {2, 4}, 1: {22, 24}} {
			w, out := replayWorld(t, ranks.Eager, func(w *ranks.World, in *ranks.Buffer) { w.InitPerReplay(in, f) })
			if k >= 0 {
				w.SetInputReplay(k)
			}
			_, err := w.Run()
			require.NoError(t, err)
			require.Equal(t, want, ns(out.Vals), "replay %d", k)
		}
	})
	t.Run("derived", func(t *testing.T) {
		w, out := replayWorld(t, ranks.Graph, func(w *ranks.World, in *ranks.Buffer) {
			w.SetIndependentReplays(true)
			w.Init(in, func(c int) uint64 { return uint64(c + 1) })
		})
		res, err := w.Run()
		require.NoError(t, err)
		require.Empty(t, res.Findings)
		r0, r1 := ns(w.ReplayValues(0, 0)), ns(w.ReplayValues(0, 1))
		require.NotEqual(t, r0, r1, "each replay computes on inputs of its own")
		require.NotEqual(t, r1, ns(out.Vals))
		require.Equal(t, []uint64{2, 4}, ns(out.Vals), "the last replay computes on the initial values")
	})
	t.Run("not independent", func(t *testing.T) {
		w, out := replayWorld(t, ranks.Graph, func(w *ranks.World, in *ranks.Buffer) {
			w.Init(in, func(c int) uint64 { return uint64(c + 1) })
		})
		_, err := w.Run()
		require.NoError(t, err)
		require.Zero(t, w.ReplayInputs())
		require.Equal(t, ns(out.Vals), ns(w.ReplayValues(0, 0)))
	})
}
