//go:build !unix

package format

import "time"

var wallStart = time.Now()

// processCPU falls back to wall time where getrusage does not exist.
func processCPU() time.Duration { return time.Since(wallStart) }
