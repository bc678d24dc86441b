// Package scenarios is what a scenario file is turned into: [Load] parses
// and validates a file (package format) and [ScenarioOf] makes the
// runnable [Scenario], whose Build lowers the file's programs or op graph
// to a world — ranks' programs, memory, communicators, flags, captures and
// replays (spec_build.go, lower_*.go) — for a [Config]. [Resolve] turns a
// built-in name or a file path into a Scenario; [ExportYAML] writes one
// back. A scenario only builds a world; it never decides a verdict. The
// check package runs what it builds and judges the outcome from the
// simulated memory, signals and timing ([Scenario.Program] is the one
// hand-off, a check.Program; budget.go estimates a run's cost before it
// is built).
//
// What a file is written in lives beside it: the language in package
// format (the Spec types, parse, validate, expressions, patches, repeats,
// export; [Spec] is format.Spec), the knobs in package knobs ([Config] is
// knobs.Config), the Go models a file may name as `graph: {builder: NAME}`
// in package forms. The built-ins are files in builtin/, embedded, loaded
// exactly as a user's file is.
package scenarios
