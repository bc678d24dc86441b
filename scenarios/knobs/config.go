package knobs

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/streamsched"
)

// Config is every knob a scenario understands. Each field but FineSteps
// has a key for --set key=value; [Config.Keys] lists them in a fixed order.
type Config struct {
	TP        int    `json:"tp"`
	DP        int    `json:"dp,omitempty"` // data-parallel replicas: world size is TP·DP
	Arch      string `json:"arch"`
	Mode      string `json:"mode"`  // graph | eager
	Phase     string `json:"phase"` // decode | prefill
	Strategy  string `json:"strategy"`
	Workspace string `json:"workspace"` // shared | per-call
	Placement string `json:"placement"`
	Order     string `json:"order"`  // shared-first | routed-first
	Shared    string `json:"shared"` // none | plain | trailing | mid
	Layers    int    `json:"layers"`
	Replays   int    `json:"replays"`
	Tokens    int64  `json:"tokens"`
	Hidden    int64  `json:"hidden"`
	Chunks    int    `json:"chunks"`
	Seed      uint64 `json:"seed,string"` // a string: JSON readers round numbers above 2^53
	Budget    int    `json:"budget"`

	// Knobs of the collective-family scenarios (family_knobs.go).
	Issue     string `json:"issue,omitempty"`
	NCCLOrder string `json:"nccl_order,omitempty"`
	// NCCLCoresident is "on" where NCCL kernels of different communicators
	// may run together on a GPU (collectives.Comm.Coresident).
	NCCLCoresident string `json:"nccl_coresident,omitempty"`
	// SymmGuard is "on" for PyTorch's GroupStreamGuard (symmguard.go).
	SymmGuard string `json:"symm_guard,omitempty"`
	Blocks    int    `json:"blocks,omitempty"`
	Engines   string `json:"engines,omitempty"`
	// SMs overrides the profile's SM count for residency (0: the profile's).
	SMs int `json:"sms,omitempty"`
	// Patch names the variant whose patch the programs of a scenario file
	// take (the format's patches, scenarios/format/spec_patch.go); empty: the file's own programs.
	Patch string `json:"patch,omitempty"`
	// Params holds the knobs a scenario file declares itself (params:), as
	// name=value pairs joined by commas in declaration order
	// (scenarios/format/spec_params.go; [Config.Param]).
	Params string `json:"params,omitempty"`
	// Jitter is the duration noise exploration draws from (hostcost.go):
	// "measured" (the default: the H200's measured spread of kernel
	// durations and host issue costs, validation/durations.py), "measured:F"
	// (that spread widened F times) or "wide" (×0.25 to ×5, to look
	// past the hardware's noise on purpose).
	Jitter string `json:"jitter,omitempty"`
	// Bug holds the knobs of the bug-class built-ins (family.go).
	Bug BugKnobs `json:"bug,omitzero"`
	// FineSteps builds every world with [ranks.Config.FineSteps]: every
	// micro-op an event of its own, no coarse collective steps. It is not
	// a knob (a scenario file cannot set it) but the command line's
	// --fine-steps (scenarios.Scenario.WithFineSteps): verdicts, findings, times
	// and values are the same either way, the trace hash and step count
	// differ where a call would have run coarse.
	FineSteps bool `json:"fine_steps,omitempty"`
}

// ErrBadKnob wraps every knob error.
var ErrBadKnob = errors.New("bad knob")

type knob struct {
	key  string
	help string
	set  func(c *Config, v string) error
	get  func(c *Config) string
}

func intKnob(key, help string, lo, hi int, f func(*Config) *int) knob {
	return knob{key, help, func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("%w: %s=%q: want an integer in [%d, %d]", ErrBadKnob, key, v, lo, hi)
		}
		*f(c) = n
		return nil
	}, func(c *Config) string { return strconv.Itoa(*f(c)) }}
}

func int64Knob(key, help string, lo, hi int64, f func(*Config) *int64) knob {
	return knob{key, help, func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("%w: %s=%q: want an integer in [%d, %d]", ErrBadKnob, key, v, lo, hi)
		}
		*f(c) = n
		return nil
	}, func(c *Config) string { return strconv.FormatInt(*f(c), 10) }}
}

func enumKnob(key, help string, vals []string, f func(*Config) *string) knob {
	enumValues[key] = vals
	return knob{key, help, func(c *Config, v string) error {
		for _, x := range vals {
			if x == v {
				*f(c) = v
				return nil
			}
		}
		return fmt.Errorf("%w: %s=%q: want one of %s", ErrBadKnob, key, v, strings.Join(vals, ", "))
	}, func(c *Config) string { return *f(c) }}
}

var knobs = []knob{
	intKnob("tp", "tensor-parallel world size", 1, 1024, func(c *Config) *int { return &c.TP }),
	intKnob("dp", "data-parallel replicas of the TP group (world size tp·dp)", 1, 1024, func(c *Config) *int { return &c.DP }),
	enumKnob("arch", "hardware: sm80/a100, sm90/h100, h200, sm100/b200", []string{"sm90", "sm100", "h100", "h200", "b200", "sm80", "a100"}, func(c *Config) *string { return &c.Arch }),
	enumKnob("mode", "graph (CUDA-graph replay) or eager", []string{"graph", "eager"}, func(c *Config) *string { return &c.Mode }),
	enumKnob("phase", "decode (monolithic graph, multi-stream on) or prefill (piecewise path, stream helpers disabled)", []string{"decode", "prefill"}, func(c *Config) *string { return &c.Phase }),
	enumKnob("strategy", "all-reduce strategy", []string{"auto", "nccl", "multimem", "p2p-oneshot", "nccl-tree", "multimem-twoshot", "p2p-twoshot"}, func(c *Config) *string { return &c.Strategy }),
	enumKnob("workspace", "symmetric workspace per communicator (shared) or per call", []string{"shared", "per-call"}, func(c *Config) *string { return &c.Workspace }),
	enumKnob("placement", "stream placement transform", []string{"single", "buggy", "fixed", "fixed-overlap"}, func(c *Config) *string { return &c.Placement }),
	enumKnob("order", "which branch the framework issues first", []string{"shared-first", "routed-first"}, func(c *Config) *string { return &c.Order }),
	enumKnob("shared", "shared-expert branch shape", []string{"none", "plain", "trailing", "mid"}, func(c *Config) *string { return &c.Shared }),
	intKnob("layers", "MoE layers", 1, 256, func(c *Config) *int { return &c.Layers }),
	intKnob("replays", "graph replays", 1, 64, func(c *Config) *int { return &c.Replays }),
	int64Knob("tokens", "tokens per step", 1, 1<<20, func(c *Config) *int64 { return &c.Tokens }),
	int64Knob("hidden", "hidden size", 1, 1<<20, func(c *Config) *int64 { return &c.Hidden }),
	intKnob("chunks", "value chunks per tensor", 1, 64, func(c *Config) *int { return &c.Chunks }),
	{"seed", "exploration seed", func(c *Config, v string) error {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: seed=%q: want a non-negative integer", ErrBadKnob, v)
		}
		c.Seed = n
		return nil
	}, func(c *Config) string { return strconv.FormatUint(c.Seed, 10) }},
	intKnob("budget", "random schedules explored per variant besides the nominal one", 0, 1000000, func(c *Config) *int { return &c.Budget }),
}

// Set sets knob key to value.
func (c *Config) Set(key, value string) error {
	key = Canonical(key)
	for _, k := range knobs {
		if k.key == key {
			return k.set(c, value)
		}
	}
	if _, ok := c.Param(key); ok {
		return c.setParam(key, value)
	}
	keys := make([]string, len(knobs))
	for i, k := range knobs {
		keys[i] = k.key
	}
	return fmt.Errorf("%w: unknown key %q (known: %s)", ErrBadKnob, key, strings.Join(keys, ", "))
}

// fileSpellings are the knobs a scenario file writes at its top level
// under another name: a --set or a variant's set: may use either.
var fileSpellings = map[string]string{"ranks": "tp", "hardware": "arch"}

// Canonical is the knob key a --set key names: tp for ranks, arch for
// hardware (a file's top-level spellings), any other key as it is.
func Canonical(key string) string {
	if k, ok := fileSpellings[key]; ok {
		return k
	}
	return key
}

// ApplySets applies "key=value" strings in order.
func (c *Config) ApplySets(sets []string) error {
	for _, s := range sets {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return fmt.Errorf("%w: %q: want key=value", ErrBadKnob, s)
		}
		if err := c.Set(strings.TrimSpace(k), strings.TrimSpace(v)); err != nil {
			return err
		}
	}
	return nil
}

// Help lists the knobs with their help text, in one column, and the
// values of an enumerated knob whose help does not name them all.
func Help() string {
	w := 0
	for _, k := range knobs {
		w = max(w, len(k.key))
	}
	var b strings.Builder
	for _, k := range knobs {
		help := k.help
		if vs := enumValues[k.key]; len(vs) > 0 {
			missing := false
			for _, v := range vs {
				missing = missing || !strings.Contains(help, v)
			}
			if missing {
				help += " (" + strings.Join(vs, ", ") + ")"
			}
		}
		fmt.Fprintf(&b, "  %-*s %s\n", w, k.key, help)
	}
	return b.String()
}

// Summary is a one-line description of the main knobs.
func (c *Config) Summary() string {
	if c.Issue != "" || c.Engines != "" {
		return c.familySummary()
	}
	return fmt.Sprintf("tp=%d arch=%s mode=%s phase=%s strategy=%s workspace=%s placement=%s layers=%d", c.TP, c.Arch, c.Mode, c.Phase, c.Strategy, c.Workspace, c.Placement, c.Layers)
}

// World is the number of ranks: TP·DP.
func (c *Config) World() int { return c.TP * max(c.DP, 1) }

// Profile is the hardware profile of c.Arch, with c.SMs SMs when set.
func (c *Config) Profile() (ranks.Profile, error) {
	p, err := ranks.ProfileFor(c.Arch)
	if err == nil && c.SMs > 0 {
		p.SMs = c.SMs
	}
	return p, err
}

// ParsedStrategy is c.Strategy as the collectives package's strategy.
func (c *Config) ParsedStrategy() (collectives.Strategy, error) {
	return collectives.ParseStrategy(c.Strategy)
}

// ParsedPlacement is c.Placement as streamsched's placement transform.
func (c *Config) ParsedPlacement() (streamsched.Placement, error) {
	return streamsched.ParsePlacement(c.Placement)
}

// UnmarshalJSON reads a Config as MarshalJSON's default writes it, and a
// seed written as a bare number, as shard files and witnesses of earlier
// versions hold it (the CLI reads them: docs/cli.md, merge).
func (c *Config) UnmarshalJSON(b []byte) error {
	type plain Config // without this method
	aux := struct {
		*plain
		Seed json.RawMessage `json:"seed"`
	}{plain: (*plain)(c)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	if aux.Seed == nil {
		return nil
	}
	t := strings.TrimSpace(string(aux.Seed))
	if u, err := strconv.Unquote(t); err == nil {
		t = u
	}
	v, err := strconv.ParseUint(t, 10, 64)
	if err != nil {
		return fmt.Errorf("seed %s: want a non-negative 64-bit integer, as a decimal string or number", aux.Seed)
	}
	c.Seed = v
	return nil
}
