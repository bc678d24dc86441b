package explore

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"github.com/collsim/collsim/ranks"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/scenarios"
)

// steppedSends: two graphs on rank 0, each captured apart with one send to
// rank 1 and replayed from its own stream; rank 1 replays the two matching
// receives one after the other. Under RCCL's graph path on a GPU that runs
// NCCL kernels together (nccl-order graph-unordered, nccl-coresident on)
// the sends are unordered and share the connection's step counter
// (ranks/stepconn.go): when both load it before either writes it back they
// fill step 0 twice and the second receive waits for step 1 forever; when
// one completes first both steps are filled.
const steppedSends = `name: stepped-sends
ranks: 2
hardware: h200
chunks: 1
mode: graph
knobs: {strategy: nccl, nccl-order: graph-unordered, nccl-coresident: "on"}
communicators: [{name: world, ranks: all}]
tensors:
  - {name: x0, bytes: 4096, init_per_rank: [[1], [2]]}
  - {name: x1, bytes: 4096, init_per_rank: [[3], [4]]}
  - {name: y0, bytes: 4096, output: true}
  - {name: y1, bytes: 4096, output: true}
programs:
  - ranks: 0
    streams: [s0, s1]
    ops:
      - capture: a
        ops: [{send: t0, comm: world, in: x0, peer: 1}]
      - capture: b
        ops: [{send: t1, comm: world, in: x1, peer: 1}]
      - {replay: a}
      - {replay: b, stream: s1}
  - ranks: 1
    streams: [main]
    ops:
      - capture: a
        ops: [{recv: t0, comm: world, out: y0, peer: 0}]
      - capture: b
        ops: [{recv: t1, comm: world, out: y1, peer: 0}]
      - {replay: a}
      - {replay: b}
variants:
  - {name: v}
`

// TestDPORStepped: DPOR explores every class of the program above and
// reaches the hang (both sends load the counter before either writes it
// back), the completion where one send is written back first, and the
// cross-delivered data between: every use of a stepped connection, the
// load at a kernel's first micro-op and the write-back at its completion
// are one resource (explore/dpor.go resConn). With COLLSIM_NAIVE_STEPPED=1
// it also compares DPOR's verdicts and outcomes with the naive enumeration
// of every interleaving (over a million runs: minutes, so not in CI).
func TestDPORStepped(t *testing.T) {
	tg, err := NewTargetFrom("stepped.yaml", "v", nil, scenarios.ReadFunc(func(string) ([]byte, error) { return []byte(steppedSends), nil }))
	require.NoError(t, err)
	got, sum := dporEveryOutcome(tg, 20000)
	require.True(t, *sum.Complete, "dpor must finish within 20000 traces")
	require.ElementsMatch(t, []string{"corruption", "hang", "race"}, verdicts(got))
	if os.Getenv("COLLSIM_NAIVE_STEPPED") == "" {
		return
	}
	want, runs, ok := naiveOutcomes(tg, 20_000_000)
	require.True(t, ok, "naive enumeration within %d runs", runs)
	require.Equal(t, verdicts(want), verdicts(got))
	require.Equal(t, keys(want), keys(got), "dpor (%d traces) vs naive (%d runs)", sum.Schedules, runs)
	t.Logf("naive %d runs, dpor %d traces, verdicts %v", runs, sum.Schedules, verdicts(got))
}

// counterSlotRace: a put whose slot comes from a counter (at: ctr%2) that
// an unordered kernel on another stream advances, and an await on slot 1:
// the put's load of the counter before the increment stores into slot 0
// and the await hangs; after it, slot 1 and the await is met (and the load
// races with the increment either way).
const counterSlotRace = `name: counter-slot-race
ranks: 1
hardware: h200
steps: carried
tensors:
  - {name: ctr, bytes: 4096, chunks: 1}
  - {name: flags, bytes: 4096, chunks: 2}
programs:
  - ranks: all
    streams: [main, aux]
    events: [fork]
    ops:
      - {record: fork}
      - {wait: fork, stream: aux}
      - {increment: ctr, stream: aux}
      - {put: p, flag: flags, at: ctr%2, value: 7}
      - {await: w, flag: flags, at: 1, value: 7}
variants:
  - {name: v}
`

// counterSlotWrite: a kernel writes stage[ctr%2] (ctr holds 1: slot 1)
// while an unordered kernel on another stream reads stage[1]: the read
// sees the write or the old value, two outcomes, only if the write's step
// names the slot it moved to.
const counterSlotWrite = `name: counter-slot-write
ranks: 1
hardware: h200
symmetric:
  - {name: stage, ranks: all, chunks: 2}
tensors:
  - {name: ctr, bytes: 4096, chunks: 1, init: [1]}
  - {name: x, bytes: 4096, chunks: 1, init: [5]}
  - {name: y, bytes: 4096, chunks: 1, output: true}
programs:
  - ranks: all
    streams: [main, aux]
    events: [fork]
    ops:
      - {record: fork}
      - {wait: fork, stream: aux}
      - {kernel: writer, reads: [x], writes: ["stage[ctr%2]"], weight: 1}
      - {kernel: reader, stream: aux, reads: ["stage[1]"], writes: [y], weight: 1}
variants:
  - {name: v}
`

// TestDPORCounterSlotMatchNaive: DPOR reaches exactly the naive
// enumeration's verdicts and outcomes on counter slots: the slot index
// load (ranks.OpIndex) is a read of the counter in the footprint (the
// first program: without it DPOR misses the hang), and the step of a
// micro-op it moves names the moved region (the second: without it DPOR
// misses the read of the old value).
func TestDPORCounterSlotMatchNaive(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		outcomes  int
	}{{"load-races-increment", counterSlotRace, 2}, {"moved-write", counterSlotWrite, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			tg, err := NewTargetFrom("counter.yaml", "v", nil, scenarios.ReadFunc(func(string) ([]byte, error) { return []byte(tc.src), nil }))
			require.NoError(t, err)
			want, runs, ok := naiveOutcomes(tg, 40000)
			require.True(t, ok, "naive enumeration within %d runs", runs)
			require.Len(t, want, tc.outcomes, "naive outcomes: %v", keys(want))
			got, sum := dporEveryOutcome(tg, runs+1)
			require.True(t, *sum.Complete, "dpor must finish within %d traces", runs+1)
			require.Equal(t, verdicts(want), verdicts(got))
			require.Equal(t, keys(want), keys(got), "dpor (%d traces) vs naive (%d runs)", sum.Schedules, runs)
			t.Logf("naive %d runs, dpor %d traces, outcomes %v", runs, sum.Schedules, keys(got))
		})
	}
}

// genStepped draws a two-rank program whose kernels send and receive on
// stepped connections (richProgram.Stepped): one or two kernels per rank on
// either stream, each of one or two micro-ops among sends, receives, fused
// receive-and-forwards and copies, every kernel on communicator 1 (so they
// share its connections), with event records and waits between.
func genStepped(t *rapid.T) richProgram {
	p := richProgram{Stepped: true}
	instr := rapid.Custom(func(t *rapid.T) tinyInstr {
		return tinyInstr{
			Op:       rapid.SampledFrom([]string{"send", "send", "recv", "recv", "recvsend", "copy"}).Draw(t, "op"),
			DstRank:  rapid.IntRange(0, 1).Draw(t, "dstRank"),
			DstOut:   rapid.Bool().Draw(t, "dstOut"),
			DstChunk: rapid.IntRange(0, 1).Draw(t, "dstChunk"),
			SrcRank:  rapid.IntRange(0, 1).Draw(t, "srcRank"),
			SrcChunk: rapid.IntRange(0, 1).Draw(t, "srcChunk"),
		}
	})
	genHostOps(t, &p, func(t *rapid.T) richKernel {
		return richKernel{Instrs: rapid.SliceOfN(instr, 1, 2).Draw(t, "instrs"), Comm: 1}
	})
	return p
}

// genHostOps draws each of two ranks' host programs: one to three
// launches, records and waits on either stream and event, at most two
// launches per rank (a third draw of a launch records instead), each
// launch's kernel drawn by kernel.
func genHostOps(t *rapid.T, p *richProgram, kernel func(*rapid.T) richKernel) {
	for r := range 2 {
		n := rapid.IntRange(1, 3).Draw(t, fmt.Sprintf("ops%d", r))
		launches := 0
		for range n {
			op := richOp{Kind: rapid.SampledFrom([]ranks.HostOpKind{ranks.Launch, ranks.Launch, ranks.Record, ranks.Wait}).Draw(t, "kind"),
				Stream: rapid.IntRange(0, 1).Draw(t, "stream"), Event: rapid.IntRange(0, 1).Draw(t, "event")}
			if launches == 2 && op.Kind == ranks.Launch {
				op.Kind = ranks.Record
			}
			if op.Kind == ranks.Launch {
				launches++
				op.Kernel = kernel(t)
			}
			p.Ops[r] = append(p.Ops[r], op)
		}
	}
}

// TestDPORSteppedMatchNaive: on generated programs over stepped
// connections (two kernels of one communicator on a rank run together and
// race on its step counters), the verdicts and outcomes DPOR reaches are
// exactly the naive enumeration's, and DPOR says it is complete.
func TestDPORSteppedMatchNaive(t *testing.T) {
	generatedMatchNaive(t, genStepped)
}

// generatedMatchNaive checks programs drawn by gen against the naive
// enumeration: the same verdicts and outcomes, and DPOR complete.
func generatedMatchNaive(t *testing.T, gen func(*rapid.T) richProgram) {
	limit := scale(1500, 300)
	var checked, skipped atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		target := func(rt *rapid.T) *Target { return &Target{Scenario: gen(rt).scenario(), Variant: "rich"} }
		requireDPORMatchesNaive(rt, target, limit, dporEveryOutcome, &skipped)
		checked.Add(1)
	})
	t.Logf("checked %d generated programs against the naive enumeration (%d too large to enumerate within %d runs)", checked.Load(), skipped.Load(), limit)
}

// genCounterSlots draws a two-rank program whose kernels may load a slot
// index from a chunk of their rank's memory (ranks.OpIndex, mod 2) and
// move their copies, flag stores and flag waits by it, while other kernels
// write that memory: which slot a kernel takes depends on the schedule.
func genCounterSlots(t *rapid.T) richProgram {
	var p richProgram
	genHostOps(t, &p, func(t *rapid.T) richKernel {
		var k richKernel
		indexed := rapid.Bool().Draw(t, "indexed")
		if indexed {
			k.Instrs = append(k.Instrs, tinyInstr{Op: "ix", SrcChunk: rapid.IntRange(0, 1).Draw(t, "counter")})
		}
		for range rapid.IntRange(1, 2).Draw(t, "body") {
			ti := tinyInstr{
				Op:       rapid.SampledFrom([]string{"copy", "copy", "fputown", "fwait"}).Draw(t, "op"),
				DstRank:  rapid.IntRange(0, 1).Draw(t, "dstRank"),
				DstOut:   rapid.Bool().Draw(t, "dstOut"),
				DstChunk: rapid.IntRange(0, 1).Draw(t, "dstChunk"),
				SrcRank:  rapid.IntRange(0, 1).Draw(t, "srcRank"),
				SrcChunk: rapid.IntRange(0, 1).Draw(t, "srcChunk"),
				Slot:     rapid.IntRange(0, 30).Draw(t, "value"),
			}
			if indexed && rapid.Bool().Draw(t, "shift") {
				ti.Shift, ti.DstChunk = true, 0 // slot 0 or 1 of a two-chunk buffer
			}
			k.Instrs = append(k.Instrs, ti)
		}
		return k
	})
	return p
}

// TestDPORCounterSlotsMatchNaive: on generated programs whose kernels take
// a slot from a value in memory that other kernels write, DPOR reaches
// exactly the naive enumeration's verdicts and outcomes.
func TestDPORCounterSlotsMatchNaive(t *testing.T) {
	generatedMatchNaive(t, genCounterSlots)
}
