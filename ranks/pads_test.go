package ranks_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// barrierKernel is a hand-written one-shot barrier over pads: put into slot
// rank of every peer's pad, then wait for slot peer of one's own, for every
// peer. With data, it first writes x[rank] (its copy of a symmetric
// buffer) and, after the barrier, reads every peer's copy.
func barrierKernel(name string, rank int, pads []*ranks.SignalPad, x []*ranks.Buffer, out *ranks.Buffer) *ranks.KernelSpec {
	k := &ranks.KernelSpec{Name: name}
	if x != nil {
		k.Instrs = append(k.Instrs, ranks.Instr{Op: ranks.OpCompute, Dur: 100, Dst: x[rank], N: 1, Srcs: []ranks.Src{{Buf: out, Coef: 1}}})
	}
	for p := range pads {
		k.Instrs = append(k.Instrs, ranks.Instr{Op: ranks.OpPut, Dur: 50, Pad: pads[p], Slot: rank, Peer: p})
	}
	for p := range pads {
		k.Instrs = append(k.Instrs, ranks.Instr{Op: ranks.OpWait, Dur: 50, Pad: pads[rank], Slot: p, Peer: p})
	}
	if x != nil {
		var srcs []ranks.Src
		for p := range x {
			srcs = append(srcs, ranks.Src{Buf: x[p], Coef: 1})
		}
		k.Instrs = append(k.Instrs, ranks.Instr{Op: ranks.OpCompute, Dur: 100, Dst: out, N: 1, Srcs: srcs})
	}
	return k
}

func raceOn(res *ranks.Result, what string) []string {
	var out []string
	for _, f := range res.Findings {
		if f.Kind == ranks.KindRace && strings.Contains(f.Message, what) {
			out = append(out, f.Message)
		}
	}
	return out
}

// TestPadSlotsRaceChecked: two barriers on one pad are a race when nothing
// orders them (two streams, no event), and none when stream order or an
// event does; the race names the pad and the slot. A barrier's own puts and
// waits never race with each other: put → wait is release/acquire.
func TestPadSlotsRaceChecked(t *testing.T) {
	for _, tc := range []struct {
		name    string
		streams [2]int // stream of barrier a and of barrier b
		event   bool   // b's stream waits for an event recorded after a
		race    bool
	}{
		{"one barrier per stream, unordered", [2]int{0, 1}, false, true},
		{"two streams joined by an event", [2]int{0, 1}, true, false},
		{"one stream: stream order", [2]int{0, 0}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := ranks.NewWorld(2, ranks.Config{LaunchCost: 1000, EventCost: 100}, sim.NewEngine(sim.Timed, nil))
			pads := []*ranks.SignalPad{ranks.NewSignalPad("pad", 0, 4), ranks.NewSignalPad("pad", 1, 4)}
			for r := range 2 {
				p := &ranks.Program{Streams: []string{"s0", "s1"}, Events: []string{"e"}}
				p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: tc.streams[0], Kernel: barrierKernel("a", r, pads, nil, nil)})
				if tc.event {
					p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Record, Stream: tc.streams[0]}, ranks.HostOp{Kind: ranks.Wait, Stream: tc.streams[1]})
				}
				p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: tc.streams[1], Kernel: barrierKernel("b", r, pads, nil, nil)})
				w.SetProgram(r, p)
			}
			res, err := w.Run()
			require.NoError(t, err)
			require.False(t, res.Hung)
			races := raceOn(res, `signal pad "pad"`)
			if !tc.race {
				require.Empty(t, races)
				return
			}
			require.NotEmpty(t, races)
			require.Contains(t, races[0], "slot ")
			require.Contains(t, races[0], "put/put")
		})
	}
}

// TestSignalReleaseAcquireOrdersData: a barrier orders each rank's write of
// its copy before every peer's read of it (put releases, the wait that
// consumes it acquires), so a properly synchronised barrier shows no race;
// the same reads without the waits race on the buffer.
func TestSignalReleaseAcquireOrdersData(t *testing.T) {
	for _, wait := range []bool{true, false} {
		t.Run(fmt.Sprintf("wait=%v", wait), func(t *testing.T) {
			w := ranks.NewWorld(2, ranks.Config{LaunchCost: 1000}, sim.NewEngine(sim.Timed, nil))
			sym := w.AllocSymmetric("x", []int{0, 1}, 64, 1, 4)
			for r := range 2 {
				out := w.Alloc(r, "out", 64, 1)
				w.Init(out, func(int) uint64 { return uint64(r + 1) })
				k := barrierKernel("ar", r, sym.Pads, sym.Bufs, out)
				if !wait {
					var keep []ranks.Instr
					for _, in := range k.Instrs {
						if in.Op != ranks.OpWait {
							keep = append(keep, in)
						}
					}
					k.Instrs = keep
				}
				w.SetProgram(r, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{{Kind: ranks.Launch, Kernel: k}}})
			}
			res, err := w.Run()
			require.NoError(t, err)
			races := raceOn(res, `symmetric buffer "x"`)
			if wait {
				require.Empty(t, res.Findings, "a barrier orders the writes before the reads")
			} else {
				require.NotEmpty(t, races, "without the waits nothing orders a peer's write before the read")
			}
		})
	}
}

// TestFifoRaceChecked: sends into one FIFO from two streams that nothing
// orders are a race naming the connection and slot; from one stream they
// are not. A message orders its sender's earlier writes before the
// receiver's later reads (send releases, receive acquires): a peer that
// reads the sender's buffer after the receive does not race.
func TestFifoRaceChecked(t *testing.T) {
	t.Run("two unordered senders", func(t *testing.T) {
		for _, streams := range [][2]int{{0, 1}, {0, 0}} {
			w := ranks.NewWorld(2, ranks.Config{LaunchCost: 1000}, sim.NewEngine(sim.Timed, nil))
			f := w.NewFifo("0→1", 0, 1, 4)
			x := w.Alloc(0, "x", 64, 1)
			y := w.Alloc(1, "y", 64, 1)
			send := func(n string) *ranks.KernelSpec {
				return &ranks.KernelSpec{Name: n, Instrs: []ranks.Instr{{Op: ranks.OpSend, Dur: 100, Fifo: f, N: 1, Srcs: []ranks.Src{{Buf: x, Coef: 1}}, Peer: 1}}}
			}
			recv := &ranks.KernelSpec{Name: "recv", Instrs: []ranks.Instr{
				{Op: ranks.OpRecv, Dur: 100, Fifo: f, Dst: y, N: 1, Peer: 0},
				{Op: ranks.OpRecv, Dur: 100, Fifo: f, Dst: y, N: 1, Peer: 0},
			}}
			w.SetProgram(0, &ranks.Program{Streams: []string{"s0", "s1"}, Ops: []ranks.HostOp{
				{Kind: ranks.Launch, Stream: streams[0], Kernel: send("a")},
				{Kind: ranks.Launch, Stream: streams[1], Kernel: send("b")},
			}})
			w.SetProgram(1, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{{Kind: ranks.Launch, Kernel: recv}}})
			res, err := w.Run()
			require.NoError(t, err)
			races := raceOn(res, "NCCL connection 0→1 slot")
			if streams[1] == streams[0] {
				require.Empty(t, races)
			} else {
				require.NotEmpty(t, races)
				require.Contains(t, races[0], "send/send")
			}
		}
	})
	t.Run("a message orders the sender's writes", func(t *testing.T) {
		w := ranks.NewWorld(2, ranks.Config{LaunchCost: 1000}, sim.NewEngine(sim.Timed, nil))
		f := w.NewFifo("0→1", 0, 1, 4)
		sym := w.AllocSymmetric("x", []int{0, 1}, 64, 1, 1)
		src := w.Alloc(0, "src", 64, 1)
		w.Init(src, func(int) uint64 { return 7 })
		y := w.Alloc(1, "y", 64, 1)
		w.SetProgram(0, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{{Kind: ranks.Launch, Kernel: &ranks.KernelSpec{Name: "write-then-send", Instrs: []ranks.Instr{
			{Op: ranks.OpCompute, Dur: 100, Dst: sym.Bufs[0], N: 1, Srcs: []ranks.Src{{Buf: src, Coef: 1}}},
			{Op: ranks.OpSend, Dur: 100, Fifo: f, N: 1, Srcs: []ranks.Src{{Buf: src, Coef: 1}}, Peer: 1},
		}}}}})
		w.SetProgram(1, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{{Kind: ranks.Launch, Kernel: &ranks.KernelSpec{Name: "recv-then-read", Instrs: []ranks.Instr{
			{Op: ranks.OpRecv, Dur: 100, Fifo: f, Dst: y, N: 1, Peer: 0},
			{Op: ranks.OpCompute, Dur: 100, Dst: y, N: 1, Srcs: []ranks.Src{{Buf: sym.Bufs[0], Coef: 1}}}, // a P2P read of rank 0's copy
		}}}}})
		res, err := w.Run()
		require.NoError(t, err)
		require.Empty(t, res.Findings, "the receive acquires the send's clock")
		require.Equal(t, uint64(7), y.Vals[0].N)
	})
}

// TestSharedPadRacesAcrossCalls: two MULTIMEM all-reduces over one shared
// workspace share its signal pad, so on two unordered streams their puts
// into one slot race (the race names the shared pad); joined, they do not.
func TestSharedPadRacesAcrossCalls(t *testing.T) {
	_, res := twoStreamAllReduces(t, 2, false, false)
	require.NotEmpty(t, raceOn(res, `signal pad "tp.ws" `), "the calls share one pad")
	_, res = twoStreamAllReduces(t, 2, true, false)
	require.Empty(t, res.Findings)
}

// TestRandomSchedulesSkewRanks: random schedules start the ranks' host
// threads at different times (rank skew), the nominal one together.
func TestRandomSchedulesSkewRanks(t *testing.T) {
	starts := func(ch sim.Chooser) [2]sim.Time {
		w := ranks.NewWorld(2, ranks.Config{LaunchCost: 1000, Timeline: true}, sim.NewEngine(sim.Timed, ch))
		for r := range 2 {
			k := &ranks.KernelSpec{Name: "k", Instrs: []ranks.Instr{{Op: ranks.OpDelay, Dur: 100}}}
			w.SetProgram(r, &ranks.Program{Streams: []string{"main"}, Ops: []ranks.HostOp{{Kind: ranks.Launch, Kernel: k}}})
		}
		_, err := w.Run()
		require.NoError(t, err)
		var at [2]sim.Time
		for _, is := range w.Issues() {
			at[is.Rank] = is.At
		}
		return at
	}
	nom := starts(sim.Nominal{})
	require.Equal(t, nom[0], nom[1])
	skewed := 0
	for seed := range uint64(20) {
		if at := starts(sim.NewRandom(seed, 300)); at[0] != at[1] {
			skewed++
		}
	}
	require.Positive(t, skewed, "some random schedule skews the ranks")
}
