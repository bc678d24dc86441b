package importer

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The execution trace holds every thread's operators; the profiler's
// trace only those of threads it knew. ReadET hands back, under negative
// keys, the outermost CUDA operators of each thread none of whose
// operators was asked for, in node order, threads in root order.
func TestReadETOrphans(t *testing.T) {
	const et = `{"schema": "1.1.1", "nodes": [
 {"id": 1, "name": "[pytorch|profiler|execution_trace|process]", "ctrl_deps": 0, "inputs": {"values": []}, "outputs": {"values": []}, "attrs": []},
 {"id": 2, "name": "[pytorch|profiler|execution_trace|thread]", "ctrl_deps": 1, "inputs": {"values": []}, "outputs": {"values": []}, "attrs": [{"name": "rf_id", "value": 0}]},
 {"id": 3, "name": "aten::sin", "ctrl_deps": 2, "inputs": {"values": [[5, 6, 0, 16, 4, "cuda:0"]]}, "outputs": {"values": [[7, 8, 0, 16, 4, "cuda:0"]]}, "attrs": [{"name": "rf_id", "value": 10}]},
 {"id": 4, "name": "[pytorch|profiler|execution_trace|thread]", "ctrl_deps": 1, "inputs": {"values": []}, "outputs": {"values": []}, "attrs": [{"name": "rf_id", "value": 0}]},
 {"id": 9, "name": "aten::add", "ctrl_deps": 4, "inputs": {"values": [[5, 6, 0, 16, 4, "cuda:0"]]}, "outputs": {"values": [[9, 10, 0, 16, 4, "cuda:0"]]}, "attrs": [{"name": "rf_id", "value": 12}]},
 {"id": 5, "name": "produce", "ctrl_deps": 4, "inputs": {"values": []}, "outputs": {"values": []}, "attrs": [{"name": "rf_id", "value": 11}]},
 {"id": 6, "name": "aten::mul", "ctrl_deps": 5, "inputs": {"values": [[5, 6, 0, 16, 4, "cuda:0"]]}, "outputs": {"values": [[11, 12, 0, 16, 4, "cuda:0"]]}, "attrs": [{"name": "rf_id", "value": 13}]},
 {"id": 7, "name": "aten::empty", "ctrl_deps": 6, "inputs": {"values": []}, "outputs": {"values": [[11, 12, 0, 16, 4, "cuda:0"]]}, "attrs": [{"name": "rf_id", "value": 14}]},
 {"id": 8, "name": "aten::zeros", "ctrl_deps": 4, "inputs": {"values": []}, "outputs": {"values": [[13, 14, 0, 4, 4, "cpu"]]}, "attrs": [{"name": "rf_id", "value": 15}]}
]}`
	out, err := readET(strings.NewReader(et), "t.json", map[int64]bool{10: true})
	require.NoError(t, err)
	require.Contains(t, out, int64(10))
	var names []string
	for k := int64(-1); out[k] != nil; k-- {
		require.True(t, out[k].Orphan)
		require.Equal(t, int64(4), out[k].Root)
		names = append(names, out[k].Name)
	}
	// aten::mul (node 6) before aten::add (node 9); aten::empty is inside
	// aten::mul; aten::zeros has no CUDA tensor; the first thread is asked for.
	require.Equal(t, []string{"aten::mul", "aten::add"}, names)

	all, err := readET(strings.NewReader(et), "t.json", nil)
	require.NoError(t, err)
	require.Nil(t, all[-1], "with every operator asked for there is no orphan")
}
