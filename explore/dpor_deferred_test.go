package explore

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/collsim/collsim/scenarios"
)

// deferredProgram is a one-rank program around one free after
// record_stream: x (with its values) is read on some of main, aux and
// aux2, record_stream names some streams, main may synchronize a stream,
// x is freed and w allocated on main or aux and written there. Whether w
// gets x's block depends on whether the recorded streams' work is done at
// w's malloc (ranks/dynalloc.go): a race between the host and the device.
type deferredProgram struct {
	Readers [3]bool // a kernel on main, aux, aux2 reads x
	Records [3]bool // record_stream(x, stream); main's is a no-op
	Sync    int     // -1: none; else cudaStreamSynchronize of that stream before the free
	WOn     int     // 0: w on main; 1: on aux (another pool: never x's block)
}

var deferredStreams = []string{"main", "aux", "aux2"}

func (p deferredProgram) yaml() string {
	var b strings.Builder
	b.WriteString(`name: deferred-gen
ranks: 1
chunks: 1
tensors:
  - {name: src, bytes: 65536, init: [5]}
  - {name: x, bytes: 65536}
  - {name: w, bytes: 65536, output: true}
  - {name: y0, bytes: 65536, output: true}
  - {name: y1, bytes: 65536, output: true}
  - {name: y2, bytes: 65536, output: true}
programs:
  - ranks: all
    streams: [main, aux, aux2]
    ops:
      - {alloc: x, stream: main, init: [3]}
`)
	for s, ok := range p.Readers {
		if ok {
			fmt.Fprintf(&b, "      - {kernel: read%d, stream: %s, reads: [x], writes: [y%d], time: 1us}\n", s, deferredStreams[s], s)
		}
	}
	for s, ok := range p.Records {
		if ok {
			fmt.Fprintf(&b, "      - {record_stream: x, stream: %s}\n", deferredStreams[s])
		}
	}
	if p.Sync >= 0 {
		fmt.Fprintf(&b, "      - {sync: %s}\n", deferredStreams[p.Sync])
	}
	b.WriteString("      - {free: x}\n")
	fmt.Fprintf(&b, "      - {alloc: w, stream: %s}\n", deferredStreams[p.WOn])
	fmt.Fprintf(&b, "      - {kernel: cos, stream: %s, reads: [src], writes: [w], time: 2us}\n", deferredStreams[p.WOn])
	b.WriteString("variants:\n  - {name: v}\n")
	return b.String()
}

func (p deferredProgram) target(t require.TestingT) *Target {
	src := p.yaml()
	tg, err := NewTargetFrom("deferred.yaml", "v", nil, scenarios.ReadFunc(func(string) ([]byte, error) { return []byte(src), nil }))
	require.NoError(t, err, src)
	return tg
}

func genDeferred(t *rapid.T) deferredProgram {
	var p deferredProgram
	for s := range 3 {
		p.Readers[s] = rapid.Bool().Draw(t, fmt.Sprintf("reader%d", s))
		p.Records[s] = rapid.Bool().Draw(t, fmt.Sprintf("record%d", s))
	}
	p.Records[1] = p.Records[1] || !p.Records[2] // at least one stream that defers the free
	p.Sync = rapid.IntRange(-1, 2).Draw(t, "sync")
	p.WOn = rapid.IntRange(0, 1).Draw(t, "wOn")
	return p
}

// TestDPORDeferredFreesMatchNaive: on programs with a free after
// record_stream, the verdicts and outcomes DPOR reaches are exactly those
// of the naive enumeration of every interleaving, whose host malloc runs
// before or after each recorded stream's completion. The fixed cases need
// both orders: reuse (aux done first) followed by aux2's late read (one
// recorded: corruption), and the malloc before aux is done (no reuse: the
// ok outcome). With the malloc's reads of the events left out of its
// footprint (mutant dpor-free-query-independent) DPOR never reverses the
// malloc and the record's completion and misses one of them.
func TestDPORDeferredFreesMatchNaive(t *testing.T) {
	fixed := []struct {
		name string
		p    deferredProgram
		want string
	}{
		{"aux-recorded-aux2-reads", deferredProgram{Readers: [3]bool{false, true, true}, Records: [3]bool{false, true, false}, Sync: -1}, "corruption"},
		{"both-recorded", deferredProgram{Readers: [3]bool{false, true, true}, Records: [3]bool{false, true, true}, Sync: -1}, "ok"},
		{"aux-recorded-aux-reads", deferredProgram{Readers: [3]bool{false, true, false}, Records: [3]bool{false, true, false}, Sync: -1}, "ok"},
	}
	for _, tt := range fixed {
		t.Run(tt.name, func(t *testing.T) {
			tg := tt.p.target(t)
			want, runs, ok := naiveOutcomes(tg, 40000)
			require.True(t, ok, "naive enumeration within %d runs", runs)
			got, sum := dporEveryOutcome(tg, runs)
			require.True(t, *sum.Complete)
			require.Equal(t, verdicts(want), verdicts(got), "verdict sets: dpor (%d traces) vs naive (%d runs)", sum.Schedules, runs)
			require.Equal(t, keys(want), keys(got), "outcome sets: dpor (%d traces) vs naive (%d runs)", sum.Schedules, runs)
			require.Equal(t, tt.want, sum.Verdict)
		})
	}
	var skipped atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		gen := func(rt *rapid.T) *Target { return genDeferred(rt).target(rt) }
		// One trace more than the naive runs: DPOR learns that it is
		// complete when it looks for the next trace, and a program
		// without a race has as many classes as interleavings (two).
		requireDPORMatchesNaive(rt, gen, scale(3000, 800), func(tg *Target, runs int) (map[outcomeKey]bool, *Summary) {
			got, sum := dporEveryOutcome(tg, runs+1)
			require.LessOrEqual(rt, sum.Schedules, runs)
			return got, sum
		}, &skipped)
	})
	t.Logf("skipped %d programs whose enumeration was too large", skipped.Load())
}
