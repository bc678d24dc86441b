package scenarios

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

// builtinFS holds the built-in scenarios written as scenario files. They are
// loaded at init, exactly as `simctl run FILE` loads a user's file, so each
// one doubles as an example of the format.
//
//go:embed builtin/*.yaml
var builtinFS embed.FS

// BuiltinFile returns the embedded scenario file of built-in name, if it was
// written as one.
func BuiltinFile(name string) ([]byte, bool) {
	data, err := builtinFS.ReadFile("builtin/" + name + ".yaml")
	return data, err == nil
}

// loadBuiltin loads and registers builtin/NAME.yaml. A broken embedded file is
// a bug in the binary, so it panics at init, where every test notices.
func loadBuiltin(name string) {
	path := "builtin/" + name + ".yaml"
	data, err := builtinFS.ReadFile(path)
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
	ents, err := fs.ReadDir(builtinFS, "builtin")
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
