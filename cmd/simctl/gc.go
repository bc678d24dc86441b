package main

import (
	"os"
	"runtime/debug"
	"sync"

	"github.com/collsim/collsim/scenarios"
)

// The collector's target follows the size of the run (scenarios.Estimate's
// GCPercent, three tiers): a command starts at GOGC=400, which saves CPU
// where the heap is a few MB (a simulation allocates many short-lived
// tasks, clocks and provenance), and drops as soon as it admits a
// configuration estimated large, before that configuration is built: to
// Go's default 100 (at 400 a large run's peak grows with its heap goal, 5×
// the live heap instead of 2×), and to 50 for a run estimated huge (a heap
// goal of 1.5× the live heap). The choice reads only the estimates, which
// are computed from the knobs, never a clock; and the collector never
// changes what a run computes. GOGC in the environment wins.
var gcChoice struct {
	sync.Mutex
	pct int // 0 until set; then only lowered
}

// tuneGC sets the starting target, unless GOGC is set.
func tuneGC() {
	if os.Getenv("GOGC") != "" {
		return
	}
	gcChoice.Lock()
	defer gcChoice.Unlock()
	gcChoice.pct = scenarios.SmallRunGCPercent
	debug.SetGCPercent(gcChoice.pct)
}

// gcForEstimate lowers the target to e's when e's is lower (never raises
// it: one large configuration in a command keeps it at 100, a huge one at
// 50).
func gcForEstimate(e scenarios.Estimate) {
	if os.Getenv("GOGC") != "" || e.GCPercent <= 0 {
		return
	}
	gcChoice.Lock()
	defer gcChoice.Unlock()
	if gcChoice.pct == 0 || e.GCPercent < gcChoice.pct {
		gcChoice.pct = e.GCPercent
		debug.SetGCPercent(gcChoice.pct)
	}
}
