package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/explore"
	"github.com/collsim/collsim/scenarios"
)

func init() { register(newMergeCmd) }

func newMergeCmd(stdout, _ io.Writer) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "merge SHARD.json...",
		Short: "Combine the shard files of `explore --shard i/n` into one summary",
		Long: `merge reads the files written by every shard of one exploration
(simctl explore ... --shard i/n > shard-i.json, on as many machines as you
like) and prints the summary a single machine would have printed for the same
budget: with --format json, byte for byte (the text form differs only in its
wall-clock line). The shards must have explored the same scenario, variant,
overrides, strategy, seed and budget, and cover 0..n-1 exactly once.`,
		Example: `  simctl explore tp8-shared-expert --variant fixed --budget 40 --set layers=1 --shard 0/2 > /tmp/s0.json
  simctl explore tp8-shared-expert --variant fixed --budget 40 --set layers=1 --shard 1/2 > /tmp/s1.json
  simctl merge /tmp/s0.json /tmp/s1.json --format json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if format != "text" && format != "json" {
				return usagef("--format %q: want text or json", format)
			}
			sum, files, err := mergeShardFiles(args)
			if err != nil {
				return err
			}
			if format == "json" {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(sum); err != nil {
					return err
				}
			} else {
				writeExploreText(stdout, sum, exploreFlags{outcomes: files[0].Outcomes})
			}
			// The same exit status explore would give: the expectation the
			// shards recorded (older files: the built-in's).
			expect, known := files[0].Expect, files[0].Expect != ""
			if sc, err := scenarios.Resolve(sum.Scenario, nil); err == nil && !known {
				if v, ok := sc.Variant(sum.Variant); ok {
					expect, known = v.Expect, true
				}
			}
			if known && !check.Meets(sum.Verdict, expect) {
				return errUnmet
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	return cmd
}

// mergeShardFiles merges the shard files at paths a record at a time
// (explore.Merging): each file's header is read first, stepping over its
// records, then its records are folded in as they are decoded, none held,
// so any number of records merges in the memory of the outcomes, whatever
// the order of the keys.
func mergeShardFiles(paths []string) (*explore.Summary, []*explore.ShardFile, error) {
	g := explore.NewMerging()
	heads := make([]*explore.ShardFile, len(paths))
	for i, path := range paths {
		var head *explore.ShardFile
		err := withShardFile(path, func(r io.Reader) (err error) {
			head, err = explore.ReadShardHeader(r)
			return err
		})
		if err != nil {
			return nil, nil, err
		}
		head.Source = path
		part := g.File(head)
		var tail *explore.ShardFile
		err = withShardFile(path, func(r io.Reader) (err error) {
			tail, err = explore.ScanShardFile(r, part.Add)
			return err
		})
		switch {
		case err != nil && !part.Failed():
			return nil, nil, err
		case err == nil && !sameHeader(head, tail):
			return nil, nil, usagef("%s: the file changed while merge read it", quoteName(path))
		}
		part.End()
		heads[i] = head
	}
	sum, err := g.Summary()
	if err != nil {
		return nil, nil, usageError{err}
	}
	return sum, heads, nil
}

// sameHeader reports whether two readings of a shard file's header agree.
func sameHeader(a, b *explore.ShardFile) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// withShardFile gives read the shard file at path; a file it finds
// malformed (explore.ErrBadInput) is read again whole, at most
// maxShardBytes, to say where it goes wrong.
func withShardFile(path string, read func(io.Reader) error) error {
	fd, err := openRegular(path, "shard")
	if err != nil {
		return usagef("%w", err)
	}
	err = read(bufio.NewReaderSize(fd, 1<<16))
	fd.Close()
	if err == nil || !errors.Is(err, explore.ErrBadInput) {
		return err
	}
	data, rerr := readFile(path, "shard", maxShardBytes)
	if rerr != nil {
		return usagef("%w", rerr)
	}
	if _, perr := explore.ParseShardFile(data); perr != nil {
		err = perr
	}
	return usagef("%s: %v", quoteName(path), err)
}
