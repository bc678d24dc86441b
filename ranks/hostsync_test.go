package ranks_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

func kernel(name string, in ranks.Instr) *ranks.KernelSpec {
	return &ranks.KernelSpec{Name: name, Instrs: []ranks.Instr{in}}
}

// A host sync blocks the host thread: the launch after it is issued only
// when the synchronized stream's work is done, and is ordered after it by
// happens-before (no race on the buffer the slow kernel wrote), even on
// another stream. Without the sync the two are unordered.
func TestHostSyncBlocksHost(t *testing.T) {
	for _, tt := range []struct {
		name   string
		sync   int // -2: none; -1: device; 0: stream s0
		race   bool
		waited bool
	}{
		{"no sync", -2, true, false},
		{"stream sync", 0, false, true},
		{"device sync", -1, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := ranks.NewWorld(1, ranks.Config{LaunchCost: 100, EventCost: 100, Timeline: true}, sim.NewEngine(sim.Timed, nil))
			buf := w.Alloc(0, "buf", 64, 1)
			p := &ranks.Program{Streams: []string{"s0", "s1"}}
			p.Ops = append(p.Ops,
				ranks.HostOp{Kind: ranks.Launch, Stream: 0, Kernel: kernel("slow", ranks.Instr{Op: ranks.OpDelay, Dur: 10000})},
				ranks.HostOp{Kind: ranks.Launch, Stream: 0, Kernel: kernel("write", ranks.Instr{Op: ranks.OpCompute, Dst: buf, N: 1, Srcs: []ranks.Src{{Buf: buf, Coef: 2}}, Dur: 10})})
			if tt.sync > -2 {
				p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Sync, Stream: tt.sync})
			}
			p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: 1, Kernel: kernel("other", ranks.Instr{Op: ranks.OpCompute, Dst: buf, N: 1, Srcs: []ranks.Src{{Buf: buf, Coef: 3}}, Dur: 10})})
			w.SetProgram(0, p)
			res, err := w.Run()
			require.NoError(t, err)
			require.False(t, res.Hung)
			require.Equal(t, tt.race, res.Counts[ranks.KindRace] > 0, "%v", res.Findings)
			var slowEnd, otherStart sim.Time
			for _, s := range w.Spans() {
				switch s.Name {
				case "slow":
					slowEnd = s.End
				case "other":
					otherStart = s.Start
				}
			}
			require.Equal(t, tt.waited, otherStart >= slowEnd, "other starts %d, slow ends %d", otherStart, slowEnd)
		})
	}
}

func TestHostSyncCannotBeCaptured(t *testing.T) {
	w := ranks.NewWorld(1, ranks.Config{Mode: ranks.Graph}, sim.NewEngine(sim.Timed, nil))
	w.SetProgram(0, &ranks.Program{Streams: []string{"s0"}, Ops: []ranks.HostOp{{Kind: ranks.Sync, Stream: 0}}})
	_, err := w.Run()
	var ce *ranks.CaptureError
	require.ErrorAs(t, err, &ce)
	require.Contains(t, err.Error(), "cudaStreamSynchronize(s0) during capture")

	w = ranks.NewWorld(1, ranks.Config{}, sim.NewEngine(sim.Timed, nil))
	w.SetProgram(0, &ranks.Program{Streams: []string{"s0"}, Ops: []ranks.HostOp{{Kind: ranks.Sync, Stream: 3}}})
	_, err = w.Run()
	require.ErrorContains(t, err, "out of range")
}

// Two ranks, two collectives A and B with their own pads, each on its own
// stream. Rank 1 issues them in the other order. Without host syncs both run
// concurrently and finish; with a stream synchronize after each, each host
// waits for a collective whose peer's host is blocked: a hang whose cycle
// goes through both hosts.
func TestHostSyncHangCycle(t *testing.T) {
	for _, withSync := range []bool{false, true} {
		w := ranks.NewWorld(2, ranks.Config{LaunchCost: 100, EventCost: 100}, sim.NewEngine(sim.Timed, nil))
		pads := map[string][]*ranks.SignalPad{}
		for _, c := range []string{"A", "B"} {
			pads[c] = []*ranks.SignalPad{ranks.NewSignalPad(c, 0, 2), ranks.NewSignalPad(c, 1, 2)}
		}
		coll := func(c string, r int) *ranks.KernelSpec {
			peer := 1 - r
			return &ranks.KernelSpec{Name: c, Coll: c, Instrs: []ranks.Instr{
				{Op: ranks.OpPut, Pad: pads[c][peer], Slot: r, Dur: 10, Peer: peer},
				{Op: ranks.OpWait, Pad: pads[c][r], Slot: peer, Dur: 10, Peer: peer},
			}}
		}
		for r, order := range [][]string{{"A", "B"}, {"B", "A"}} {
			p := &ranks.Program{Streams: []string{"sA", "sB"}}
			for _, c := range order {
				s := map[string]int{"A": 0, "B": 1}[c]
				p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: s, Kernel: coll(c, r)})
				if withSync {
					p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Sync, Stream: s})
				}
			}
			w.SetProgram(r, p)
		}
		res, err := w.Run()
		require.NoError(t, err)
		require.Equal(t, withSync, res.Hung)
		if withSync {
			msg := res.Findings[len(res.Findings)-1].Message
			require.Contains(t, msg, "wait-for cycle")
			require.Contains(t, msg, "rank 0 sA: host cudaStreamSynchronize(sA) blocks rank 0's host thread")
			require.Contains(t, msg, "rank 1 sB: host cudaStreamSynchronize(sB) blocks rank 1's host thread")
		}
	}
}
