package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios"
)

func TestComparisons(t *testing.T) {
	sc := &scenarios.Scenario{Compare: []scenarios.Comparison{
		{Variant: "fixed", Against: "buggy", Label: "the join"},
		{Variant: "overlap", Against: "fixed", Label: "overlap again"},
		{Variant: "fixed", Against: "missing", Label: "skipped: not run"},
	}}
	vs := []*check.VariantReport{{Name: "buggy", StepTimeNs: 50000}, {Name: "fixed", StepTimeNs: 75000}, {Name: "overlap", StepTimeNs: 60000}}
	cs := comparisons(sc, vs)
	require.Len(t, cs, 2)
	require.Equal(t, int64(25000), cs[0].DeltaNs)
	require.InDelta(t, 50.0, cs[0].DeltaPct, 1e-9)
	require.Equal(t, int64(-15000), cs[1].DeltaNs)
	var b bytes.Buffer
	writeComparisons(&b, cs)
	require.Equal(t, "\nstep time: fixed costs 25.00µs (+50.0%) against buggy: the join\nstep time: overlap saves 15.00µs (-20.0%) against fixed: overlap again\n", b.String())
}
