// Package layers holds one test: every package of the module imports only
// what its row of docs/architecture.md's layer table allows.
package layers

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/collsim/collsim/"

// allowed reads the table of docs/architecture.md: package → the
// packages of the module it may import ("any": no limit).
func allowed(t *testing.T, root string) map[string][]string {
	f, err := os.Open(filepath.Join(root, "docs", "architecture.md"))
	require.NoError(t, err)
	defer f.Close()
	row := regexp.MustCompile("^\\| `([a-z/]+)/` \\|.*\\| ([^|]+) \\|$")
	name := regexp.MustCompile("`([a-z/]+)`")
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m := row.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		may := []string{}
		if strings.TrimSpace(m[2]) == "any" {
			may = nil
		}
		for _, n := range name.FindAllStringSubmatch(m[2], -1) {
			may = append(may, n[1])
		}
		out[m[1]] = may
	}
	require.NoError(t, sc.Err())
	return out
}

// TestImportsFollowTheLayers: no package imports a package of the module
// its row does not list, and every package has a row.
func TestImportsFollowTheLayers(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the packages")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	may := allowed(t, root)
	require.NotEmpty(t, may, "docs/architecture.md has no layer table")
	cmd := exec.Command(goBin, "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = root
	raw, err := cmd.Output()
	require.NoError(t, err)
	var bad []string
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		if pkg == "internal/layers" {
			continue
		}
		rule, ok := may[pkg]
		if !ok {
			bad = append(bad, pkg+": no row in docs/architecture.md's layer table")
			continue
		}
		if rule == nil {
			continue // any
		}
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			imp = strings.TrimPrefix(imp, module)
			if !contains(rule, imp) {
				bad = append(bad, pkg+" imports "+imp+", which its row does not list")
			}
		}
	}
	sort.Strings(bad)
	require.Empty(t, bad)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
