package importer

import (
	"sort"
	"strconv"

	"github.com/collsim/collsim/scenarios"
)

// hostStream is the stream the importer gives the host's own reads and
// writes of memory a device copy of the step also touches (host.go).
const hostStream int64 = -1000

// eventSyncStream runs nothing but waits: a host wait for an event is a
// wait of this stream on it and a sync of this stream (build.go, pair).
const eventSyncStream int64 = -1001

// knownStream reports whether s names a stream of the program: a device
// stream the trace named, or the host's.
func knownStream(s int64) bool { return s >= 0 || s == hostStream || s == eventSyncStream }

// hostKey names a CPU tensor's storage ("h12"), apart from the device
// storages ("s12").
func hostKey(storage int64) string { return "h" + strconv.FormatInt(storage, 10) }

// hostAccess adds the CPU tensors a device kernel's operator names: a
// non_blocking copy into pinned memory writes it, one out of it reads it.
func (b *builder) hostAccess(it *item, eo *ETOp) {
	for _, w := range eo.HostWrites {
		key := hostKey(w.Storage)
		it.writes = appendOnce(it.writes, key)
		b.tensor(key, w.Bytes())
	}
	for _, r := range eo.HostReads {
		key := hostKey(r.Storage)
		if !containsStr(it.writes, key) {
			it.reads = appendOnce(it.reads, key)
		}
		b.tensor(key, r.Bytes())
	}
}

func containsStr(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// hostOps makes the host's own use of pinned memory part of the program.
// A copy with non_blocking=True between the device and pinned host memory
// returns before the copy is done: the host may read the buffer before the
// data arrives (`h.copy_(y, non_blocking=True); h.numpy()`), or refill it
// while the copy still reads it (`h.copy_(batch2)` after
// `d.copy_(h, non_blocking=True)`), unless it synchronizes first. Each
// operator of the step that runs on the host alone (it launches nothing)
// and reads or writes a CPU storage that a device copy of the step touches
// becomes a kernel on the "host" stream — its duration the operator's —
// followed by a sync of that stream: the host does it then and there and
// goes on only when it is done, so it is ordered after every sync before
// it and before everything issued after it, and unordered with the device
// work it did not wait for. Of nested operators the innermost counts.
func (b *builder) hostOps(items []*item) []*item {
	if b.et == nil {
		return nil
	}
	dev := map[int64]bool{} // CPU storages a device copy of the step touches
	for _, it := range items {
		if it.kind != scenarios.OpKernel || it.op == nil {
			continue
		}
		if eo := b.et[it.op.rf]; eo != nil {
			for _, r := range append(append([]TensorRef(nil), eo.HostReads...), eo.HostWrites...) {
				dev[r.Storage] = true
			}
		}
	}
	if len(dev) == 0 {
		return nil
	}
	launches := map[ID][]float64{} // host times of every launch, per thread
	for _, c := range b.rt.calls {
		if isLaunchCall(c.name) || len(b.rt.dev[c.corr]) > 0 {
			launches[c.tid] = append(launches[c.tid], c.ts)
		}
	}
	launchedIn := func(op *cpuOp) bool {
		ts := launches[op.tid]
		i := sort.SearchFloat64s(ts, op.ts)
		return i < len(ts) && ts[i] <= op.end
	}
	touches := func(op *cpuOp) (*ETOp, bool) {
		eo := b.et[op.rf]
		if eo == nil || viewOps[shortOp(op.name)] {
			return nil, false
		}
		for _, r := range append(append([]TensorRef(nil), eo.HostReads...), eo.HostWrites...) {
			if dev[r.Storage] {
				return eo, true
			}
		}
		return nil, false
	}
	var cands []*cpuOp
	for _, op := range b.rt.ops {
		if op.cat != "cpu_op" || !b.rt.window.has(op.ts) {
			continue
		}
		if _, ok := touches(op); ok && !launchedIn(op) {
			cands = append(cands, op)
		}
	}
	var out []*item
	for i, op := range cands {
		inner := false
		for j, o := range cands {
			if j != i && o.tid == op.tid && o.ts >= op.ts && o.end <= op.end && (o.ts > op.ts || o.end < op.end || j > i) {
				inner = true
				break
			}
		}
		if inner {
			continue
		}
		eo, _ := touches(op)
		it := &item{kind: scenarios.OpKernel, ts: op.ts, issue: op.ts, stream: hostStream,
			act: &devAct{cat: "host", name: op.name, ts: op.ts, dur: max(op.end-op.ts, 0.001), stream: hostStream}, name: "host." + shortOp(op.name)}
		b.hostAccess(it, eo)
		for _, w := range eo.HostWrites {
			it.reads = removeStr(it.reads, hostKey(w.Storage))
		}
		b.touch(it, "")
		out = append(out, it,
			&item{kind: scenarios.OpSync, ts: op.end, issue: op.end, stream: hostStream, waitEvent: -1})
		b.hostOpsN++
	}
	return out
}

// viewOps are PyTorch's operators that make a view of their input (a new
// tensor header over the same storage) and touch no element: taking
// hp[i*S:(i+1)*S] of a pinned buffer reads and writes nothing. Those that
// copy where they must (reshape, contiguous, flatten) do it in an inner
// operator (aten::clone, aten::copy_), which is the host access then.
var viewOps = map[string]bool{
	"as_strided": true, "slice": true, "select": true, "view": true, "_unsafe_view": true, "narrow": true,
	"reshape": true, "reshape_as": true, "view_as": true, "flatten": true, "unflatten": true, "contiguous": true,
	"expand": true, "expand_as": true, "t": true, "transpose": true, "permute": true, "unsqueeze": true,
	"squeeze": true, "alias": true, "detach": true, "split": true, "split_with_sizes": true, "chunk": true,
	"unbind": true, "diagonal": true, "unfold": true, "movedim": true, "swapaxes": true, "lift_fresh": true,
}

func removeStr(xs []string, x string) []string {
	var out []string
	for _, y := range xs {
		if y != x {
			out = append(out, y)
		}
	}
	return out
}
