package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Every bug-class built-in meets its expectations from the command line,
// and its report names the mechanism.
func TestRunFamily(t *testing.T) {
	tests := []struct {
		name string
		want []string
	}{
		{"aux-stream-lifetime", []string{"caching-allocator block 0x7f0000010000+64 KiB of segment #0, stream main's pool", "overlaps freed L0.x_norm", "stream aux"}},
		{"shared-expert-times-w", []string{"op L0.shared's contribution is counted 4 times"}},
		{"graph-double-shared-expert", []string{"op L0.shared is captured 2× in the graph"}},
		{"symm-two-streams-one-group", []string{"wait-for cycle", "blocks rank 1's host thread"}},
		{"symm-pad-aliasing", []string{"aliased slot: rank 0's pad slot 1", "through signal pad \"symm\" on rank 0, slot 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, stderr := simctl(t, "run", tt.name, "--set", "budget=24")
			require.Equal(t, 0, code, "stderr: %s\n%s", stderr, out)
			for _, w := range tt.want {
				require.Contains(t, out, w)
			}
		})
	}
	code, _, stderr := simctl(t, "run", "symm-pad-aliasing", "--set", "pad=global")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `pad="global"`)
}
