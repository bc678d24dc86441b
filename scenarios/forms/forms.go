package forms

import (
	"sort"
	"strings"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios/knobs"
	"github.com/collsim/collsim/sim"
)

// Form is a Go model a scenario file names with `graph: {builder:
// NAME}`: code that makes the op graph, its tensors and communicators from
// the knobs, where writing them out would only repeat what the model
// computes (the MoE layer stack; the Torch-TensorRT engine build). Every
// scenario is a file; a form is a mechanism the file uses, like a
// collective's strategy.
type Form struct {
	Build func(cfg knobs.Config, opt check.BuildOptions, eng *sim.Engine) (*check.Built, error)
	// Doc is one line for error messages and docs.
	Doc string
	// Tasks bounds the ops one schedule runs for cfg (ranks × ops ×
	// replays), for the file's limits.
	Tasks func(cfg knobs.Config, replays int) int
}

// graphForms are the builders a file may name.
var graphForms = map[string]Form{
	"moe": {Build: BuildMoE, Doc: "TP MoE layers shaped by tp, layers, shared, order, tokens, hidden; placed by placement",
		Tasks: func(cfg knobs.Config, replays int) int {
			const opsPerLayer = 12 // ops and stream markers of one MoE layer
			return cfg.TP * cfg.Layers * opsPerLayer * replays
		}},
	"trt-dit": {Build: buildDiT, Doc: "Torch-TensorRT on a DiT-like stack (Ulysses all-to-all over SP=2, TP=2 all-reduce), engines partitioned by the engines knob",
		Tasks: func(cfg knobs.Config, _ int) int {
			const opsPerLayer = 16 // ditGraph's ops per layer
			return cfg.TP * cfg.Layers * opsPerLayer
		}},
	"trt-moe-ep": {Build: buildMoEEP, Doc: "Torch-TensorRT on an expert-parallel MoE stack (router GEMM, experts, all-reduce per layer), engines partitioned by the engines knob",
		Tasks: func(cfg knobs.Config, _ int) int {
			const opsPerLayer = 8 // moeEPGraph's ops per layer, with engine boundaries
			return cfg.TP * cfg.Layers * opsPerLayer
		}},
}

// Lookup returns the form named name.
func Lookup(name string) (Form, bool) {
	f, ok := graphForms[name]
	return f, ok
}

// Names lists the forms' names, sorted.
func Names() []string {
	var names []string
	for n := range graphForms {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NameList is [Names] joined by commas, for messages.
func NameList() string { return strings.Join(Names(), ", ") }
