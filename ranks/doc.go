// Package ranks is the world: every rank's GPU, its streams, events, host
// thread, memory and programs, run on one deterministic engine
// ([NewWorld], [World.Run]). A [Program] of host operations launches
// kernels of micro-ops ([Instr]) over [Buffer]s, signal pads, FIFOs and
// flags; the world checks every access for races and every consumed signal
// or message for mismatched collectives, and reports what it finds as
// findings. It never decides a verdict: the check package judges runs.
//
// Concerns that can be stated without the world live in packages of their
// own, which World composes: ranks/hb (vector clocks, the carry filter,
// snapshot recycling), ranks/findings (the finding record and a run's
// log), ranks/cachealloc (PyTorch's caching allocator), ranks/gpu (the
// hardware profiles, the kernel load model, the rates of kernels sharing a
// GPU, the SM and exclusive-slot pools), ranks/slab (the containers a
// world's memory is recycled with). The rest of World's state is one
// type per concern, each declared in the file that owns it
// (docs/architecture.md lists them).
//
// The package is larger than 3,000 lines because what is left is the
// execution of one shared task graph over one set of program and memory
// types: streams, events, graphs, flags, residency and sharing at run
// time, and the speed machinery (folding, templates, coarse collective
// steps, retirement) all run over the same tasks, micro-ops and buffers,
// and their hot paths read one another's state. Those types keep their run
// state inline, where every access finds it on the line it already read:
// a Buffer its shadow readers and writers, last writers and whether a flag
// wait watches it, a Fifo its ring, a signal pad its slots, a HostOp its
// folded copy. A package below the world would have to export that state
// (and be reached into) or move it to side tables on the hot path. The
// next cut is that
// split — a program's description (HostOp, KernelSpec, Instr, a buffer's
// name and size) below, its run state in the world — after which the
// capture rules and folding's matcher, which read only the description,
// could follow the others out.
//
// Nothing here reads a clock, starts a goroutine or touches os.
package ranks
