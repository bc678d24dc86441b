package cachealloc_test

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks/cachealloc"
)

// allocTrace is validation/alloc_placement.py's output for one sequence:
// the requests, and where real PyTorch put each malloc (segment ordinal in
// order of first use, offset in it, segment size).
type allocTrace struct {
	Ops []struct {
		Op     string `json:"op"`
		ID     int    `json:"id"`
		Bytes  int64  `json:"bytes"`
		Stream string `json:"stream"`
	} `json:"ops"`
	// HoldsLast: the recording kept the most recent malloc's tensor alive
	// until the next malloc returned, so freeing it took effect then.
	HoldsLast bool `json:"holds_last"`
	Placed    []struct {
		ID          int   `json:"id"`
		Seg         int   `json:"seg"`
		Offset      int64 `json:"offset"`
		SegSize     int64 `json:"seg_size"`
		PrivatePool bool  `json:"private_pool"`
	} `json:"placed"`
}

// The allocator puts every block where PyTorch 2.11 put it on an H200
// (testdata/alloc_h200.json, recorded by validation/alloc_placement.py):
// split and coalesced blocks, best fit, the large pool's 20 MiB segments,
// record_stream deferral, empty_cache, a capture's private pool (and the
// CUDA generator's two tensors its first capture allocates), the
// aux-stream-lifetime allocation pattern at five token counts, and three
// random sequences of 160 requests; recorded twice (the second run, @run3,
// held no tensor between requests).
func TestAllocatorMatchesPyTorch(t *testing.T) {
	raw, err := os.ReadFile("testdata/alloc_h200.json")
	require.NoError(t, err)
	var file struct {
		Sequences map[string]allocTrace `json:"sequences"`
	}
	require.NoError(t, json.Unmarshal(raw, &file))
	names := make([]string, 0, len(file.Sequences))
	for n := range file.Sequences {
		names = append(names, n)
	}
	sort.Strings(names)
	require.GreaterOrEqual(t, len(names), 38)
	for _, name := range names {
		seq := file.Sequences[name]
		t.Run(name, func(t *testing.T) {
			got := replayAlloc(t, seq)
			require.Len(t, got, len(seq.Placed))
			for i, want := range seq.Placed {
				require.Equal(t, fmt.Sprintf("#%d seg %d +%d of %d private=%v", want.ID, want.Seg, want.Offset, want.SegSize, want.PrivatePool), got[i],
					"malloc %d of %s", i, name)
			}
		})
	}
}

// replayAlloc runs seq's requests through the model and says where each
// malloc landed, in the trace's words.
func replayAlloc(t *testing.T, seq allocTrace) []string {
	a := cachealloc.New(0, true)
	live := map[int]*cachealloc.Block{}
	var out []string
	last, lastFreed := 0, false // HoldsLast: the held tensor, and whether its free is waiting
	for _, op := range seq.Ops {
		switch op.Op {
		case "malloc":
			blk, err := a.Malloc(fmt.Sprint("t", op.ID), op.Stream, op.Bytes)
			require.NoError(t, err)
			if lastFreed {
				require.NoError(t, a.Free(live[last]))
				delete(live, last)
			}
			last, lastFreed = op.ID, false
			live[op.ID] = blk
			out = append(out, fmt.Sprintf("#%d seg %d +%d of %d private=%v", op.ID, blk.Seg.ID, blk.Ptr-blk.Seg.Base, blk.Seg.Size, blk.Seg.Pool > 0))
		case "free":
			if seq.HoldsLast && op.ID == last {
				lastFreed = true
				continue
			}
			require.NoError(t, a.Free(live[op.ID]))
			delete(live, op.ID)
		case "record_stream":
			require.NoError(t, a.RecordStream(live[op.ID], op.Stream))
		case "sync":
			a.Synchronize()
		case "empty_cache":
			a.EmptyCache()
		case "capture_begin":
			_, err := a.BeginCaptureOn("main")
			require.NoError(t, err) // alloc_placement.py captures on main
		case "capture_end":
			a.EndCapture()
		case "sleep":
			// device time: the model keeps recorded uses outstanding until
			// a synchronize, as a long sleep does
		default:
			t.Fatalf("unknown op %q", op.Op)
		}
	}
	return out
}
