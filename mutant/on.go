//go:build mutants

package mutant

import "os"

// active is the mutant this test binary applies, from COLLSIM_MUTANT
// (read once, before any test runs: a build for the harness only).
var active = Name(os.Getenv("COLLSIM_MUTANT"))

// On reports whether mutant m is applied.
func On(m Name) bool { return m == active }

// Enabled reports whether this build can apply mutants.
const Enabled = true
