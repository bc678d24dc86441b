package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

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
	// block is the line of the ```sh fence: the commands of one block run
	// in one directory, in order, so a later one can use an earlier one's
	// files (explore --witness w.json, then replay w.json).
	block int
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
	block := 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "```"):
			in = !in && strings.TrimSpace(strings.TrimPrefix(line, "```")) == "sh"
			block = n
			continue
		case !in || !strings.HasPrefix(line, "simctl"):
			continue
		}
		cmd := docCommand{file: path, line: n, block: block}
		if i := strings.Index(line, "#"); i >= 0 {
			comment := strings.TrimSpace(line[i+1:])
			line = line[:i]
			if rest, ok := strings.CutPrefix(comment, "exit "); ok {
				cmd.exit, err = strconv.Atoi(strings.Fields(rest)[0])
				require.NoError(t, err, "%s:%d: bad exit comment", path, n)
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

// TestDocsCommands runs every `simctl` command shown in a ```sh block of
// README.md and docs/*.md through run, in a fresh directory, and checks its
// exit status (0 unless the line ends with "# exit N") and that the files it
// names with --trace and --html were written. The docs cannot rot.
func TestDocsCommands(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	files = append(files, filepath.Join(root, "README.md"))
	var cmds []docCommand
	for _, f := range files {
		cmds = append(cmds, docCommands(t, f)...)
	}
	require.NotEmpty(t, cmds, "the docs show simctl commands")
	dirs := map[string]string{} // file:block → directory
	parent := t
	for _, c := range cmds {
		rel, _ := filepath.Rel(root, c.file)
		t.Run(fmt.Sprintf("%s:%d", rel, c.line), func(t *testing.T) {
			key := fmt.Sprintf("%s:%d", c.file, c.block)
			if d, ok := dirs[key]; ok {
				t.Chdir(d)
			} else {
				d, err := os.MkdirTemp("", "simctl-docs-")
				require.NoError(t, err)
				parent.Cleanup(func() { os.RemoveAll(d) })
				dirs[key] = d
				t.Chdir(d)
			}
			// The docs name docs/examples/*.yaml from the repository root,
			// and "my.yaml" for the reader's own file: both exist here.
			ex, err := filepath.Glob(filepath.Join(root, "docs", "examples", "*.yaml"))
			require.NoError(t, err)
			require.NoError(t, os.MkdirAll(filepath.Join("docs", "examples"), 0o755))
			for _, f := range ex {
				data, err := os.ReadFile(f)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join("docs", "examples", filepath.Base(f)), data, 0o644))
				if filepath.Base(f) == "two-stream.yaml" {
					require.NoError(t, os.WriteFile("my.yaml", data, 0o644))
				}
			}
			var stdout, stderr bytes.Buffer
			code := run(c.args, &stdout, &stderr)
			if c.stdout != "" {
				require.NoError(t, os.WriteFile(c.stdout, stdout.Bytes(), 0o644))
			}
			require.Equal(t, c.exit, code, "simctl %s\nstdout:\n%s\nstderr:\n%s", strings.Join(c.args, " "), stdout.String(), stderr.String())
			if code == 2 {
				require.NotEmpty(t, stderr.String(), "a usage error says what is wrong")
			} else {
				require.NotEmpty(t, stdout.String(), "simctl %s prints something", strings.Join(c.args, " "))
			}
			for i, a := range c.args {
				if (a == "--trace" || a == "--html") && i+1 < len(c.args) && code != 2 {
					st, err := os.Stat(c.args[i+1])
					require.NoError(t, err, "%s %s was not written", a, c.args[i+1])
					require.NotZero(t, st.Size())
				}
			}
		})
	}
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
