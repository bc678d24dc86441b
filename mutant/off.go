//go:build !mutants

package mutant

// On reports whether mutant m is applied: never, without the mutants
// build tag.
func On(Name) bool { return false }

// Enabled reports whether this build can apply mutants.
const Enabled = false
