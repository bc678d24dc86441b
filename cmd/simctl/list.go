package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/collsim/collsim/scenarios"
)

func init() { register(newListCmd) }

func newListCmd(stdout, _ io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the built-in scenarios and their variants",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			for _, n := range scenarios.Names() {
				s, _ := scenarios.Lookup(n)
				fmt.Fprintf(stdout, "%s — %s\n", n, s.OneLine())
				for _, v := range s.Variants {
					fmt.Fprintf(stdout, "  %-16s expect %-16s %s\n", v.Name, v.Expect, v.Doc)
				}
			}
			return nil
		},
	}
}
