package importer

import (
	"sort"
	"strings"
)

// orphanLaunch is a launch from a host thread other than the step's with
// no operator around it in the trace.
type orphanLaunch struct {
	c   *call
	its []*item
}

// linkOrphans gives operators to the launches of host threads whose
// operators the profiler did not record. The profiler records a thread's
// operators only if the thread existed when profiling began; a thread the
// program starts inside the recorded region shows its CUDA runtime calls
// (CUPTI sees every thread) but no operator, while the execution trace
// holds its operators under a thread root of their own (ReadET's orphans).
// Threads are paired in order (the trace's by their first launch, the
// execution trace's by their root), and a thread's launches with its
// operators in order, only where every pair holds as many launches as
// operators; otherwise nothing is linked and a note says so.
func (b *builder) linkOrphans(ls []orphanLaunch) {
	// torch.cuda._sleep's kernel (a program's delay, or collsim_record's
	// probe in a thread whose ranges the profiler did not record) has no
	// operator in the execution trace either: it is matched with nothing and
	// stays an opaque kernel.
	kept := ls[:0:0]
	for _, l := range ls {
		if !allSpin(l.its) {
			kept = append(kept, l)
		}
	}
	ls = kept
	if len(ls) == 0 {
		return
	}
	var ets []*ETOp
	for k, op := range b.et {
		// Views and empty allocations launch no kernel: they pair
		// with no launch (a slice taken on a worker thread).
		if k < 0 && op.Orphan && !viewOps[shortOp(op.Name)] && !noKernelOps[shortOp(op.Name)] {
			ets = append(ets, op)
		}
	}
	sort.Slice(ets, func(i, j int) bool {
		if ets[i].Root != ets[j].Root {
			return ets[i].Root < ets[j].Root
		}
		return ets[i].Node < ets[j].Node
	})
	var etGroups [][]*ETOp
	for i, op := range ets {
		if i == 0 || op.Root != ets[i-1].Root {
			etGroups = append(etGroups, nil)
		}
		etGroups[len(etGroups)-1] = append(etGroups[len(etGroups)-1], op)
	}
	var order []ID
	byTid := map[ID][]orphanLaunch{}
	for _, l := range ls {
		if _, ok := byTid[l.c.tid]; !ok {
			order = append(order, l.c.tid)
		}
		byTid[l.c.tid] = append(byTid[l.c.tid], l)
	}
	type pair struct {
		l  orphanLaunch
		eo *ETOp
		lo float64 // the thread's previous launch ended here: the operator ran after it
	}
	var pairs []pair
	prevEnd := func(tid ID, before *call) float64 {
		lo := b.rt.window.lo
		for _, l := range ls {
			if l.c.tid == tid && l.c.end <= before.ts {
				lo = max(lo, l.c.end)
			}
		}
		return lo
	}
	ok := len(order) == len(etGroups)
	for i := 0; ok && i < len(order); i++ {
		ok = len(byTid[order[i]]) == len(etGroups[i])
	}
	how := "the execution trace's operators of those threads in order"
	if ok {
		for i, tid := range order {
			for j, l := range byTid[tid] {
				pairs = append(pairs, pair{l, etGroups[i][j], prevEnd(tid, l.c)})
			}
		}
	} else if len(ls) == len(ets) {
		// The threads do not pair up (the system reuses a finished
		// thread's id, so two threads started one after the other show
		// as one in the trace), but the counts do: launches in host order
		// with operators in the execution trace's order, whose node ids
		// are given as operators run, across threads.
		byNode := append([]*ETOp(nil), ets...)
		sort.Slice(byNode, func(i, j int) bool { return byNode[i].Node < byNode[j].Node })
		byTime := append([]orphanLaunch(nil), ls...)
		sort.SliceStable(byTime, func(i, j int) bool { return byTime[i].c.ts < byTime[j].c.ts })
		for i, l := range byTime {
			pairs = append(pairs, pair{l, byNode[i], prevEnd(l.c.tid, l.c)})
		}
		how = "the execution trace's operators of threads started in the region in the order they ran (the threads themselves do not pair up)"
	} else {
		b.p.notef("%d kernel launches from %d host threads with no operator in the trace (threads started inside the recorded region: the profiler records no operators for them): they touch nothing the importer can name; start such threads before recording", len(ls), len(order))
		return
	}
	if b.orphanRf == 0 {
		b.orphanRf = -1 << 40 // below ReadET's orphan keys
	}
	for _, pr := range pairs {
		b.orphanRf--
		rf := b.orphanRf
		b.et[rf] = pr.eo
		// The operator ran on its thread between that thread's last
		// launch and this one: its allocations are in that span.
		op := &cpuOp{idx: -1, tid: pr.l.c.tid, name: pr.eo.Name, cat: "cpu_op", ts: pr.lo, end: pr.l.c.end, ext: -1, rf: rf, seq: -1, peer: -1, groupRank: -1}
		for _, it := range pr.l.its {
			it.op = op
		}
	}
	b.p.notef("%d kernel launches from %d host threads whose operators the profiler did not record (threads started inside the recorded region) are matched to %s (a guess; start such threads before recording to know)", len(ls), len(order), how)
}

// allSpin reports whether every kernel of a launch is torch.cuda._sleep's.
func allSpin(its []*item) bool {
	for _, it := range its {
		if it.act == nil || !strings.Contains(it.act.name, "spin_kernel") {
			return false
		}
	}
	return len(its) > 0
}

// noKernelOps allocate without writing an element: like views, they launch
// no kernel.
var noKernelOps = map[string]bool{"empty": true, "empty_strided": true, "empty_like": true, "new_empty": true, "new_empty_strided": true}
