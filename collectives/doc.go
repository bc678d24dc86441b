// Package collectives holds communicators and collective algorithms written as
// per-rank device micro-programs ([ranks.Instr] lists) over the memory model:
// NCCL ring all-reduce through per-peer FIFO connections, and the
// symmetric-memory all-reduces (MULTIMEM one-shot, P2P one-shot) over a
// workspace and a signal pad shared by every call on the communicator, as
// TensorRT-LLM's cached AllReduce instance shares them.
//
// Nothing here decides an outcome: an algorithm only says which memory it
// touches and which signals it exchanges. Whether two calls corrupt each
// other falls out of the engine's execution of these micro-programs.
package collectives
