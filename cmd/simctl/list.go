package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/collsim/collsim/scenarios"
)

func init() { register(newListCmd) }

// listEntry is one built-in in `simctl list --format json`.
type listEntry struct {
	Name        string        `json:"name"`
	Description string        `json:"description"`
	File        bool          `json:"file"` // expressible as a scenario file (show --yaml)
	Variants    []listVariant `json:"variants"`
}

type listVariant struct {
	Name   string   `json:"name"`
	Expect string   `json:"expect"`
	Sets   []string `json:"sets"`
	Doc    string   `json:"doc"`
}

func newListCmd(stdout, _ io.Writer) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the built-in scenarios and their variants",
		Example: `  simctl list
  simctl list --format json`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			if format == formatJSON {
				out := []listEntry{}
				for _, n := range scenarios.Names() {
					s, _ := scenarios.Lookup(n)
					_, err := scenarios.SpecOf(s)
					e := listEntry{Name: n, Description: s.Description, File: err == nil, Variants: []listVariant{}}
					for _, v := range s.Variants {
						e.Variants = append(e.Variants, listVariant{Name: v.Name, Expect: v.Expect, Sets: append([]string{}, v.Sets...), Doc: v.Doc})
					}
					out = append(out, e)
				}
				return writeJSON(stdout, out)
			}
			// One width for the variant and expect columns, from the
			// longest name and expectation, so a long one does not push
			// its row's columns out of line.
			width, ewidth := 16, 16
			for _, n := range scenarios.Names() {
				s, _ := scenarios.Lookup(n)
				for _, v := range s.Variants {
					width = max(width, len(v.Name))
					ewidth = max(ewidth, len(v.Expect))
				}
			}
			for _, n := range scenarios.Names() {
				s, _ := scenarios.Lookup(n)
				if _, err := scenarios.SpecOf(s); err != nil {
					fmt.Fprintf(stdout, "%s — %s (Go builder: no scenario-file form)\n", n, s.OneLine())
				} else {
					fmt.Fprintf(stdout, "%s — %s\n", n, s.OneLine())
				}
				for _, v := range s.Variants {
					fmt.Fprintf(stdout, "  %-*s expect %-*s %s\n", width, v.Name, ewidth, v.Expect, v.Doc)
				}
			}
			return nil
		},
	}
	addFormatFlag(cmd, &format)
	return cmd
}
