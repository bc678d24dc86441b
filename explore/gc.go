package explore

import (
	"os"
	"runtime/debug"
	"sync"
)

// DefaultGCPercent is the garbage collector's target percentage simctl
// explores with (GOGC=400 instead of Go's 100). An exploration makes a
// fresh world for every schedule (about 240 kB for one tp8 layer) but keeps
// little: the template, one world per worker and the distinct outcomes, a
// few MB. At 100 the collector ran every few schedules and, with two
// workers, took the share of the CPU that a second worker should have had
// (workers2-speedup 1.25–1.32 on a loaded box, 1.45–1.59 at 400). A heap
// goal of five times a few MB costs little memory. The Go toolchain tunes
// its compiler's small heaps the same way.
const DefaultGCPercent = 400

var gcTune struct {
	sync.Mutex
	users int
	saved int
}

// TuneGC sets the collector's target percentage to pct (debug.SetGCPercent)
// until the returned function is called. Nested and concurrent uses share
// one setting; the last to finish restores the setting from before the
// first. pct ≤ 0, or a GOGC set in the environment (the user's choice),
// leaves the collector alone.
func TuneGC(pct int) (restore func()) {
	if _, set := lookupGOGC(); pct <= 0 || set {
		return func() {}
	}
	gcTune.Lock()
	defer gcTune.Unlock()
	if gcTune.users == 0 {
		gcTune.saved = debug.SetGCPercent(pct)
	}
	gcTune.users++
	var once sync.Once
	return func() {
		once.Do(func() {
			gcTune.Lock()
			defer gcTune.Unlock()
			if gcTune.users--; gcTune.users == 0 {
				debug.SetGCPercent(gcTune.saved)
			}
		})
	}
}

func lookupGOGC() (string, bool) { return os.LookupEnv("GOGC") }
