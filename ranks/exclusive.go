package ranks

import (
	"fmt"
	"strings"

	"github.com/collsim/collsim/ranks/findings"
)

// noteTalk marks t as having communicated when in touches a peer.
func (w *World) noteTalk(t *task, in *Instr) {
	if !t.talked {
		w.noteTalkSlow(t, in)
	}
}

func (w *World) noteTalkSlow(t *task, in *Instr) {
	switch in.Op {
	case OpPut, OpWait, OpSend, OpRecv, OpRecvSend:
		t.talked = true
	case OpCompute:
		if in.Dst != nil && in.Dst.Rank != t.rank {
			t.talked = true
		}
		for _, s := range in.Srcs {
			if s.Buf != nil && s.Buf.Rank != t.rank {
				t.talked = true
			}
		}
	}
}

// checkDropped reports a collective kernel that completed without
// communicating: its peers' contributions never reached this rank, whatever
// its output holds. One finding per kernel name lists every rank.
func (w *World) checkDropped(t *task) {
	if t.op == nil || t.op.Kind != Launch {
		return
	}
	k := t.op.Kernel
	if k.Coll == "" || k.GroupSize <= 1 || t.talked {
		return
	}
	if f, ok := w.log.Group(k.Name); ok {
		if f == nil {
			return // counted already, past the cap: not kept
		}
		for _, r := range f.Ranks {
			if r == t.rank {
				return
			}
		}
		f.Ranks = append(f.Ranks, t.rank)
		sortInts(f.Ranks)
		f.Message = droppedMsg(k, f.Ranks)
		return
	}
	// Counted once, whatever its other ranks report: Counts is the
	// number of dropped collectives, kept or not.
	w.log.AddGroup(k.Name, Finding{
		Kind:     KindDropped,
		Message:  droppedMsg(k, []int{t.rank}),
		Ranks:    []int{t.rank},
		Ops:      []string{k.Name},
		Streams:  []string{w.streamName(t.id)},
		Resource: k.Coll,
	})
}

func droppedMsg(k *KernelSpec, rs []int) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = fmt.Sprint(r)
	}
	return fmt.Sprintf("collective %s (%s, kernel %s) completed without communicating on ranks %s: no signal, message or peer memory access reached any of its %d-rank group",
		k.Coll, k.Kind, k.Name, strings.Join(s, ", "), k.GroupSize)
}

// sigMismatch reports a call that consumed data of a call with the same
// instance name but a different signature (op or count): the calls differ
// at the same sequence number.
func (w *World) sigMismatch(t *task, by int32, got, resKind string, resource func() string) {
	o := w.task(by)
	// Deduplicated by the kind of resource ("signal", "NCCL"), the call and
	// both signatures; the resource is named only for a new finding (a
	// mismatched ring meets this on every message).
	key := findings.Key{Kind: "sigmismatch", A: w.callKey(t.inst), B: t.sig, X: got, Res: resKind}
	if !w.log.First(key) {
		return
	}
	res := resource()
	w.noteTasks(t.id, by)
	w.report(Finding{
		Kind: KindMismatch,
		Message: fmt.Sprintf("%s on rank %d stream %s (%s) consumed data of %s from rank %d stream %s (%s) through %s: the calls differ at the same sequence number",
			w.callName(t.inst), t.rank, w.streamName(t.id), t.sig, w.callName(o.inst), o.rank, w.streamName(by), got, res),
		Ranks:    uniqInts(t.rank, o.rank),
		Ops:      []string{w.taskName(t.id), w.taskName(by)},
		Streams:  []string{w.streamName(t.id), w.streamName(by)},
		Resource: res,
	})
}

// partner returns the stuck task on rank that is the same collective
// instance as t (its peer in the call), or -1.
func (w *World) partner(stuck []*task, t *task, rank int) int32 {
	if t.inst.Call < 0 {
		return -1
	}
	for _, u := range stuck {
		if u.rank == rank && u.inst == t.inst && u.id != t.id {
			return u.id
		}
	}
	return -1
}

// peerDone explains a wait on a peer that has no unfinished work: what it
// should have sent will never come.
func (w *World) peerDone(stuck []*task, t *task) string {
	var out string
	for _, br := range t.blockWho {
		busy := false
		for _, u := range stuck {
			if u.rank == br.rank {
				busy = true
				break
			}
		}
		if !busy {
			out += fmt.Sprintf(" (rank %d has finished all its work: it will never send it)", br.rank)
		}
	}
	return out
}
