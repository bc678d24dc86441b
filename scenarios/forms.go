package scenarios

import (
	"sort"
	"strings"

	"github.com/collsim/collsim/sim"
)

// graphForm is a Go model a scenario file names with `graph: {builder:
// NAME}`: code that makes the op graph, its tensors and communicators from
// the knobs, where writing them out would only repeat what the model
// computes (the MoE layer stack; the Torch-TensorRT engine build). Every
// scenario is a file; a form is a mechanism the file uses, like a
// collective's strategy.
type graphForm struct {
	build func(cfg Config, opt BuildOptions, eng *sim.Engine) (*Built, error)
	// doc is one line for error messages and docs.
	doc string
	// tasks bounds the ops one schedule runs for cfg (ranks × ops ×
	// replays), for the file's limits.
	tasks func(cfg Config, replays int) int
}

// graphForms are the builders a file may name.
var graphForms = map[string]graphForm{
	"moe": {build: BuildMoE, doc: "TP MoE layers shaped by tp, layers, shared, order, tokens, hidden; placed by placement",
		tasks: func(cfg Config, replays int) int {
			const opsPerLayer = 12 // ops and stream markers of one MoE layer
			return cfg.TP * cfg.Layers * opsPerLayer * replays
		}},
	"trt-dit": {build: buildDiT, doc: "Torch-TensorRT on a DiT-like stack (Ulysses all-to-all over SP=2, TP=2 all-reduce), engines partitioned by the engines knob",
		tasks: func(cfg Config, _ int) int {
			const opsPerLayer = 16 // ditGraph's ops per layer
			return cfg.TP * cfg.Layers * opsPerLayer
		}},
	"trt-moe-ep": {build: buildMoEEP, doc: "Torch-TensorRT on an expert-parallel MoE stack (router GEMM, experts, all-reduce per layer), engines partitioned by the engines knob",
		tasks: func(cfg Config, _ int) int {
			const opsPerLayer = 8 // moeEPGraph's ops per layer, with engine boundaries
			return cfg.TP * cfg.Layers * opsPerLayer
		}},
}

// graphFormNames lists the builders, sorted, for messages.
func graphFormNames() string {
	var names []string
	for n := range graphForms {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
