package scenarios_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/scenarios"
)

// TestCounterSlots: a slot taken from a device counter (COUNTER%SLOTS,
// ranks/slotindex.go) is the counter's first chunk, read when the kernel
// starts, modulo SLOTS.
//
//   - flag: a put at ctr%3 after k increments stores into slot k mod 3; an
//     await on slot 1 is met only when that is 1 (else it hangs).
//   - kernel: a kernel writes stage[ctr%3] while an unordered kernel on
//     another stream reads stage[0]: they race only when the write lands
//     in slot 0.
//   - read at start: the increment that picks the slot runs on another
//     stream with no order to the put: the put's load of the counter races
//     with it. An await that loaded slot 0 keeps polling slot 0 after the
//     counter moves on (a put into slot 1 does not meet it): a hang.
func TestCounterSlots(t *testing.T) {
	for _, tc := range []struct {
		name  string
		incs  int
		extra string // more ops, after the increments
		want  string
	}{
		{"flag/k=0", 0, "flag", "hang"},
		{"flag/k=1", 1, "flag", "ok"},
		{"flag/k=2", 2, "flag", "hang"},
		{"flag/k=4", 4, "flag", "ok"},
		{"kernel/k=0", 0, "kernel", "race|corruption"},
		{"kernel/k=1", 1, "kernel", "ok"},
		{"kernel/k=3", 3, "kernel", "race|corruption"},
		{"kernel/k=5", 5, "kernel", "ok"},
		{"unordered-increment", 1, "unordered", "race|corruption"},
		{"spin-keeps-its-slot", 0, "spin", "hang"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ops strings.Builder
			for range tc.incs {
				ops.WriteString("      - {increment: ctr}\n")
			}
			switch tc.extra {
			case "flag":
				ops.WriteString("      - {put: p, flag: flags, at: ctr%3, value: 7}\n")
				ops.WriteString("      - {await: w, flag: flags, at: 1, value: 7}\n")
			case "kernel":
				ops.WriteString("      - {record: fork}\n      - {wait: fork, stream: aux}\n")
				ops.WriteString("      - {kernel: writer, reads: [x], writes: [\"stage[ctr%3]\"], weight: 1, time: 5us}\n")
				ops.WriteString("      - {kernel: reader, stream: aux, reads: [\"stage[0]\"], writes: [y], weight: 1, time: 5us}\n")
			case "spin":
				ops.WriteString("      - {kernel: k0, reads: [x], writes: [y], weight: 1}\n")
				ops.WriteString("      - {record: fork}\n      - {wait: fork, stream: aux}\n")
				ops.WriteString("      - {await: w, flag: flags, at: ctr%3, value: 7}\n")
				ops.WriteString("      - {kernel: slow, stream: aux, reads: [x], writes: [z], weight: 1, time: 40us}\n")
				ops.WriteString("      - {increment: ctr, stream: aux}\n")
				ops.WriteString("      - {put: p, flag: flags, stream: aux, at: 1, value: 7}\n")
			case "unordered":
				ops.Reset()
				ops.WriteString("      - {record: fork}\n      - {wait: fork, stream: aux}\n")
				ops.WriteString("      - {increment: ctr, stream: aux, time: 5us}\n")
				ops.WriteString("      - {put: p, flag: flags, at: ctr%3, value: 7}\n")
			}
			src := fmt.Sprintf(`name: counter-slots
ranks: 1
hardware: h200
steps: carried
knobs: {budget: 4}
symmetric:
  - {name: stage, ranks: all, chunks: 6}
tensors:
  - {name: ctr, bytes: 4096, chunks: 1}
  - {name: flags, bytes: 4096, chunks: 3}
  - {name: x, bytes: 4096, chunks: 2, init: [1, 2]}
  - {name: y, bytes: 4096, chunks: 2, output: true}
  - {name: z, bytes: 4096, chunks: 2}
programs:
  - ranks: all
    streams: [main, aux]
    events: [fork]
    ops:
%svariants:
  - {name: v}
`, ops.String())
			sc, err := scenarios.Load("counter-slots.yaml", []byte(src))
			require.NoError(t, err, src)
			require.Contains(t, strings.Split(tc.want, "|"), runVerdict(t, sc, "v"), src)
		})
	}
}
