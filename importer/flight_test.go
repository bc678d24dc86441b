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

// frDump writes one rank's Flight Recorder dump (the JSON form's keys)
// with the given collectives (profiling names), sequence numbers from seq0.
func frDump(t *testing.T, dir string, rank int, seq0 int, names ...string) string {
	t.Helper()
	var es []string
	for i, n := range names {
		state := "completed"
		if i == len(names)-1 {
			state = "started"
		}
		es = append(es, fmt.Sprintf(`{"record_id": %d, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": %d, "p2p_seq_id": 0, "op_id": %d, "profiling_name": %q, "time_created_ns": %d, "input_sizes": [[1024]], "input_dtypes": ["Float"], "output_sizes": [[%d]], "output_dtypes": ["Float"], "state": %q, "is_p2p": false, "retired": false, "timeout_ms": 600000, "frames": []}`,
			i, seq0+i, seq0+i, n, 1000000+i*50000, map[bool]int{true: 2048, false: 1024}[strings.Contains(n, "gather")], state))
	}
	body := fmt.Sprintf(`{"version": "2.10", "comm_lib_version": "2.28.9", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}}, "pg_status": {}, "entries": [%s]}`, strings.Join(es, ",\n"))
	p := filepath.Join(dir, fmt.Sprintf("fr%d.json", rank))
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

func runFlight(t *testing.T, files ...string) (*importer.Result, *check.VariantReport) {
	t.Helper()
	res, err := importer.Import(importer.Options{Traces: files, FlightRecorder: true})
	require.NoError(t, err)
	sc, err := scenarios.Load("fr.yaml", res.YAML)
	require.NoError(t, err)
	rep, err := check.RunVariant(sc, sc.Variants[0], check.Options{Extra: []string{"budget=0"}})
	require.NoError(t, err)
	return res, rep
}

// Two ranks that issued the same collectives: the import runs clean. The
// ring buffer of rank 0 still holds an older call rank 1 has lost: left
// out, and said.
func TestFlightRecorderAgree(t *testing.T) {
	dir := t.TempDir()
	res, rep := runFlight(t,
		frDump(t, dir, 0, 0, "nccl:all_reduce", "nccl:all_reduce", "nccl:_allgather_base"),
		frDump(t, dir, 1, 1, "nccl:all_reduce", "nccl:_allgather_base"))
	require.Equal(t, "ok", rep.Verdict)
	var ops []string
	for _, op := range res.Spec.Programs[0].Ops {
		ops = append(ops, op.Name)
	}
	require.Equal(t, []string{"pg0.allreduce.1", "pg0.allgather.2"}, ops)
	require.Contains(t, strings.Join(res.Ranks[0].Notes, "\n"), "1 entries before the first sequence number")
	require.Equal(t, int64(50000), res.Spec.Programs[0].Ops[1].HostNs)
}

// Rank 1 issued an all-gather where rank 0 issued an all-reduce: the
// import reproduces what the dump shows, a collective that cannot
// complete.
func TestFlightRecorderMismatch(t *testing.T) {
	dir := t.TempDir()
	_, rep := runFlight(t,
		frDump(t, dir, 0, 1, "nccl:all_reduce", "nccl:all_reduce"),
		frDump(t, dir, 1, 1, "nccl:all_reduce", "nccl:_allgather_base"))
	require.Contains(t, []string{"hang", "mismatch"}, rep.Verdict, "%+v", rep.Findings)
}

func TestFlightRecorderBad(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(p, []byte(`{"entries": [{"record_id": 0},`+"\n"+`{"record_id": "x"}]}`), 0o644))
	_, err := importer.Import(importer.Options{Traces: []string{p}, FlightRecorder: true})
	require.ErrorContains(t, err, "bad.json:2:1: entry 1: ")
}

// frEntry is one entry of a dump written by frJob.
type frEntry struct {
	name  string // profiling name: "nccl:all_reduce", "nccl:send 0->1", …
	elems int64
	seq   int // collective_seq_id (p2p: p2p_seq_id)
}

// frJob writes one dump per rank of a two-rank job with the given entries.
func frJob(t *testing.T, ranks ...[]frEntry) []string {
	t.Helper()
	dir := t.TempDir()
	var files []string
	for r, es := range ranks {
		var js []string
		for i, e := range es {
			p2p := strings.HasPrefix(e.name, "nccl:send") || strings.HasPrefix(e.name, "nccl:recv")
			cs, ps := e.seq, 0
			if p2p {
				cs, ps = 0, e.seq
			}
			js = append(js, fmt.Sprintf(`{"record_id": %d, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": %d, "p2p_seq_id": %d, "profiling_name": %q, "time_created_ns": %d, "input_sizes": [[%d]], "input_dtypes": ["Float"], "output_sizes": [[%d]], "state": "completed", "is_p2p": %v}`,
				i, cs, ps, e.name, 1000000+i*50000, e.elems, e.elems, p2p))
		}
		body := fmt.Sprintf(`{"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}}, "entries": [%s]}`, strings.Join(js, ",\n"))
		p := filepath.Join(dir, fmt.Sprintf("fr%d.json", r))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		files = append(files, p)
	}
	return files
}

// Flight Recorder's sends and receives import with their peers (the
// profiling name's "a->b" / "a<-b"), paired per rank pair in issue order;
// a message size that differs between the ranks is a mismatch when run,
// and a receive no send meets hangs.
func TestFlightRecorderPairs(t *testing.T) {
	const M = 1 << 18
	for _, tc := range []struct {
		name    string
		ranks   [][]frEntry
		verdict []string
	}{
		{"p2p", [][]frEntry{{{"nccl:send 0->1", M, 1}}, {{"nccl:recv 1<-0", M, 1}}}, []string{"ok"}},
		{"p2p-size", [][]frEntry{{{"nccl:send 0->1", M, 1}}, {{"nccl:recv 1<-0", M / 2, 1}}}, []string{"mismatch", "hang"}},
		{"p2p-unmatched", [][]frEntry{{{"nccl:send 0->1", M, 1}}, {{"nccl:recv 1<-0", M, 1}, {"nccl:recv 1<-0", M, 2}}}, []string{"hang"}},
		{"collective-size", [][]frEntry{{{"nccl:all_reduce", M, 1}}, {{"nccl:all_reduce", M / 2, 1}}}, []string{"mismatch"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, rep := runFlight(t, frJob(t, tc.ranks...)...)
			require.Contains(t, tc.verdict, rep.Verdict, "%s", res.YAML)
			if tc.name == "p2p" {
				send := res.Spec.Programs[0].Ops[0]
				require.Equal(t, scenarios.OpSend, send.Kind)
				require.Equal(t, "1", send.Peer)
				require.Equal(t, "pg0.p2p.0-1.1", send.Name)
				require.Equal(t, send.Name, res.Spec.Programs[1].Ops[0].Name)
			}
		})
	}
}
