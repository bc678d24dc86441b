package forms

import (
	"fmt"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/scenarios/knobs"
	"github.com/collsim/collsim/sim"
	"github.com/collsim/collsim/streamsched"
)

// PlaceGraph places g on streams as cfg says and picks how it runs: graph
// or eager mode, stream helpers on (decode) or off (prefill's piecewise
// path). The reference places every op on one stream, eager. BuildMoE,
// and scenario files with an op graph share it.
func PlaceGraph(cfg knobs.Config, opt check.BuildOptions, g *streamsched.Graph) (*streamsched.Schedule, ranks.Mode, bool, error) {
	place, err := cfg.ParsedPlacement()
	if err != nil {
		return nil, 0, false, err
	}
	mode := ranks.Graph
	if cfg.Mode == "eager" {
		mode = ranks.Eager
	}
	multi := cfg.Phase != "prefill"
	if opt.Reference {
		place, mode, multi = streamsched.Single, ranks.Eager, false
	}
	sched, err := streamsched.Place(g, place)
	return sched, mode, multi, err
}

// MoEGraph is the op graph of BuildMoE under cfg: cfg.Layers MoE layers
// shaped by tp, shared, order, tokens and hidden, on the communicator "tp".
func MoEGraph(cfg knobs.Config) *streamsched.Graph {
	return streamsched.BuildMoE(cfg.Layers, streamsched.MoEOptions{
		Tokens: cfg.Tokens, Hidden: cfg.Hidden,
		SharedInter: cfg.Hidden, ExpertInter: cfg.Hidden / 4, Experts: 128, TopK: 8,
		TP: int64(cfg.TP), Shared: streamsched.SharedKind(cfg.Shared), RoutedFirst: cfg.Order == "routed-first",
		Comm: "tp",
	})
}

// MoEWeight is the weight BuildMoE gives linear op on rank: a data-
// parallel replica holds the same weights as the first (a rank's shard is
// its place in its TP group).
func MoEWeight(cfg knobs.Config, op string, rank int) int64 {
	return streamsched.DefaultWeight(op, rank%max(cfg.TP, 1))
}

// BuildMoE builds a TP MoE scenario world from cfg: the op graph, the
// placement, communicators and lowering. It is the builder of
// tp8-shared-expert and of any scenario made of MoE layers.
func BuildMoE(cfg knobs.Config, opt check.BuildOptions, eng *sim.Engine) (*check.Built, error) {
	reference := opt.Reference
	hw, err := cfg.Profile()
	if err != nil {
		return nil, err
	}
	strat, err := cfg.ParsedStrategy()
	if err != nil {
		return nil, err
	}
	g := MoEGraph(cfg)
	sched, mode, multi, err := PlaceGraph(cfg, opt, g)
	if err != nil {
		return nil, err
	}
	if cfg.World() > 4096 {
		return nil, fmt.Errorf("%w: tp·dp = %d ranks; at most 4096", knobs.ErrBadKnob, cfg.World())
	}
	w := ranks.NewWorld(cfg.World(), knobs.WorldConfig(cfg, hw, ranks.Config{Mode: mode, Replays: cfg.Replays, Timeline: opt.Timeline, SMs: hw.SMs}), eng)
	w.SetIndependentReplays(true) // each replay a step on inputs of its own, checked on its own (ranks/replays.go)
	if opt.NoFold {
		w.NoFold()
	}
	ws := collectives.SharedWorkspace
	if cfg.Workspace == "per-call" {
		ws = collectives.PerCallWorkspace
	}
	// One TP communicator per data-parallel replica: ranks [d·tp, (d+1)·tp).
	tpComms := make([]*collectives.Comm, max(cfg.DP, 1))
	for d := range tpComms {
		group := make([]int, cfg.TP)
		for i := range group {
			group[i] = d*cfg.TP + i
		}
		name := "tp"
		if len(tpComms) > 1 {
			name = fmt.Sprintf("tp%d", d)
		}
		tpComms[d] = collectives.NewComm(w, name, group, ws, hw, cfg.Chunks)
		tpComms[d].StreamGuard = cfg.SymmGuard == "on"
	}
	commFor := func(name string, rank int) (*collectives.Comm, bool) {
		if name != "tp" {
			return nil, false
		}
		return tpComms[rank/cfg.TP], true
	}
	tp := cfg.TP
	lo, err := streamsched.Lower(w, g, sched, nil, streamsched.LowerConfig{HW: hw, MultiStream: multi, Strategy: strat, Chunks: cfg.Chunks, CommFor: commFor,
		// Data-parallel replicas hold the same weights (a rank's shard is
		// its place in its TP group) and run the same program on inputs of
		// their own: every replica runs the first one's, folded.
		Weight:   func(op string, rank int) int64 { return MoEWeight(cfg, op, rank) },
		FoldOnto: func(rank int) int { return rank % tp }})
	if err != nil {
		return nil, err
	}
	b := &check.Built{World: w}
	b.Compare = make([][]*ranks.Buffer, 0, cfg.World())
	for r := range cfg.World() {
		cmp := make([]*ranks.Buffer, 0, len(g.Ops))
		for _, op := range g.Ops {
			cmp = append(cmp, lo.Tensors.Of(r, op.Output))
		}
		b.Compare = append(b.Compare, cmp)
	}
	for _, op := range g.Ops {
		if s, ok := lo.Strategies[op.Name]; ok && op.Layer == 0 {
			b.Notes = append(b.Notes, fmt.Sprintf("%s → %s", op.Name, s))
		}
	}
	for _, l := range sched.Layers {
		if !l.Matched && l.Reason != "" && !reference {
			b.Notes = append(b.Notes, "transform skipped "+l.MoE+": "+l.Reason)
		}
	}
	return b, nil
}
