package collectives

import (
	"fmt"

	"github.com/collsim/collsim/ranks"
	"github.com/collsim/collsim/sim"
)

// Cost is the α–β time of one collective call with nothing else running:
// the time the micro-programs of [Comm.Collective] take on an idle machine,
// written out as a formula. n is the group size, bytes the per-rank input
// size (for all-gather the input block; for reduce-scatter and all-to-all
// the whole n-block input), blocks the grid size of symmetric kernels.
//
// Parameters come from the profile: α = StepLat (one NCCL step: a hop's
// latency), β = NVLink bytes/s per direction, HBM for local copies, SigLat/4
// per signal put or wait, KStart to start a kernel. The shapes are the
// textbook ones (Thakur, Rabenseifner and Gropp, "Optimization of Collective
// Communication Operations in MPICH", IJHPCA 2005; Patarasuk and Yuan,
// "Bandwidth optimal all-reduce algorithms for clusters of workstations",
// JPDC 2009; NCCL src/graph/tuning.cc ncclTopoGetAlgoTime: time = latency ×
// steps + bytes / bandwidth):
//
//	ring all-reduce      2(n−1)·(α + S/(nβ))          + copy-in
//	ring all-gather       (n−1)·(α + B/β)              + copy-in
//	ring reduce-scatter   (n−1)·(α + S/(nβ))           + copy-in + copy-out
//	all-to-all (p2p)      (n−1)·(α + S/(nβ))           + local block copy
//	ring broadcast        (n+p−2)·(α + S/(pβ))         + copy-in (p pieces, pipelined)
//	tree all-reduce       2·depth·(α + S/β)            + copy-in (depth = ⌊log2 n⌋)
//	symmetric one-shot    2 barriers + one pass over S (multicast) or (n−1)·S (P2P)
//	symmetric two-shot    3 barriers + two passes over S/n (multicast) or (n−1)·S/n (P2P)
//
// where a barrier is 2(n−1)·blocks signal operations and a step larger than
// an NCCL connection slot goes in p = ⌈step/slot⌉ pieces, each paying its
// own transfer time (α once per step).
func Cost(op Op, s Strategy, n int, bytes int64, blocks int, hw ranks.Profile) (sim.Time, error) {
	if n < 1 {
		return 0, fmt.Errorf("cost: group size %d; want ≥ 1", n)
	}
	if !Supports(op, s) {
		return 0, fmt.Errorf("cost: strategy %q does not implement %s", s, op)
	}
	blocks = max(blocks, 1)
	nb := int64(n)
	hbm := func(b int64) sim.Time { return ranks.Bytes(b, hw.HBM) }
	nvl := func(b int64) sim.Time { return ranks.Bytes(b, hw.NVLink) }
	// One ring step of b bytes in pieces: α + p·(b/p)/β.
	step := func(b int64) sim.Time {
		p := pieces(b)
		return hw.StepLat + sim.Time(p)*nvl(b/int64(p))
	}
	barrier := sim.Time(2*(n-1)*blocks) * (hw.SigLat / 4)
	mc := s == Multimem || s == MultimemTwoShot
	remote := func(b int64) sim.Time {
		if mc {
			return nvl(b)
		}
		return nvl(b * (nb - 1))
	}
	t := hw.KStart
	switch s {
	case NCCL:
		switch op {
		case AllReduce:
			t += hbm(bytes) + sim.Time(2*(n-1))*step(bytes/nb)
		case AllGather:
			t += hbm(bytes) + sim.Time(n-1)*step(bytes)
		case ReduceScatter:
			t += hbm(bytes) + sim.Time(n-1)*step(bytes/nb) + hbm(bytes/nb)
		case AllToAll:
			t += hbm(bytes/nb) + sim.Time(n-1)*step(bytes/nb)
		case Broadcast:
			p := pieces(bytes)
			if n > 1 {
				t += hbm(bytes) + sim.Time(n+p-2)*(hw.StepLat+nvl(bytes/int64(p)))
			} else {
				t += hbm(bytes)
			}
		}
	case NCCLTree:
		t += hbm(bytes) + sim.Time(2*treeDepth(n))*(hw.StepLat+nvl(bytes))
	default:
		switch op {
		case AllReduce:
			t += hbm(bytes) + 2*barrier
			if s == MultimemTwoShot || s == P2PTwoShot {
				t += 2*remote(bytes/nb) + barrier + hbm(bytes)
			} else {
				t += remote(bytes) + hbm(bytes)
			}
		case AllGather:
			if mc {
				t += nvl(bytes) + 2*barrier + hbm(bytes*nb)
			} else {
				t += hbm(bytes) + 2*barrier + nvl(bytes*(nb-1))
			}
		case ReduceScatter:
			t += hbm(bytes) + 2*barrier + remote(bytes/nb)
		case AllToAll:
			t += nvl(bytes/nb*(nb-1)) + 2*barrier + hbm(bytes)
		case Broadcast:
			stage := hbm(bytes)
			if mc {
				stage = nvl(bytes)
			}
			t += stage + 2*barrier + nvl(bytes)
		}
	}
	return t, nil
}
