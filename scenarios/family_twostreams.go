package scenarios

import (
	"fmt"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

func init() {
	Register(&Scenario{
		Name: "symm-two-streams-one-group",
		Description: `PyTorch #189228: two symmetric-memory all-reduces of one process group issued
on two streams. Both synchronize through the group's one signal pad (slot
world_size·block + rank, nothing naming the op), so they "require the device
execution order of the ops to match their group issue order". With ranks skewed
(odd ranks have more work queued on the first stream) the device order differs
across ranks and one op's signals complete the other's waits: the ops pair up
across ranks and reduce each other's data. The report saw a hang; in this model
the pad alone does not hang (each slot gets as many signals as waits), so the
cross-paired ops finish on wrong data. Without skew the two still overlap on one
pad. On one stream, or with PyTorch's later GroupStreamGuard (PR #195947), they
run in issue order: ok. With a host stream synchronize after each and ranks
issuing the two in different orders, it hangs through the host threads.`,
		Base: Config{
			TP: 2, Arch: "sm90", Mode: "eager", Layers: 1, Replays: 1,
			Tokens: 8, Hidden: 4096, Chunks: 2, Seed: 1, Budget: 60,
			Bug: BugKnobs{Streams: "two", SkewNs: 30000, HostSync: "off", IssueOrder: "same", Pad: "per-group", StreamGuard: "off", Coresident: "one"},
		},
		Variants: []Variant{
			{Name: "buggy", Expect: "hang", Doc: "two streams, odd ranks skewed: device order differs across ranks; each GPU runs one spinning kernel, waiting for a peer that runs the other"},
			{Name: "co-resident", Sets: []string{"coresident=both"}, Expect: "corruption", Doc: "the same, but both kernels resident at once: signals cross-pair the two ops instead of deadlocking"},
			{Name: "no-skew", Sets: []string{"skew_ns=0", "coresident=both"}, Expect: "race|mismatch|corruption", Doc: "two streams, same device order, both kernels resident: the ops still overlap on one pad"},
			{Name: "one-stream", Sets: []string{"streams=one"}, Expect: "ok", Doc: "one stream per group: device order is issue order"},
			{Name: "stream-guard", Sets: []string{"stream_guard=on"}, Expect: "ok", Doc: "PyTorch PR #195947 GroupStreamGuard: a pad op on a new stream waits for the group's previous one"},
			{Name: "host-sync", Sets: []string{"streams=one", "skew_ns=0", "issue_order=differs", "host_sync=on"}, Expect: "hang", Doc: "odd ranks issue the two in the other order, each followed by a host stream synchronize: a cycle through the hosts"},
			{Name: "host-sync-same-order", Sets: []string{"streams=one", "skew_ns=0", "host_sync=on"}, Expect: "ok", Doc: "the same syncs with one issue order: every sync returns"},
		},
		Build: buildTwoStreams,
	})
}

// channelsFor is the block count of a one-shot kernel for bytes: one block
// per 32 KiB, at most 4 (PyTorch sizes the grid by numel).
func channelsFor(bytes int64) int { return int(min(4, max(1, bytes/(32<<10)))) }

func buildTwoStreams(cfg Config, opt BuildOptions, eng *sim.Engine) (*Built, error) {
	if cfg.TP < 2 {
		return nil, fmt.Errorf("%w: symm-two-streams-one-group needs tp ≥ 2, got tp=%d", ErrBadKnob, cfg.TP)
	}
	f, err := newFam(cfg, opt, eng, []string{"s1", "s2"}, []string{"guard"})
	if err != nil {
		return nil, err
	}
	f.forkJoin = true
	gridFill, err := ranks.ProfileFor(cfg.Arch) // the profile's own SM count, whatever sms= says
	if err != nil {
		return nil, err
	}
	C := cfg.Chunks
	group := collectives.Group{Name: "tp", Ranks: make([]int, cfg.TP)}
	for i := range group.Ranks {
		group.Ranks[i] = i
	}
	alloc, err := collectives.NewSymmAlloc(f.w, "tp.workspace", group.Ranks, 2*C, collectives.PadScope(cfg.Bug.Pad), f.hw)
	if err != nil {
		return nil, err
	}
	T, H := cfg.Tokens, cfg.Hidden
	type call struct {
		name   string
		bytes  int64
		stream int
	}
	calls := []call{{"ar_hidden", T * H * 2, 0}, {"ar_small", T * H / 4 * 2, 1}}
	if cfg.Bug.Streams == "one" {
		calls[1].stream = 0
	}
	b := &Built{World: f.w}
	for i, c := range calls {
		b.Notes = append(b.Notes, fmt.Sprintf("%s: %d B, %d block(s), signal slots %d..%d of the group's pad, stream %s", c.name, c.bytes, channelsFor(c.bytes),
			collectives.Slot(cfg.TP, 0, 0), collectives.Slot(cfg.TP, channelsFor(c.bytes)-1, cfg.TP-1), []string{"s1", "s2"}[calls[i].stream]))
	}
	for r := range cfg.TP {
		if r%2 == 1 && cfg.Bug.SkewNs > 0 {
			f.launch(r, 0, &ranks.KernelSpec{Name: "prior_work", Kind: "gemm", Instrs: []ranks.Instr{{Op: ranks.OpDelay, Phase: "gemm", Dur: sim.Time(cfg.Bug.SkewNs)}}})
		}
		order := []int{0, 1}
		if r%2 == 1 && cfg.Bug.IssueOrder == "differs" {
			order = []int{1, 0}
		}
		var cmp []*ranks.Buffer
		last := -1 // stream of the group's previous pad op (GroupStreamGuard)
		for l := range cfg.Layers {
			for _, i := range order {
				c := calls[i]
				name := c.name
				if cfg.Layers > 1 {
					name = fmt.Sprintf("L%d.%s", l, c.name)
				}
				in := f.w.Alloc(r, name+".in", c.bytes, C)
				f.w.Init(in, func(ch int) uint64 { return uint64(10*(r+1) + ch + 100*i + 1000*l) })
				out := f.w.Alloc(r, name+".out", c.bytes, C)
				k, err := alloc.OneShot(r, group, name, channelsFor(c.bytes), i*C, in, out)
				if err != nil {
					return nil, err
				}
				if cfg.Bug.Coresident == "one" {
					// A grid sized to fill the GPU: one block per SM of
					// the profile. It spins at its barriers holding them,
					// so the other one-shot kernel becomes resident only
					// when it ends (ranks/residency.go), unless --set sms=
					// gives the GPU room for both grids.
					k.Blocks = gridFill.SMs
				}
				if cfg.Bug.StreamGuard == "on" && last >= 0 && last != c.stream {
					// GroupStreamGuard: the new stream waits on the previous
					// pad op's completion event.
					f.record(r, last, 0)
					f.wait(r, c.stream, 0)
				}
				last = c.stream
				f.launch(r, c.stream, k)
				if cfg.Bug.HostSync == "on" {
					// out.item(): the host waits for the stream.
					f.progs[r].Ops = append(f.progs[r].Ops, ranks.HostOp{Kind: ranks.Sync, Stream: f.stream(c.stream)})
				}
				cmp = append(cmp, out)
			}
		}
		b.Compare = append(b.Compare, cmp)
	}
	f.finish()
	return b, nil
}
