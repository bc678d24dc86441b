package scenarios_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios"
	"github.com/collsim/collsim/sim"
)

// deferredFile: main allocates x (with its values); aux and aux2 read it
// (aux2 after a GEMM of aux2Time); x.record_stream(aux) and, with RECORDS,
// more record_stream calls; main frees x and, after a host gap of HOST,
// allocates w (the malloc runs as the host issues cos), which cos writes. PyTorch hands x's block to w once a
// malloc finds the events of x's free complete (process_events).
func deferredFile(records, host, auxTime, aux2Time string) string {
	return strings.NewReplacer("RECORDS", records, "HOST", host, "AUXT", auxTime, "AUX2T", aux2Time).Replace(`name: deferred
ranks: 1
chunks: 1
knobs: {budget: 3}
tensors:
  - {name: src, bytes: 65536, init: [5]}
  - {name: x, bytes: 65536}
  - {name: w, bytes: 65536}
  - {name: y, bytes: 65536, output: true}
  - {name: u, bytes: 65536, output: true}
programs:
  - ranks: all
    streams: [main, aux, aux2]
    ops:
      - {alloc: x, stream: main, init: [3]}
      - {kernel: sin, stream: aux, reads: [x], writes: [y], time: AUXT}
      - {kernel: exp, stream: aux2, reads: [x], writes: [u], time: AUX2T}
      - {record_stream: x, stream: aux}
RECORDS      - {free: x}
      - {alloc: w, stream: main}
      - {kernel: cos, stream: main, reads: [src], writes: [w], time: 2us, host: HOST}
variants:
  - {name: v}
`)
}

// runNominal runs the file's variant once at nominal timing and returns
// the world after the run.
func runNominal(t *testing.T, src string) *ranks.World {
	sc, err := scenarios.Load("deferred.yaml", []byte(src))
	require.NoError(t, err, src)
	cfg, err := sc.VariantConfig(sc.Variants[0], nil)
	require.NoError(t, err)
	b, err := sc.Build(cfg, scenarios.BuildOptions{}, sim.NewEngine(sim.Timed, sim.Nominal{}))
	require.NoError(t, err)
	_, err = b.World.Run()
	require.NoError(t, err)
	return b.World
}

func bufNamed(w *ranks.World, name string) *ranks.Buffer {
	var out *ranks.Buffer
	for _, b := range w.Buffers() {
		if b.Name == name {
			out = b
		}
	}
	return out
}

// TestDeferredFreeAtTheMalloc: whether w gets x's block follows the
// simulated timeline: the events of x's free are done at w's malloc when
// the recorded stream finished before the host got there, and not when it
// is still running; a host sync makes them done; a stream never recorded
// does not hold the block back. Each case fails with the free deferred to a
// host sync (mutant deferred-free-at-sync-only, or the old build-time
// allocator): then no malloc before a sync ever reuses the block.
func TestDeferredFreeAtTheMalloc(t *testing.T) {
	tests := []struct {
		name, records, host, aux, aux2 string
		reused                         bool
	}{
		// aux's 1 µs read is long done after a 50 µs host gap
		{"recorded-stream-done", "", "50us", "1us", "1us", true},
		// aux still runs its 200 µs kernel when the host allocates
		{"recorded-stream-busy", "", "0s", "200us", "1us", false},
		// aux2 is recorded too, and still busy
		{"second-recorded-busy", "      - {record_stream: x, stream: aux2}\n", "50us", "1us", "200us", false},
		// aux2 is busy but never recorded: the block comes back anyway
		{"unrecorded-busy", "", "50us", "1us", "200us", true},
		// a device sync before the free: every event is done at the malloc
		{"synced", "      - {sync: device}\n", "0s", "200us", "1us", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := runNominal(t, deferredFile(tt.records, tt.host, tt.aux, tt.aux2))
			x, nw := bufNamed(w, "x"), bufNamed(w, "w")
			require.NotNil(t, x.Block.Block, "x has its block after the run")
			require.NotNil(t, nw.Block.Block, "w has its block after the run")
			require.Equal(t, tt.reused, x.Block.Ptr == nw.Block.Ptr, "x at %#x, w at %#x", x.Block.Ptr, nw.Block.Ptr)
		})
	}
}
