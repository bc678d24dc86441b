package explore

import (
	"flag"
	"os"
	"testing"
)

// TestMain sizes the rapid properties for CI: under the race detector (CI's
// go test -race) each property runs 12 cases unless -rapid.checks is given;
// without it, rapid's default of 100.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if raceEnabled && !set {
		if err := flag.Set("rapid.checks", "12"); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
