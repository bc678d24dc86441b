package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/collsim/collsim/scenarios"
)

// memoryFlag is --max-memory: the most memory a run may use. Before
// anything runs, every configuration's estimate (scenarios.Estimate) must
// fit in it; while it runs, the Go heap's soft limit is set below it and a
// watchdog (started by main) stops the process with a clear message if
// the heap still grows past it, before the runtime would die with a
// "fatal error: out of memory" and a goroutine dump.
type memoryFlag struct{ n int64 }

func (m *memoryFlag) String() string { return scenarios.FormatBytes(m.n) }
func (m *memoryFlag) Type() string   { return "size" }
func (m *memoryFlag) Set(s string) error {
	n, err := parseSize(s)
	if err != nil || n < 64<<20 {
		return fmt.Errorf("want a size of at least 64MiB, such as 8GiB or 512MiB")
	}
	m.n = n
	return nil
}

// parseSize parses "123", "64MiB", "8GiB", "8G", "1.5GB" (units are
// binary either way).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	mult := int64(1)
	for _, u := range []struct {
		suf string
		m   int64
	}{{"TIB", 1 << 40}, {"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10}, {"TB", 1 << 40}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(t, u.suf) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suf)), u.m
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || f*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("size %q", s)
	}
	return int64(f * float64(mult)), nil
}

// defaultMaxMemory is half of the machine's memory, and at most half of
// the address space the process has left under its limit (ulimit -v): an
// idle simctl has already reserved most of a 2 GiB limit (the Go runtime's
// page tables and arena hints, C thread stacks), and the heap needs about
// twice its live bytes of address space (the collector's headroom and
// arena rounding), so a limit computed from the whole ulimit (a fifth of
// it, before) never fired before the runtime died (issue 31).
func defaultMaxMemory() int64 {
	limit := int64(8 << 30) // when neither can be read
	if phys := physicalMemory(); phys > 0 {
		limit = phys / 2
	}
	if free := addressSpaceLeft(); free > 0 {
		limit = min(limit, free/2)
	}
	return max(limit, 64<<20)
}

// addressSpaceLeft is the address space the process may still map under
// its limit (ulimit -v), less the headroom the watchdog keeps (0: no limit,
// or it cannot be read).
func addressSpaceLeft() int64 {
	as := addressSpaceLimit()
	if as <= 0 {
		return 0
	}
	return max(as-addressSpaceUsed()-addressHeadroom, 1)
}

// addressHeadroom is the address space the watchdog keeps free: the Go
// heap grows by 64 MiB arenas, so a process within 64 MiB of its limit
// may die at its next allocation; the rest is thread stacks and the
// collector's own allocations.
const addressHeadroom = 128 << 20

// memoryAdvice is what the watchdog's message tells the user to lower:
// each command's own knobs (set in PersistentPreRunE from the command's
// name).
var memoryAdvice = map[string]string{
	"import":   "import one step (--step, --step-index), lower --max-events",
	"merge":    "merge fewer or smaller shards (explore --shard with more shards, without --outcomes)",
	"validate": "validate fewer files at once",
	"explore":  "lower --workers, tp, dp, layers, replays or --budget",
}

func adviceFor(cmd string) string {
	if a, ok := memoryAdvice[cmd]; ok {
		return a
	}
	return "lower tp, dp, layers, replays or --budget"
}

// addMemoryFlag adds --max-memory to every command and applies it before
// the command runs.
func addMemoryFlag(root *cobra.Command) {
	m := &memoryFlag{n: defaultMaxMemory()}
	root.PersistentFlags().Var(m, "max-memory", "the most memory a run may use: configurations estimated above it are refused before they run\n(exit 2, naming the knob to lower), and a run that still grows past it stops (by default half the machine's memory, at most half the address space ulimit -v leaves)")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		scenarios.MemoryBudget = m.n
		scenarios.Admitted = gcForEstimate // gc.go: the collector's target from the run's size
		if os.Getenv("GOMEMLIMIT") == "" {
			// The collector works harder as the heap nears this, below
			// the watchdog's limit. It is not capped lower: a large run
			// already collects at GOGC=100 (gc.go), and a soft limit
			// under its live heap made the collector run almost
			// continuously (1024 ranks × 61 layers: 2.8 GB live under a
			// 3 GiB limit took 2.0× the CPU for 0.78× the peak).
			debug.SetMemoryLimit(m.n * 3 / 4)
		}
		if watchdogOn {
			startWatchdog(m.n, addressSpaceLimit(), adviceFor(cmd.Name()))
		}
		return nil
	}
}

// watchdogOn is set by main: tests run commands in-process and do not
// want a process exit.
var watchdogOn bool

var watchdogOnce sync.Once

// startWatchdog polls the heap and the address space every 20 ms and ends
// the process with exit status 2 and a message naming advice (what to
// lower) when the heap passes limit or the mapped address space comes
// within addressHeadroom of as (ulimit -v; 0: none): past either the
// runtime would soon die with "fatal error: out of memory" and a goroutine
// dump.
func startWatchdog(limit, as int64, advice string) {
	watchdogOnce.Do(func() {
		go func() {
			s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
			for {
				time.Sleep(20 * time.Millisecond)
				metrics.Read(s)
				if s[0].Value.Kind() != metrics.KindUint64 {
					return
				}
				what := ""
				if used := int64(s[0].Value.Uint64()); used > limit {
					what = fmt.Sprintf("the heap reached %s, over --max-memory %s", scenarios.FormatBytes(used), scenarios.FormatBytes(limit))
				} else if mapped := addressSpaceUsed(); as > 0 && mapped > as-addressHeadroom {
					what = fmt.Sprintf("the process mapped %s of the %s its address-space limit (ulimit -v) allows", scenarios.FormatBytes(mapped), scenarios.FormatBytes(as))
				}
				if what != "" {
					fmt.Fprintf(os.Stderr, "simctl: out of memory: %s; %s, or raise --max-memory or the limit (a checkpoint, if this run wrote one, resumes it)\n", what, advice)
					os.Exit(2)
				}
			}
		}()
	})
}
