package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// micros is a time in nanoseconds written as microseconds with three
// decimals, the unit of the trace-event format ("ts": 12.345).
type micros int64

func (m micros) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("%d.%03d", int64(m)/1000, int64(m)%1000)), nil
}

// event is one Chrome trace event (the "JSON Array/Object Format" read by
// chrome://tracing and ui.perfetto.dev).
type event struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   micros         `json:"ts"`
	Dur  *micros        `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	ID   int            `json:"id,omitempty"`
	Bp   string         `json:"bp,omitempty"`
	S    string         `json:"s,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

// PidStride is the pid distance between variants in a trace: variant v's
// rank r is process v·PidStride + r (so a single-variant trace has
// pid = rank). It grows by powers of ten when a variant has more ranks.
const PidStride = 1000

func pidStride(d *Data) int {
	s := PidStride
	for _, v := range d.Variants {
		for s < v.Ranks {
			s *= 10
		}
	}
	return s
}

// WriteTrace writes d as a Chrome trace-event JSON file that opens in
// Perfetto UI (ui.perfetto.dev) and chrome://tracing:
//
//   - one process per rank and variant (pid = variant index × 1000 + rank,
//     named "rank R · VARIANT (verdict)"), one thread per stream (tid 1, 2,
//     … in program order) plus the host thread (tid 0);
//   - every kernel, event record and wait as a complete ("X") slice, with the
//     kernel's micro-program phases (copy-in, barrier-entry, ld_reduce, …)
//     nested inside it; records and waits take no time (dur 0);
//   - event record → wait, signal put → wait, NCCL send → receive,
//     NCCL's implicit per-communicator order and host synchronisations
//     across streams as flow arrows ("s"/"f"); a
//     signal or message consumed by another collective is in category
//     "flow.mismatch". Viewers bind a flow to the slice that encloses its
//     timestamp, which a zero-length slice cannot reliably do, so an event
//     flow runs from the last kernel before the record to the first kernel
//     after the wait (the pair the event orders);
//   - host launches and findings as instant ("i") events on the lanes
//     involved, at the simulated time they happened or were detected.
//
// Timestamps are simulated microseconds. The output is a pure function of
// d: the same data gives the same bytes.
func WriteTrace(w io.Writer, d *Data) error {
	bw := bufio.NewWriter(w)
	stride := pidStride(d)
	var evs []event
	for vi, v := range d.Variants {
		evs = append(evs, variantEvents(v, vi*stride)...)
	}
	if _, err := bw.WriteString("{\"traceEvents\":[\n"); err != nil {
		return err
	}
	for i, e := range evs {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		bw.Write(b)
		if i < len(evs)-1 {
			bw.WriteString(",")
		}
		bw.WriteString("\n")
	}
	type vmeta struct {
		Name     string `json:"name"`
		Verdict  string `json:"verdict"`
		Schedule string `json:"schedule"`
		PidBase  int    `json:"pid_base"`
		Trace    string `json:"trace_hash"`
	}
	meta := struct {
		Scenario string  `json:"scenario"`
		Variants []vmeta `json:"variants"`
	}{Scenario: d.Scenario, Variants: []vmeta{}}
	for vi, v := range d.Variants {
		meta.Variants = append(meta.Variants, vmeta{v.Name, v.Verdict, v.Schedule, vi * stride, v.TraceHash})
	}
	mb, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	fmt.Fprintf(bw, "],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":%s}\n", mb)
	return bw.Flush()
}

func dur(ns int64) *micros {
	m := micros(ns)
	return &m
}

func variantEvents(v *Variant, base int) []event {
	var evs []event
	// Lane → (pid, tid).
	pid := make([]int, len(v.Lanes))
	tid := make([]int, len(v.Lanes))
	n := 0
	for i, l := range v.Lanes {
		if i > 0 && v.Lanes[i-1].Rank != l.Rank {
			n = 0
		}
		pid[i], tid[i] = base+l.Rank, n
		n++
	}
	for i, l := range v.Lanes {
		if l.Host {
			p := base + l.Rank
			evs = append(evs,
				event{Name: "process_name", Ph: "M", Pid: p, Args: map[string]any{"name": fmt.Sprintf("rank %d · %s (%s)", l.Rank, v.Name, v.Verdict)}},
				event{Name: "process_sort_index", Ph: "M", Pid: p, Args: map[string]any{"sort_index": p}},
				event{Name: "process_labels", Ph: "M", Pid: p, Args: map[string]any{"labels": fmt.Sprintf("%s schedule, %s", v.Schedule, v.Config)}},
			)
		}
		name := "stream " + l.Stream
		if l.Host {
			name = "host"
		}
		evs = append(evs,
			event{Name: "thread_name", Ph: "M", Pid: pid[i], Tid: tid[i], Args: map[string]any{"name": name}},
			event{Name: "thread_sort_index", Ph: "M", Pid: pid[i], Tid: tid[i], Args: map[string]any{"sort_index": tid[i]}},
		)
	}
	for _, is := range v.Issues {
		evs = append(evs, event{Name: is.Name, Cat: "host", Ph: "i", S: "t", Ts: micros(is.At), Pid: pid[is.Lane], Tid: tid[is.Lane]})
	}
	for _, s := range v.Spans {
		args := map[string]any{"kind": s.Kind, "replay": s.Replay}
		if s.Coll >= 0 {
			args["collective"] = v.Colls[s.Coll]
		}
		if len(s.Findings) > 0 {
			var ks []string
			for _, f := range s.Findings {
				ks = append(ks, v.Findings[f].Kind)
			}
			args["findings"] = strings.Join(ks, ", ")
		}
		evs = append(evs, event{Name: s.Name, Cat: s.Kind, Ph: "X", Ts: micros(s.Start), Dur: dur(s.End - s.Start), Pid: pid[s.Lane], Tid: tid[s.Lane], Args: args})
		for _, p := range s.Phases {
			if p.End <= p.Start || p.Start < s.Start || p.End > s.End {
				continue // nothing to draw, or it would not nest
			}
			evs = append(evs, event{Name: p.Name, Cat: "phase", Ph: "X", Ts: micros(p.Start), Dur: dur(p.End - p.Start), Pid: pid[s.Lane], Tid: tid[s.Lane]})
		}
	}
	// Flow ids are unique per file: offset by the variant's pid base.
	prev, next := neighbours(v)
	for i, f := range v.Flows {
		from, to := v.Spans[f.From], v.Spans[f.To]
		fromAt, toAt := inside(f.FromAt, from), inside(f.ToAt, to)
		if j := prev[f.From]; j >= 0 {
			from = v.Spans[j]
			fromAt = inside(from.End, from)
		}
		if j := next[f.To]; j >= 0 {
			to = v.Spans[j]
			toAt = to.Start
		}
		cat := "flow." + f.Kind
		if f.Mismatch {
			cat = "flow.mismatch"
		}
		id := base*100000 + i + 1
		evs = append(evs,
			event{Name: f.Kind + " " + f.Label, Cat: cat, Ph: "s", ID: id, Ts: micros(fromAt), Pid: pid[from.Lane], Tid: tid[from.Lane]},
			event{Name: f.Kind + " " + f.Label, Cat: cat, Ph: "f", Bp: "e", ID: id, Ts: micros(toAt), Pid: pid[to.Lane], Tid: tid[to.Lane]},
		)
	}
	for _, f := range v.Findings {
		args := map[string]any{"message": f.Message, "resource": f.Resource}
		name := f.Kind + ": " + strings.Join(f.Ops, " ↔ ")
		seen := map[int]bool{}
		for _, s := range f.Spans {
			l := v.Spans[s].Lane
			if seen[l] {
				continue
			}
			seen[l] = true
			evs = append(evs, event{Name: name, Cat: "finding." + f.Kind, Ph: "i", S: "t", Ts: micros(max(f.At, 0)), Pid: pid[l], Tid: tid[l], Args: args})
		}
		at := f.At
		if at < 0 {
			at = v.EndNs
		}
		for _, l := range f.Lanes {
			if !seen[l] {
				seen[l] = true
				evs = append(evs, event{Name: name, Cat: "finding." + f.Kind, Ph: "i", S: "t", Ts: micros(at), Pid: pid[l], Tid: tid[l], Args: args})
			}
		}
		if len(seen) == 0 {
			// Nothing to anchor on: a process-wide instant on each rank named.
			for _, r := range f.Ranks {
				evs = append(evs, event{Name: name, Cat: "finding." + f.Kind, Ph: "i", S: "p", Ts: micros(at), Pid: base + r, Args: args})
			}
		}
	}
	return evs
}

// inside clamps t into the span's extent [Start, End), so that a flow
// event binds to the slice it belongs to.
func inside(t int64, s Span) int64 {
	end := max(s.End, s.Start+1)
	return min(max(t, s.Start), end-1)
}

// isEventOp reports whether s is a zero-length event record or wait.
func isEventOp(s Span) bool { return s.End == s.Start && (s.Kind == "record" || s.Kind == "wait") }

// neighbours returns, for each event record or wait, the last kernel that
// ended on its lane before it (prev) and the first kernel that started on
// its lane after it (next); -1 where there is none or the span is a kernel.
func neighbours(v *Variant) (prev, next []int) {
	prev, next = make([]int, len(v.Spans)), make([]int, len(v.Spans))
	byLane := make([][]int, len(v.Lanes))
	for i, s := range v.Spans { // in start order
		byLane[s.Lane] = append(byLane[s.Lane], i)
		prev[i], next[i] = -1, -1
	}
	for _, ids := range byLane {
		last := -1
		for _, i := range ids {
			if isEventOp(v.Spans[i]) {
				prev[i] = last
			} else {
				last = i
			}
		}
		last = -1
		for k := len(ids) - 1; k >= 0; k-- {
			if i := ids[k]; isEventOp(v.Spans[i]) {
				next[i] = last
			} else {
				last = i
			}
		}
	}
	return prev, next
}
