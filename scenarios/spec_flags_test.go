package scenarios_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios"
)

// carFile is a one-shot custom all-reduce written with flag ops, called
// twice on two ranks: copy the input into this rank's slot of the staging
// allocation, a start barrier (put a colour into every rank's flag, await
// every rank's colour), reduce every rank's copy, and optionally an exit
// barrier. Rank 1 leaves the start barrier 10µs late (its time:), so
// without an exit barrier rank 0's second copy lands under rank 1's first
// reduction. slot2 is the staging slot of the second call (0: one staging
// slot, 1: double buffering); mode and register place the registration.
func carFile(exit bool, slot2 int, mode, register string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `name: car
ranks: 2
mode: %s
knobs: {budget: 0}
symmetric:
  - {name: stage, ranks: all, chunks: 4, registration: op}
  - {name: sig, ranks: all, chunks: 2}
  - {name: esig, ranks: all, chunks: 2}
tensors:
  - {name: x1, bytes: 4096, chunks: 2, init_per_rank: [[1, 2], [10, 20]]}
  - {name: x2, bytes: 4096, chunks: 2, init_per_rank: [[3, 4], [30, 40]]}
  - {name: y1, bytes: 4096, chunks: 2, output: true}
  - {name: y2, bytes: 4096, chunks: 2, output: true}
programs:
`, mode)
	for r := range 2 {
		late := ""
		if r == 1 {
			late = ", time: 10us"
		}
		fmt.Fprintf(&b, "  - ranks: %d\n    ops:\n", r)
		if register == "first" {
			b.WriteString("      - {register: stage}\n")
		}
		for call, slot := range []int{0, slot2} {
			c := call + 1
			fmt.Fprintf(&b, "      - {kernel: copy%d, reads: [x%d], writes: [\"stage[%d]\"], weight: 1}\n", c, c, slot)
			fmt.Fprintf(&b, "      - {put: start%d, flag: sig, peer: all, at: me, value: %d}\n", c, c)
			fmt.Fprintf(&b, "      - {await: wstart%d, flag: sig, at: all, until: ge, value: %d%s}\n", c, c, late)
			fmt.Fprintf(&b, "      - {kernel: reduce%d, reads: [\"stage@all[%d]\"], writes: [y%d], weight: 1, time: 2us}\n", c, slot, c)
			if exit {
				fmt.Fprintf(&b, "      - {put: end%d, flag: esig, peer: all, at: me, value: %d}\n", c, c)
				fmt.Fprintf(&b, "      - {await: wend%d, flag: esig, at: all, until: ge, value: %d}\n", c, c)
			}
		}
		if register == "last" {
			b.WriteString("      - {register: stage}\n")
		}
	}
	b.WriteString("variants:\n  - {name: v}\n")
	return b.String()
}

// TestFlagProtocols: the verdicts of a custom all-reduce follow its
// protocol, through the flags' values, the happens-before edges a wait
// acquires, and the mapping of peer memory: an exit barrier (or a second
// staging slot) keeps a fast rank's next copy off a slot its peer still
// reads; without either the slow rank reduces the next call's data; a
// peer's copy is reachable only once registered (eagerly: before the
// access; in a graph: anywhere in the capture).
func TestFlagProtocols(t *testing.T) {
	tests := []struct {
		name     string
		exit     bool
		slot2    int
		mode     string
		register string
		want     string
	}{
		{"exit barrier", true, 0, "graph", "first", "ok"},
		{"no exit barrier, one staging slot", false, 0, "graph", "first", "corruption"},
		{"no exit barrier, double buffering", false, 1, "graph", "first", "ok"},
		{"graph registers when capture ends", true, 0, "graph", "last", "ok"},
		{"graph never registered", true, 0, "graph", "none", "invalid-access"},
		{"eager registered first", true, 0, "eager", "first", "ok"},
		{"eager registered after use", true, 0, "eager", "last", "invalid-access"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := carFile(tt.exit, tt.slot2, tt.mode, tt.register)
			sc, err := scenarios.Load("car.yaml", []byte(src))
			require.NoError(t, err, src)
			rep, err := check.RunVariant(sc, sc.Variants[0], check.Options{})
			require.NoError(t, err)
			require.Equal(t, tt.want, rep.Verdict, "%v\n%s", rep.Findings, src)
			if tt.want == "corruption" {
				races := 0
				for _, f := range rep.Findings {
					if f.Kind == check.Race && strings.Contains(f.Message, `symmetric buffer "stage"`) {
						races++
					}
				}
				require.NotZero(t, races, "the overwrite is also an unordered write/read: %v", rep.Findings)
			}
		})
	}
}

// TestFlagRegistrationAtReplay: a kernel captured in a capture block
// resolves its peer addresses when the graph is replayed, so the register
// that maps them must come before the replay, not before the capture: a
// replay issued before it is an invalid access, one after it is not.
func TestFlagRegistrationAtReplay(t *testing.T) {
	file := func(ops string) string {
		return `name: at-replay
ranks: 2
mode: graph
knobs: {budget: 0}
symmetric:
  - {name: hidden, ranks: all, chunks: 2, registration: op}
  - {name: sig, ranks: all, chunks: 2}
tensors:
  - {name: x, bytes: 4096, chunks: 2, init_per_rank: [[1, 2], [10, 20]]}
  - {name: out, bytes: 4096, chunks: 2, output: true}
programs:
  - ranks: all
    ops:
      - capture: g
        ops:
          - {kernel: o_proj, reads: [x], writes: [hidden], weight: 1}
          - {put: start, flag: sig, peer: all, at: me, value: 1}
          - {await: start_wait, flag: sig, at: all, until: ge, value: 1}
          - {kernel: reduce, reads: ["hidden@all"], writes: [out], weight: 1}
` + ops + `variants:
  - {name: v}
`
	}
	tests := []struct{ name, ops, want string }{
		{"register after capture, before replay", "      - {register: hidden}\n      - {replay: g}\n", "ok"},
		{"replay before register", "      - {replay: g}\n      - {register: hidden}\n", "invalid-access"},
		{"never registered", "      - {replay: g}\n", "invalid-access"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := file(tt.ops)
			sc, err := scenarios.Load("at-replay.yaml", []byte(src))
			require.NoError(t, err, src)
			rep, err := check.RunVariant(sc, sc.Variants[0], check.Options{})
			require.NoError(t, err)
			require.Equal(t, tt.want, rep.Verdict, "%v\n%s", rep.Findings, src)
		})
	}
}
