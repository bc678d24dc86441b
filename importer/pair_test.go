package importer_test

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/importer"
	"github.com/collsim/collsim/scenarios"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// A job's per-rank traces, assembled from a real single-GPU trace: its
// c10d operator (c10d::allreduce_, …, with record_param_comms and the
// runtime calls and device work inside it) is the template of every
// communication call, cloned once per call of the rank's script, later in
// host time, with the record's arguments set as a rank of a multi-GPU job
// records them (ProcessGroupNCCL's RECORD_PARAM_COMMS_DATA, saveNcclMeta's
// names). A single-GPU NCCL call launches no kernel where it has nothing to
// send (validation/traces/d_comm.json): there a launch of an NCCL kernel on
// the NCCL stream is added inside it, as a multi-GPU run records one.

// rec is one communication call of a rank's script.
type rec struct {
	pg     string
	ranks  []int  // the process group's global ranks
	coll   string // "allreduce", "_allgather_base", "send", "recv", …
	nelems int64
	seq    int64 // -1: the record carries no "Seq"
	peer   int   // send / recv: the peer's global rank
}

func ar(pg string, ranks []int, n, seq int64) rec {
	return rec{pg: pg, ranks: ranks, coll: "allreduce", nelems: n, seq: seq, peer: -1}
}

// tester is what the helpers need of a *testing.T or a *rapid.T.
type tester interface {
	require.TestingT
	Helper()
}

type template struct {
	top    map[string]any
	events []map[string]any
}

func loadTemplate(t testing.TB, path string) template {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		require.NoError(t, err)
		r = gz
	}
	var top map[string]any
	require.NoError(t, json.NewDecoder(r).Decode(&top))
	var evs []map[string]any
	for _, e := range top["traceEvents"].([]any) {
		evs = append(evs, e.(map[string]any))
	}
	return template{top: top, events: evs}
}

func num(e map[string]any, k string) float64 {
	v, _ := e[k].(float64)
	return v
}

func arg(e map[string]any, k string) (float64, bool) {
	a, _ := e["args"].(map[string]any)
	v, ok := a[k].(float64)
	return v, ok
}

// deepCopy clones a decoded JSON value.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, y := range x {
			m[k] = deepCopy(y)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, y := range x {
			s[i] = deepCopy(y)
		}
		return s
	}
	return v
}

// assemble writes rank's trace of a world-rank job whose communication
// calls are calls, in that order.
func assemble(t tester, tp template, dir string, rank, world int, calls []rec) string {
	t.Helper()
	var rpc, slot map[string]any
	for _, e := range tp.events {
		if e["name"] == "record_param_comms" {
			rpc = e
			break
		}
	}
	require.NotNil(t, rpc, "the template has no record_param_comms")
	slot = rpc
	for _, e := range tp.events {
		n, _ := e["name"].(string)
		if strings.HasPrefix(n, "c10d::") && e["tid"] == rpc["tid"] && num(e, "ts") <= num(rpc, "ts") && num(e, "ts")+num(e, "dur") >= num(rpc, "ts")+num(rpc, "dur") {
			slot = e
		}
	}
	lo, hi := num(slot, "ts"), num(slot, "ts")+num(slot, "dur")
	in := func(e map[string]any) bool {
		return e["ph"] == "X" && e["tid"] == slot["tid"] && e["pid"] == slot["pid"] && num(e, "ts") >= lo && num(e, "ts") <= hi
	}
	corrs := map[float64]bool{}
	for _, e := range tp.events {
		if c, ok := arg(e, "correlation"); ok && in(e) {
			corrs[c] = true
		}
	}
	var inSlot, rest []map[string]any
	work := false
	for _, e := range tp.events {
		c, ok := arg(e, "correlation")
		_, onStream := arg(e, "stream")
		switch {
		case in(e):
			inSlot = append(inSlot, e)
		case ok && corrs[c] && e["ph"] == "X":
			inSlot = append(inSlot, e)
			if onStream && e["cat"] != "cuda_sync" {
				work = true
			}
		default:
			rest = append(rest, e)
		}
	}
	if !work {
		ts := num(rpc, "ts") + num(rpc, "dur")/2
		inSlot = append(inSlot,
			map[string]any{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernelExC", "pid": rpc["pid"], "tid": rpc["tid"], "ts": ts, "dur": 5.0, "args": map[string]any{"correlation": 900.0}},
			map[string]any{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0.0, "tid": 23.0, "ts": ts + 20, "dur": 30.0, "args": map[string]any{"correlation": 900.0, "stream": 23.0}})
	}
	d := hi - lo + 10
	shift := float64(len(calls)-1) * d
	var out []any
	for _, e := range rest {
		e = deepCopy(e).(map[string]any)
		ts, end := num(e, "ts"), num(e, "ts")+num(e, "dur")
		switch {
		case ts > lo:
			e["ts"] = ts + shift
		case end >= hi && e["ph"] == "X":
			e["dur"] = num(e, "dur") + shift
		}
		out = append(out, e)
	}
	for i, c := range calls {
		for _, e := range inSlot {
			e = deepCopy(e).(map[string]any)
			e["ts"] = num(e, "ts") + float64(i)*d
			a, _ := e["args"].(map[string]any)
			if a == nil {
				a = map[string]any{}
				e["args"] = a
			}
			off := float64((i + 1) * 1000000)
			for _, k := range []string{"correlation", "External id"} {
				if v, ok := a[k].(float64); ok && v >= 0 {
					a[k] = v + off
				}
			}
			if e["name"] == "record_param_comms" {
				a["Collective name"] = c.coll
				a["Process Group Name"] = c.pg
				rs := make([]string, len(c.ranks))
				for j, r := range c.ranks {
					rs[j] = fmt.Sprint(r)
				}
				a["Process Group Ranks"] = "[" + strings.Join(rs, ", ") + "]"
				a["Group size"] = float64(len(c.ranks))
				a["In msg nelems"] = float64(c.nelems)
				out := c.nelems
				if strings.Contains(c.coll, "allgather") {
					out *= int64(len(c.ranks))
				}
				a["Out msg nelems"] = float64(out)
				a["Rank"] = float64(slices.Index(c.ranks, rank))
				delete(a, "Seq")
				delete(a, "Dst Rank")
				delete(a, "Src Rank")
				if c.seq >= 0 {
					a["Seq"] = float64(c.seq)
				}
				switch c.coll {
				case "send":
					a["Rank"] = float64(slices.Index(c.ranks, c.peer))
					a["Dst Rank"] = float64(c.peer)
				case "recv":
					a["Rank"] = float64(slices.Index(c.ranks, c.peer))
					a["Src Rank"] = float64(c.peer)
				}
			}
			out = append(out, e)
		}
	}
	top := deepCopy(tp.top).(map[string]any)
	top["traceEvents"] = out
	if di, ok := top["distributedInfo"].(map[string]any); ok {
		di["rank"], di["world_size"] = float64(rank), float64(world)
	}
	b, err := json.Marshal(top)
	require.NoError(t, err)
	p := filepath.Join(dir, fmt.Sprintf("rank%d.json", rank))
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

// jobET is a single-GPU execution trace as rank of a world-rank job
// records it: the all-gather's input (c10d::_allgather_base_'s second
// tensor, and every reference to its storage) holds 1 Mi elements and its
// output world times that, and the collective's sequence number (the
// record_param_comms node's (seq, isP2P) input) is seq unless negative.
func jobET(t tester, path, dir string, rank, world int, seq int64) string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	var et map[string]any
	require.NoError(t, json.NewDecoder(gz).Decode(&et))
	numel := map[float64]float64{}
	for _, n := range et["nodes"].([]any) {
		n := n.(map[string]any)
		vs := n["inputs"].(map[string]any)["values"].([]any)
		switch n["name"] {
		case "c10d::_allgather_base_":
			numel[vs[0].([]any)[1].(float64)] = float64(world << 20)
			numel[vs[1].([]any)[1].(float64)] = 1 << 20
		case "record_param_comms":
			if tup, ok := vs[1].([]any); ok && len(tup) == 2 && seq >= 0 {
				tup[0] = float64(seq)
			}
		}
	}
	for _, n := range et["nodes"].([]any) {
		n := n.(map[string]any)
		for _, side := range []string{"inputs", "outputs"} {
			vs, _ := n[side].(map[string]any)["values"].([]any)
			for _, v := range vs {
				if ref, ok := v.([]any); ok && len(ref) == 6 {
					if st, ok := ref[1].(float64); ok && numel[st] > 0 {
						ref[3] = numel[st]
					}
				}
			}
		}
	}
	b, err := json.Marshal(et)
	require.NoError(t, err)
	p := filepath.Join(dir, fmt.Sprintf("rank%d.et.json", rank))
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

// verdict imports the ranks' scripts as a job and runs it on its nominal
// schedule.
func verdict(t tester, tp template, et string, scripts [][]rec, etSeq ...int64) (string, *importer.Result) {
	t.Helper()
	dir, err := os.MkdirTemp("", "pair")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	var files, ets []string
	for r, s := range scripts {
		files = append(files, assemble(t, tp, dir, r, len(scripts), s))
		if et != "" {
			seq := int64(-1)
			if r < len(etSeq) {
				seq = etSeq[r]
			}
			ets = append(ets, jobET(t, et, dir, r, len(scripts), seq))
		}
	}
	res, err := importer.Import(importer.Options{Traces: files, ET: ets})
	require.NoError(t, err)
	sc, err := scenarios.Load("job.yaml", res.YAML)
	require.NoError(t, err)
	rep, err := check.RunVariant(sc, sc.Variants[0], check.Options{Extra: []string{"budget=0"}})
	require.NoError(t, err)
	return rep.Verdict, res
}

var w2 = []int{0, 1}

// TestPairing: ranks whose communication records agree run as the program
// does on one GPU; a call missing on one rank, a size or kind that differs,
// two communicators in opposite orders and a send no receive takes come
// out of running the import as the simulator's verdicts, not as import
// errors. The pairing lines say what the traces hold.
func TestPairing(t *testing.T) {
	dcomm := loadTemplate(t, filepath.Join(traces, "d_comm.json"))
	side := loadTemplate(t, filepath.Join(corpusTraces, "NcclSideStreamNoJoin.json.gz"))
	sideET := filepath.Join(corpusTraces, "NcclSideStreamNoJoin.et.json.gz")
	const M = 1 << 20
	ag := func(pg string, ranks []int, n, seq int64) rec {
		r := ar(pg, ranks, n, seq)
		r.coll = "_allgather_base"
		return r
	}
	p2p := func(kind string, peer int, n int64) rec {
		return rec{pg: "0", ranks: w2, coll: kind, nelems: n, seq: -1, peer: peer}
	}
	for _, tc := range []struct {
		name    string
		tp      template
		et      string
		scripts [][]rec
		verdict []string // accepted verdicts
		pairing string   // a line Result.Pairing holds ("" none expected beyond the method)
		etSeq   []int64  // per rank: the execution trace's sequence number of its call
	}{
		{"agree-seq", dcomm, "", [][]rec{{ar("0", w2, M, 1), ar("0", w2, M, 2)}, {ar("0", w2, M, 1), ar("0", w2, M, 2)}}, []string{"ok"}, "sequence number", nil},
		{"agree-order", dcomm, "", [][]rec{{ar("0", w2, M, -1), ar("0", w2, M, -1)}, {ar("0", w2, M, -1), ar("0", w2, M, -1)}}, []string{"ok"}, "order on each rank", nil},
		// Rank 1's step begins a call later: its sequence numbers say the
		// call rank 0 holds first met one before rank 1's step.
		{"window-seq", dcomm, "", [][]rec{{ar("0", w2, M, 1), ar("0", w2, M, 2)}, {ar("0", w2, M, 2)}}, []string{"ok"}, "sequence number", nil},
		// Without sequence numbers the same records pair by position.
		{"missing-order", dcomm, "", [][]rec{{ar("0", w2, M, -1), ar("0", w2, M, -1)}, {ar("0", w2, M, -1)}}, []string{"hang"}, "pg0.allreduce.2 is issued on ranks 0 and not on ranks 1", nil},
		{"missing-seq", dcomm, "", [][]rec{{ar("0", w2, M, 1), ar("0", w2, M, 2), ar("0", w2, M, 3)}, {ar("0", w2, M, 1), ar("0", w2, M, 2)}}, []string{"hang"}, "pg0.allreduce.3 is issued on ranks 0 and not on ranks 1", nil},
		{"size", dcomm, "", [][]rec{{ar("0", w2, M, 1), ar("0", w2, M, 2)}, {ar("0", w2, M, 1), ar("0", w2, M/2, 2)}}, []string{"mismatch"}, "pg0.allreduce.2 moves messages of different sizes", nil},
		{"size-order", dcomm, "", [][]rec{{ar("0", w2, M, -1)}, {ar("0", w2, 2*M, -1)}}, []string{"mismatch"}, "different sizes", nil},
		{"kind", dcomm, "", [][]rec{{ar("0", w2, M, 1), ar("0", w2, M, 2)}, {ar("0", w2, M, 1), ag("0", w2, M, 2)}}, []string{"mismatch", "hang"}, "pg0.allgather.2 is issued on ranks 1", nil},
		{"two-groups-agree", dcomm, "", [][]rec{{ar("0", w2, M, 1), ar("1", w2, M, 1)}, {ar("0", w2, M, 1), ar("1", w2, M, 1)}}, []string{"ok"}, "", nil},
		{"two-groups-opposite", dcomm, "", [][]rec{{ar("0", w2, M, 1), ar("1", w2, M, 1)}, {ar("1", w2, M, 1), ar("0", w2, M, 1)}}, []string{"hang"}, "opposite orders on ranks 0 and 1", nil},
		{"p2p", dcomm, "", [][]rec{{p2p("send", 1, M)}, {p2p("recv", 0, M)}}, []string{"ok"}, "", nil},
		{"p2p-size", dcomm, "", [][]rec{{p2p("send", 1, M)}, {p2p("recv", 0, M/4)}}, []string{"mismatch", "hang"}, "different sizes", nil},
		{"p2p-unmatched", dcomm, "", [][]rec{{p2p("send", 1, M)}, {p2p("recv", 0, M), p2p("recv", 0, M)}}, []string{"hang"}, "", nil},
		// The corpus program: its all-gather on a side stream is never
		// joined back (a race on one GPU, and on every rank of a job). Its
		// records carry no "Seq"; its execution trace does.
		{"side-agree", side, sideET, [][]rec{{ag("0", w2, M, -1)}, {ag("0", w2, M, -1)}}, []string{"race", "corruption"}, "the execution trace's", nil},
		{"side-agree-two", side, sideET, [][]rec{{ag("0", w2, M, -1), ag("0", w2, M, -1)}, {ag("0", w2, M, -1), ag("0", w2, M, -1)}}, []string{"race", "corruption"}, "do not increase", nil},
		{"side-window-et", side, sideET, [][]rec{{ag("0", w2, M, -1)}, {ag("0", w2, M, -1)}}, []string{"hang"}, "pg0.allgather.3 is issued on ranks 1 and not on ranks 0", []int64{2, 3}},
		{"side-missing", side, sideET, [][]rec{{ag("0", w2, M, -1), ag("0", w2, M, -1)}, {ag("0", w2, M, -1)}}, []string{"hang"}, "is issued on ranks 0 and not on ranks 1", nil},
		{"side-opposite", side, sideET, [][]rec{{ag("0", w2, M, -1), ag("1", w2, M, -1)}, {ag("1", w2, M, -1), ag("0", w2, M, -1)}}, []string{"hang"}, "opposite orders", nil},
		{"side-size", side, "", [][]rec{{ag("0", w2, M, 1)}, {ag("0", w2, M/2, 1)}}, []string{"mismatch", "hang"}, "different sizes", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, res := verdict(t, tc.tp, tc.et, tc.scripts, tc.etSeq...)
			lines := strings.Join(res.Pairing, "\n")
			require.Contains(t, tc.verdict, v, "pairing:\n%s\n%s", lines, res.YAML)
			if tc.pairing != "" {
				require.Contains(t, lines, tc.pairing)
			}
		})
	}
}

// Relabelling the ranks of a job consistently — the files and the ranks
// the records inside them name (a process group's ranks, a send's or
// receive's peer, the rank's own place in its groups) — changes no
// verdict. The job: collectives on the world group and on a subgroup,
// sends and receives between two ranks, each rank deviating from the
// common script (a call missing, another size, two calls swapped).
func TestPairingRelabel(t *testing.T) {
	tp := loadTemplate(t, filepath.Join(traces, "d_comm.json"))
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(2, 3).Draw(rt, "ranks")
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		sub := rapid.SliceOfNDistinct(rapid.IntRange(0, n-1), 2, n, rapid.ID[int]).Draw(rt, "subgroup")
		slices.Sort(sub)
		withSeq := rapid.Bool().Draw(rt, "seq")
		// One script every rank would run: a call is a collective on a
		// group, or a message from one rank to another.
		type call struct {
			pg       string
			kind     string
			size     int64
			src, dst int
		}
		base := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) call {
			size := int64(rapid.IntRange(1, 4).Draw(t, "size")) << 16
			if rapid.IntRange(0, 3).Draw(t, "p2p") == 0 {
				src := rapid.IntRange(0, n-1).Draw(t, "src")
				dst := (src + rapid.IntRange(1, n-1).Draw(t, "to")) % n
				return call{pg: "0", kind: "p2p", size: size, src: src, dst: dst}
			}
			pg := rapid.SampledFrom([]string{"0", "1"}).Draw(t, "pg")
			kind := rapid.SampledFrom([]string{"allreduce", "_allgather_base"}).Draw(t, "kind")
			return call{pg: pg, kind: kind, size: size}
		}), 1, 4).Draw(rt, "base")
		groups := map[string][]int{"0": all, "1": sub}
		scripts := make([][]rec, n)
		for r := range n {
			var s []rec
			for _, c := range base {
				switch {
				case c.kind == "p2p" && c.src == r:
					s = append(s, rec{pg: c.pg, ranks: all, coll: "send", nelems: c.size, peer: c.dst})
				case c.kind == "p2p" && c.dst == r:
					s = append(s, rec{pg: c.pg, ranks: all, coll: "recv", nelems: c.size, peer: c.src})
				case c.kind != "p2p" && slices.Contains(groups[c.pg], r):
					s = append(s, rec{pg: c.pg, ranks: groups[c.pg], coll: c.kind, nelems: c.size, peer: -1})
				}
			}
			if len(s) > 0 {
				switch rapid.IntRange(0, 3).Draw(rt, fmt.Sprintf("deviation%d", r)) {
				case 1: // a call missing
					i := rapid.IntRange(0, len(s)-1).Draw(rt, "drop")
					s = slices.Delete(s, i, i+1)
				case 2: // another size
					i := rapid.IntRange(0, len(s)-1).Draw(rt, "resize")
					s[i].nelems *= 2
				case 3: // two calls swapped
					if len(s) > 1 {
						i := rapid.IntRange(0, len(s)-2).Draw(rt, "swap")
						s[i], s[i+1] = s[i+1], s[i]
					}
				}
			}
			// Sequence numbers as ProcessGroupNCCL counts them: per
			// group, in the rank's own issue order of its collectives.
			k := map[string]int64{}
			for i := range s {
				s[i].seq = -1
				if withSeq && s[i].peer < 0 {
					k[s[i].pg]++
					s[i].seq = k[s[i].pg]
				}
			}
			scripts[r] = s
		}
		// Rank r becomes perm[r]: its file, its groups' ranks (sorted, as
		// torch.distributed.new_group keeps them) and its peers.
		perm := rapid.Permutation(all).Draw(rt, "perm")
		relabelled := make([][]rec, n)
		for r, s := range scripts {
			var out []rec
			for _, c := range s {
				rs := make([]int, len(c.ranks))
				for i, x := range c.ranks {
					rs[i] = perm[x]
				}
				slices.Sort(rs)
				c.ranks = rs
				if c.peer >= 0 {
					c.peer = perm[c.peer]
				}
				out = append(out, c)
			}
			relabelled[perm[r]] = out
		}
		if slices.ContainsFunc(scripts, func(s []rec) bool { return len(s) == 0 }) {
			return // a rank with no communication: nothing of it to import
		}
		v1, _ := verdict(rt, tp, "", scripts)
		v2, _ := verdict(rt, tp, "", relabelled)
		if v1 != v2 {
			rt.Fatalf("verdict %s, relabelled by %v: %s", v1, perm, v2)
		}
	})
}
