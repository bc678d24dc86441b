package gpu_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks/gpu"
)

// A pool hands out units to holders in order, queues waiters, and on a
// release gets its holder's units back (none from a task that holds
// none) and hands back every waiter once.
func TestPool(t *testing.T) {
	p := gpu.NewPool(0, "", 4)
	p.Take(7, 3)
	require.Equal(t, 1, p.Free)
	p.Wait(8)
	require.Equal(t, []int32{8}, p.Release(5, 2))
	require.Equal(t, 1, p.Free, "a task holding nothing returns nothing")
	p.Wait(8)
	p.Wait(9)
	require.Equal(t, []int32{8, 9}, p.Release(7, 3))
	require.Equal(t, 4, p.Free)
	require.Empty(t, p.Holders)
	require.Empty(t, p.Waiters)
}
