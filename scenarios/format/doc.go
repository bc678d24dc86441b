// Package format is the scenario-file language (docs/scenario-format.md):
// [ParseSpec] reads a [Spec] with every key's position (bounded first on
// the raw bytes: yamlscan.go), [Spec.Validate] checks it — names,
// expressions over the knobs, patches, repeats, references, flags,
// captures, lifetimes, limits — under the base and every variant, and
// [MarshalSpec] writes one back. [LoadSpec] parses and validates.
//
// It says what a file means and never builds it: the questions the
// validator and the builder both ask (a tensor's chunks under a
// configuration, the ops a configuration runs, an op's time and load, the
// region a flag op or a kernel's reference to a symmetric allocation
// names) are methods here; package scenarios lowers a validated Spec to
// ranks' programs, memory and communicators and runs it. The knobs a file
// sets are package knobs' ([Config] is knobs.Config).
//
// One file per section of the format (spec_*.go): its decoding, its
// validation and its writing. The package is larger than 3,000 lines
// because the format is one language: every section decodes through the
// same decoder (positions, limits, error list) into the same Spec types,
// and the validator checks them together (a stream, tensor or
// communicator an op names is declared in another section).
package format
