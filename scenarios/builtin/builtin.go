// Package builtin holds the built-in scenarios as data: one scenario file
// per built-in (docs/scenario-format.md), embedded in the binary. It has
// no code of its own; package scenarios loads every file at init exactly
// as `simctl run FILE` loads a user's, so dropping a file here is all it
// takes to add a built-in, and each file doubles as an example of the
// format.
package builtin

import "embed"

// FS holds NAME.yaml for every built-in NAME.
//
//go:embed *.yaml
var FS embed.FS
