package format

import (
	"strconv"

	"github.com/collsim/collsim/collectives"
	"github.com/collsim/collsim/ranks"
)

// What a file's names and calls mean, shared by the validator (which
// checks them under every variant's knobs) and the lowering (package
// scenarios, which builds them).

// Tensor returns the tensor named name, or nil.
func (s *Spec) Tensor(name string) *TensorSpec {
	for i := range s.Tensors {
		if s.Tensors[i].Name == name {
			return &s.Tensors[i]
		}
	}
	return nil
}

// CollOp is the collectives.Op of a collective op kind.
func CollOp(k OpKind) collectives.Op {
	switch k {
	case OpAllGather:
		return collectives.AllGather
	case OpReduceScatter:
		return collectives.ReduceScatter
	case OpAllToAll:
		return collectives.AllToAll
	case OpBroadcast:
		return collectives.Broadcast
	}
	return collectives.AllReduce
}

// CallStrategy is the concrete strategy of collective op on a group of n
// ranks under cfg: the op's own strategy, else the strategy knob; auto
// resolves as the libraries do. An all-reduce keeps TensorRT-LLM's choice
// (collectives.Resolve, by its output's size) as files always had it; the
// other collectives take NCCL's tuner choice (collectives.ResolveOp).
func CallStrategy(cfg Config, hw ranks.Profile, op *OpSpec, n int, in, out int64) collectives.Strategy {
	want := collectivesStrategy(cfg.Strategy, op.Strategy)
	if op.Kind == OpAllReduce {
		return collectives.Resolve(want, hw.Arch, n, out)
	}
	return collectives.ResolveOp(CollOp(op.Kind), want, hw, n, max(in, out))
}

// PeerIndex is the communicator index a send or receive at index i of a
// group of n names with peer (next, prev or an index); -1 when unreadable.
func PeerIndex(peer string, i, n int) int {
	switch peer {
	case "next":
		return (i + 1) % n
	case "prev":
		return (i - 1 + n) % n
	}
	v, err := strconv.Atoi(peer)
	if err != nil {
		return -1
	}
	return v
}

// collectivesStrategy is an op's strategy, or the knob's when it names none.
func collectivesStrategy(knob, op string) collectives.Strategy {
	if op != "" {
		return collectives.Strategy(op)
	}
	return collectives.Strategy(knob)
}
