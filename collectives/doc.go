// Package collectives holds communicators and collective algorithms written as
// per-rank device micro-programs ([ranks.Instr] lists) over the memory model:
// NCCL ring all-reduce through per-peer FIFO connections, and the
// symmetric-memory all-reduces (MULTIMEM one-shot, P2P one-shot) over a
// workspace and a signal pad shared by every call on the communicator, as
// TensorRT-LLM's cached AllReduce instance shares them.
//
// [Comm.Collective] adds the rest of the family (family.go): all-gather,
// reduce-scatter, all-to-all and broadcast besides all-reduce; NCCL ring and
// tree, symmetric-memory one-shot and two-shot with multicast or P2P, with a
// grid of blocks each using its own signal-pad slots; sub-communicators;
// NCCL's per-communicator or implicit (NCCL_LAUNCH_ORDER_IMPLICIT) launch
// order. [Cost] (cost.go) is the α–β time of each algorithm.
//
// Nothing here decides an outcome: an algorithm only says which memory it
// touches and which signals it exchanges. Whether two calls corrupt each
// other falls out of the engine's execution of these micro-programs.
package collectives
