package importer

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/collsim/collsim/scenarios"
)

// Pairing calls across ranks.
//
// NCCL runs the calls of one communicator in the order each rank issues
// them: the k-th call of every rank meets the k-th of its peers, whatever
// they are. ProcessGroupNCCL numbers a process group's collectives
// (seqCollective_, recorded by record_param_comms as "Seq" in recent
// PyTorch and by Flight Recorder as collective_seq_id), so the k-th call
// of two ranks is one call when their sequence numbers agree. The importer
// names each collective by its process group and that number (else its
// position among the rank's calls on the group), each send and receive by
// the ranks it connects and its position among them, and gives each
// tensor one size on every rank. It never decides itself that the ranks
// disagree: running the scenario meets the k-th calls of every rank, and
// a call missing on one rank, a different kind or size, or two
// communicators in opposite orders come out of that run as a mismatch or a
// hang. Result.Pairing says how each group was paired and lists the
// disagreements the run will meet, for the reader.

// seqFromET gives a record_param_comms without "Seq" the sequence number
// the execution trace recorded for it: PyTorch versions whose profiler does
// not write "Seq" still record the (seq, isP2P) tuple as an input of the
// record_param_comms node under the c10d operator (ETOp.CommSeq). The
// c10d operator is the innermost one around the record, as for its
// tensors (collTensors).
func seqFromET(rt *rankTrace, et map[int64]*ETOp) {
	for _, c := range rt.ops {
		if c.name != "record_param_comms" || c.seq >= 0 {
			continue
		}
		var best *cpuOp
		for _, op := range rt.ops {
			if strings.HasPrefix(op.name, "c10d::") && c.ts >= op.ts && c.ts <= op.end && et[op.rf] != nil && (best == nil || op.end-op.ts < best.end-best.ts) {
				best = op
			}
		}
		if best != nil {
			c.seq = et[best.rf].CommSeq
		}
	}
}

// pairBy decides, per communicator, whether its collectives are named by
// sequence number: every rank's records on it carry one. It returns, for
// those, the first sequence number every rank's step holds: a rank's
// earlier calls met calls its peers issued before their own steps began
// (a step window is a stretch of each rank's calls, and the sequence
// numbers align the stretches), so they pair with nothing imported.
func pairBy(rts []*rankTrace) (map[string]int64, []string) {
	has := map[string]bool{}
	lacks := map[string]bool{}
	first := map[string]int64{}
	for _, rt := range rts {
		low := map[string]int64{}
		for _, op := range rt.ops {
			if op.name != "record_param_comms" || op.seq < 0 {
				continue
			}
			if _, p2p := p2pKind(op.coll); p2p {
				continue
			}
			c := sanitize("pg" + op.pg)
			if v, ok := low[c]; !ok || op.seq < v {
				low[c] = op.seq
			}
		}
		for c, v := range low {
			first[c] = max(first[c], v)
		}
	}
	notIncreasing := map[string]int{} // a group whose numbers do not increase on a rank: that rank + 1
	for r, rt := range rts {
		last := map[string]int64{}
		for _, op := range rt.ops {
			if op.name != "record_param_comms" {
				continue
			}
			if _, p2p := p2pKind(op.coll); p2p {
				continue
			}
			c := sanitize("pg" + op.pg)
			if op.seq < 0 {
				lacks[c] = true
				continue
			}
			has[c] = true
			if l, ok := last[c]; ok && op.seq <= l && notIncreasing[c] == 0 {
				notIncreasing[c] = r + 1
			}
			last[c] = op.seq
		}
	}
	by := map[string]int64{}
	var lines []string
	for _, c := range sortedKeys(has) {
		if r := notIncreasing[c]; r > 0 && !lacks[c] {
			lacks[c] = true
			lines = append(lines, fmt.Sprintf("%s: the sequence numbers do not increase in issue order on rank %d", c, r-1))
		}
		if !lacks[c] {
			by[c] = first[c]
			lines = append(lines, fmt.Sprintf("%s: collectives paired across ranks by the process group's sequence number (the records' \"Seq\", or the execution trace's)", c))
		}
	}
	for _, c := range sortedKeys(lacks) {
		lines = append(lines, fmt.Sprintf("%s: collectives paired across ranks by their order on each rank (not every record carries \"Seq\")", c))
	}
	return by, lines
}

// renameSizes gives a tensor that has another size on this rank than on
// an earlier one a name of its own here (name@<bytes>B): a scenario's
// tensor has one size on every rank, and a collective whose ranks pass
// messages of different sizes must show as calls of different signatures.
func renameSizes(ops []scenarios.OpSpec, rename map[string]string) {
	if len(rename) == 0 {
		return
	}
	sub := func(xs []string) {
		for i, x := range xs {
			if y, ok := rename[x]; ok {
				xs[i] = y
			}
		}
	}
	for i := range ops {
		op := &ops[i]
		sub(op.Reads)
		sub(op.Writes)
		if y, ok := rename[op.In]; ok {
			op.In = y
		}
		if y, ok := rename[op.Out]; ok {
			op.Out = y
		}
		switch op.Kind {
		case scenarios.OpAlloc, scenarios.OpFree, scenarios.OpRecordStream:
			if y, ok := rename[op.Name]; ok {
				op.Name = y
			}
		}
	}
}

func sizedName(name string, bytes int64) string {
	return sanitize(name + "@" + strconv.FormatInt(bytes, 10) + "B")
}

// disagreements lists where the ranks' calls on a communicator differ:
// calls some ranks issue and others do not, calls of one name with
// different messages, and two calls in opposite orders on two ranks. What
// running the scenario does with them is the verdict; these lines only
// say what the traces hold.
func disagreements(spec *scenarios.Spec) []string {
	bytes := map[string]int64{}
	for _, t := range spec.Tensors {
		bytes[t.Name] = t.Bytes
	}
	type call struct {
		name, kind, comm string
		bytes            int64
	}
	per := map[int][]call{} // rank → its calls in issue order
	var rks []int
	for _, p := range spec.Programs {
		r := p.Ranks.Ranks[0]
		rks = append(rks, r)
		for _, op := range p.Ops {
			if !isColl(op.Kind) {
				continue
			}
			b := bytes[op.In]
			if op.Kind == scenarios.OpRecv {
				b = bytes[op.Out]
			}
			per[r] = append(per[r], call{op.Name, string(op.Kind), op.Comm, b})
		}
	}
	var out []string
	for _, c := range spec.Comms {
		members := c.Ranks.Ranks
		if c.Ranks.All {
			members = rks
		}
		seen := map[string]map[int]call{}
		var names []string
		for _, r := range members {
			for _, k := range per[r] {
				if k.comm != c.Name {
					continue
				}
				if seen[k.name] == nil {
					seen[k.name] = map[int]call{}
					names = append(names, k.name)
				}
				seen[k.name][r] = k
			}
		}
		for _, n := range names {
			var on, off []string
			sizes := map[int64]bool{}
			for _, r := range members {
				if k, ok := seen[n][r]; ok {
					on = append(on, strconv.Itoa(r))
					sizes[k.bytes] = true
				} else if !strings.Contains(n, ".p2p.") {
					off = append(off, strconv.Itoa(r))
				}
			}
			if len(off) > 0 {
				out = append(out, fmt.Sprintf("%s: %s is issued on ranks %s and not on ranks %s", c.Name, n, strings.Join(on, ","), strings.Join(off, ",")))
			}
			if len(sizes) > 1 {
				var ss []string
				for _, r := range members {
					if k, ok := seen[n][r]; ok {
						ss = append(ss, fmt.Sprintf("rank %d %d B", r, k.bytes))
					}
				}
				out = append(out, fmt.Sprintf("%s: %s moves messages of different sizes (%s)", c.Name, n, strings.Join(ss, ", ")))
			}
		}
	}
	// Opposite orders: two calls both issued by two ranks, in one order on
	// the first and the other on the second.
	pos := map[int]map[string]int{}
	for _, r := range rks {
		pos[r] = map[string]int{}
		for i, k := range per[r] {
			pos[r][k.name] = i
		}
	}
	reported := map[[2]string]bool{}
	for i, r := range rks {
		for _, s := range rks[i+1:] {
			calls := per[r]
			for a := range calls {
				for b := a + 1; b < len(calls); b++ {
					x, y := calls[a].name, calls[b].name
					px, okx := pos[s][x]
					py, oky := pos[s][y]
					if !okx || !oky || px < py || reported[[2]string{x, y}] {
						continue
					}
					reported[[2]string{x, y}] = true
					out = append(out, fmt.Sprintf("%s and %s are issued in opposite orders on ranks %d and %d", x, y, r, s))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}
