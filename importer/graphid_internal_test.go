package importer

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGraphIdentityOfOpaqueReplays: graph launches whose capture the trace
// lacks are one graph when the trace's graph id says so (newer Kineto's
// "graph id" on each replayed kernel), else when they ran the same kernels
// on the same grids; a different grid is another graph.
func TestGraphIdentityOfOpaqueReplays(t *testing.T) {
	k := func(name, shape string, graph int64) *devAct {
		return &devAct{cat: "kernel", name: name, shape: shape, graphID: graph, stream: 7}
	}
	for _, c := range []struct {
		name string
		a, b []*devAct
		same bool
	}{
		{"same kernels, same grids", []*devAct{k("triton_poi_0", "[8192 1 1]/[256 1 1]", 0)}, []*devAct{k("triton_poi_0", "[8192 1 1]/[256 1 1]", 0)}, true},
		{"same kernel, two grids", []*devAct{k("triton_poi_0", "[8192 1 1]/[256 1 1]", 0)}, []*devAct{k("triton_poi_0", "[4096 1 1]/[256 1 1]", 0)}, false},
		{"the trace's graph ids differ", []*devAct{k("gemm", "[1]/[1]", 11)}, []*devAct{k("gemm", "[1]/[1]", 12)}, false},
		{"the trace's graph id is one", []*devAct{k("gemm", "[1]/[1]", 11)}, []*devAct{k("gemm", "[2]/[1]", 11)}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := &builder{rt: &rankTrace{}, p: &rankProg{}, graphOf: map[int]string{}, opaqueAt: map[int]float64{}}
			b.inlineReplay(&call{name: "cudaGraphLaunch", capIdx: -1}, c.a)
			b.inlineReplay(&call{name: "cudaGraphLaunch", ts: 1, capIdx: -1}, c.b)
			require.Equal(t, c.same, b.graphOf[1] == b.graphOf[2], "%q %q", b.graphOf[1], b.graphOf[2])
		})
	}
}
