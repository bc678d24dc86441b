package ranks

import "fmt"

// Host synchronization: a Sync host op (cudaStreamSynchronize, or
// cudaDeviceSynchronize with Stream -1) becomes a task that depends on the
// synchronized streams' last issued work. Issuing it blocks the rank's host
// thread: the host issues nothing more until the task completes, and every
// op issued afterwards is ordered after it (the host saw the work finish).
// A collective whose peer's host is blocked in a sync cannot be matched
// until that sync returns, so hang analysis adds a wait-for edge from a
// kernel blocked on a peer to that peer's pending sync: a cycle through the
// hosts is reported as such.

// lowerSync adds the node of Sync op i and returns its id. (A sync under
// capture never gets here: CheckCapture refuses it.)
func lowerSync(rank int, p *Program, i int, tail []int32, lastSync int32, nodes *[]node) (int32, error) {
	op := p.Ops[i]
	if op.Stream < -1 || op.Stream >= len(p.Streams) {
		return 0, fmt.Errorf("rank %d op %d: sync of stream %d out of range", rank, i, op.Stream)
	}
	n := node{op: i, stream: max(op.Stream, 0)}
	if lastSync >= 0 {
		n.deps = append(n.deps, lastSync)
	}
	for s, t := range tail {
		if t >= 0 && (op.Stream == -1 || s == op.Stream) {
			n.deps = append(n.deps, t)
		}
	}
	id := int32(len(*nodes))
	*nodes = append(*nodes, n)
	return id, nil
}

func syncCall(p *Program, stream int) string {
	if stream < 0 {
		return "cudaDeviceSynchronize()"
	}
	return fmt.Sprintf("cudaStreamSynchronize(%s)", p.Streams[stream])
}

func isSync(t *task) bool { return t.op != nil && t.op.Kind == Sync }

// hostBlocks reports whether issuing t blocks the host thread.
func (w *World) hostBlocks(t *task) bool {
	if !isSync(t) {
		return false
	}
	w.hosts[t.rank].syncing = t.id
	return true
}

// hostSyncDone resumes the host thread blocked on t.
func (w *World) hostSyncDone(t *task) {
	if !isSync(t) {
		return
	}
	h := &w.hosts[t.rank]
	h.syncing = -1
	if h.next < len(h.nodes) {
		w.eng.Schedule(w.eng.Now()+w.hostJitter(w.hostGap(t.rank, w.cfg.EventCost)), uint64(t.rank), int32(t.rank))
	}
}

func (w *World) syncName(t *task) string {
	return "host " + syncCall(w.progs[t.rank], t.op.Stream)
}

// hostSyncEdge returns the pending sync task that blocks rank's host, or
// -1.
func (w *World) hostSyncEdge(rank int) int32 {
	if rank < 0 || rank >= len(w.hosts) {
		return -1
	}
	if id := w.hosts[rank].syncing; id >= 0 && w.task(id).state != done {
		return id
	}
	return -1
}
