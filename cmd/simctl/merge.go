package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"

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
			if err := checkMergeMemory(args); err != nil {
				return err
			}
			var files []*explore.ShardFile
			for _, a := range args {
				f, err := readShardFile(a)
				if err != nil {
					return err
				}
				f.Source = a
				files = append(files, f)
			}
			sum, err := explore.Merge(files)
			if err != nil {
				return usageError{err}
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

// mergeBytesPerFile2Bytes is merge's peak memory per two bytes of its
// shard files: two shards of 43 MB peaked at 128 MB resident, their
// records decoded one at a time (260 MB when the files were read whole
// first).
const mergeBytesPerFile2Bytes = 3

// checkMergeMemory refuses shard files whose records would not fit in
// --max-memory, before any is read (two 88 MB shards, read whole, ran out
// of memory under ulimit -v 2GiB).
func checkMergeMemory(paths []string) error {
	var total int64
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			total += st.Size()
		}
	}
	need := total/2*mergeBytesPerFile2Bytes + 32<<20
	if need <= scenarios.MemoryBudget {
		return nil
	}
	return usagef("merge: %d shard files of %s together would need about %s of memory; the limit is %s (--max-memory); merge on a machine with more (raise --max-memory), or explore with fewer schedules per shard file (a smaller --budget, without --outcomes)",
		len(paths), scenarios.FormatBytes(total), scenarios.FormatBytes(need), scenarios.FormatBytes(scenarios.MemoryBudget))
}

// readShardFile reads a shard file record by record (explore.ReadShardFile:
// its bytes are not held); a malformed one is read again whole, at most
// maxShardBytes, to say where it goes wrong.
func readShardFile(path string) (*explore.ShardFile, error) {
	fd, err := openRegular(path, "shard")
	if err != nil {
		return nil, usagef("%w", err)
	}
	f, err := explore.ReadShardFile(bufio.NewReaderSize(fd, 1<<16))
	fd.Close()
	if err == nil {
		return f, nil
	}
	data, rerr := readFile(path, "shard", maxShardBytes)
	if rerr != nil {
		return nil, usagef("%w", rerr)
	}
	if _, perr := explore.ParseShardFile(data); perr != nil {
		err = perr
	}
	return nil, usagef("%s: %v", quoteName(path), err)
}
