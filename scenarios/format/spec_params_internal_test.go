package format

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/collsim/collsim/scenarios/knobs"
)

// TestParamsRoundTrip: setting a declared param changes its value and no
// other param's, and Set finds a param by name like a knob.
func TestParamsRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 6).Draw(t, "params")
		var ps []ParamSpec
		for i := range n {
			ps = append(ps, ParamSpec{Name: fmt.Sprintf("p%d", i), Default: fmt.Sprintf("d%d", i)})
		}
		c := DefaultConfig()
		c.Params = paramsBase(ps)
		want := map[string]string{}
		for _, p := range ps {
			want[p.Name] = p.Default
		}
		for range rapid.IntRange(0, 10).Draw(t, "sets") {
			name := fmt.Sprintf("p%d", rapid.IntRange(0, n-1).Draw(t, "which"))
			val := rapid.StringMatching(`[a-z0-9-]{1,8}`).Draw(t, "value")
			if err := c.Set(name, val); err != nil {
				t.Fatalf("Set(%s, %s): %v", name, val, err)
			}
			want[name] = val
			for _, p := range ps {
				if got, ok := c.Param(p.Name); !ok || got != want[p.Name] {
					t.Fatalf("param %s = %q, %v; want %q", p.Name, got, ok, want[p.Name])
				}
				if got := knobs.Get(&c, p.Name); got != want[p.Name] {
					t.Fatalf("knobs.Get(%s) = %q; want %q", p.Name, got, want[p.Name])
				}
			}
		}
		if err := c.Set("p99", "x"); err == nil {
			t.Fatalf("an undeclared name is not a knob")
		}
	})
}
