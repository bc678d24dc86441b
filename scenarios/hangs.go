package scenarios

import (
	"fmt"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// The ordering-rule scenarios: NCCL matches calls on a communicator by issue
// order and carries no operation identity (usage/collectives.rst: every rank
// must call with the same count and datatype, "failure to do so will result
// in undefined behavior, including hangs, crashes, or data corruption");
// several communicators need a consistent global order unless
// NCCL_LAUNCH_ORDER_IMPLICIT orders them by host program order
// (usage/communicators.rst, NCCL ≥ 2.26); symmetric-memory kernels pair
// through signal-pad slots blockIdx·ws + rank (torch
// CUDASymmetricMemory-inl.h sync_remote_blocks), so their device order must
// match their group issue order (PyTorch issue #189228).

func init() {
	Register(&Scenario{
		Name: "nccl-order-mismatch",
		Description: `Rank-divergent calls on one NCCL communicator mix data or hang. NCCL pairs the
k-th call of every rank with no operation identity, so swapped calls of equal
size mix data (mismatch, corruption), and calls that differ in count or op at
the same sequence number leave one side waiting for messages that never come
(hang).`,
		Base: Config{TP: 4, Arch: "sm100", Mode: "eager", Strategy: "nccl", Issue: "consistent", Chunks: 4, Seed: 1, Budget: 20},
		Variants: []Variant{
			{Name: "consistent", Expect: "ok", Doc: "every rank issues X then Y"},
			{Name: "swapped", Sets: []string{"issue=swapped"}, Expect: "corruption", Doc: "odd ranks issue Y then X; equal sizes: the calls pair with each other's data"},
			{Name: "count-differs", Sets: []string{"issue=count-differs"}, Expect: "hang", Doc: "odd ranks pass X a 4× larger count: more pipeline pieces per step than even ranks send"},
			{Name: "op-differs", Sets: []string{"issue=op-differs"}, Expect: "hang", Doc: "odd ranks call all-gather where even ranks call all-reduce: n−1 steps against 2(n−1)"},
		},
		Build: buildOrderMismatch,
	})
	Register(&Scenario{
		Name: "symm-block-mismatch",
		Description: `Two symmetric-memory all-reduces on one workspace and signal pad, reached in
different orders on different ranks (PyTorch #189228: device order must match
group issue order). Their barriers pair across ranks through the pad slots
blockIdx·ws + rank: with equal grid sizes the calls pass each other's barriers
and reduce each other's data (corruption); with different grid sizes a slot
stays unpaired and both wait forever (hang).`,
		Base: Config{TP: 4, Arch: "sm100", Mode: "eager", Strategy: "multimem", Issue: "consistent", Blocks: 2, Chunks: 4, Seed: 1, Budget: 20},
		Variants: []Variant{
			{Name: "same-order", Expect: "ok", Doc: "every rank runs X (1 block) then Y (2 blocks)"},
			{Name: "swapped-equal", Sets: []string{"issue=swapped", "blocks=1"}, Expect: "corruption", Doc: "odd ranks run Y first; both 1 block"},
			{Name: "swapped-differ", Sets: []string{"issue=swapped", "blocks=2"}, Expect: "hang", Doc: "odd ranks run Y first; X has 1 block, Y 2: slot ws+rank is never paired"},
		},
		Build: buildBlockMismatch,
	})
}

func planMode(cfg Config) ranks.Mode {
	if cfg.Mode == "graph" {
		return ranks.Graph
	}
	return ranks.Eager
}

func allRanks(n int) []int {
	g := make([]int, n)
	for i := range g {
		g[i] = i
	}
	return g
}

func concreteStrategy(cfg Config, hw ranks.Profile, n int, bytes int64) (collectives.Strategy, error) {
	s, err := cfg.strategy()
	if err != nil {
		return "", err
	}
	return collectives.Resolve(s, hw.Arch, n, bytes), nil
}

func needTP(cfg Config, lo int) error {
	if cfg.TP < lo {
		return fmt.Errorf("%w: tp=%d: this scenario needs at least %d ranks", ErrBadKnob, cfg.TP, lo)
	}
	return nil
}

// hangSetup is what every scenario of this file starts with: the hardware
// profile, at least two ranks, and the strategy its all-reduces of bytes
// resolve to.
func hangSetup(cfg Config, bytes int64) (ranks.Profile, collectives.Strategy, error) {
	hw, err := cfg.Profile()
	if err != nil {
		return hw, "", err
	}
	if err := needTP(cfg, 2); err != nil {
		return hw, "", err
	}
	s, err := concreteStrategy(cfg, hw, cfg.TP, bytes)
	return hw, s, err
}

func buildOrderMismatch(cfg Config, opt BuildOptions, eng *sim.Engine) (*Built, error) {
	const MiB = 1 << 20
	hw, s, err := hangSetup(cfg, MiB)
	if err != nil {
		return nil, err
	}
	n := cfg.TP
	p := &collPlan{n: n, replays: cfg.Replays, streams: []string{"main"}, comms: []commSpec{{name: "tp", group: allRanks(n), strategy: s}}}
	for r := range n {
		x := cstep{name: "X", comm: "tp", op: collectives.AllReduce, bytes: MiB, chunks: cfg.Chunks}
		y := cstep{name: "Y", comm: "tp", op: collectives.AllReduce, bytes: MiB, chunks: cfg.Chunks}
		odd := r%2 == 1
		if odd && cfg.Issue == "count-differs" {
			x.bytes = 4 * MiB
		}
		if cfg.Issue == "op-differs" {
			// One piece per ring step for both ops at this size, so the
			// step counts differ: n−1 against 2(n−1).
			x.bytes = MiB / 4
			if odd {
				x.op = collectives.AllGather
			}
		}
		prog := []cstep{x, y}
		if odd && cfg.Issue == "swapped" {
			prog = []cstep{y, x}
		}
		p.progs = append(p.progs, prog)
		p.ref = append(p.ref, []cstep{x, y})
	}
	b, err := p.build(hw, opt, eng, planMode(cfg))
	if err != nil {
		return nil, err
	}
	b.Notes = append(b.Notes, fmt.Sprintf("X, Y → %s on communicator tp (%d ranks)", s, n))
	return b, nil
}

func buildBlockMismatch(cfg Config, opt BuildOptions, eng *sim.Engine) (*Built, error) {
	const bytes = 256 << 10
	hw, s, err := hangSetup(cfg, bytes)
	if err != nil {
		return nil, err
	}
	n := cfg.TP
	p := &collPlan{n: n, replays: cfg.Replays, streams: []string{"main"}, comms: []commSpec{{name: "tp", group: allRanks(n), strategy: s}}}
	for r := range n {
		x := cstep{name: "X", comm: "tp", op: collectives.AllReduce, bytes: bytes, chunks: cfg.Chunks, blocks: 1}
		y := cstep{name: "Y", comm: "tp", op: collectives.AllReduce, bytes: bytes, chunks: cfg.Chunks, blocks: max(1, cfg.Blocks)}
		prog := []cstep{x, y}
		if r%2 == 1 && cfg.Issue == "swapped" {
			prog = []cstep{y, x}
		}
		p.progs = append(p.progs, prog)
		p.ref = append(p.ref, []cstep{x, y})
	}
	b, err := p.build(hw, opt, eng, planMode(cfg))
	if err != nil {
		return nil, err
	}
	b.Notes = append(b.Notes, fmt.Sprintf("X (1 block), Y (%s) → %s over one workspace and signal pad", plural(max(1, cfg.Blocks), "block"), s))
	return b, nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
