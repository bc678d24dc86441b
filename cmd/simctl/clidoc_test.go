package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// cliDocPath is the generated CLI reference.
const cliDocPath = "../../docs/cli.md"

// genCLIDoc writes the CLI reference from the cobra commands: for each
// subcommand (every one but help) its one-line summary, long help, usage,
// examples (in sh blocks, which TestDocsCommands runs) and flags, between
// the hand-written parts in testdata/clidoc/.
func genCLIDoc(t *testing.T) []byte {
	t.Helper()
	intro, err := os.ReadFile(filepath.Join("testdata", "clidoc", "intro.md"))
	require.NoError(t, err)
	appendix, err := os.ReadFile(filepath.Join("testdata", "clidoc", "appendix.md"))
	require.NoError(t, err)
	root := newRoot(io.Discard, io.Discard)
	root.InitDefaultCompletionCmd()
	var cmds []*cobra.Command
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" {
			continue
		}
		cmds = append(cmds, c)
	}
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].Name() < cmds[j].Name() })

	var b bytes.Buffer
	b.WriteString("# CLI reference: `simctl`\n\n")
	b.WriteString("<!-- Generated from the cobra commands (cmd/simctl/*.go) and cmd/simctl/testdata/clidoc/*.md\n")
	b.WriteString("     by cmd/simctl/clidoc_test.go. Do not edit by hand: change those, then run\n")
	b.WriteString("     go test ./cmd/simctl -run TestCLIDocCurrent -update -->\n\n")
	b.Write(intro)
	b.WriteString("| command | what it does |\n| --- | --- |\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, "| [`%s`](#simctl-%s) | %s |\n", c.Name(), c.Name(), c.Short)
	}
	b.WriteString("\nEvery command also takes `-h`/`--help`; `simctl --version` prints the version.\n")
	for _, c := range cmds {
		writeCommandDoc(&b, c, 2)
	}
	b.WriteString("\n")
	b.Write(appendix)
	return b.Bytes()
}

func writeCommandDoc(b *bytes.Buffer, c *cobra.Command, level int) {
	fmt.Fprintf(b, "\n%s simctl %s\n\n", strings.Repeat("#", level), strings.TrimPrefix(c.CommandPath(), "simctl "))
	fmt.Fprintf(b, "%s.\n", strings.TrimSuffix(c.Short, "."))
	if c.Long != "" && c.Long != c.Short {
		fmt.Fprintf(b, "\n```text\n%s\n```\n", strings.TrimRight(c.Long, "\n"))
	}
	fmt.Fprintf(b, "\nUsage:\n\n```text\n%s\n```\n", c.UseLine())
	if c.Example != "" {
		b.WriteString("\nExamples:\n\n```sh\n")
		for _, l := range strings.Split(c.Example, "\n") {
			fmt.Fprintf(b, "%s\n", strings.TrimSpace(l))
		}
		b.WriteString("```\n")
	}
	if fl := c.NonInheritedFlags(); fl.HasAvailableFlags() {
		fmt.Fprintf(b, "\nFlags:\n\n```text\n%s```\n", fl.FlagUsages())
	}
	var subs []*cobra.Command
	for _, s := range c.Commands() {
		if !s.Hidden && s.Name() != "help" {
			subs = append(subs, s)
		}
	}
	sort.Slice(subs, func(i, j int) bool { return subs[i].Name() < subs[j].Name() })
	for _, s := range subs {
		writeCommandDoc(b, s, level+1)
	}
}

// TestCLIDocCurrent keeps docs/cli.md what the commands say: a new
// command, flag or example changes it (run with -update to rewrite it), and
// every subcommand has a section.
func TestCLIDocCurrent(t *testing.T) {
	got := genCLIDoc(t)
	if *update {
		require.NoError(t, os.WriteFile(cliDocPath, got, 0o644))
	}
	want, err := os.ReadFile(cliDocPath)
	require.NoError(t, err)
	if string(want) != string(got) {
		t.Fatalf("docs/cli.md is not what the commands say (go test ./cmd/simctl -run TestCLIDocCurrent -update rewrites it): %s", firstDiff(string(want), string(got)))
	}
	root := newRoot(io.Discard, io.Discard)
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" {
			continue
		}
		require.Contains(t, string(got), "\n## simctl "+c.Name()+"\n", "every subcommand is documented")
		require.NotEmpty(t, c.Short, "simctl %s has a one-line summary", c.Name())
	}
}
