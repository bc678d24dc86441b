package importer

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/collsim/collsim/scenarios"
)

// graph builds the program of a step that replays a CUDA graph.
//
// Kineto reports a replay's kernels under the cudaGraphLaunch's correlation
// id, on the streams the graph executor picked, which need not be the
// capture streams (libkineto/src/CuptiActivity.cpp: kernel records carry the
// stream CUPTI saw; this trace's capture on stream 21 replayed on 7 and
// 142). The capture itself is in the trace as runtime calls with no device
// activity and no stream. So the importer:
//
//   - takes the capture's launches in host order, with their operators (and
//     so their tensors, from the execution trace);
//   - matches each replayed kernel to a captured launch: same kind
//     (kernel, memset, memcpy), and the operator's name in the kernel's name
//     ("sin" in "sin_kernel_cuda") when one fits, else the first free launch
//     of that kind (a guess, counted in the output);
//   - puts each captured launch on its kernel's replay stream, with the
//     replay's duration;
//   - maps the capture's event records and waits onto replay streams (a
//     record on the stream of the launch before it, a wait on the stream of
//     the launch after it) and forks every other stream from the first at
//     the start and joins it back at the end, which the capture rules need.
//
// Kernels on one replay stream keep their replay order, which is real; the
// order between replay streams is what the capture's events give, so a race
// reported on an imported graph may be one the real graph's edges prevent.
func (b *builder) graph(launch *call) error {
	rt, p := b.rt, b.p
	p.mode = "graph"
	var replay []*devAct
	for _, a := range rt.dev[launch.corr] {
		if a.cat != "cuda_sync" {
			replay = append(replay, a)
		}
	}
	if rt.captures > 1 {
		p.notef("%d graph captures before the step: the replayed graph is taken to be the last one (a guess)", rt.captures)
	}
	var capCalls []*call
	for _, c := range rt.calls {
		if c.capture {
			capCalls = append(capCalls, c)
		}
	}
	items := b.replayItems(capCalls, replay, "")
	if err := b.finish(items); err != nil {
		return err
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, a := range replay {
		lo, hi = min(lo, a.ts), max(hi, a.ts+a.dur)
	}
	if hi > lo {
		p.stepNs = ns(hi - lo)
	}
	return nil
}

// inlineReplay is one cudaGraphLaunch inside an eager step: the launches of
// the capture it replays (of the captures before it, the one whose
// operators most replayed kernels name, then one that made as many
// launches as the replay ran kernels, then the latest), each on the
// stream its replayed kernel ran on with that kernel's duration, all issued
// at the launch, reading and writing the tensors the capture named — so a
// replay on a side stream races with eager work like any kernel.
func (b *builder) inlineReplay(launch *call, work []*devAct) []*item {
	rt, p := b.rt, b.p
	b.replays++
	ci, exact, best := -1, false, -1
	var tied []int // the captures of the best score, latest first
	for i := len(rt.caps) - 1; i >= 0; i-- {
		if rt.caps[i].hi > launch.ts {
			continue
		}
		launches := b.capLaunches(i)
		fits := len(launches) == len(work)
		// The capture whose operators the replayed kernels name wins
		// (two graphs of as many kernels: mul+sin and mul+cos); then one
		// of as many launches; then the latest.
		score := 2 * nameMatches(launches, work, b)
		if fits {
			score++
		}
		switch {
		case score > best:
			ci, exact, best, tied = i, fits, score, []int{i}
		case score == best:
			tied = append(tied, i)
		}
	}
	if len(tied) > 1 {
		ci = b.bySize(ci, tied, work)
	}
	if ci < 0 {
		var items []*item
		for _, a := range work {
			items = append(items, &item{kind: scenarios.OpKernel, ts: launch.ts, issue: launch.end, stream: a.stream, act: a, name: "graph." + shortKernel(a.name), opaque: b.replays})
		}
		b.opaqueAt[b.replays] = launch.ts
		// No capture to name the graph: the trace's graph id does where
		// it gives one (newer Kineto), else the kernels it ran, with their
		// launch shapes (two launches that ran the same kernels on the
		// same grids are taken for one graph; one compiled function's
		// graphs for two input sizes run the same kernel on two grids).
		var names []string
		id := int64(-1)
		for _, a := range work {
			names = append(names, a.name+" "+a.shape)
			if id == -1 || id == a.graphID {
				id = a.graphID
			} else {
				id = 0
			}
		}
		b.graphOf[b.replays] = "kernels:" + strings.Join(names, "\x00")
		if id > 0 {
			b.graphOf[b.replays] = "graph:" + strconv.FormatInt(id, 10)
		}
		return items
	}
	if !exact {
		p.notef("graph launch at host time %.3f µs ran %d kernels; no capture before it made as many launches: taken to replay the latest capture (a guess)", b.rel(launch.ts), len(work))
	}
	var capCalls []*call
	for _, c := range rt.calls {
		if c.capIdx == ci {
			capCalls = append(capCalls, c)
		}
	}
	items := b.replayItems(capCalls, work, "g"+strconv.Itoa(ci+1)+".r"+strconv.Itoa(b.replays)+".")
	foreign := b.foreignCapture(capCalls)
	// Issue every node at the launch, in capture order; the joins last.
	sortItems(items)
	for i, it := range items {
		if it.ts < math.MaxFloat64 {
			it.ts = launch.ts + float64(i+1)*1e-6
		} else {
			it.ts = launch.ts + float64(len(items)+1)*1e-6
		}
		it.issue = launch.end
		it.captured = it.kind == scenarios.OpKernel
		if foreign && it.kind == scenarios.OpKernel {
			it.opaque = b.replays
		}
	}
	if foreign {
		b.opaqueAt[b.replays] = launch.ts
		b.foreignAt[b.replays] = ci
		b.graphOf[b.replays] = "capture:" + strconv.Itoa(ci)
	}
	return items
}

// bySize tells apart captures that the kernels' names cannot: one function
// captured at several sizes (torch.cuda.graph at two batch sizes) makes
// captures of the same operators, and their replays run the same kernels
// on grids of different sizes. Of the captures before the launch that
// score best (tied; ci, the latest, by default), the one whose rank by the
// elements its operators write is the rank of this replay's threads among
// the replays of the same kernels in the trace. Where the sizes do not
// rank apart (as many distinct sizes on each side), ci stays.
func (b *builder) bySize(ci int, tied []int, work []*devAct) int {
	rt := b.rt
	names := func(w []*devAct) string {
		var ns []string
		for _, a := range w {
			ns = append(ns, a.name)
		}
		return strings.Join(ns, "\x00")
	}
	threads := func(w []*devAct) float64 {
		t := 0.0
		for _, a := range w {
			t += a.threads
		}
		return t
	}
	key, mine := names(work), threads(work)
	var ts []float64
	for _, c := range rt.calls {
		if !strings.Contains(c.name, "GraphLaunch") || c.capture || c.capIdx >= 0 {
			continue
		}
		var w []*devAct
		for _, a := range rt.dev[c.corr] {
			if a.cat != "cuda_sync" {
				w = append(w, a)
			}
		}
		if names(w) == key && !slices.Contains(ts, threads(w)) {
			ts = append(ts, threads(w))
		}
	}
	type sized struct {
		capIdx int
		elems  int64
	}
	var cs []sized
	for _, i := range tied {
		var n int64
		for _, c := range b.capLaunches(i) {
			if op := b.byExt[c.ext]; op != nil {
				if eo := b.et[op.rf]; eo != nil {
					for _, o := range eo.Outputs {
						n += o.Numel
					}
				}
			}
		}
		cs = append(cs, sized{i, n})
	}
	slices.Sort(ts)
	slices.SortStableFunc(cs, func(x, y sized) int { return cmp.Compare(x.elems, y.elems) })
	if len(ts) != len(cs) || mine == 0 {
		return ci
	}
	for k := 1; k < len(cs); k++ {
		if cs[k].elems == cs[k-1].elems {
			return ci
		}
	}
	b.sized++
	return cs[slices.Index(ts, mine)].capIdx
}

// capLaunches is capture i's kernel, memset and memcpy launches, in host
// order (computed once per capture).
func (b *builder) capLaunches(i int) []*call {
	if b.capCalls == nil {
		b.capCalls = map[int][]*call{}
		for _, c := range b.rt.calls {
			if c.capIdx >= 0 && isLaunchCall(c.name) {
				b.capCalls[c.capIdx] = append(b.capCalls[c.capIdx], c)
			}
		}
	}
	return b.capCalls[i]
}

// nameMatches counts the replayed activities that a captured launch of the
// same kind names by its operator (nameFits), each launch taken once, as
// replayItems pairs them.
func nameMatches(launches []*call, replay []*devAct, b *builder) int {
	used := make([]bool, len(launches))
	n := 0
	for _, a := range replay {
		kind := actKind(a)
		for i, c := range launches {
			if used[i] || callKind(c.name) != kind {
				continue
			}
			op := b.byExt[c.ext]
			if op == nil {
				op = b.opAt(c.ts, c.tid)
			}
			if op != nil && nameFits(a.name, op.name) {
				used[i] = true
				n++
				break
			}
		}
	}
	return n
}

// foreignET is where collsim_record puts the execution-trace nodes of a
// capture it profiled before the recorded region: past 10^9 (one block of
// 10^9 ids per capture), beyond any node id of the region's own trace.
const foreignET = 1_000_000_000

// foreignCapture reports whether a capture's operators come from another
// execution-trace session than the step's (collsim_record's capture hook):
// the observer numbers storages afresh in each session, so the capture's
// tensors and the step's cannot be told equal by id. Its replay keeps the
// capture's own tensors (a race inside the graph shows) and also takes a
// graph's static buffers from the step as an opaque replay does
// (opaqueReplays): the inputs the step filled before it, the outputs the
// step reads after it.
func (b *builder) foreignCapture(calls []*call) bool {
	for _, c := range calls {
		if !isLaunchCall(c.name) {
			continue
		}
		if op := b.byExt[c.ext]; op != nil {
			if eo := b.et[op.rf]; eo != nil {
				return eo.Node >= foreignET
			}
		}
	}
	return false
}

// replayItems matches a replay's device activities to the captured calls
// and returns the replay as items (see graph's comment for what is a
// guess). prefix names the fork and join events it adds.
func (b *builder) replayItems(capCalls []*call, replay []*devAct, prefix string) []*item {
	p := b.p
	var items, launches []*item
	for _, c := range capCalls {
		switch {
		case isLaunchCall(c.name):
			op := b.byExt[c.ext]
			if op == nil {
				op = b.opAt(c.ts, c.tid)
			}
			it := &item{kind: scenarios.OpKernel, ts: c.ts, issue: c.ts, stream: -1, op: op, coll: b.commAt(c.ts, c.tid), note: callKind(c.name)}
			items = append(items, it)
			launches = append(launches, it)
		case strings.HasPrefix(c.name, "cudaEventRecord"):
			items = append(items, &item{kind: scenarios.OpRecord, ts: c.ts, issue: c.ts, stream: -1, corr: c.corr})
		case c.name == "cudaStreamWaitEvent":
			items = append(items, &item{kind: scenarios.OpWait, ts: c.ts, issue: c.ts, stream: -1, waitEvent: -1, recStream: -1, recCorr: -1})
		}
	}
	b.checkHostScalars(launches)
	guessed, extra := 0, 0
	for _, a := range replay {
		kind := actKind(a)
		pick := -1
		for i, l := range launches {
			if l.act == nil && l.note == kind && l.op != nil && nameFits(a.name, l.op.name) {
				pick = i
				break
			}
		}
		if pick < 0 {
			for i, l := range launches {
				if l.act == nil && l.note == kind {
					pick = i
					guessed++
					break
				}
			}
		}
		if pick < 0 {
			extra++
			items = append(items, &item{kind: scenarios.OpKernel, ts: math.MaxFloat64 / 2, stream: a.stream, act: a, name: "graph." + shortKernel(a.name)})
			continue
		}
		launches[pick].act, launches[pick].stream = a, a.stream
	}
	var kept []*item
	dropped := 0
	for _, it := range items {
		it.note = ""
		if it.kind == scenarios.OpKernel && it.act == nil {
			dropped++
			continue
		}
		kept = append(kept, it)
	}
	items = kept
	if len(replay) > 0 {
		p.notef("graph replay: %d of %d replayed kernels matched to a captured launch by operator name in the kernel name, %d by kind and order only (a guess)", len(replay)-guessed-extra, len(replay), guessed)
	}
	if extra > 0 {
		p.notef("graph replay: %d replayed kernels match no captured launch: opaque kernels at the end", extra)
	}
	if dropped > 0 {
		p.notef("graph replay: %d captured launches have no replayed kernel: left out", dropped)
	}
	// A captured wait is on the stream of the launch after it. A captured
	// record is on the stream that wait waits for, which the capture does
	// not name: PyTorch's wait_stream issues the record just before the
	// wait, on the waited-on stream, after that stream's last launch. The
	// graph executor runs a captured chain on one replay stream, so when a
	// launch before the record ran on the waiting stream's replay stream,
	// the edge is within one replay stream (the executor's own order);
	// else the record follows the last launch before it.
	for i, it := range items {
		if it.kind == scenarios.OpWait {
			for j := i + 1; j < len(items); j++ {
				if items[j].kind == scenarios.OpKernel {
					it.stream = items[j].stream
					break
				}
			}
		}
	}
	for i, it := range items {
		if it.kind != scenarios.OpRecord {
			continue
		}
		var waiter int64 = -1
		for j := i + 1; j < len(items); j++ {
			if items[j].kind == scenarios.OpWait {
				waiter = items[j].stream
				break
			}
			if items[j].kind == scenarios.OpRecord {
				break
			}
		}
		last := int64(-1)
		for j := i - 1; j >= 0; j-- {
			if items[j].kind != scenarios.OpKernel {
				continue
			}
			if last < 0 {
				last = items[j].stream
			}
			if waiter >= 0 && items[j].stream == waiter {
				last = waiter
				break
			}
		}
		it.stream = last
	}
	// Fork every replay stream from the first at the start, join it back
	// at the end.
	first := int64(-1)
	var others []int64
	for _, it := range items {
		if it.kind != scenarios.OpKernel {
			continue
		}
		if first < 0 {
			first = it.stream
		} else if it.stream != first && !containsInt(others, it.stream) {
			others = append(others, it.stream)
		}
	}
	if len(others) > 0 {
		// Each other stream forks from the first after the last kernel of
		// the first stream that had ended when the stream's first kernel
		// started in the replay (at the start when none had).
		for _, s := range others {
			var firstOn *item
			for _, it := range items {
				if it.kind == scenarios.OpKernel && it.stream == s {
					firstOn = it
					break
				}
			}
			at := math.Inf(-1)
			for _, it := range items {
				if it.kind == scenarios.OpKernel && it.stream == first && it.act.ts+it.act.dur <= firstOn.act.ts && it.ts < firstOn.ts {
					at = max(at, it.ts)
				}
			}
			if math.IsInf(at, -1) && len(items) > 0 {
				at = math.Nextafter(items[0].ts, math.Inf(-1))
			}
			ev := prefix + "fork." + streamName(s)
			p.events = append(p.events, ev)
			items = append(items,
				&item{kind: scenarios.OpRecord, ts: math.Nextafter(at, math.Inf(1)), stream: first, event: ev},
				&item{kind: scenarios.OpWait, ts: math.Nextafter(math.Nextafter(at, math.Inf(1)), math.Inf(1)), stream: s, event: ev})
		}
		for _, s := range others {
			ev := prefix + "join." + streamName(s)
			p.events = append(p.events, ev)
			items = append(items,
				&item{kind: scenarios.OpRecord, ts: math.MaxFloat64, stream: s, event: ev},
				&item{kind: scenarios.OpWait, ts: math.MaxFloat64, stream: first, event: ev})
		}
		p.notef("graph replay: kernels ran on %d streams; the order between them comes from the capture's event records and waits mapped onto replay streams, a fork of each stream after the first stream's last kernel that had ended when it started in the replay, and a join at the end (guesses)", len(others)+1)
	}
	sortItems(items)
	return items
}

// checkHostScalars notes every captured launch whose operator took a host
// value (validation/corpus HostScalarCaptured): the graph keeps the value it
// had at capture for every replay. The trace cannot tell a constant from a
// variable that changes between replays, so this is a note naming the op,
// not a verdict.
func (b *builder) checkHostScalars(launches []*item) {
	if b.et == nil {
		return
	}
	var ops []string
	for _, l := range launches {
		if l.op == nil {
			continue
		}
		if eo := b.et[l.op.rf]; eo != nil && eo.HostScalars > 0 {
			name := shortOp(l.op.name)
			if a := b.annotation(l.op.ts, l.op.tid); a != "" {
				name = a + "." + name
			}
			if !contains(ops, name) {
				ops = append(ops, name)
			}
		}
	}
	if len(ops) > 0 {
		b.p.notef("host values frozen at capture: %s took a host scalar (a Python number) when the graph was captured; every replay reuses that value — if it changes between replays, pass it as a device tensor", strings.Join(ops, ", "))
	}
}

func callKind(name string) string {
	switch {
	case strings.Contains(name, "Memset"):
		return "memset"
	case strings.Contains(name, "Memcpy"):
		return "memcpy"
	}
	return "kernel"
}

func actKind(a *devAct) string {
	switch a.cat {
	case "gpu_memset", "Memset":
		return "memset"
	case "gpu_memcpy", "Memcpy":
		return "memcpy"
	}
	return "kernel"
}

// nameFits reports whether an operator's name appears in a kernel's name:
// "aten::sin" in "…sin_kernel_cuda…", "aten::mul" in "…MulFunctor…".
func nameFits(kernel, op string) bool {
	s := strings.ToLower(shortOp(op))
	s = strings.TrimSuffix(s, "_")
	if len(s) < 2 {
		return false
	}
	return strings.Contains(strings.ToLower(kernel), s)
}

// opaqueReplays gives the kernels of each graph launch whose capture is not
// in the trace (captured before the recorded region: cudagraph trees and
// torch.cuda.graph warm-ups do this) the tensors a graph's static buffers
// are, read from what the host does around the launch:
//
//   - it reads every tensor that lives outside the step (no allocation of
//     the step made it) and that the step last wrote before the launch
//     without reading it since: a static input, filled for the replay;
//   - it writes every such tensor that the step first touches after the
//     launch, by reading it: a static output; and every static input that
//     the step reads after the launch, by a kernel that does not rewrite
//     it, with no write between: a static output the step zeroed or
//     filled before the replay (out.zero_(); g.replay(); read out) looks
//     like an input and is both.
//
// The first of its kernels to start takes the reads, the last to end the
// writes. A graph's static buffers are exactly such tensors (a replay
// writes its outputs in place, at addresses fixed at capture), but a
// tensor that merely looks like one is taken for one: the note says so and
// how to know (record the capture).
// captureSizes is, for a replay of a capture the recorder profiled in a
// session of its own, the byte sizes of the tensors its operators read and
// write: a graph's static input or output is one of them (nil, nil for a
// replay whose capture the trace lacks).
func (b *builder) captureSizes(r int) (in, out map[int64]bool) {
	ci, ok := b.foreignAt[r]
	if !ok {
		return nil, nil
	}
	in, out = map[int64]bool{}, map[int64]bool{}
	for _, c := range b.capLaunches(ci) {
		op := b.byExt[c.ext]
		if op == nil {
			continue
		}
		if eo := b.et[op.rf]; eo != nil {
			for _, t := range eo.Inputs {
				in[t.Bytes()] = true
			}
			for _, t := range eo.Outputs {
				out[t.Bytes()] = true
			}
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return in, out
}

// fitsSize reports whether a tensor of n bytes is one of sizes (any size
// when sizes is nil).
func fitsSize(sizes map[int64]bool, n int64) bool {
	return sizes == nil || sizes[n]
}

func (b *builder) opaqueReplays(out []*item) {
	if len(b.opaqueAt) == 0 {
		return
	}
	static := func(k string) bool {
		t := b.tensors[k]
		return t != nil && !t.managed && !strings.HasPrefix(k, "scratch.") && !strings.HasPrefix(k, "c:")
	}
	type replay struct {
		r             int
		firstK, lastK *item
		ins, outs     []string
		n             int
	}
	var rs []*replay
	// earlier is what earlier replays were taken to write: the step has
	// seen it by the next replay (a graph's output read after a second,
	// other graph is the first one's, not the second's).
	earlier := map[string]bool{}
	var earlierOrder []string
	for r := 1; r <= b.replays; r++ {
		if _, ok := b.opaqueAt[r]; !ok {
			continue
		}
		first, last := -1, -1
		var firstK, lastK *item
		for i, it := range out {
			if it.opaque != r {
				continue
			}
			if first < 0 {
				first = i
			}
			last = i
			if firstK == nil || it.act.ts < firstK.act.ts {
				firstK = it
			}
			if lastK == nil || it.act.ts+it.act.dur > lastK.act.ts+lastK.act.dur {
				lastK = it
			}
		}
		if first < 0 {
			continue
		}
		lastWrite := map[string]bool{} // before the launch: was the last access a write?
		seen := map[string]bool{}
		var order []string
		for _, it := range out[:first] {
			if it.kind != scenarios.OpKernel || it.opaque != 0 {
				continue
			}
			for _, k := range it.reads {
				if !seen[k] {
					order = append(order, k)
				}
				seen[k], lastWrite[k] = true, false
			}
			for _, k := range it.writes {
				if !seen[k] {
					order = append(order, k)
				}
				seen[k], lastWrite[k] = true, true
			}
		}
		for _, k := range earlierOrder {
			if !seen[k] {
				seen[k] = true
			}
		}
		rp := &replay{r: r, firstK: firstK, lastK: lastK}
		inSize, outSize := b.captureSizes(r)
		for _, k := range order {
			if lastWrite[k] && static(k) && fitsSize(inSize, b.tensors[k].bytes) {
				rp.ins = append(rp.ins, k)
			}
		}
		after := map[string]bool{}
		for _, it := range out[last+1:] {
			if it.kind != scenarios.OpKernel || it.opaque != 0 {
				continue
			}
			for _, k := range it.reads {
				switch {
				case after[k] || !static(k):
				case !fitsSize(outSize, b.tensors[k].bytes):
					// Not the size of any tensor the capture's
					// operators write: another graph's output.
				case !seen[k]:
					rp.outs = append(rp.outs, k)
				case lastWrite[k] && !slices.Contains(it.writes, k):
					// Filled (or cleared) before the launch and read
					// after it, by a kernel that does not rewrite it:
					// a static output the step zeroed first is one;
					// taken as read and written by the replay.
					rp.outs = append(rp.outs, k)
				}
				after[k] = true
			}
			for _, k := range it.writes {
				after[k] = true
			}
		}
		for _, it := range out {
			if it.opaque == r {
				rp.n++
			}
		}
		rs = append(rs, rp)
		for _, k := range rp.outs {
			if !earlier[k] {
				earlier[k] = true
				earlierOrder = append(earlierOrder, k)
			}
		}
	}
	// A graph's static buffers are the same at every replay: each replay
	// of one graph reads every static input and writes every static
	// output that any replay of it showed (the last replay's output is
	// rewritten even where the step reads it no more after it).
	ins, outs := map[string][]string{}, map[string][]string{}
	for _, rp := range rs {
		g := b.graphOf[rp.r]
		for _, k := range rp.ins {
			ins[g] = appendOnce(ins[g], k)
		}
		for _, k := range rp.outs {
			outs[g] = appendOnce(outs[g], k)
		}
	}
	for _, rp := range rs {
		g := b.graphOf[rp.r]
		for _, k := range ins[g] {
			rp.firstK.reads = appendOnce(rp.firstK.reads, k)
		}
		if len(outs[g]) > 0 {
			rp.lastK.writes = append([]string(nil), outs[g]...)
		}
		b.touch(rp.firstK, "")
		b.touch(rp.lastK, "")
		also := ""
		if len(ins[g]) > len(rp.ins) || len(outs[g]) > len(rp.outs) {
			also = ", counting those of the other replays of the same graph"
		}
		if _, ok := b.foreignAt[rp.r]; ok {
			b.p.notef("graph launch at host time %.3f µs replays a capture recorded in a profiling session of its own (before the region): its kernels use the capture's tensors, and are also taken to read the %d tensors the step filled just before it and to write the %d tensors it read after it with no write between (first there, or filled before it)%s, as a graph's static buffers are (the two sessions name tensors apart: a guess)", b.rel(b.opaqueAt[rp.r]), len(ins[g]), len(outs[g]), also)
			continue
		}
		b.p.notef("graph launch at host time %.3f µs: its capture is not in the trace (captured before the recorded region); its %d kernels are taken to read the %d tensors the step filled just before it and to write the %d tensors it read after it with no write between (first there, or filled before it)%s, as a graph's static buffers are (a guess: record the capture inside the region to know)", b.rel(b.opaqueAt[rp.r]), rp.n, len(ins[g]), len(outs[g]), also)
	}
}
