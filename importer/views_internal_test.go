package importer

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLayoutOf: which elements past its offset a view reaches, from the
// execution trace's sizes and strides.
func TestLayoutOf(t *testing.T) {
	for _, c := range []struct {
		name, shape, strides string
		numel, step, extent  int64
	}{
		{"dense matrix", "[4, 4]", "[4, 1]", 16, 1, 16},
		{"x[::2]", "[8]", "[2]", 8, 2, 15},
		{"transposed", "[4, 4]", "[1, 4]", 16, 1, 16},
		{"a column x[:, 0]", "[4]", "[4]", 4, 4, 13},
		{"x[..., ::2] of a 4×4", "[4, 2]", "[4, 2]", 8, 2, 15},
		{"x[:, :2] of a 4×4: a gap", "[4, 2]", "[4, 1]", 8, 0, 14},
		{"expand of one element", "[8]", "[0]", 8, 1, 1},
		{"size-1 dimensions aside", "[1, 8, 1]", "[99, 2, 7]", 8, 2, 15},
		{"empty", "[0]", "[1]", 0, 1, 0},
		{"no strides in the trace", "[8]", "", 8, 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			step, ext := layoutOf(json.RawMessage(c.shape), json.RawMessage(c.strides), c.numel)
			require.Equal(t, [2]int64{c.step, c.extent}, [2]int64{step, ext})
		})
	}
	// A strided view's bytes reach its last element, not numel elements.
	r := TensorRef{Offset: 1, Numel: 4, ItemSize: 4, Step: 2, Extent: 7}
	require.Equal(t, int64(32), r.Bytes())
}

// TestLanes: element e of a storage laid out in m lanes is in lane e mod m,
// at position e div m; a view reaches a run of positions in each lane it
// touches.
func TestLanes(t *testing.T) {
	for _, c := range []struct {
		name string
		p    prog
		m    int64
		want [][3]int64
	}{
		{"odd elements of 16, 2 lanes", prog{1, 2, 8, 4}, 2, [][3]int64{{1, 0, 8}}},
		{"even elements of 16, 2 lanes", prog{0, 2, 8, 4}, 2, [][3]int64{{0, 0, 8}}},
		{"every fourth, 4 lanes", prog{0, 4, 4, 4}, 4, [][3]int64{{0, 0, 4}}},
		{"every other, 4 lanes", prog{0, 2, 8, 4}, 4, [][3]int64{{0, 0, 4}, {2, 0, 4}}},
		{"the first half, 2 lanes", prog{0, 1, 8, 4}, 2, [][3]int64{{0, 0, 4}, {1, 0, 4}}},
		{"elements 3..5, 2 lanes", prog{3, 1, 3, 4}, 2, [][3]int64{{0, 2, 3}, {1, 1, 3}}},
		{"one element", prog{5, 2, 1, 4}, 4, [][3]int64{{1, 1, 2}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, c.p.lanes(c.m))
		})
	}
	require.Equal(t, int64(4), laneMod([]prog{{0, 2, 8, 4}, {1, 4, 4, 4}, {0, 1, 16, 4}}))
	require.Equal(t, int64(1), laneMod([]prog{{0, 2, 8, 4}, {0, 1, 16, 2}}), "elements of two sizes")
	require.Equal(t, int64(1), laneMod([]prog{{0, 32, 8, 4}}), "a step over 16")
}
