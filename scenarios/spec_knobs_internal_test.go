package scenarios

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEveryFormDeclaresItsKnobs: a graph builder without a row in
// formKnobs would have every knob it reads reported as unused.
func TestEveryFormDeclaresItsKnobs(t *testing.T) {
	for name := range graphForms {
		require.Contains(t, formKnobs, name, "add the knobs graph form %q reads to formKnobs (spec_knobs.go)", name)
	}
	for name, keys := range formKnobs {
		require.Contains(t, graphForms, name, "formKnobs has a row for %q, which is no graph form", name)
		for _, k := range keys {
			require.NotEmpty(t, knobDefault(k)+k)
			found := false
			for _, kn := range knobs {
				found = found || kn.key == k
			}
			require.True(t, found, "form %q: %q is no knob", name, k)
		}
	}
}
