//go:build !unix

package scenarios

import "time"

var wallStart = time.Now()

// processCPU falls back to wall time where getrusage does not exist.
func processCPU() time.Duration { return time.Since(wallStart) }
