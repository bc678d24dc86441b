// Package scenarios is the scenario-file format (docs/scenario-format.md):
// [ParseSpec] reads a [Spec] with every key's position, [Spec.Validate]
// checks it (expressions over the knobs, patches, repeats, references,
// flags, limits), [Spec.Scenario] turns it into a runnable [Scenario], and
// [MarshalSpec] and [ExportYAML] write one back. [Load] does the first
// three; [Resolve] turns a built-in name or a file path into a Scenario.
// A scenario only builds a world — ranks, memory, programs — from a
// [Config]; it never decides a verdict. The check package runs what it
// builds and judges the outcome from the simulated memory, signals and
// timing ([Scenario.Program] is the one hand-off, a check.Program).
//
// What a file is written in lives beside it: the knobs in package knobs
// ([Config] is knobs.Config), the Go models a file may name as
// `graph: {builder: NAME}` in package forms. The built-ins are files in
// builtin/, embedded, loaded exactly as a user's file is.
//
// The package is larger than 3,000 lines because the format is one
// language: the parser, validator and lowering of each section
// (spec_*.go) share the Spec types and the decoder's positions.
package scenarios
