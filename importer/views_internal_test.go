package importer

import (
	"encoding/json"
	"testing"

	"github.com/collsim/collsim/scenarios"
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
		{"odd elements of 16, 2 lanes", prog{start: 1, step: 2, count: 8, size: 4}, 2, [][3]int64{{1, 0, 8}}},
		{"even elements of 16, 2 lanes", prog{start: 0, step: 2, count: 8, size: 4}, 2, [][3]int64{{0, 0, 8}}},
		{"every fourth, 4 lanes", prog{start: 0, step: 4, count: 4, size: 4}, 4, [][3]int64{{0, 0, 4}}},
		{"every other, 4 lanes", prog{start: 0, step: 2, count: 8, size: 4}, 4, [][3]int64{{0, 0, 4}, {2, 0, 4}}},
		{"the first half, 2 lanes", prog{start: 0, step: 1, count: 8, size: 4}, 2, [][3]int64{{0, 0, 4}, {1, 0, 4}}},
		{"elements 3..5, 2 lanes", prog{start: 3, step: 1, count: 3, size: 4}, 2, [][3]int64{{0, 2, 3}, {1, 1, 3}}},
		{"one element", prog{start: 5, step: 2, count: 1, size: 4}, 4, [][3]int64{{1, 1, 2}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, c.p.lanes(c.m))
		})
	}
	require.Equal(t, int64(4), laneMod([]prog{{start: 0, step: 2, count: 8, size: 4}, {start: 1, step: 4, count: 4, size: 4}, {start: 0, step: 1, count: 16, size: 4}}))
	require.Equal(t, int64(1), laneMod([]prog{{start: 0, step: 2, count: 8, size: 4}, {start: 0, step: 1, count: 16, size: 2}}), "elements of two sizes")
	require.Equal(t, int64(1), laneMod([]prog{{start: 0, step: 32, count: 8, size: 4}}), "a step over 16")
}

// TestLayoutBox: views that are rows of consecutive elements.
func TestLayoutBox(t *testing.T) {
	for _, c := range []struct {
		name, shape, strides   string
		rows, rowStride, width int64
	}{
		{"qkv[:, :4] of 8×12", "[8, 4]", "[12, 1]", 8, 12, 4},
		{"qkv[:, :, 4:8] of 2×3×12", "[2, 3, 4]", "[36, 12, 1]", 6, 12, 4},
		{"a dense matrix is no box", "[4, 4]", "[4, 1]", 0, 0, 0},
		{"three levels", "[2, 3, 4]", "[100, 12, 1]", 0, 0, 0},
		{"no unit stride", "[4, 2]", "[8, 2]", 0, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, s, w := layoutBox(json.RawMessage(c.shape), json.RawMessage(c.strides))
			require.Equal(t, [3]int64{c.rows, c.rowStride, c.width}, [3]int64{r, s, w})
		})
	}
}

// Column slices of one matrix (a fused qkv buffer split along its last
// dimension) written by different kernels share no chunk; an overlapping
// slice shares some with each; a row slice reaches every column block of
// its rows.
func TestColumnSlicesAreDisjoint(t *testing.T) {
	const rows, width = 64, 96 // a 64×96 matrix of 4-byte elements
	box := func(c0, w int64) TensorRef {
		return TensorRef{Storage: 1, Offset: c0, Numel: rows * w, ItemSize: 4, Extent: (rows-1)*width + w, Rows: rows, RowStride: width, Width: w}
	}
	b := &builder{tensors: map[string]*tensor{"s1": {key: "s1"}}, p: &rankProg{}}
	var out []*item
	for _, r := range []TensorRef{box(0, 32), box(32, 32), box(64, 32), box(16, 32), {Storage: 1, Offset: 0, Numel: 16 * width, ItemSize: 4, Step: 1, Extent: 16 * width}} {
		it := &item{kind: scenarios.OpKernel, writes: []string{"s1"}}
		it.addSpan("s1", r)
		out = append(out, it)
	}
	b.views(out)
	got := make([]string, len(out))
	for i, it := range out {
		got[i] = it.wrSfx[0]
	}
	require.Equal(t, 24, b.tensors["s1"].chunks, "6 column blocks (16 columns each: every slice's edge on one) of 4 row blocks (16 rows)")
	require.Equal(t, []string{"[0:8]", "[8:16]", "[16:24]", "[4:12]", "[0:1]|[4:5]|[8:9]|[12:13]|[16:17]|[20:21]"}, got)
}
