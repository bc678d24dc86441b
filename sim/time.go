package sim

import "fmt"

// Time is simulated time in nanoseconds. It is its own type so that wall-clock
// durations cannot be mixed in by accident.
type Time int64

// Units of simulated time.
const (
	Nanosecond  Time = 1
	Microsecond Time = 1000
	Millisecond Time = 1000 * 1000
	Second      Time = 1000 * 1000 * 1000
)

// String formats t with a unit chosen for readability ("12.345µs").
func (t Time) String() string {
	switch a := max(t, -t); {
	case a >= Second:
		return fmt.Sprintf("%.3fs", float64(t)/float64(Second))
	case a >= Millisecond:
		return fmt.Sprintf("%.3fms", float64(t)/float64(Millisecond))
	case a >= Microsecond:
		return fmt.Sprintf("%.3fµs", float64(t)/float64(Microsecond))
	default:
		return fmt.Sprintf("%dns", int64(t))
	}
}
