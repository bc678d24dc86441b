package collectives_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/collectives"
)

// TestAutoRespectsWorkspaceCap: AUTO picks MULTIMEM only for messages
// below the symmetric workspace's size cap (symm_mem_allreduce.py
// _MAX_SIZES: 128 MiB at 8 ranks); a larger one goes to NCCL.
func TestAutoRespectsWorkspaceCap(t *testing.T) {
	require.Equal(t, collectives.Multimem, collectives.Resolve(collectives.Auto, "sm100", 8, 1<<20))
	require.Equal(t, collectives.NCCL, collectives.Resolve(collectives.Auto, "sm100", 8, 128<<20))
	require.Equal(t, collectives.NCCL, collectives.Resolve(collectives.Auto, "sm90", 4, 64<<20))
}
