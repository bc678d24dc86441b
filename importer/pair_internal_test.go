package importer

import (
	"math"
	"testing"

	"github.com/collsim/collsim/scenarios"
	"github.com/stretchr/testify/require"
)

// TestPairByEventNumber is pair's table: which record each wait takes,
// from the host-ordered records and waits alone. Streams: 7 main, 37 aux,
// 41 aux2. "rec S ID" is a record on stream S (-1: unknown) whose probe
// named CUPTI event ID (0: no probe wait); "wait S ID" a wait of stream S
// on event ID (0: CUPTI gave none). want[i] is the index of the record the
// i-th wait takes (-1: none: it orders nothing).
func TestPairByEventNumber(t *testing.T) {
	type step struct {
		wait   bool
		stream int64
		id     int64
	}
	rec := func(s, id int64) step { return step{false, s, id} }
	wait := func(s, id int64) step { return step{true, s, id} }
	for _, c := range []struct {
		name    string
		steps   []step
		want    []int // per wait: index into steps of its record, -1 none
		guesses int
	}{
		{
			// e = aux.record_event(); main writes; aux.wait_stream(main);
			// aux2.wait_event(e). The wait on e skips the wait_stream's
			// record, which a wait on another event took.
			name:    "a later wait on an earlier event (no probe waits)",
			steps:   []step{rec(37, 0), rec(7, 0), wait(37, 5126), wait(41, 5125)},
			want:    []int{1, 0},
			guesses: 2,
		},
		{
			// e1.record(main); e2.record(aux); aux.wait(e1); aux2.wait(e2):
			// the first wait does not take aux's own record.
			name:    "a wait passes over its own stream's record",
			steps:   []step{rec(7, 0), rec(37, 0), wait(37, 2553), wait(41, 2554)},
			want:    []int{0, 1},
			guesses: 2,
		},
		{
			// The waits in the other order: only the probe's numbers say
			// aux2's wait is on aux's early record.
			name:  "probe numbers pair exactly",
			steps: []step{rec(37, 5125), rec(7, 5126), wait(41, 5125), wait(37, 5126)},
			want:  []int{0, 1},
		},
		{
			name:    "the same order guessed goes wrong (why the probe waits)",
			steps:   []step{rec(37, 0), rec(7, 0), wait(41, 5125), wait(37, 5126)},
			want:    []int{1, -1},
			guesses: 2,
		},
		{
			name:  "a re-recorded event: the latest record of it",
			steps: []step{rec(7, 9), rec(37, 10), rec(7, 9), wait(41, 9)},
			want:  []int{2},
		},
		{
			// Without probe numbers, a record a guess gave to this event
			// is no better than a later unknown one: the event may have
			// been recorded again.
			name:    "a guessed event recorded again",
			steps:   []step{rec(7, 0), wait(41, 9), rec(13, 0), wait(37, 9)},
			want:    []int{0, 2},
			guesses: 2,
		},
		{
			name:  "an event recorded before the step: no record",
			steps: []step{rec(7, 9), wait(41, 12)},
			want:  []int{-1},
		},
		{
			// No CUPTI numbers at all (an older trace): the latest record.
			name:    "no event numbers: the latest record",
			steps:   []step{rec(37, 0), rec(7, 0), wait(41, 0)},
			want:    []int{1},
			guesses: 1,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := &builder{rt: &rankTrace{t0: math.Inf(1)}, p: &rankProg{}, probeEvent: map[*cpuOp]int64{}}
			var out, waits []*item
			for i, s := range c.steps {
				it := &item{ts: float64(i), stream: s.stream, corr: int64(100 + i), waitEvent: -1, recStream: -1, recCorr: -1}
				if s.wait {
					it.kind, it.waitEvent, it.cupti = scenarios.OpWait, s.id, s.id
					waits = append(waits, it)
				} else {
					it.kind = scenarios.OpRecord
					if s.id > 0 {
						it.recProbe = &cpuOp{}
						b.probeEvent[it.recProbe] = s.id
					}
				}
				out = append(out, it)
			}
			require.NoError(t, b.pair(out))
			for i, w := range waits {
				got := -1
				for j, r := range out {
					if r.kind == scenarios.OpRecord && r.event != "" && r.event == w.event {
						got = j
					}
				}
				require.Equal(t, c.want[i], got, "wait %d", i)
			}
			require.Equal(t, c.guesses, b.p.guesses)
		})
	}
}
