package collectives

import "github.com/collsim/collsim/ranks"

// ResolveOp turns Auto into a concrete strategy for op on a group of n ranks
// of hardware hw. All-reduce first follows [Resolve] (symmetric memory where
// TensorRT-LLM enables it). Where that gives NCCL, and for every other op,
// the NCCL algorithm is the one with the least α–β time ([Cost]) among
// those that implement op, as NCCL's tuner picks the minimum estimated time
// over algorithms (src/graph/tuning.cc ncclTopoGetAlgoTime, src/enqueue.cc
// topoGetAlgoInfo). A concrete s is returned as is.
func ResolveOp(op Op, s Strategy, hw ranks.Profile, n int, bytes int64) Strategy {
	if s != Auto {
		return s
	}
	if op == AllReduce {
		if r := Resolve(s, hw.Arch, n, bytes); r != NCCL {
			return r
		}
	}
	best, bestT := NCCL, int64(-1)
	for _, cand := range []Strategy{NCCL, NCCLTree} {
		if !Supports(op, cand) {
			continue
		}
		t, err := Cost(op, cand, n, bytes, 1, hw)
		if err != nil {
			continue
		}
		if bestT < 0 || int64(t) < bestT {
			best, bestT = cand, int64(t)
		}
	}
	return best
}
