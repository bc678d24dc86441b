package scenarios_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks"
)

// TestSymmGuardLeavesTheHeadlineCorrupt: PyTorch's GroupStreamGuard
// (symm-guard=on) orders the headline's two MULTIMEM reduce kernels on every
// rank, so no signal crosses between the calls (no mismatch, where without
// it the pads cross-pair); TensorRT-LLM's copies into the shared workspace
// stay unordered, so the buggy placement still corrupts, through a copy
// (collectives/multimem.go).
func TestSymmGuardLeavesTheHeadlineCorrupt(t *testing.T) {
	kinds := func(fs []ranks.Finding) map[string]bool {
		k := map[string]bool{}
		for _, f := range fs {
			k[f.Kind] = true
		}
		return k
	}
	off := runVariant(t, "tp8-shared-expert", "buggy", "budget=40")
	require.Equal(t, "corruption", off.Verdict)
	require.True(t, kinds(off.Findings)[ranks.KindMismatch], "without the guard the pads cross-pair")

	on := runVariant(t, "tp8-shared-expert", "buggy", "budget=40", "symm-guard=on")
	require.Equal(t, "corruption", on.Verdict)
	require.False(t, kinds(on.Findings)[ranks.KindMismatch], "the guard keeps each call's signals its own")
	copyRace := false
	for _, f := range on.Findings {
		for _, op := range f.Ops {
			if f.Kind == ranks.KindRace && strings.HasSuffix(op, ".copy_in") {
				copyRace = true
			}
		}
	}
	require.True(t, copyRace, "a copy into the workspace races: %v", on.Findings)

	fixed := runVariant(t, "tp8-shared-expert", "fixed", "budget=40", "symm-guard=on")
	require.Equal(t, "ok", fixed.Verdict)
}
