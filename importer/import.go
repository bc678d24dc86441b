package importer

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/collsim/collsim/scenarios"
)

// Options say what to import.
type Options struct {
	// Traces holds one Kineto / Chrome trace per rank, rank 0 first (.json
	// or .json.gz).
	Traces []string
	// ET holds the execution traces, in the same order ("" or a shorter
	// list: none for that rank).
	ET []string
	// Step is the annotation around the step to import (a
	// record_function name); empty tries ProfilerStep#… then "step", and
	// imports the whole trace when neither is there.
	Step string
	// StepIndex picks the occurrence of Step (0: the first) where
	// PickStep is set or StepIndex > 0. Otherwise a step annotation that
	// repeats under one name on one thread (record_function("step") in a
	// loop) is imported from its first occurrence to its last, as one
	// window, so a race from one iteration into the next shows; a name
	// that does not repeat, or ProfilerStep#N (a new name each step), is
	// its first occurrence.
	StepIndex int
	PickStep  bool
	// Name is the scenario's name (default: the first trace's base name).
	Name string
	// FlightRecorder reads Traces as Flight Recorder dumps (JSON form), one
	// per rank, instead of profiler traces (flight.go).
	FlightRecorder bool
	// Limits bound what reading each file may cost (zero fields: the
	// DefaultLimits).
	Limits Limits
}

// Rank is what was imported from one rank's trace.
type Rank struct {
	File        string
	Step        string // the annotation imported, "" for the whole trace
	Mode        string
	Events      int // events in the file
	Kernels     int
	Streams     []string
	Records     int
	Waits       int
	Syncs       int
	Collectives int
	StepNs      int64 // the recorded step time
	Notes       []string
}

// Result is an imported scenario.
type Result struct {
	Spec *scenarios.Spec
	// YAML is the scenario file; it validates (Import checks).
	YAML  []byte
	Ranks []Rank
	// StepNs is the recorded step time: the slowest rank's.
	StepNs int64
	// Pairing says, per process group, how its calls were paired across
	// ranks, and where the ranks' calls disagree (what running shows).
	Pairing []string
}

// Import reads the traces and returns the scenario they describe.
func Import(o Options) (*Result, error) {
	if len(o.Traces) == 0 {
		return nil, fmt.Errorf("no trace to import")
	}
	if len(o.Traces) > scenarios.MaxRanks {
		return nil, fmt.Errorf("%d traces: a scenario holds at most %d ranks", len(o.Traces), scenarios.MaxRanks)
	}
	if len(o.ET) > len(o.Traces) {
		return nil, fmt.Errorf("%d execution traces for %d traces; expected at most one per trace, in the same order", len(o.ET), len(o.Traces))
	}
	if o.StepIndex < 0 {
		return nil, fmt.Errorf("step index %d: want 0 (the first occurrence) or more", o.StepIndex)
	}
	if o.FlightRecorder {
		if len(o.ET) > 0 || o.Step != "" {
			return nil, fmt.Errorf("--et and --step apply to profiler traces, not Flight Recorder dumps")
		}
		return importFlight(o)
	}
	res := &Result{}
	var progs []*rankProg
	var builders []*builder
	hw := ""
	mode := ""
	// Every rank's step first: how calls pair across ranks depends on what
	// all of them recorded.
	var rts []*rankTrace
	var ets []map[int64]*ETOp
	for r, path := range o.Traces {
		idx := o.StepIndex
		if !o.PickStep && idx == 0 {
			idx = allSteps
		}
		rt, err := readRank(path, o.Step, idx, o.Limits)
		if err != nil {
			return nil, err
		}
		if rt.worldSize > 1 && rt.rank != r {
			return nil, fmt.Errorf("%s: the trace is rank %d of %d (distributedInfo) but was given as rank %d; pass one trace per rank, rank 0 first", path, rt.rank, rt.worldSize, r)
		}
		var et map[int64]*ETOp
		if r < len(o.ET) && o.ET[r] != "" {
			want := map[int64]bool{}
			for _, op := range rt.ops {
				if op.rf >= 0 {
					want[op.rf] = true
				}
			}
			if et, err = readETFile(o.ET[r], want, o.Limits); err != nil {
				return nil, err
			}
			seqFromET(rt, et)
		}
		rts = append(rts, rt)
		ets = append(ets, et)
	}
	bySeq, pairing := pairBy(rts)
	res.Pairing = pairing
	for r, rt := range rts {
		path := rt.file
		et := ets[r]
		var err error
		b := newBuilder(rt, et, r)
		b.bySeq = bySeq
		var graphLaunch *call
		eagerWork := 0
		for _, c := range rt.calls {
			if c.capture {
				continue
			}
			if strings.Contains(c.name, "GraphLaunch") {
				if graphLaunch == nil {
					graphLaunch = c
				}
			} else if isLaunchCall(c.name) && len(rt.dev[c.corr]) > 0 {
				eagerWork++
			}
		}
		if graphLaunch != nil && eagerWork == 0 {
			err = b.graph(graphLaunch)
		} else {
			err = b.eager()
		}
		if err != nil {
			return nil, err
		}
		p := b.p
		if p.kernels == 0 && p.collectives == 0 {
			return nil, fmt.Errorf("%s: no kernel in the imported step (%q); expected a trace recorded with ProfilerActivity.CUDA", path, rt.step)
		}
		h, note := hardware(rt.gpu)
		if note != "" {
			p.notes = append(p.notes, note)
		}
		if hw == "" {
			hw, mode = h, p.mode
		} else if h != hw || p.mode != mode {
			return nil, fmt.Errorf("%s: rank %d is %s in %s mode, rank 0 %s in %s mode; expected one kind of GPU and mode", path, r, h, p.mode, hw, mode)
		}
		progs = append(progs, p)
		builders = append(builders, b)
		res.Ranks = append(res.Ranks, Rank{File: path, Step: rt.step, Mode: p.mode, Events: rt.events, Kernels: p.kernels, Streams: p.streams,
			Records: p.records, Waits: p.waits, Syncs: p.syncs, Collectives: p.collectives, StepNs: p.stepNs, Notes: p.notes})
		res.StepNs = max(res.StepNs, p.stepNs)
	}
	n := len(progs)
	cfg := scenarios.DefaultConfig()
	cfg.TP, cfg.Arch, cfg.Mode = n, hw, mode
	name := o.Name
	if name == "" {
		name = strings.TrimSuffix(strings.TrimSuffix(filepath.Base(o.Traces[0]), ".gz"), ".json")
	}
	spec := &scenarios.Spec{Name: sanitize(name), Base: cfg}
	// Communicators: every process group a rank used.
	comms := map[string][]int{}
	var commOrder []string
	for _, p := range progs {
		for _, c := range sortedKeys(p.colls) {
			rs := p.colls[c]
			if old, ok := comms[c]; ok {
				if !slices.Equal(old, rs) {
					return nil, fmt.Errorf("%s: process group %q has ranks %v here and %v on another rank", p.file, c, rs, old)
				}
				continue
			}
			for _, r := range rs {
				if r >= n {
					return nil, fmt.Errorf("%s: process group %q has rank %d, but %d traces were given; pass one trace per rank of the group, rank 0 first", p.file, c, r, n)
				}
			}
			comms[c] = rs
			commOrder = append(commOrder, c)
		}
	}
	for _, c := range commOrder {
		rs := comms[c]
		set := scenarios.RankSet{Ranks: rs}
		if len(rs) == n && slices.IsSorted(rs) && rs[0] == 0 {
			set = scenarios.RankSet{All: true}
		}
		spec.Comms = append(spec.Comms, scenarios.CommSpec{Name: c, Ranks: set})
	}
	// Tensors: the union over ranks, by name. A name another rank gave a
	// tensor of another size is a tensor of its own here (renameSizes).
	idx := map[string]int{}
	for bi, b := range builders {
		rename := map[string]string{}
		for _, nt := range b.named {
			bytes := min(max(nt.t.bytes, 1), scenarios.MaxTensorBytes)
			name := nt.name
			if i, ok := idx[name]; ok && spec.Tensors[i].Bytes != bytes {
				name = sizedName(name, bytes)
				rename[nt.name] = name
			}
			i, ok := idx[name]
			if !ok {
				i = len(spec.Tensors)
				idx[name] = i
				spec.Tensors = append(spec.Tensors, scenarios.TensorSpec{Name: name, Bytes: 1})
			}
			t := &spec.Tensors[i]
			t.Bytes = min(max(t.Bytes, nt.t.bytes), scenarios.MaxTensorBytes)
			t.Chunks = max(t.Chunks, nt.t.chunks)
			if nt.t.readFirst && !nt.t.managed && len(t.Init) == 0 {
				t.Init = []uint64{1, 2, 3, 4}
			}
		}
		renameSizes(progs[bi].ops, rename)
	}
	if len(spec.Tensors) > scenarios.MaxTensors {
		return nil, fmt.Errorf("the step touches %d tensors, more than a scenario file holds (%d); import a shorter step (--step, --step-index)", len(spec.Tensors), scenarios.MaxTensors)
	}
	for _, p := range progs {
		if len(p.streams) > scenarios.MaxStreams || len(p.events) > scenarios.MaxEvents {
			return nil, fmt.Errorf("%s: %d streams and %d events; a scenario file holds at most %d and %d per program", p.file, len(p.streams), len(p.events), scenarios.MaxStreams, scenarios.MaxEvents)
		}
		spec.Programs = append(spec.Programs, scenarios.ProgramSpec{Ranks: scenarios.RankSet{Ranks: []int{p.rank}}, Streams: p.streams, Events: p.events, Ops: p.ops})
	}
	spec.Variants = []scenarios.Variant{{Name: "recorded", Doc: "the program as the trace recorded it; its nominal schedule has the recorded durations and host gaps"}}
	if n > 1 {
		res.Pairing = append(res.Pairing, disagreements(spec)...)
	} else {
		res.Pairing = nil
	}
	spec.Description = describe(res)
	res.Spec = spec
	res.YAML = scenarios.MarshalSpec(spec)
	if _, err := scenarios.Load(spec.Name+".yaml", res.YAML); err != nil {
		return nil, fmt.Errorf("the imported scenario does not validate (an importer bug, please report it with the trace): %w", err)
	}
	return res, nil
}

// describe is the scenario's description: where it came from and what the
// importer had to guess.
func describe(res *Result) string {
	var b strings.Builder
	b.WriteString("Imported by simctl import.\n")
	for r, rk := range res.Ranks {
		step := "the whole trace"
		if rk.Step != "" {
			step = fmt.Sprintf("step %q", rk.Step)
		}
		fmt.Fprintf(&b, "rank %d: %s, %s, %s: %d kernels on %d streams, %d event waits, %d syncs, %d collectives; recorded step time %s.\n",
			r, filepath.Base(rk.File), step, rk.Mode, rk.Kernels, len(rk.Streams), rk.Waits, rk.Syncs, rk.Collectives, fmtNs(rk.StepNs))
		for _, n := range rk.Notes {
			fmt.Fprintf(&b, "rank %d: %s.\n", r, strings.TrimSuffix(n, "."))
		}
	}
	for _, l := range res.Pairing {
		fmt.Fprintf(&b, "pairing: %s.\n", strings.TrimSuffix(l, "."))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func fmtNs(v int64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3f ms", float64(v)/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.2f µs", float64(v)/1e3)
	}
	return fmt.Sprintf("%d ns", v)
}

// hardware maps deviceProperties' name to a profile.
func hardware(gpu string) (string, string) {
	g := strings.ToUpper(gpu)
	switch {
	case strings.Contains(g, "H200"):
		return "h200", ""
	case strings.Contains(g, "H100"), strings.Contains(g, "H800"), strings.Contains(g, "GH200"):
		return "h100", ""
	case strings.Contains(g, "B200"), strings.Contains(g, "GB200"):
		return "b200", ""
	case strings.Contains(g, "A100"), strings.Contains(g, "A800"):
		return "a100", ""
	}
	if gpu == "" {
		return "h100", "the trace names no GPU (deviceProperties): hardware h100 assumed"
	}
	return "h100", fmt.Sprintf("GPU %q has no profile: hardware h100 assumed", gpu)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
