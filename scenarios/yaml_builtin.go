package scenarios

import (
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/collsim/collsim/scenarios/builtin"
)

// The built-in scenarios are data: the files of package builtin
// (scenarios/builtin/*.yaml). They are loaded at init, exactly as
// `simctl run FILE` loads a user's file, so each one doubles as an example
// of the format. Errors name them builtin/NAME.yaml.

// BuiltinFile returns the embedded scenario file of built-in name, if it was
// written as one.
func BuiltinFile(name string) ([]byte, bool) {
	data, err := builtin.FS.ReadFile(name + ".yaml")
	return data, err == nil
}

// loadBuiltin loads and registers builtin/NAME.yaml. A broken embedded file is
// a bug in the binary, so it panics at init, where every test notices.
func loadBuiltin(name string) {
	path := "builtin/" + name + ".yaml"
	data, err := builtin.FS.ReadFile(name + ".yaml")
	if err != nil {
		panic(fmt.Sprintf("scenarios: embedded %s: %v", path, err))
	}
	sc, err := Load(path, data)
	if err != nil {
		panic(fmt.Sprintf("scenarios: embedded %s:\n%v", path, err))
	}
	if sc.Name != name {
		panic(fmt.Sprintf("scenarios: embedded %s names itself %q", path, sc.Name))
	}
	Register(sc)
}

// init registers every embedded scenario file, in name order: dropping a
// file into builtin/ is all it takes to add a built-in.
func init() {
	ents, err := fs.ReadDir(builtin.FS, ".")
	if err != nil {
		panic(fmt.Sprintf("scenarios: embedded builtin/: %v", err))
	}
	var names []string
	for _, e := range ents {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(names)
	for _, n := range names {
		loadBuiltin(n)
	}
}
