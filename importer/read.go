package importer

import (
	"fmt"

	"github.com/collsim/collsim/scenarios"
	"math"
	"sort"
	"strings"
)

// What one rank's trace holds for the imported step, read in three
// streaming passes (window, host side, device side): only the step's events
// are kept, so memory follows the step, not the file.

type cpuOp struct {
	idx       int
	tid       ID // the host thread
	name      string
	cat       string
	ts, end   float64
	ext, rf   int64
	coll      string // record_param_comms: collective name
	pg        string
	pgRanks   []int
	nelems    int64
	outNelems int64
	dtype     string
	hasRanks  bool
	// seq is the process group's sequence number ("Seq"), -1 when the
	// record has none; peer is a send's destination or a receive's source
	// as a global rank ("Dst Rank" / "Src Rank"), else -1; groupRank is
	// "Rank" (for a send or receive, the peer's rank in the group).
	seq, peer, groupRank int64
}

type call struct {
	idx     int
	tid     ID
	name    string
	ts, end float64
	corr    int64
	ext     int64
	capture bool // inside the graph capture the step replays
	capIdx  int  // the capture (rankTrace.caps) the call is inside, -1 if none
}

type memEvent struct {
	idx   int
	tid   ID
	ts    float64
	addr  string
	bytes int64
}

type devAct struct {
	idx        int
	cat, name  string
	ts, dur    float64
	stream     int64
	corr       int64
	syncKind   string
	waitEvent  int64
	waitStream int64
	waitCorr   int64
	shape      string  // a kernel's grid and block, "[g]/[b]"
	threads    float64 // its grid's blocks times a block's threads (0: not given)
	graphID    int64   // the CUDA graph that ran it, where the trace says (> 0)
}

// span is a closed time range on one host thread.
type span struct {
	lo, hi float64
}

func (s span) has(t float64) bool { return t >= s.lo && t <= s.hi }

// maxCalls bounds the runtime calls kept for one step, so that a trace
// without step annotations cannot grow the importer's memory with its size
// (a scenario program holds at most scenarios.MaxOps ops anyway).
const maxCalls = 16 * scenarios.MaxOps

// maxDeviceDurUs is the longest device activity imported (µs): a
// scenario's times are at most an hour (an 11-day kernel was refused by
// the validation of the written file, blamed on the importer).
const maxDeviceDurUs = 3600e6

// hostGap is the error for a host pause longer than a scenario's longest
// time (1 h) before op, at its kernel's event when it has one.
func hostGap(file string, it *item, op scenarios.OpSpec, gap, at float64) error {
	ev := -1
	if it.act != nil {
		ev = it.act.idx
	}
	return &Error{File: file, Event: ev, Offset: -1, Msg: fmt.Sprintf("the host waits %.0f s before %s %q (%.3f s into the trace), longer than a scenario's longest time (1 h); import a step without the pause (--step, --step-index)", gap/1e6, op.Kind, op.Name, at/1e6)}
}

// rankTrace is the kept part of one rank's trace.
type rankTrace struct {
	file string
	gpu  string
	// rank and worldSize are distributedInfo's, -1 when absent.
	rank, worldSize int
	step            string // the annotation imported ("" for the whole trace)
	steps           int    // later occurrences of it imported with it (one window)
	tid             ID
	window          span
	capture         *span // the graph capture before the step, if any
	captures        int   // graph captures seen before the step
	// caps are every graph capture on the step's thread that ends before
	// the step does, in host order: a replay inside the step is matched to
	// one of them (eager.go, inlineReplay).
	caps   []span
	events int
	t0     float64 // the first event's time: host times are printed from it
	ops    []*cpuOp
	calls  []*call
	mem    []*memEvent
	dev    map[int64][]*devAct // by correlation
}

// StepDefault names the annotations tried, in order, when Options.Step is
// empty: torch.profiler's schedule steps, then a record_function("step").
var StepDefault = []string{"ProfilerStep#", "step"}

// allSteps asks readRank for every occurrence of a repeated step name
// as one window (Options.StepIndex).
const allSteps = -1

func matchStep(name, want string) (rank int, ok bool) {
	if want != "" {
		return 0, name == want
	}
	if strings.HasPrefix(name, StepDefault[0]) {
		return 0, true
	}
	return 1, name == StepDefault[1]
}

func isHostOp(e *Event) bool {
	return e.Ph == "X" && (e.Cat == "cpu_op" || e.Cat == "user_annotation" || e.Cat == "Operator")
}

func isRuntime(e *Event) bool {
	return e.Ph == "X" && (e.Cat == "cuda_runtime" || e.Cat == "cuda_driver" || e.Cat == "Runtime")
}

func isDevice(e *Event) bool {
	if e.Ph != "X" {
		return false
	}
	switch e.Cat {
	case "kernel", "gpu_memset", "gpu_memcpy", "cuda_sync", "Kernel", "Memset", "Memcpy":
		return true
	case "gpu_user_annotation", "cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "python_function", "overhead", "Trace":
		return false
	}
	// An unknown kind that ran on a device stream: an opaque kernel.
	return e.Args.Stream >= 0 && e.Args.Corr >= 0
}

// readRank reads one rank's trace: the step to import (the idx-th
// annotation named step, see [StepDefault]) and everything in it.
func readRank(path, step string, idx int, lim Limits) (*rankTrace, error) {
	rt := &rankTrace{file: path, dev: map[int64][]*devAct{}}
	// Pass 1: the step's window, its host thread, the graph captures.
	type cand struct {
		pri     int
		ts, end float64
		tid     ID
		idx     int
		name    string
	}
	var cands []cand
	launches := map[ID]int{}
	type capRange struct {
		tid    ID
		lo, hi float64
	}
	var caps []capRange
	open := map[ID]float64{}
	meta := Meta{Rank: -1, WorldSize: -1}
	rt.t0 = math.Inf(1)
	err := scanFile(path, lim, &meta, func(e *Event) error {
		rt.events++
		if e.Ph == "X" || e.Ph == "i" {
			rt.t0 = min(rt.t0, e.Ts)
		}
		if isHostOp(e) {
			if pri, ok := matchStep(e.Name, step); ok {
				if err := lim.keep(path, len(cands), "step annotations", e.Index); err != nil {
					return err
				}
				cands = append(cands, cand{pri, e.Ts, e.End(), e.Tid, e.Index, e.Name})
			}
		}
		if isRuntime(e) {
			if _, ok := launches[e.Tid]; !ok {
				if err := lim.keep(path, len(launches), "host threads", e.Index); err != nil {
					return err
				}
			}
			launches[e.Tid]++
			switch e.Name {
			case "cudaStreamBeginCapture", "cudaStreamBeginCaptureToGraph":
				open[e.Tid] = e.Ts
			case "cudaStreamEndCapture":
				if lo, ok := open[e.Tid]; ok {
					if err := lim.keep(path, len(caps), "graph captures", e.Index); err != nil {
						return err
					}
					caps = append(caps, capRange{e.Tid, lo, e.End()})
					delete(open, e.Tid)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	rt.gpu, rt.rank, rt.worldSize = meta.GPU, meta.Rank, meta.WorldSize
	if len(cands) > 0 {
		best := cands[0].pri
		for _, c := range cands {
			best = min(best, c.pri)
		}
		var cs []cand
		for _, c := range cands {
			if c.pri == best {
				cs = append(cs, c)
			}
		}
		sort.SliceStable(cs, func(i, j int) bool { return cs[i].ts < cs[j].ts })
		if idx == allSteps {
			idx = 0
			// The first occurrence and every later one of its name on
			// its thread, as one window (iterations of one loop).
			c := cs[0]
			rt.step, rt.window, rt.tid = c.name, span{c.ts, c.end}, c.tid
			for _, d := range cs[1:] {
				if d.name == c.name && d.tid == c.tid {
					rt.window.hi = max(rt.window.hi, d.end)
					rt.steps++
				}
			}
		}
		if idx >= len(cs) {
			return nil, &Error{File: path, Event: -1, Msg: fmt.Sprintf("the trace has %d step annotations named %q; step index %d is out of range", len(cs), cs[0].name, idx)}
		}
		if rt.steps == 0 {
			c := cs[idx]
			rt.step, rt.window, rt.tid = c.name, span{c.ts, c.end}, c.tid
		}
	} else {
		if step != "" {
			return nil, &Error{File: path, Event: -1, Msg: fmt.Sprintf("no annotation named %q; expected record_function(%q) around the step to import", step, step)}
		}
		rt.window = span{math.Inf(-1), math.Inf(1)}
		best := -1
		for tid, n := range launches {
			if n > best || (n == best && tid < rt.tid) {
				best, rt.tid = n, tid
			}
		}
	}
	sort.SliceStable(caps, func(i, j int) bool { return caps[i].lo < caps[j].lo })
	for _, c := range caps {
		if c.tid != rt.tid || c.hi > rt.window.hi {
			continue
		}
		rt.caps = append(rt.caps, span{c.lo, c.hi})
		if c.hi <= rt.window.lo {
			rt.captures++
			if rt.capture == nil || c.lo > rt.capture.lo {
				rt.capture = &span{c.lo, c.hi}
			}
		}
	}
	capOf := func(t float64) int {
		for i, c := range rt.caps {
			if c.has(t) {
				return i
			}
		}
		return -1
	}
	// The step is what every host thread did inside its window: the
	// autograd engine runs backward on threads of its own (one per device)
	// while the step's thread waits in loss.backward(), and a program may
	// launch from threads it started. They are merged by host time, as the
	// trace recorded them. Captures are read on the step's thread.
	inScope := func(e *Event) bool {
		if e.Tid == rt.tid {
			return rt.window.has(e.Ts) || capOf(e.Ts) >= 0
		}
		return rt.window.has(e.Ts) && capOf(e.Ts) < 0
	}
	// Pass 2: the host side.
	corrs := map[int64]bool{}
	err = scanFile(path, lim, nil, func(e *Event) error {
		switch {
		case isHostOp(e) && inScope(e):
			if err := lim.keep(path, len(rt.ops), "operators in the step", e.Index); err != nil {
				return err
			}
			op := &cpuOp{idx: e.Index, tid: e.Tid, name: e.Name, cat: e.Cat, ts: e.Ts, end: e.End(), ext: e.Args.ExternalID, rf: e.Args.RecordFn, seq: -1, peer: -1, groupRank: -1}
			if e.Name == "record_param_comms" {
				op.coll, op.pg, op.nelems, op.outNelems, op.dtype = e.Args.Collective, e.Args.PGName, e.Args.InNelems, e.Args.OutNelems, e.Args.DType
				op.pgRanks, op.hasRanks = ranksOf(e.Args.PGRanksRaw)
				op.seq, op.groupRank, op.peer = e.Args.Seq, e.Args.Rank, max(e.Args.DstRank, e.Args.SrcRank)
			}
			rt.ops = append(rt.ops, op)
		case isRuntime(e) && inScope(e):
			if len(rt.calls) >= maxCalls {
				return &Error{File: path, Event: e.Index, Msg: fmt.Sprintf("the imported step has more than %d runtime calls, more than a scenario file can hold; import one step (record_function or torch.profiler.schedule, then --step / --step-index)", maxCalls)}
			}
			c := &call{idx: e.Index, tid: e.Tid, name: e.Name, ts: e.Ts, end: e.End(), corr: e.Args.Corr, ext: e.Args.ExternalID}
			c.capture = rt.capture != nil && rt.capture.has(e.Ts) && !rt.window.has(e.Ts)
			c.capIdx = capOf(e.Ts)
			rt.calls = append(rt.calls, c)
			if c.corr >= 0 {
				corrs[c.corr] = true
			}
		case e.Ph == "i" && e.Name == "[memory]" && e.Args.DeviceType == 1 && inScope(e):
			if err := lim.keep(path, len(rt.mem), "memory events in the step", e.Index); err != nil {
				return err
			}
			rt.mem = append(rt.mem, &memEvent{idx: e.Index, tid: e.Tid, ts: e.Ts, addr: e.Args.Addr.String(), bytes: e.Args.Bytes})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Pass 3: the device side of the kept calls.
	ndev := 0
	err = scanFile(path, lim, nil, func(e *Event) error {
		if !isDevice(e) || !corrs[e.Args.Corr] {
			return nil
		}
		if err := lim.keep(path, ndev, "device activities of the step's calls", e.Index); err != nil {
			return err
		}
		if e.Dur > maxDeviceDurUs {
			return &Error{File: path, Event: e.Index, Offset: -1, Msg: fmt.Sprintf("%s %q runs %.0f s, longer than a scenario's longest time (1 h); expected a device activity's duration in µs", e.Cat, e.Name, e.Dur/1e6)}
		}
		ndev++
		a := &devAct{idx: e.Index, cat: e.Cat, name: e.Name, ts: e.Ts, dur: e.Dur, stream: e.Args.Stream, corr: e.Args.Corr,
			syncKind: e.Args.SyncKind, waitEvent: e.Args.WaitEvent, waitStream: e.Args.WaitStream, waitCorr: e.Args.WaitCorr, graphID: e.Args.GraphID}
		if len(e.Args.Grid)+len(e.Args.Block) > 0 {
			a.shape = fmt.Sprint(e.Args.Grid, "/", e.Args.Block)
			a.threads = 1
			for _, d := range append(append([]int64(nil), e.Args.Grid...), e.Args.Block...) {
				a.threads *= float64(max(d, 1))
			}
		}
		rt.dev[a.corr] = append(rt.dev[a.corr], a)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(rt.ops, func(i, j int) bool { return rt.ops[i].ts < rt.ops[j].ts })
	sort.SliceStable(rt.calls, func(i, j int) bool { return rt.calls[i].ts < rt.calls[j].ts })
	sort.SliceStable(rt.mem, func(i, j int) bool { return rt.mem[i].ts < rt.mem[j].ts })
	for _, as := range rt.dev {
		sort.SliceStable(as, func(i, j int) bool { return as[i].ts < as[j].ts })
	}
	return rt, nil
}
