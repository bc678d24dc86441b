"""Record a region of a PyTorch program for `simctl import`.

    from collsim_record import record

    for _ in range(3):
        step()                      # warm up: the caching allocator, cuBLAS, torch.compile
    with record("out/step"):        # writes out/step.json and out/step.et.json
        step()

then

    simctl import out/step.json --et out/step.et.json -o step.yaml

Capture CUDA graphs inside the region where you can: the importer reads a
capture it sees and matches each replay to it; a graph captured before the
region replays kernels whose tensors no record names (the importer guesses
them from the static buffers the step fills and reads, and says so).

`record` turns on exactly what the importer reads, and nothing it does not
need: the profiler's CPU and CUDA activities with tensor shapes, every
allocation and free of the caching allocator (profile_memory), the CUDA
synchronisation events that say which stream waited for which event
(enable_cuda_sync_events), and the execution trace that says which tensors
each operator read and wrote (ExecutionTraceObserver). It marks the region
with record_function("step"), which is what the importer imports by default
(step=False leaves the mark out: the importer then takes the whole trace),
and synchronises the device before the profiler stops, so every kernel of
the region is in the trace.

One fact no profiler setting records is the stream a `record_stream` call
names (the trace shows the call, with "<Stream>" for its argument). Inside
`record`, each `Tensor.record_stream(s)` is wrapped in
record_function("collsim::record_stream") and launches one empty kernel
(torch.cuda._sleep(0)) on `s` first: the kernel's stream in the trace is the
stream the call named. The importer reads it there and leaves the probe
kernel out of the program (probe_record_stream=False turns this off; the
importer then says it guessed the stream).

As a command, it records a whole script (its module-level code is the
region; warm-up is the script's own business):

    python3 collsim_record.py OUT_PREFIX script.py [args...]

The only dependency is torch (2.4 or later; recorded and tested with 2.11).
"""
import contextlib
import os
import runpy
import sys

import torch
from torch.profiler import ProfilerActivity, profile, record_function

__all__ = ["record", "profiler_settings"]


def profiler_settings():
    """The keyword arguments of torch.profiler.profile that the importer needs."""
    from torch._C._profiler import _ExperimentalConfig
    return dict(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        record_shapes=True,
        profile_memory=True,
        with_stack=False,
        experimental_config=_ExperimentalConfig(enable_cuda_sync_events=True),
    )


@contextlib.contextmanager
def record(prefix, step=True, name="step", execution_trace=True, probe_record_stream=True):
    """Profile the body; write PREFIX.json (Kineto) and PREFIX.et.json (execution trace).

    step: wrap the body in record_function(name), the range `simctl import`
    picks by default. execution_trace=False writes no PREFIX.et.json (the
    import then cannot name what each kernel reads: it says so).
    """
    d = os.path.dirname(prefix)
    if d:
        os.makedirs(d, exist_ok=True)
    torch.cuda.synchronize()
    kw = profiler_settings()
    if execution_trace:
        from torch.profiler import ExecutionTraceObserver
        kw["execution_trace_observer"] = ExecutionTraceObserver().register_callback(prefix + ".et.json")
    orig = torch.Tensor.record_stream
    if probe_record_stream:
        torch.Tensor.record_stream = _probed(orig)
    try:
        with profile(**kw) as p:
            if step:
                with record_function(name):
                    yield p
            else:
                yield p
            torch.cuda.synchronize()
    finally:
        torch.Tensor.record_stream = orig
    p.export_chrome_trace(prefix + ".json")


def _probed(orig):
    def record_stream(self, stream):
        with record_function("collsim::record_stream"):
            with torch.cuda.stream(stream):
                torch.cuda._sleep(0)
            return orig(self, stream)
    return record_stream


def main(argv):
    if len(argv) < 2:
        sys.stderr.write("usage: python3 collsim_record.py OUT_PREFIX script.py [args...]\n")
        return 2
    prefix, script = argv[0], argv[1]
    sys.argv = [script] + argv[2:]
    with record(prefix):
        runpy.run_path(script, run_name="__main__")
    print(f"wrote {prefix}.json and {prefix}.et.json; next: simctl import {prefix}.json --et {prefix}.et.json -o scenario.yaml")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
