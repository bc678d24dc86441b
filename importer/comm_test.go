package importer_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/importer"
	"github.com/collsim/collsim/scenarios"
	"github.com/stretchr/testify/require"
)

// commTrace is one rank's step: a kernel, then NCCL collectives as
// torch.distributed records them (record_param_comms around the launch of
// the NCCL kernel; the argument names of validation/traces/d_comm.json).
func commTrace(rank int) string {
	var ev []string
	add := func(format string, a ...any) { ev = append(ev, fmt.Sprintf(format, a...)) }
	add(`{"ph": "X", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 1, "ts": 0, "dur": 1000, "args": {"External id": 1}}`)
	add(`{"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 10, "dur": 20, "args": {"External id": 2, "Record function id": 2}}`)
	add(`{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 15, "dur": 5, "args": {"External id": 2, "correlation": 100}}`)
	add(`{"ph": "X", "cat": "kernel", "name": "mul_kernel", "pid": 0, "tid": 7, "ts": 25, "dur": 10, "args": {"stream": 7, "correlation": 100}}`)
	colls := []struct {
		name      string
		in, out   int
		kernel    string
		ts, kdur  float64
		ext, corr int
	}{
		{"allreduce", 1024, 1024, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 100, 30, 10, 200},
		{"_allgather_base", 1024, 2048, "ncclDevKernel_AllGather_RING_LL", 300, 40, 20, 300},
		{"barrier", 1, 1, "ncclDevKernel_AllReduce_Sum_u8_RING_LL", 500, 5, 30, 400},
	}
	for _, c := range colls {
		add(`{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": %g, "dur": 50, "args": {"External id": %d, "Record function id": 0, "Collective name": "%s", "Process Group Name": "0", "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1]", "Group size": 2, "In msg nelems": %d, "Out msg nelems": %d, "dtype": "Float", "Rank": %d}}`, c.ts, c.ext, c.name, c.in, c.out, rank)
		add(`{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernelExC", "pid": 1, "tid": 1, "ts": %g, "dur": 5, "args": {"External id": %d, "correlation": %d}}`, c.ts+10, c.ext, c.corr)
		add(`{"ph": "X", "cat": "kernel", "name": "%s", "pid": 0, "tid": 7, "ts": %g, "dur": %g, "args": {"stream": 7, "correlation": %d}}`, c.kernel, c.ts+20, c.kdur, c.corr)
	}
	return `{"deviceProperties": [{"name": "NVIDIA H100 80GB HBM3"}], "traceEvents": [` + strings.Join(ev, ",\n") + "]}"
}

// Two ranks' traces with NCCL collectives import as one communicator and
// the format's collective ops, matched across ranks by their order; a
// collective the format has no op for stays an opaque kernel, and the
// output says so.
func TestImportCollectives(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for r := range 2 {
		f := filepath.Join(dir, fmt.Sprintf("rank%d.json", r))
		require.NoError(t, os.WriteFile(f, []byte(commTrace(r)), 0o644))
		files = append(files, f)
	}
	res, err := importer.Import(importer.Options{Traces: files})
	require.NoError(t, err)
	spec := res.Spec
	require.Equal(t, 2, spec.Base.TP)
	require.Equal(t, "h100", spec.Base.Arch)
	require.Len(t, spec.Comms, 1)
	require.Equal(t, "pg0", spec.Comms[0].Name)
	require.True(t, spec.Comms[0].Ranks.All)
	require.Len(t, spec.Programs, 2)
	var got []string
	for _, op := range spec.Programs[1].Ops {
		got = append(got, string(op.Kind)+":"+op.Name)
	}
	require.Equal(t, []string{"kernel:mul", "allreduce:pg0.allreduce.1", "allgather:pg0.allgather.2", "kernel:barrier"}, got)
	ag := spec.Programs[0].Ops[2]
	require.Equal(t, "nccl", ag.Strategy)
	for _, tn := range spec.Tensors {
		if tn.Name == ag.Out {
			require.Equal(t, int64(2048*4), tn.Bytes)
			require.Equal(t, 8, tn.Chunks)
		}
	}
	require.Contains(t, strings.Join(res.Ranks[0].Notes, "\n"), "barrier")
	// It runs: the collectives complete and agree.
	sc, err := scenarios.Load("c.yaml", res.YAML)
	require.NoError(t, err)
	rep, err := check.RunVariant(sc, sc.Variants[0], check.Options{Extra: []string{"budget=0"}})
	require.NoError(t, err)
	require.Equal(t, "ok", rep.Verdict, "%+v", rep.Findings)
}

// A device activity of a kind the importer does not know, on a stream and
// linked to a launch, is an opaque kernel with its recorded duration.
func TestUnknownKindIsOpaqueKernel(t *testing.T) {
	body := `{"traceEvents": [
{"ph": "X", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
{"ph": "X", "cat": "cuda_runtime", "name": "cuLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {"correlation": 7}},
{"ph": "X", "cat": "gpu_custom_engine", "name": "fancy engine op", "pid": 0, "tid": 3, "ts": 20, "dur": 42.5, "args": {"stream": 3, "correlation": 7}}]}`
	p := filepath.Join(t.TempDir(), "u.json")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	res, err := importer.Import(importer.Options{Traces: []string{p}})
	require.NoError(t, err)
	ops := res.Spec.Programs[0].Ops
	require.Len(t, ops, 1)
	require.Equal(t, scenarios.OpKernel, ops[0].Kind)
	require.Equal(t, "stream3", ops[0].Stream)
	require.Equal(t, int64(42500), ops[0].TimeNs)
	require.Equal(t, "fancy_engine_op", ops[0].Name)
}
