//go:build unix

package perf

import (
	"os"
	"runtime"
	"syscall"
	"time"
)

// cpuTime is the process's user + system CPU time so far (getrusage): on a
// shared machine it counts this process's work, not its neighbours'.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// peakRSS is the process's peak resident set in bytes (getrusage's
// ru_maxrss: the high-water mark of the whole process, heap, stacks,
// runtime and all, since the start or since resetPeak).
func peakRSS() int64 {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return u.Maxrss // bytes there
	}
	return u.Maxrss << 10 // KiB on Linux and the BSDs
}

// resetPeak resets the process's peak RSS to its current RSS where the
// kernel allows it (Linux: writing 5 to /proc/self/clear_refs), so a row's
// peak is its own and not an earlier row's; false where it could not.
func resetPeak() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}
