package scenarios

import (
	"fmt"
	"strings"

	"github.com/collsim/collsim/scenarios/format"
)

// ReadFunc reads a file; the command line passes os.ReadFile. The scenarios
// package itself never touches the file system.
type ReadFunc func(path string) ([]byte, error)

// Resolve turns a command-line argument into a scenario: the built-in of that
// name, or else the scenario file at that path, read with read, parsed and
// validated. Every command that takes a scenario calls it. Errors from a file
// wrap [ErrInvalid] and carry file:line:column; an argument that is neither a
// built-in nor a readable file gets an error that lists the built-ins.
func Resolve(arg string, read ReadFunc) (*Scenario, error) {
	if sc, ok := Lookup(arg); ok {
		return sc, nil
	}
	if read == nil || !looksLikePath(arg) {
		hint := ""
		if near := Nearest(arg, Names()); near != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", near)
		}
		return nil, fmt.Errorf("unknown scenario %q%s: not a built-in (%s) and not a file name (*.yaml)", arg, hint, strings.Join(Names(), ", "))
	}
	data, err := read(arg)
	if err != nil {
		if strings.ContainsAny(arg, `/\`) {
			// A path: no built-in is named so.
			return nil, fmt.Errorf("scenario file %q: %w", arg, err)
		}
		return nil, fmt.Errorf("scenario %q is not a built-in (%s), and reading it as a file failed: %w", arg, strings.Join(Names(), ", "), err)
	}
	return Load(arg, data)
}

// looksLikePath reports whether arg names a file rather than a built-in.
func looksLikePath(arg string) bool {
	return strings.ContainsAny(arg, `/\`) || strings.HasSuffix(arg, ".yaml") || strings.HasSuffix(arg, ".yml")
}

// Nearest returns the word of allowed closest to key when it is close
// enough to be a misspelling of it ([format.Nearest]).
var Nearest = format.Nearest
