package report_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/report"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// Trace one variant of a built-in scenario and list the trace's processes
// and threads: one process per rank, one thread per stream plus the host.
func ExampleWriteTrace() {
	sc, _ := scenarios.Lookup("tp8-shared-expert")
	v, _ := sc.Variant("fixed")
	vr, err := check.RunVariant(sc, v, check.Options{Extra: []string{"tp=2", "layers=1", "replays=1", "budget=0"}})
	if err != nil {
		panic(err)
	}
	d, err := report.Build(sc, []*check.VariantReport{vr})
	if err != nil {
		panic(err)
	}
	var buf bytes.Buffer
	if err := report.WriteTrace(&buf, d); err != nil {
		panic(err)
	}
	var tf struct {
		TraceEvents []struct {
			Name string
			Ph   string
			Pid  int
			Tid  int
			Args struct{ Name string }
		}
	}
	if err := json.Unmarshal(buf.Bytes(), &tf); err != nil {
		panic(err)
	}
	for _, e := range tf.TraceEvents {
		switch e.Name {
		case "process_name":
			fmt.Printf("pid %d: %s\n", e.Pid, e.Args.Name)
		case "thread_name":
			fmt.Printf("  tid %d: %s\n", e.Tid, e.Args.Name)
		}
	}
	// Output:
	// pid 0: rank 0 · fixed (ok)
	//   tid 0: host
	//   tid 1: stream main
	//   tid 2: stream aux
	// pid 1: rank 1 · fixed (ok)
	//   tid 0: host
	//   tid 1: stream main
	//   tid 2: stream aux
}

// Run one schedule, chosen by seed, and show where its findings were
// detected: the racing pair of kernels and the simulated time.
func ExampleSchedule() {
	sc, _ := scenarios.Lookup("tp8-shared-expert")
	cfg := sc.Base
	if err := cfg.ApplySets([]string{"tp=2", "strategy=multimem", "layers=1", "replays=1"}); err != nil {
		panic(err)
	}
	v, err := report.Schedule(sc.Program(cfg, nil), &cfg, "buggy", sim.Nominal{})
	if err != nil {
		panic(err)
	}
	fmt.Println("verdict:", v.Verdict)
	f := v.Findings[0]
	var pair []string
	for _, s := range f.Spans {
		sp := v.Spans[s]
		pair = append(pair, fmt.Sprintf("%s on rank %d stream %s", sp.Name, v.Lanes[sp.Lane].Rank, v.Lanes[sp.Lane].Stream))
	}
	fmt.Printf("first finding: %s at %dns\n  %s\n", f.Kind, f.At, strings.Join(pair, "\n  "))
	// Output:
	// verdict: race
	// first finding: race at 764910ns
	//   L0.shared_ar on rank 0 stream aux
	//   L0.routed_ar.copy_in on rank 0 stream main
}
