//go:build unix

package format

import (
	"syscall"
	"time"
)

// processCPU is the CPU time this test process has used so far (user +
// system, all threads). Tests that bound the cost of a call measure it in
// CPU time rather than wall time, so a machine busy with other processes
// does not fail them: only work this process does counts.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
