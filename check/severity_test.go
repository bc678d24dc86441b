package check_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
)

// Severity is a strict total order: ok < race < mismatch < corruption <
// dropped < hang < build-error; Meets accepts alternatives.
func TestSeverityOrder(t *testing.T) {
	order := []string{check.OK, check.Race, check.Mismatch, check.Corruption, check.Dropped, check.Hang, check.CaptureError, check.BuildError}
	for i, a := range order {
		for j, b := range order {
			require.Equal(t, i > j, check.Worse(a, b), "%s vs %s", a, b)
		}
	}
	require.True(t, check.Meets(check.BuildError, "build-error"))
	require.True(t, check.Meets(check.Dropped, "corruption|dropped"))
	require.False(t, check.Meets(check.Hang, "build-error"))
}
