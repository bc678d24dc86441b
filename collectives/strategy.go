package collectives

import (
	"fmt"

	"github.com/collsim/collsim/mutant"
)

// Strategy is how an all-reduce is implemented.
type Strategy string

const (
	// Auto picks like TensorRT-LLM: MULTIMEM where symmetric memory supports
	// the world size and arch and the message fits, otherwise NCCL.
	Auto Strategy = "auto"
	// NCCL is the ring all-reduce with NCCL's per-communicator ordering.
	NCCL Strategy = "nccl"
	// Multimem is the NVLink-multicast one-shot all-reduce over the shared
	// symmetric workspace.
	Multimem Strategy = "multimem"
	// P2POneShot reads every peer's copy of the workspace (no multicast).
	P2POneShot Strategy = "p2p-oneshot"
)

// ParseStrategy parses a strategy name.
func ParseStrategy(s string) (Strategy, error) {
	switch Strategy(s) {
	case Auto, NCCL, Multimem, P2POneShot, NCCLTree, MultimemTwoShot, P2PTwoShot:
		return Strategy(s), nil
	}
	return "", fmt.Errorf("unknown strategy %q (want auto, nccl, nccl-tree, multimem, p2p-oneshot, multimem-twoshot or p2p-twoshot)", s)
}

// multimemWorldSizes is where MULTIMEM is enabled, by arch.
// Source: tensorrt_llm/_torch/distributed/symm_mem_allreduce.py,
// _WORLD_SIZES_MULTIMEM = {"9.0": [4, 6, 8], "10.0": [6, 8]}.
var multimemWorldSizes = map[string][]int{
	"sm90":  {4, 6, 8},
	"sm100": {6, 8},
}

// multimemMaxBytes is the symmetric workspace size cap by world size.
// Source: symm_mem_allreduce.py _MAX_SIZES (SM100): 2 → 8 MiB, 4 → 32 MiB,
// 6 and 8 → 128 MiB. The same table is used for SM90 here.
var multimemMaxBytes = map[int]int64{2: 8 << 20, 4: 32 << 20, 6: 128 << 20, 8: 128 << 20}

// Resolve turns Auto into a concrete strategy for a call of the given size on
// a group of worldSize ranks on arch. AllReduce.forward tries symmetric memory
// first (bytes % 4 == 0, bytes < max size) and falls back to AUTO, which
// TensorRT-LLM resolves to NCCL for these shapes (ops.py, allreduceOp.cpp).
func Resolve(s Strategy, arch string, worldSize int, bytes int64) Strategy {
	if s != Auto {
		return s
	}
	ok := false
	for _, n := range multimemWorldSizes[arch] {
		if n == worldSize {
			ok = true
		}
	}
	if ok && bytes%4 == 0 && (bytes < multimemMaxBytes[worldSize] || mutant.On(mutant.WorkspaceCapRemoved)) {
		return Multimem
	}
	return NCCL
}
