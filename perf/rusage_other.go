//go:build !unix

package perf

import "time"

// cpuTime is not measured here: rows that need it report 0.
func cpuTime() time.Duration { return 0 }

// peakRSS is not measured here.
func peakRSS() int64 { return 0 }

// resetPeak cannot reset anything here.
func resetPeak() bool { return false }
