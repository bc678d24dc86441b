package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func init() { register(newVersionCmd) }

// version is set at link time: go build -ldflags "-X main.version=v1.2.3".
var version = ""

// versionInfo is what `simctl version` reports.
type versionInfo struct {
	Version string `json:"version"`
	Go      string `json:"go"`
	Module  string `json:"module"`
}

func currentVersion() versionInfo {
	v := versionInfo{Version: version, Module: "github.com/collsim/collsim"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v.Go = bi.GoVersion
		if v.Version == "" && bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		if bi.Main.Path != "" {
			v.Module = bi.Main.Path
		}
	}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	return v
}

func newVersionCmd(stdout, _ io.Writer) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print simctl's version and the Go toolchain it was built with",
		Example: `  simctl version
  simctl version --format json`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			v := currentVersion()
			if format == formatJSON {
				return writeJSON(stdout, v)
			}
			fmt.Fprintf(stdout, "simctl %s (%s, %s)\n", v.Version, v.Module, v.Go)
			return nil
		},
	}
	addFormatFlag(cmd, &format)
	return cmd
}
