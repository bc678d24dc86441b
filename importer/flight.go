package importer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/collsim/collsim/scenarios"
)

// Flight Recorder dumps, JSON form (torch/csrc/distributed/c10d/
// FlightRecorder.hpp and FlightRecorderDetail.hpp: the dump's keys
// "version", "pg_config", "entries", and per entry "record_id", "pg_id",
// "process_group" [name, desc], "collective_seq_id", "p2p_seq_id",
// "is_p2p", "profiling_name" ("nccl:all_reduce"), "input_sizes",
// "input_dtypes", "output_sizes", "state" (scheduled, started, completed),
// "time_created_ns"); tools/flight_recorder reads the same fields. One dump
// per rank, rank 0 first.
//
// A dump holds each rank's last collectives in issue order, not streams or
// kernels: the importer writes, per rank, one stream per process group
// with its collectives in the order the rank issued them, each named by
// its process group and sequence number (so the same call on two ranks has
// one name, and two ranks that issued different collectives at one
// sequence number do not), with the host gaps between their creation
// times. Sends and receives ("nccl:send 0->1", "nccl:recv 1<-0": the
// ranks in the group) become the format's send and recv with their peer,
// named by the ranks they connect and their position among this rank's
// calls between them, as NCCL pairs them. Running it shows the hang or
// mismatch the dump recorded, as a wait-for cycle.

type frEntry struct {
	RecordID    int64             `json:"record_id"`
	PGID        json.RawMessage   `json:"pg_id"`
	PG          []string          `json:"process_group"`
	Seq         int64             `json:"collective_seq_id"`
	P2PSeq      int64             `json:"p2p_seq_id"`
	IsP2P       bool              `json:"is_p2p"`
	Name        string            `json:"profiling_name"`
	InputSizes  [][]int64         `json:"input_sizes"`
	InputTypes  []string          `json:"input_dtypes"`
	OutputSizes [][]int64         `json:"output_sizes"`
	State       string            `json:"state"`
	Created     int64             `json:"time_created_ns"`
	Frames      []json.RawMessage `json:"-"`
}

type frPG struct {
	Name  string `json:"name"`
	Desc  string `json:"desc"`
	Ranks any    `json:"ranks"`
}

type frDump struct {
	file    string
	version string
	pgs     map[string]frPG
	entries []frEntry
}

// readFlight streams a Flight Recorder dump (JSON form).
func readFlight(path string, lim Limits) (*frDump, error) {
	g, f, err := openGuarded(path, lim)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d, err := readFlightFrom(g, path)
	return d, g.finish(err, path)
}

func readFlightFrom(r io.Reader, file string) (*frDump, error) {
	g := guarded(r, file)
	g.records("entries")
	dec := json.NewDecoder(g)
	fail := func(ev int, format string, a ...any) error {
		return &Error{File: file, Event: ev, What: "entry", Offset: dec.InputOffset(), Msg: fmt.Sprintf(format, a...)}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fail(-1, "not a Flight Recorder dump; expected a JSON object with \"entries\" (the JSON form of the dump)")
	}
	d := &frDump{file: file, pgs: map[string]frPG{}}
	seen := false
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, fail(-1, "%s; expected a key", jsonMsg(err))
		}
		switch kt {
		case "version":
			err := dec.Decode(&d.version)
			if err != nil {
				return nil, fail(-1, "version: %s; expected a string", jsonMsg(err))
			}
		case "pg_config":
			err := dec.Decode(&d.pgs)
			if err != nil {
				return nil, fail(-1, "pg_config: %s; expected {pg: {name, desc, ranks}}", jsonMsg(err))
			}
		case "entries":
			seen = true
			if t, err := dec.Token(); err != nil || t != json.Delim('[') {
				return nil, fail(-1, "\"entries\" is not an array")
			}
			for i := 0; dec.More(); i++ {
				if i >= g.lim.MaxEvents {
					return nil, g.tooMany(dec, "entry", "entries", i)
				}
				var e frEntry
				off := dec.InputOffset()
				err := dec.Decode(&e)
				if err != nil {
					ee := fail(i, "%s; expected an entry {record_id, process_group, collective_seq_id, profiling_name, …}", jsonMsg(err)).(*Error)
					var te *json.UnmarshalTypeError
					if errors.As(err, &te) || ee.Offset < off {
						ee.Offset, ee.skipSpace = off, true
					}
					return nil, ee
				}
				if len(d.entries) >= scenarios.MaxOps {
					return nil, fail(i, "more than %d entries; a scenario program holds at most that many ops", scenarios.MaxOps)
				}
				d.entries = append(d.entries, e)
			}
			if _, err := dec.Token(); err != nil {
				return nil, fail(-1, "%s; expected ] closing \"entries\"", jsonMsg(err))
			}
		default:
			if err := skipRecord(dec, g); err != nil {
				return nil, fail(-1, "%s in the value of %v", jsonMsg(err), kt)
			}
		}
	}
	if !seen {
		return nil, fail(-1, "no \"entries\"; expected a Flight Recorder dump")
	}
	return d, nil
}

// frCollective is the op kind of a profiling name ("nccl:all_reduce").
func frCollective(name string) (scenarios.OpKind, bool) {
	if i := strings.IndexByte(name, ':'); i >= 0 {
		name = name[i+1:]
	}
	if i := strings.IndexByte(name, ' '); i >= 0 {
		name = name[:i]
	}
	return collKind(name)
}

// importFlight builds the scenario of Flight Recorder dumps, one per rank.
func importFlight(o Options) (*Result, error) {
	n := len(o.Traces)
	var dumps []*frDump
	for _, p := range o.Traces {
		d, err := readFlight(p, o.Limits)
		if err != nil {
			return nil, err
		}
		dumps = append(dumps, d)
	}
	res := &Result{}
	cfg := scenarios.DefaultConfig()
	cfg.TP, cfg.Arch, cfg.Mode = n, "h100", "eager"
	name := o.Name
	if name == "" {
		name = "flight-recorder"
	}
	spec := &scenarios.Spec{Name: sanitize(name), Base: cfg}
	// Process groups: their ranks from pg_config, by the name entries use.
	comms := map[string][]int{}
	for _, d := range dumps {
		for key, pg := range d.pgs {
			rs, ok := ranksOf(pg.Ranks)
			if !ok {
				continue
			}
			pn := pg.Name
			if pn == "" {
				pn = key
			}
			comms[sanitize("pg"+pn)] = rs
		}
	}
	// A ring buffer keeps each rank's last entries: start every process
	// group at the first sequence number all its ranks still hold.
	first := map[string]int64{}
	for _, d := range dumps {
		low := map[string]int64{}
		for _, e := range d.entries {
			if e.IsP2P || len(e.PG) == 0 {
				continue
			}
			c := sanitize("pg" + e.PG[0])
			if v, ok := low[c]; !ok || e.Seq < v {
				low[c] = e.Seq
			}
		}
		for c, v := range low {
			first[c] = max(first[c], v)
		}
	}
	// addTensor declares a tensor and returns its name: a name another
	// rank gave a tensor of another size is a tensor of its own here (a
	// scenario's tensor has one size on every rank, and calls whose
	// messages differ must show as calls of different signatures).
	tensorIdx := map[string]int{}
	addTensor := func(name string, bytes int64, chunks int, init bool) string {
		bytes = min(max(bytes, 1), scenarios.MaxTensorBytes)
		if i, ok := tensorIdx[name]; ok && spec.Tensors[i].Bytes != bytes {
			name = sizedName(name, bytes)
		}
		i, ok := tensorIdx[name]
		if !ok {
			i = len(spec.Tensors)
			tensorIdx[name] = i
			spec.Tensors = append(spec.Tensors, scenarios.TensorSpec{Name: name, Bytes: bytes})
		}
		t := &spec.Tensors[i]
		t.Chunks = max(t.Chunks, chunks)
		if init && len(t.Init) == 0 {
			t.Init = []uint64{1, 2, 3, 4}
		}
		return name
	}
	used := map[string]bool{}
	for r, d := range dumps {
		rk := Rank{File: d.file, Mode: "eager", Events: len(d.entries)}
		es := slices.Clone(d.entries)
		sort.SliceStable(es, func(i, j int) bool { return es[i].RecordID < es[j].RecordID })
		prog := scenarios.ProgramSpec{Ranks: scenarios.RankSet{Ranks: []int{r}}}
		streams := map[string]bool{}
		var prev int64 = -1
		dropped, opaque := 0, 0
		states := map[string]int{}
		p2pN := map[string]int{}
		for _, e := range es {
			if len(e.PG) == 0 {
				continue
			}
			comm := sanitize("pg" + e.PG[0])
			if !e.IsP2P && e.Seq < first[comm] {
				dropped++
				continue
			}
			states[e.State]++
			op := scenarios.OpSpec{Stream: comm}
			if !streams[comm] {
				streams[comm] = true
				prog.Streams = append(prog.Streams, comm)
			}
			var elems int64 = 1
			if len(e.InputSizes) > 0 {
				for _, d := range e.InputSizes[0] {
					elems *= max(d, 1)
				}
			}
			dt := int64(4)
			if len(e.InputTypes) > 0 {
				dt = dtypeBytes(e.InputTypes[0])
			}
			var outElems = elems
			if len(e.OutputSizes) > 0 {
				outElems = 1
				for _, d := range e.OutputSizes[0] {
					outElems *= max(d, 1)
				}
			}
			kind, ok := frCollective(e.Name)
			rs, known := comms[comm]
			pk, src, dst, isP2P := frP2P(e.Name)
			inGroup := func(i int) bool { return i >= 0 && i < len(rs) }
			if e.IsP2P && isP2P && known && inGroup(src) && inGroup(dst) && src != dst && rs[src] < n && rs[dst] < n {
				// A send or receive with its peer: the ranks it connects
				// (global) and its position among this rank's calls
				// between them, as the profiler-trace import names it.
				pair := fmt.Sprintf("%s.p2p.%d-%d", comm, rs[src], rs[dst])
				p2pN[pair]++
				op.Kind, op.Comm = pk, comm
				op.Name = fmt.Sprintf("%s.%d", pair, p2pN[pair])
				key := addTensor(op.Name+".msg", elems*dt, 4, pk == scenarios.OpSend)
				if pk == scenarios.OpSend {
					op.In, op.Peer = key, strconv.Itoa(dst)
				} else {
					op.Out, op.Peer = key, strconv.Itoa(src)
				}
				used[comm] = true
				rk.Collectives++
			} else if e.IsP2P || !ok || !known || slices.ContainsFunc(rs, func(x int) bool { return x >= n }) {
				// What the format cannot say from a dump (a send or
				// receive names no peer here): an opaque kernel.
				opaque++
				op.Kind = scenarios.OpKernel
				op.Name = sanitize(fmt.Sprintf("%s.%s.%d", comm, strings.TrimPrefix(e.Name, "nccl:"), e.RecordID))
				op.Writes = []string{addTensor("scratch."+comm, 1, 0, false)}
			} else {
				g := len(rs)
				op.Kind = kind
				op.Name = fmt.Sprintf("%s.%s.%d", comm, kind, e.Seq)
				op.Comm, op.Strategy = comm, "nccl"
				base := fmt.Sprintf("%s.%d", comm, e.Seq)
				switch kind {
				case scenarios.OpAllReduce, scenarios.OpBroadcast:
					op.In = addTensor(base+".buf", elems*dt, 0, true)
					op.Out = op.In
				case scenarios.OpAllGather:
					op.In = addTensor(base+".in", elems*dt, 4, true)
					op.Out = addTensor(base+".out", outElems*dt, 4*g, false)
				case scenarios.OpReduceScatter:
					op.In = addTensor(base+".in", elems*dt, 4*g, true)
					op.Out = addTensor(base+".out", outElems*dt, 4, false)
				case scenarios.OpAllToAll:
					op.In = addTensor(base+".in", elems*dt, 4*g, true)
					op.Out = addTensor(base+".out", outElems*dt, 4*g, false)
				}
				used[comm] = true
				rk.Collectives++
			}
			if prev >= 0 && e.Created > prev {
				op.HostNs = e.Created - prev
			}
			if e.Created > 0 {
				prev = e.Created
			}
			prog.Ops = append(prog.Ops, op)
		}
		if len(prog.Streams) == 0 {
			prog.Streams = []string{"main"}
		}
		rk.Streams = prog.Streams
		if dropped > 0 {
			rk.Notes = append(rk.Notes, fmt.Sprintf("%d entries before the first sequence number every rank of their process group still holds: left out", dropped))
		}
		if opaque > 0 {
			rk.Notes = append(rk.Notes, fmt.Sprintf("%d entries (a collective, process group or peer the dump does not describe) are opaque kernels", opaque))
		}
		var st []string
		for _, s := range sortedKeys(states) {
			st = append(st, fmt.Sprintf("%d %s", states[s], s))
		}
		rk.Notes = append(rk.Notes, "recorded states: "+strings.Join(st, ", "))
		spec.Programs = append(spec.Programs, prog)
		res.Ranks = append(res.Ranks, rk)
	}
	for _, c := range sortedKeys(comms) {
		if !used[c] {
			continue
		}
		rs := comms[c]
		set := scenarios.RankSet{Ranks: rs}
		if len(rs) == n && slices.IsSorted(rs) && rs[0] == 0 {
			set = scenarios.RankSet{All: true}
		}
		spec.Comms = append(spec.Comms, scenarios.CommSpec{Name: c, Ranks: set})
	}
	if len(spec.Tensors) > scenarios.MaxTensors {
		return nil, fmt.Errorf("the dumps name %d tensors, more than a scenario file holds (%d)", len(spec.Tensors), scenarios.MaxTensors)
	}
	res.Ranks[0].Notes = append(res.Ranks[0].Notes, "a Flight Recorder dump names no GPU: hardware h100 assumed; no kernels or streams: one stream per process group, collectives in issue order")
	spec.Variants = []scenarios.Variant{{Name: "recorded", Doc: "the collectives each rank issued, as its Flight Recorder dump recorded them"}}
	spec.Description = "Imported by simctl import --flight-recorder.\n" + strconv.Itoa(n) + " ranks."
	for r, rk := range res.Ranks {
		for _, nt := range rk.Notes {
			spec.Description += fmt.Sprintf("\nrank %d: %s.", r, strings.TrimSuffix(nt, "."))
		}
	}
	res.Spec = spec
	res.YAML = scenarios.MarshalSpec(spec)
	if _, err := scenarios.Load(spec.Name+".yaml", res.YAML); err != nil {
		return nil, fmt.Errorf("the imported scenario does not validate (an importer bug, please report it with the dumps): %w", err)
	}
	return res, nil
}

// frP2P reads a send's or receive's profiling name, ProcessGroupNCCL's
// "nccl:send <rank>-><dst>" and "nccl:recv <rank><-<src>" (ranks in the
// process group): the op and the group ranks of its source and
// destination.
func frP2P(name string) (kind scenarios.OpKind, src, dst int, ok bool) {
	rest, isSend := strings.CutPrefix(name, "nccl:send ")
	sep := "->"
	kind = scenarios.OpSend
	if !isSend {
		var isRecv bool
		if rest, isRecv = strings.CutPrefix(name, "nccl:recv "); !isRecv {
			return "", 0, 0, false
		}
		sep, kind = "<-", scenarios.OpRecv
	}
	a, b, found := strings.Cut(strings.TrimSpace(rest), sep)
	if !found {
		return "", 0, 0, false
	}
	me, err1 := strconv.Atoi(strings.TrimSpace(a))
	peer, err2 := strconv.Atoi(strings.TrimSpace(b))
	if err1 != nil || err2 != nil {
		return "", 0, 0, false
	}
	if kind == scenarios.OpSend {
		return kind, me, peer, true
	}
	return kind, peer, me, true
}
