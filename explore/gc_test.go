package explore

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// TuneGC sets the percentage while any user holds it and restores the one
// from before the first, however the uses nest and end.
func TestTuneGCRestores(t *testing.T) {
	if v, ok := lookupGOGC(); ok {
		t.Skipf("GOGC=%s in the environment: TuneGC leaves the collector alone", v)
	}
	before := debug.SetGCPercent(123)
	defer debug.SetGCPercent(before)
	current := func() int { p := debug.SetGCPercent(-1); debug.SetGCPercent(p); return p }

	a := TuneGC(400)
	require.Equal(t, 400, current())
	b := TuneGC(400)
	a()
	a() // a second call is a no-op
	require.Equal(t, 400, current(), "b still holds it")
	b()
	require.Equal(t, 123, current())

	TuneGC(0)()
	require.Equal(t, 123, current(), "0 leaves it alone")
}
