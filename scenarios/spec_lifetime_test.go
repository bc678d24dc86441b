package scenarios_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/scenarios"
)

// lifetimeFile is aux-stream-lifetime in the file form: main allocates
// x_norm, aux reads it (late, after a long GEMM), main drops it and
// allocates rt_out of rtBytes. extra ops go right before the free; knobs
// holds the knobs line.
func lifetimeFile(extra, knobs string, rtBytes string) string {
	return `name: lifetime
ranks: 1
knobs: {budget: 3` + knobs + `}
tensors:
  - {name: x, bytes: 16384, init: [3, 4]}
  - {name: x_norm, bytes: 16384}
  - {name: sh_h, bytes: 16384}
  - {name: sh_g, bytes: 16384}
  - {name: rt_out, bytes: ` + rtBytes + `}
  - {name: out, bytes: 16384, output: true}
programs:
  - ranks: all
    streams: [main, aux]
    events: [fork, join]
    ops:
      - {alloc: x_norm}
      - {kernel: norm, reads: [x], writes: [x_norm], time: 1us}
      - {record: fork}
      - {wait: fork, stream: aux}
      - {alloc: sh_h, stream: aux}
      - {kernel: sh_up, stream: aux, reads: [x], writes: [sh_h], time: 20us}
      - {alloc: sh_g, stream: aux}
      - {kernel: sh_gate, stream: aux, reads: [x_norm, sh_h], writes: [sh_g], time: 2us}
      - {record: join, stream: aux}
` + extra + `      - {free: x_norm}
      - {alloc: rt_out}
      - {kernel: rt_scale, reads: [x], writes: [rt_out], time: 1us}
      - {wait: join}
      - {alloc: out}
      - {kernel: merge, reads: [rt_out, sh_g], writes: [out], time: 1us}
variants:
  - {name: v}
`
}

// TestProgramLifetime: the caching allocator's reuse of a freed block is a
// use after free when another stream still reads it, and each of PyTorch's
// remedies (record_stream, a join before the free, no caching, a request
// the freed block does not fit) makes it safe. The verdicts come from the
// allocator's block reuse: without alloc ops every tensor has its own
// memory and all five are ok.
func TestProgramLifetime(t *testing.T) {
	tests := []struct {
		name, extra, knobs, rt, want string
	}{
		{"buggy", "", "", "16384", "race|corruption"},
		{"record-stream", "      - {record_stream: x_norm, stream: aux}\n", "", "16384", "ok"},
		{"joined", "      - {wait: join}\n", "", "16384", "ok"},
		{"no-caching", "", ", caching: \"off\"", "16384", "ok"},
		// PyTorch puts a twice-as-large request over the freed block (it
		// merged with the free rest of its segment); a large-pool request
		// never lands in the small pool.
		{"larger-request", "", "", "32768", "race|corruption"},
		{"empty-cache", "      - {empty_cache: ec}\n", "", "16384", "ok"},
		{"large-pool-request", "", "", "2097152", "ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := lifetimeFile(tt.extra, tt.knobs, tt.rt)
			sc, err := scenarios.Load("lifetime.yaml", []byte(src))
			require.NoError(t, err, src)
			rep, err := check.RunVariant(sc, sc.Variants[0], check.Options{})
			require.NoError(t, err)
			require.True(t, check.Meets(rep.Verdict, tt.want), "got %s, want %s: %v", rep.Verdict, tt.want, rep.Findings)
			if tt.want != "ok" {
				require.True(t, strings.Contains(strings.Join(rep.Notes, "\n"), "reuses"), "the allocator note names the reuse: %v", rep.Notes)
			}
		})
	}
}
