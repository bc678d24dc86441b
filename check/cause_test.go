package check_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios"
)

// loadFile loads a scenario file for a test.
func loadFile(t *testing.T, path string) *scenarios.Scenario {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	sc, err := scenarios.Load(path, data)
	require.NoError(t, err)
	return sc
}

// TestRootCause: the root cause of a corruption names the op that read,
// the bytes, the op whose bytes they were, the op whose bytes they should
// have been, and the missing ordering edge; a fixed variant has none.
func TestRootCause(t *testing.T) {
	for _, c := range []struct {
		file, variant                 string
		reader, writer, expected, via string
		tensor                        string
		edge                          []string
	}{
		// A file written for this test: aux reads y after main's next
		// tensor took y's freed block.
		{"testdata/aux-use-after-free.yaml", "buggy", "use_y", "make_x", "make_y", "x", "y",
			[]string{"record_stream of y on stream aux before y is freed", "an event recorded on stream aux after use_y and waited on by stream main before make_x"}},
		{"../docs/examples/bugs/torchrec-record-stream-copy.yaml", "buggy", "copy_to_host", "fill", "a2a_single", "new_t", "a2a_out",
			[]string{"record_stream of a2a_out on stream copy"}},
		// Read before the right write: the reader must wait for it.
		{"../docs/examples/bugs/pytorch-fsdp-allgather-copy-in-wait.yaml", "buggy", "all_gather_copy_in", "", "clone_post_forward_chunk", "", "post_fwd_chunk",
			[]string{"an event recorded on stream current after clone_post_forward_chunk and waited on by stream copy_in before all_gather_copy_in"}},
		// A peer's next write lands before this rank has read: no exit barrier.
		{"../docs/examples/bugs/aiter-1stage-missing-exit-barrier.yaml", "buggy", "reduce1", "proj2", "proj1", "", "inp",
			[]string{"nothing makes proj2 on rank 0 wait until reduce1 on rank 1 has read rank 0's inp", "exit barrier"}},
		// Two collectives over one workspace on two streams.
		{"../docs/examples/bugs/trtllm-multimem-stream-guard.yaml", "buggy", "routed_ar", "shared_ar", "routed_ar.copy_in", "", "tp.ws",
			[]string{"an event recorded on stream aux after shared_ar and waited on by stream main before routed_ar.copy_in"}},
	} {
		t.Run(filepath.Base(c.file), func(t *testing.T) {
			sc := loadFile(t, c.file)
			v, ok := sc.Variant(c.variant)
			require.True(t, ok)
			rep, err := check.RunVariant(sc, v, check.Options{})
			require.NoError(t, err)
			require.Equal(t, check.Corruption, rep.Verdict)
			cause := rep.RootCause
			require.NotNil(t, cause)
			require.Equal(t, c.reader, cause.Reader.Name, cause.Text)
			require.Equal(t, c.writer, cause.Writer.Name, cause.Text)
			require.Equal(t, c.expected, cause.Expected, cause.Text)
			require.Equal(t, c.via, cause.Via, cause.Text)
			require.Equal(t, c.tensor, cause.Tensor, cause.Text)
			for _, e := range c.edge {
				require.Contains(t, cause.Edge, e)
			}
			require.Contains(t, cause.Text, "Missing: "+cause.Edge)
			// The cause's group comes first.
			require.NotEmpty(t, rep.Groups)
			require.True(t, rep.Groups[0].Cause, "%+v", rep.Groups[0])
		})
	}
	t.Run("fixed", func(t *testing.T) {
		sc := loadFile(t, "testdata/aux-use-after-free.yaml")
		v, ok := sc.Variant("fixed")
		require.True(t, ok)
		rep, err := check.RunVariant(sc, v, check.Options{})
		require.NoError(t, err)
		require.Equal(t, check.OK, rep.Verdict)
		require.Nil(t, rep.RootCause)
	})
}

// TestRootCauseTP8: the headline's root cause is the shared and routed
// all-reduces over one workspace, and its race group is the first line.
func TestRootCauseTP8(t *testing.T) {
	rep := runVariant(t, "buggy")
	if rep.Verdict != check.Corruption {
		t.Skipf("no corruption in this budget (%s)", rep.Verdict)
	}
	c := rep.RootCause
	require.NotNil(t, c)
	require.ElementsMatch(t, []string{"L0.shared_ar", "L0.routed_ar"}, []string{c.ReaderCall, c.WriterCall}, c.Text)
	require.Equal(t, "tp.ws", c.Tensor)
	require.Contains(t, c.Edge, "on every rank")
	g := rep.Groups[0]
	require.Equal(t, check.Race, g.Kind)
	require.True(t, g.Cause)
}

// TestGroupFindings: findings of one kind, op pair and resource are one
// group whatever their rank, chunk, slot or replay; the pair is unordered.
func TestGroupFindings(t *testing.T) {
	fs := []ranks.Finding{
		{Kind: check.Corruption, Ops: []string{"out"}, Resource: `rank 0 tensor "out"`, Message: "c0"},
		{Kind: check.Corruption, Ops: []string{"out"}, Resource: `rank 1 tensor "out" (replay 1)`, Message: "c1"},
		{Kind: check.Race, Ops: []string{"a", "b"}, Resource: `signal pad "ws" on rank 7, slot 7`, Message: "r0"},
		{Kind: check.Race, Ops: []string{"b", "a"}, Resource: `signal pad "ws" on rank 3, slot 1`, Message: "r1"},
		{Kind: check.Race, Ops: []string{"a", "b"}, Resource: `rank 1's copy of symmetric buffer "ws"`, Message: "r2"},
		{Kind: check.Race, Ops: []string{"make_x", "use_y"}, Resource: `rank 0 tensor "y" (caching-allocator block 0x7f0000000000+64 KiB of segment #0, stream main's pool)`, Message: "r3"},
		{Kind: check.Mismatch, Ops: []string{"a (replay 0)", "b (replay 1)"}, Resource: `signal pad "ws" on rank 7, slot 0`, Message: "m0"},
	}
	gs := check.GroupFindings(fs, nil)
	var got []string
	for _, g := range gs {
		got = append(got, g.Kind+" "+g.Object+" "+g.Message+" "+string(rune('0'+g.More)))
	}
	require.Equal(t, []string{
		`corruption tensor "out" c0 1`,
		`race signal pad "ws" r0 1`,
		`race symmetric buffer "ws" r2 0`,
		`race tensor "y" r3 0`,
		`mismatch signal pad "ws" m0 0`,
	}, got)
	// With a cause, its race comes first, then the output it corrupted.
	c := &check.Cause{Output: "rank 0 tensor out[0]", Tensor: "y", Reader: ranks.TaskRef{Name: "use_y"}, Writer: ranks.TaskRef{Name: "make_x"}}
	gs = check.GroupFindings(fs, c)
	require.Equal(t, "r3", gs[0].Message)
	require.Equal(t, "c0", gs[1].Message)
	require.True(t, gs[0].Cause && gs[1].Cause)
	require.False(t, gs[2].Cause)
}
