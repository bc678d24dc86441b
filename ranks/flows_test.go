package ranks_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// twoStreamAllReduces builds n ranks that each run two MULTIMEM all-reduces
// over one shared workspace, "a" on main and "b" on aux. With join, aux waits
// for an event recorded on main after "a", so the calls are ordered; without
// it they race.
func twoStreamAllReduces(t *testing.T, n int, join, timeline bool) (*ranks.World, *ranks.Result) {
	t.Helper()
	return twoStreamAllReducesWith(t, collectives.Multimem, n, join, timeline)
}

func twoStreamAllReducesWith(t *testing.T, strat collectives.Strategy, n int, join, timeline bool) (*ranks.World, *ranks.Result) {
	t.Helper()
	hw := ranks.Profiles["b200"]
	w := ranks.NewWorld(n, ranks.Config{Mode: ranks.Graph, LaunchCost: hw.Launch, EventCost: hw.EventOp, Timeline: timeline}, sim.NewEngine(sim.Timed, nil))
	group := make([]int, n)
	for i := range group {
		group[i] = i
	}
	comm := collectives.NewComm(w, "tp", group, collectives.SharedWorkspace, hw, 2)
	for r := range n {
		p := &ranks.Program{Streams: []string{"main", "aux"}, Events: []string{"fork", "join"}}
		// aux joins the capture first.
		p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Record, Stream: 0, Event: 0}, ranks.HostOp{Kind: ranks.Wait, Stream: 1, Event: 0})
		for k, name := range []string{"a", "b"} {
			in := w.Alloc(r, name+".in", 1<<12, 2)
			w.Init(in, func(c int) uint64 { return uint64(r*10 + c + 100*k) })
			out := w.Alloc(r, name+".out", 1<<12, 2)
			ks, err := comm.AllReduce(r, name, strat, in, out)
			require.NoError(t, err)
			if k == 1 && join {
				p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Record, Stream: 0, Event: 1}, ranks.HostOp{Kind: ranks.Wait, Stream: 1, Event: 1})
			}
			p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Launch, Stream: k, Kernel: ks})
		}
		// aux rejoins main so the capture ends cleanly.
		p.Ops = append(p.Ops, ranks.HostOp{Kind: ranks.Record, Stream: 1, Event: 1}, ranks.HostOp{Kind: ranks.Wait, Stream: 0, Event: 1})
		w.SetProgram(r, p)
	}
	res, err := w.Run()
	require.NoError(t, err)
	return w, res
}

func countFlows(fs []ranks.Flow) map[string]int {
	c := map[string]int{}
	for _, f := range fs {
		c[f.Kind]++
		if f.Mismatch {
			c["mismatch"]++
		}
	}
	return c
}

func TestFlowsOffWithoutTimeline(t *testing.T) {
	w, res := twoStreamAllReduces(t, 2, false, false)
	require.NotEmpty(t, res.Findings, "the unordered calls race")
	require.Empty(t, w.Flows())
	require.Empty(t, w.Marks())
	require.Empty(t, w.Issues())
}

func TestTimelineDoesNotChangeTheRun(t *testing.T) {
	for _, join := range []bool{false, true} {
		_, off := twoStreamAllReduces(t, 4, join, false)
		_, on := twoStreamAllReduces(t, 4, join, true)
		require.Equal(t, off.TraceHash, on.TraceHash, "join=%v", join)
		require.Equal(t, off.Findings, on.Findings, "join=%v", join)
	}
}

func TestFlowsOrderedCalls(t *testing.T) {
	const n = 4
	w, res := twoStreamAllReduces(t, n, true, true)
	require.Empty(t, res.Findings)
	c := countFlows(w.Flows())
	// Each all-reduce has two barriers of n·(n-1) puts, each consumed once.
	require.Equal(t, 2*2*n*(n-1), c[ranks.FlowSignal])
	require.Zero(t, c["mismatch"])
	// fork, join before b, rejoin: three record → wait pairs per rank.
	require.Equal(t, 3*n, c[ranks.FlowEvent])
	for _, f := range w.Flows() {
		require.LessOrEqual(t, f.From.At, f.To.At, "%+v", f)
		require.GreaterOrEqual(t, f.From.At, f.From.Start, "%+v", f)
		require.GreaterOrEqual(t, f.To.At, f.To.Start, "%+v", f)
		if f.Kind == ranks.FlowEvent {
			require.Equal(t, f.From.Rank, f.To.Rank)
			require.Contains(t, []string{"fork", "join"}, f.Label)
		}
	}
	// One graph launch per rank.
	require.Len(t, w.Issues(), n)
}

func TestMarksNameTheRacingPair(t *testing.T) {
	const n = 4
	w, res := twoStreamAllReduces(t, n, false, true)
	require.NotEmpty(t, res.Findings)
	marks := w.Marks()
	require.Len(t, marks, len(res.Findings), "one mark per kept finding")
	kinds := map[string]bool{}
	for i, m := range marks {
		require.Equal(t, res.Findings[i].Message, m.Message)
		kinds[m.Kind] = true
		require.Len(t, m.Tasks, 2, "%s", m.Message)
		names := []string{m.Tasks[0].Name, m.Tasks[1].Name}
		require.ElementsMatch(t, []string{"a", "b"}, names, "%s: the pair is the two calls", m.Message)
		for _, tr := range m.Tasks {
			require.LessOrEqual(t, tr.Start, m.At)
			require.Equal(t, map[string]string{"a": "main", "b": "aux"}[tr.Name], tr.Stream)
		}
	}
	require.True(t, kinds[ranks.KindRace], fmt.Sprint(kinds))
	if kinds[ranks.KindMismatch] {
		require.NotZero(t, countFlows(w.Flows())["mismatch"], "a mismatch finding has a mis-consumed signal")
	}
}

// With NCCL the two calls are ordered by the communicator's strong stream
// even unjoined: an "order" flow from a on main to b on aux on every rank,
// and every ring message is a FIFO flow between neighbours.
func TestFlowsNCCL(t *testing.T) {
	const n = 4
	w, res := twoStreamAllReducesWith(t, collectives.NCCL, n, false, true)
	require.Empty(t, res.Findings)
	c := countFlows(w.Flows())
	require.Equal(t, n, c[ranks.FlowOrder])
	// Ring all-reduce: 2(n-1) sends per rank per call, two calls.
	require.Equal(t, 2*n*2*(n-1), c[ranks.FlowFifo])
	require.Zero(t, c["mismatch"])
	for _, f := range w.Flows() {
		switch f.Kind {
		case ranks.FlowOrder:
			require.Equal(t, "a", f.From.Name)
			require.Equal(t, "b", f.To.Name)
			require.Equal(t, f.From.Rank, f.To.Rank)
			require.LessOrEqual(t, f.From.At, f.To.At)
		case ranks.FlowFifo:
			require.Equal(t, (f.From.Rank+1)%n, f.To.Rank, "a ring sends to the next rank")
			require.Equal(t, f.From.Name, f.To.Name, "one call's message is received by the same call")
		}
	}
}

// A device-wide host sync waits for the aux stream's kernel: a sync flow
// from that kernel to the sync task.
func TestFlowsHostSync(t *testing.T) {
	hw := ranks.Profiles["b200"]
	w := ranks.NewWorld(1, ranks.Config{Mode: ranks.Eager, LaunchCost: hw.Launch, EventCost: hw.EventOp, Timeline: true}, sim.NewEngine(sim.Timed, nil))
	b := w.Alloc(0, "x", 1<<12, 1)
	k := func(name string) *ranks.KernelSpec {
		return &ranks.KernelSpec{Name: name, Kind: "gemm", Instrs: []ranks.Instr{{Op: ranks.OpCompute, Dst: b, N: 1, Srcs: []ranks.Src{{Buf: b, Coef: 1}}, Dur: 1000}}}
	}
	w.SetProgram(0, &ranks.Program{Streams: []string{"main", "aux"}, Ops: []ranks.HostOp{
		{Kind: ranks.Launch, Stream: 1, Kernel: k("on_aux")},
		{Kind: ranks.Sync, Stream: -1},
		{Kind: ranks.Launch, Stream: 0, Kernel: k("after")},
	}})
	res, err := w.Run()
	require.NoError(t, err)
	require.Empty(t, res.Findings)
	var syncs []ranks.Flow
	for _, f := range w.Flows() {
		if f.Kind == ranks.FlowSync {
			syncs = append(syncs, f)
		}
	}
	require.Len(t, syncs, 1)
	require.Equal(t, "on_aux", syncs[0].From.Name)
	require.Equal(t, "aux", syncs[0].From.Stream)
	require.Equal(t, "main", syncs[0].To.Stream)
	require.LessOrEqual(t, syncs[0].From.At, syncs[0].To.At)
}
