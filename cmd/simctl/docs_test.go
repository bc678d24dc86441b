package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// docCommand is one `simctl …` line of a ```sh block in the docs.
type docCommand struct {
	file string
	line int
	args []string
	exit int // expected exit status: 0, or the N of a trailing "# exit N"
	// stdout, when set, is the file a trailing "> FILE" sends stdout to.
	stdout string
	// skip, when set, is the reason of a trailing "# not run: REASON".
	skip string
}

// docCommands extracts every line that begins with "simctl" from the ```sh
// blocks of path.
func docCommands(t *testing.T, path string) []docCommand {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []docCommand
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "```"):
			in = !in && strings.TrimSpace(strings.TrimPrefix(line, "```")) == "sh"
			continue
		case !in || !strings.HasPrefix(line, "simctl"):
			continue
		}
		cmd := docCommand{file: path, line: n}
		// A comment starts at a word that begins with '#', as in sh
		// (ProfilerStep#3 is one word).
		if i := strings.Index(line, " #"); i >= 0 {
			comment := strings.TrimSpace(line[i+2:])
			line = line[:i]
			if rest, ok := strings.CutPrefix(comment, "exit "); ok {
				cmd.exit, err = strconv.Atoi(strings.Fields(rest)[0])
				require.NoError(t, err, "%s:%d: bad exit comment", path, n)
			}
			if rest, ok := strings.CutPrefix(comment, "not run:"); ok {
				cmd.skip = strings.TrimSpace(rest)
				require.NotEmpty(t, cmd.skip, "%s:%d: '# not run:' says why", path, n)
			}
		}
		if i := strings.LastIndex(line, " > "); i >= 0 {
			cmd.stdout = strings.TrimSpace(line[i+3:])
			line = line[:i]
		}
		words, err := splitWords(line)
		require.NoError(t, err, "%s:%d", path, n)
		cmd.args = words[1:]
		out = append(out, cmd)
	}
	require.NoError(t, sc.Err())
	return out
}

// splitWords splits a command line as a POSIX shell would for the simple
// cases the docs use: blanks separate words, single and double quotes group.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	have := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, have = r, true
		case r == ' ' || r == '\t':
			if have {
				words = append(words, cur.String())
				cur.Reset()
				have = false
			}
		case r == '\\' || r == '$' || r == '|' || r == '>' || r == '<' || r == ';' || r == '&' || r == '`':
			return nil, fmt.Errorf("shell syntax %q is not supported in a docs command", r)
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated quote")
	}
	if have {
		words = append(words, cur.String())
	}
	return words, nil
}

// docPages are the pages whose commands TestDocsCommands runs: README.md
// and every Markdown file under docs/.
func docPages(t *testing.T, root string) []string {
	t.Helper()
	pages := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			pages = append(pages, p)
		}
		return err
	})
	require.NoError(t, err)
	return pages
}

// buildSimctl builds the command once into dir, as the README's install
// line does, and returns its path: the docs are run with the binary a
// reader has, not with `go run` or this test's own process.
func buildSimctl(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "simctl")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build ./cmd/simctl:\n%s", out)
	return bin
}

// TestDocsCommands runs every `simctl` command shown in a ```sh block of
// README.md and of every page under docs/ with the built simctl binary, and
// checks its exit status and the files it names with --trace, --html,
// --witness and --out. The docs cannot rot. The conventions a page's
// commands follow are in docs/README.md ("Commands in these pages"):
//
//   - each page runs in its own fresh directory, its commands in page order,
//     so a command can use a file an earlier one made (explore --witness
//     w.json, then replay w.json; show NAME --yaml > my.yaml, then run
//     my.yaml);
//   - a relative path that names a file of the repository (docs/examples/…,
//     validation/traces/…) is copied there before the command runs;
//   - "# exit N" at the end of a line expects exit status N;
//   - "# not run: REASON" keeps a command out (it needs what a test
//     machine lacks); the test log names it and the reason.
func TestDocsCommands(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	bin := buildSimctl(t, t.TempDir())
	total := 0
	for _, page := range docPages(t, root) {
		cmds := docCommands(t, page)
		total += len(cmds)
		if len(cmds) == 0 {
			continue
		}
		rel, _ := filepath.Rel(root, page)
		dir := t.TempDir()
		// The reader's own scenario file, which older pages name.
		ex, err := os.ReadFile(filepath.Join(root, "docs", "examples", "two-stream.yaml"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "my.yaml"), ex, 0o644))
		for _, c := range cmds {
			t.Run(fmt.Sprintf("%s:%d", rel, c.line), func(t *testing.T) {
				if c.skip != "" {
					t.Skipf("not run: %s", c.skip)
				}
				for _, a := range c.args {
					copyRepoFile(t, root, dir, a)
				}
				// A page writes its files under /tmp, never where the
				// reader stands (the repository): here /tmp/ is the
				// page's own directory.
				args := make([]string, len(c.args))
				for i, a := range c.args {
					args[i] = inTmp(dir, a)
				}
				c.stdout = inTmp(dir, c.stdout)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, bin, args...)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "NO_COLOR=1")
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				code := 0
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					code = ee.ExitCode()
				} else {
					require.NoError(t, err)
				}
				if c.stdout != "" {
					path := c.stdout
					if !filepath.IsAbs(path) {
						path = filepath.Join(dir, path)
					}
					require.NoError(t, os.WriteFile(path, stdout.Bytes(), 0o644))
				}
				require.Equal(t, c.exit, code, "simctl %s\nstdout:\n%s\nstderr:\n%s", strings.Join(c.args, " "), stdout.String(), stderr.String())
				if code == 2 {
					require.NotEmpty(t, stderr.String(), "a usage error says what is wrong")
				} else {
					require.NotEmpty(t, stdout.String(), "simctl %s prints something", strings.Join(c.args, " "))
				}
				for i, a := range args {
					if (a == "--trace" || a == "--html" || a == "--witness" || a == "--out") && i+1 < len(args) && code != 2 {
						path := args[i+1]
						if !filepath.IsAbs(path) {
							path = filepath.Join(dir, path)
						}
						st, err := os.Stat(path)
						require.NoError(t, err, "%s %s was not written", a, c.args[i+1])
						require.NotZero(t, st.Size())
					}
				}
			})
		}
	}
	require.NotZero(t, total, "the docs show simctl commands")
}

// inTmp maps a docs command's /tmp/NAME (where the pages write files) to
// dir/NAME; any other argument is returned as is.
func inTmp(dir, arg string) string {
	if flag, v, ok := strings.Cut(arg, "="); ok && strings.HasPrefix(arg, "-") {
		return flag + "=" + inTmp(dir, v)
	}
	if rest, ok := strings.CutPrefix(arg, "/tmp/"); ok {
		return filepath.Join(dir, rest)
	}
	return arg
}

// copyRepoFile copies arg into dir when it is a relative path that names a
// file of the repository and dir does not have it yet (a later command may
// use a file an earlier one wrote under the same name).
func copyRepoFile(t *testing.T, root, dir, arg string) {
	t.Helper()
	if _, v, ok := strings.Cut(arg, "="); ok && strings.HasPrefix(arg, "-") {
		arg = v // --flag=path
	}
	if arg == "" || filepath.IsAbs(arg) || strings.HasPrefix(arg, "-") || strings.Contains(arg, "..") {
		return
	}
	src := filepath.Join(root, arg)
	st, err := os.Stat(src)
	if err != nil || !st.Mode().IsRegular() {
		return
	}
	dst := filepath.Join(dir, arg)
	if _, err := os.Stat(dst); err == nil {
		return
	}
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
	require.NoError(t, os.WriteFile(dst, data, 0o644))
}

func TestSplitWords(t *testing.T) {
	w, err := splitWords(`run tp8-shared-expert --set 'a=b c' --x "y z"`)
	require.NoError(t, err)
	require.Equal(t, []string{"run", "tp8-shared-expert", "--set", "a=b c", "--x", "y z"}, w)
	_, err = splitWords(`run x > out`)
	require.Error(t, err)
	_, err = splitWords(`run 'x`)
	require.Error(t, err)
}

// The variant tables the README and the tour show are what simctl run
// prints (without its trace column): a change to the model that moves a
// verdict or a step time must update them.
func TestDocsVariantTables(t *testing.T) {
	skipUnderRace(t)
	for _, tc := range []struct {
		file string
		args []string
	}{
		{"../../README.md", []string{"run", "tp8-shared-expert"}},
		{"../../docs/tour-tp8-shared-expert.md", []string{"run", "tp8-shared-expert", "--set", "budget=40"}},
	} {
		doc, err := os.ReadFile(tc.file)
		require.NoError(t, err)
		code, out, _ := simctl(t, tc.args...)
		require.Equal(t, 0, code, "every variant meets its expectation")
		var table []string
		in := false
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "variant ") {
				in = true
			}
			if in && line == "" {
				break
			}
			if in {
				// drop the trace column: the docs leave it out
				if i := strings.LastIndex(line, "  "); i > 0 {
					line = strings.TrimRight(line[:i], " ")
				}
				table = append(table, line)
			}
		}
		require.NotEmpty(t, table)
		want := strings.Join(table, "\n") + "\n"
		require.True(t, strings.Contains(string(doc), want), "%s does not show what simctl %s prints now:\n%s", tc.file, strings.Join(tc.args, " "), want)
	}
}
