package scenarios_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios"
)

// TestSymmGuardLeavesTheHeadlineCorrupt: PyTorch's GroupStreamGuard
// (symm-guard=on) orders the headline's two MULTIMEM reduce kernels on every
// rank, so no signal crosses between the calls (no mismatch, where without
// it the pads cross-pair); TensorRT-LLM's copies into the shared workspace
// stay unordered, so the buggy placement still corrupts, through a copy
// (collectives/multimem.go).
func TestSymmGuardLeavesTheHeadlineCorrupt(t *testing.T) {
	kinds := func(fs []ranks.Finding) map[string]bool {
		k := map[string]bool{}
		for _, f := range fs {
			k[f.Kind] = true
		}
		return k
	}
	off := runVariant(t, "tp8-shared-expert", "buggy", "budget=40")
	require.Equal(t, "corruption", off.Verdict)
	require.True(t, kinds(off.Findings)[ranks.KindMismatch], "without the guard the pads cross-pair")

	on := runVariant(t, "tp8-shared-expert", "buggy", "budget=40", "symm-guard=on")
	require.Equal(t, "corruption", on.Verdict)
	require.False(t, kinds(on.Findings)[ranks.KindMismatch], "the guard keeps each call's signals its own")
	copyRace := false
	for _, f := range on.Findings {
		for _, op := range f.Ops {
			if f.Kind == ranks.KindRace && strings.HasSuffix(op, ".copy_in") {
				copyRace = true
			}
		}
	}
	require.True(t, copyRace, "a copy into the workspace races: %v", on.Findings)

	fixed := runVariant(t, "tp8-shared-expert", "fixed", "budget=40", "symm-guard=on")
	require.Equal(t, "ok", fixed.Verdict)
}

// guardContexts has symmetric-memory all-reduces on one group issued from
// two streams, with PyTorch's GroupStreamGuard on (GUARD). SHAPE is where
// they run: both inside one capture, or one captured and replayed and one
// eager after the replay.
const guardContexts = `name: guard-contexts
ranks: 2
hardware: b200
mode: graph
chunks: 2
knobs: {strategy: p2p-oneshot, symm-guard: "GUARD", budget: 20}
communicators:
  - {name: tp, ranks: all}
tensors:
  - {name: x, bytes: 4096, init_per_rank: [[1, 2], [10, 20]]}
  - {name: y, bytes: 4096, init_per_rank: [[3, 4], [30, 40]]}
  - {name: xs, bytes: 4096, output: true}
  - {name: ys, bytes: 4096, output: true}
programs:
  - ranks: all
    streams: [main, side]
    events: [fork, join]
    ops:
      - capture: step
        ops:
          - {record: fork}
          - {wait: fork, stream: side}
          - {allreduce: ar_graph, stream: side, comm: tp, in: x, out: xs}
SHAPE
variants:
  - {name: base}
`

// TestSymmGuardPerCaptureContext: GroupStreamGuard.cpp (pytorch/pytorch,
// GroupStreamGuard::init_) makes a pad op on a new stream wait on the
// event the previous one recorded only when that event was recorded in
// the same capture context (captureIdMayInitCtx); under capture the record
// and the wait are graph nodes, so two pad ops of one capture stay
// ordered in every replay, and a replay, which runs no guard code, is
// ordered with no eager pad op. The guard orders the two calls inside one
// capture (without it they share the pad and race), and leaves a replayed
// call and an eager call after it unordered.
func TestSymmGuardPerCaptureContext(t *testing.T) {
	inCapture := `          - {allreduce: ar_main, comm: tp, in: y, out: ys}
          - {record: join, stream: side}
          - {wait: join}
      - {replay: step}`
	replayThenEager := `          - {record: join, stream: side}
          - {wait: join}
      - {replay: step, stream: side}
      - {allreduce: ar_eager, comm: tp, in: y, out: ys}`
	for _, tt := range []struct {
		name, shape, guard string
		ok                 bool
	}{
		{"one capture, guard on", inCapture, "on", true},
		{"one capture, guard off", inCapture, "off", false},
		{"replay then eager, guard on", replayThenEager, "on", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := strings.NewReplacer("GUARD", tt.guard, "SHAPE", tt.shape).Replace(guardContexts)
			sc, err := scenarios.Load("g.yaml", []byte(src))
			require.NoError(t, err, src)
			rep, err := check.RunVariant(sc, sc.Variants[0], check.Options{})
			require.NoError(t, err)
			if tt.ok {
				require.Equal(t, check.OK, rep.Verdict, "%v", rep.Findings)
			} else {
				require.Contains(t, []string{check.Race, check.Mismatch, check.Corruption}, rep.Verdict, "%v", rep.Findings)
			}
		})
	}
}
