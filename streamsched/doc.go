// Package streamsched is the program layer: a small op graph (what a
// framework's FX graph holds — GEMMs, elementwise ops, routed-expert MoE ops and
// collectives, with tensors as edges), an MoE layer builder, the stream
// placement transforms (single stream; TensorRT-LLM AutoDeploy's
// multi_stream_moe as it was before PR #14917 and as fixed; a fix that keeps
// more overlap), and the lowering of a placed graph to per-rank host programs
// through the stream helpers' semantics (begin/end/wait_aux with two events
// reused across layers).
//
// engine.go models Torch-TensorRT's engine build for graphs with native
// collectives: partitioning into TensorRT engines and PyTorch ops, Myelin
// ForeignNode fusion (a fused collective fails to build), the multi-device
// rule (an engine with a collective and GEMMs is not multi-device, so its
// communicator binding is rejected and the collective does nothing), and the
// lowering of each submodule call to one launch.
package streamsched
