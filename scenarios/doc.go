// Package scenarios holds the built-in scenarios (tp8-shared-expert and its
// variants, …) and their knobs. A scenario only builds a world — ranks,
// memory, programs — from a [Config]; it never decides a verdict. The check
// package runs what it builds and judges the outcome from the simulated
// memory, signals and timing.
//
// Scenarios can also be written as YAML files (docs/scenario-format.md):
// [Load] parses and validates one, [Resolve] turns a built-in name or a file
// path into a [Scenario], and [ExportYAML] writes a scenario back as a file.
// Built-ins written as files live in builtin/ and are embedded.
package scenarios
