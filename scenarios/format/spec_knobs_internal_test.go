package format

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/scenarios/forms"
	"github.com/collsim/collsim/scenarios/knobs"
)

// TestEveryFormDeclaresItsKnobs: a graph builder without a row in
// formKnobs would have every knob it reads reported as unused.
func TestEveryFormDeclaresItsKnobs(t *testing.T) {
	for _, name := range forms.Names() {
		require.Contains(t, formKnobs, name, "add the knobs graph form %q reads to formKnobs (spec_knobs.go)", name)
	}
	for name, keys := range formKnobs {
		require.Contains(t, forms.Names(), name, "formKnobs has a row for %q, which is no graph form", name)
		for _, k := range keys {
			require.NotEmpty(t, knobDefault(k)+k)
			require.True(t, knobs.Known(k), "form %q: %q is no knob", name, k)
		}
	}
}
