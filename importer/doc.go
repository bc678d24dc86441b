// Package importer turns real PyTorch profiler traces into a collsim
// scenario file (the program form of docs/scenario-format.md): one program
// per rank, kernels with the streams and durations the trace recorded, the
// host gaps between launches, event records and waits, and the tensors each
// kernel reads and writes.
//
// # What it reads
//
// Kineto / Chrome traces, as torch.profiler's export_chrome_trace writes
// them (pytorch/kineto libkineto/src/output_json.cpp: a JSON object whose
// "traceEvents" array holds one object per event; a bare array is accepted
// too). The importer reads them as a stream with encoding/json's Decoder
// token API, one event at a time, in three passes over the file, and keeps
// only the events of the step it imports: a 1 GB trace imports in far less
// memory than its size (BenchmarkImportLarge).
//
//   - "cpu_op" and "user_annotation" events: the PyTorch operators and
//     record_function ranges, with "External id" (the link to the runtime
//     calls they made) and "Record function id" (the link to the execution
//     trace) — torch/csrc/profiler/kineto_shim.cpp, torch/autograd/profiler_util.py.
//   - "cuda_runtime" / "cuda_driver" events: cudaLaunchKernel, cuLaunchKernelEx,
//     cudaMemsetAsync, cudaEventRecord(WithFlags), cudaStreamWaitEvent,
//     cudaStreamSynchronize, cudaDeviceSynchronize, cudaGraphLaunch, with the
//     "correlation" id that links each to the device activity it caused
//     (libkineto/src/CuptiActivity.cpp, RuntimeActivity::metadataJson).
//   - "kernel", "gpu_memset", "gpu_memcpy": device activities with "stream",
//     "correlation", start and duration.
//   - "cuda_sync" (recorded with
//     torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)):
//     "Stream Wait Event" entries name the waiting "stream" and
//     "wait_on_cuda_event_id"; "wait_on_stream" and
//     "wait_on_cuda_event_record_corr_id" name the record when CUPTI
//     reports it, and are -1 otherwise (libkineto/src/CuptiActivity.cpp,
//     CudaSyncActivity::metadataJson and eventSyncInfo). When they are -1 a
//     wait is paired with the latest cudaEventRecord before it in host
//     order, on the stream the host last launched to other than the
//     waiting one; the output says each time it guessed.
//   - "[memory]" instant events (profile_memory=True): "Addr", "Bytes"
//     (negative for a free), "Device Type" 1 for CUDA
//     (torch/csrc/autograd/profiler_kineto.cpp, the memory-event handler).
//   - "record_param_comms" operators: a collective's "Collective name",
//     "Process Group Name", "Process Group Ranks", "In msg nelems", "dtype",
//     the process group's sequence number "Seq", and a send's or receive's
//     peer "Dst Rank" / "Src Rank" (torch/csrc/distributed/c10d/
//     ParamCommsUtils.hpp, RECORD_PARAM_COMMS_DATA; torch/csrc/profiler/
//     util.cpp, saveNcclMeta); without "Seq", the execution trace's
//     record_param_comms node under the c10d operator gives the number (its
//     (seq, isP2P) input). How calls pair across ranks: pair.go.
//   - "distributedInfo": the trace's "rank" and "world_size", checked
//     against its place among the traces.
//
// The PyTorch execution trace (torch.profiler.ExecutionTraceObserver,
// torch/csrc/profiler/standalone/execution_trace_observer.cpp; schema
// "1.1.1-chakra.0.0.4", mlcommons/chakra's et_def) is read the same way:
// each node's "rf_id" attribute is the Kineto op's "Record function id", and
// its inputs and outputs list tensors as [tensor id, storage id, offset,
// numel, item size, device]. The storage id follows the data pointer, so a
// block the caching allocator hands out again keeps its id: that is how a
// freed tensor's memory reused by the next allocation shows up as one
// scenario tensor written by both.
//
// Without an execution trace a kernel writes the blocks its operator
// allocated ("[memory]" events inside the operator) and reads nothing the
// importer can name; the output says so.
//
// CUDA-graph replays: Kineto reports the replayed kernels under the
// cudaGraphLaunch's correlation id, on the streams the graph executor chose
// (not the capture streams). The importer matches them to the captured
// launches (kernel name against operator name, then order) and builds a
// graph-mode program on the replay streams; see graph.go for what is a guess.
//
// Unknown event kinds that carry a duration on a device stream are kept as
// opaque kernels with that duration; other unknown events are ignored.
// Input that cannot be read is reported as file:line:column with the event's
// index in traceEvents ([*Error]).
//
// # Files, and why it is one package
//
// About 4,900 lines, over the project's 3,000-line line for a package: its
// files are stages of one translation that share the builder's state (the
// step's operators, calls, allocations and the tensors they name), and each
// stage is a file of a few hundred lines: read.go (the step's events),
// chrome.go and limits.go (the bounded streaming reader), et.go (the
// execution trace), build.go (eager steps: kernels, waits, syncs,
// allocations, collectives), graph.go (captures and replays), host.go
// (pinned host memory), views.go (tensor views), orphan.go (threads the
// profiler saw no operators of), pair.go (calls paired across ranks),
// flight.go (Flight Recorder dumps), import.go (the scenario file). The
// readers (chrome.go, limits.go, et.go) are the next cut when the package
// grows: they know nothing of scenarios.
package importer
