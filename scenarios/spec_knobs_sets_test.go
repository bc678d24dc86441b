package scenarios_test

import (
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/scenarios"
)

// TestVariantConfigRefusesUnreadSets: a command line's --set extras pass
// through Scenario.VariantConfig, which refuses a knob the scenario's form
// does not read (naming the knob, the form and the knobs it reads), for
// built-ins and files alike; a read knob, a knob every form reads, an unread
// knob at its default value and a file-declared param are accepted.
func TestVariantConfigRefusesUnreadSets(t *testing.T) {
	data, err := os.ReadFile("testdata/ok/lifetime-params.yaml")
	require.NoError(t, err)
	file, err := scenarios.Load("lifetime-params.yaml", data)
	require.NoError(t, err)
	// every allocation fixes its own pad: the pad knob is read by the
	// form but changes nothing, and the message says why (issue 27 item
	// 10: it used to say "not read by this file's form")
	padFixed, err := scenarios.Load("pad-fixed.yaml", []byte(`name: pad-fixed
ranks: 2
communicators: [{name: w, ranks: all}]
symmetric:
  - {name: symm, ranks: all, chunks: 4, pad: allocation}
tensors:
  - {name: x, bytes: 4096, chunks: 2, init: [1, 2]}
  - {name: y, bytes: 4096, chunks: 2, output: true}
programs:
  - ranks: all
    streams: [main]
    ops:
      - {allreduce: ar, comm: w, in: x, out: y, symmetric: symm}
variants:
  - {name: base}
`))
	require.NoError(t, err)
	builtin := func(name string) *scenarios.Scenario {
		sc, ok := scenarios.Lookup(name)
		require.True(t, ok, name)
		return sc
	}
	tests := []struct {
		name    string
		sc      *scenarios.Scenario
		set     string
		wantErr string // "" for accepted
	}{
		{"moe reads layers", builtin("tp8-shared-expert"), "layers=2", ""},
		{"moe reads dp", builtin("tp8-shared-expert"), "dp=2", ""},
		{"moe ignores engines", builtin("tp8-shared-expert"), "engines=fused",
			`engines=fused: knob "engines" is not read by scenario tp8-shared-expert's form (graph builder moe), so it would change nothing; knobs it reads: arch, budget, chunks, dp, hidden, jitter, layers, mode, order, phase, placement, replays, seed, shared, sms, strategy, symm-guard, tokens, tp, workspace`},
		{"programs read every common knob", builtin("symm-pad-aliasing"), "seed=7", ""},
		{"programs ignore placement", builtin("symm-pad-aliasing"), "placement=buggy",
			`placement=buggy: knob "placement" is not read by scenario symm-pad-aliasing's form (programs)`},
		{"programs ignore dp", builtin("symm-pad-aliasing"), "dp=2", `knob "dp" is not read`},
		{"unread knob at its default", builtin("symm-pad-aliasing"), "placement=single", ""},
		{"file reads caching (it allocates)", file, "caching=off", ""},
		{"file ignores shared", file, "shared=mid", `shared=mid: knob "shared" is not read by scenario lifetime-params's form (programs)`},
		{"file-declared param", file, "fix=join", ""},
		{"file-declared repeat count", file, "gates=2", ""},
		{"pad fixed by every allocation", padFixed, "pad=per-group",
			`knob "pad" would change nothing: every symmetric allocation of this file fixes its own pad scope ("symm" (pad: allocation, line 5)); leave pad: out of an allocation for the knob to choose it`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.sc.Variants[0]
			_, err := tt.sc.VariantConfig(v, []string{tt.set})
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.True(t, errors.Is(err, scenarios.ErrBadKnob), "%v", err)
			require.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

// TestSetTakesTheFileSpellings: --set ranks=N and --set hardware=H do what
// a variant's set: {ranks: N} does (the file's top-level spellings of tp
// and arch), where they were refused as unknown keys.
func TestSetTakesTheFileSpellings(t *testing.T) {
	sc, ok := scenarios.Lookup("symm-pad-aliasing")
	require.True(t, ok)
	v := sc.Variants[0]
	for _, tt := range []struct{ file, knob string }{{"ranks=4", "tp=4"}, {"hardware=h100", "arch=h100"}} {
		got, err := sc.VariantConfig(v, []string{tt.file})
		require.NoError(t, err, tt.file)
		want, err := sc.VariantConfig(v, []string{tt.knob})
		require.NoError(t, err, tt.knob)
		require.Equal(t, want, got, "%s is %s", tt.file, tt.knob)
	}
}
