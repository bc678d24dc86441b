"""Record a region of a PyTorch program for `simctl import`.

    from collsim_record import record

    for _ in range(3):
        step()                      # warm up: the caching allocator, cuBLAS, torch.compile
    with record("out/step"):        # writes out/step.json and out/step.et.json
        step()

then

    simctl import out/step.json --et out/step.et.json -o step.yaml

CUDA graphs: the importer reads each capture and matches every replay to
it. A graph is usually captured during warm-up, before the region (a
torch.cuda.graph warmed up first; torch.compile(mode="reduce-overhead"),
which captures on an early call). So importing this module also hooks
torch.cuda.CUDAGraph: every capture made outside a `record` region is
profiled on its own (the same settings), and the next `record` writes those
captures into its trace and execution trace, before the region, where the
importer finds them. Import collsim_record before the first capture;
COLLSIM_RECORD_CAPTURES=0 turns the hook off, clear_captures() forgets the
captures kept so far.

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

Two facts no profiler setting records are the stream a `record_stream` call
names (the trace shows the call, with "<Stream>" for its argument) and the
stream an event is recorded on (CUPTI names a wait's stream, not a
record's), and which event a wait waits on is named by a number CUPTI gives
the wait but not the record; nor does a `Stream.query()` name its stream;
and whether a program acts on a query's answer no trace shows.
Inside `record`, each `Tensor.record_stream(s)`, each
`torch.cuda.Event.record(s)` (so `Stream.record_event` and `wait_stream`
too) and each `torch.cuda.Stream.query()` is wrapped in
record_function("collsim::record_stream"), ("collsim::event_record") or
("collsim::stream_query") and launches one empty kernel
(torch.cuda._sleep(0)) on `s` first: the kernel's stream in the trace is the
stream the call named. After an event record, a private stream waits on the
event and runs one empty kernel (Kineto keeps a wait only on a stream that
ran work): that wait's event number names the record's event. The importer
reads them there and leaves the probe kernels and wait out of the program.
The first query of each event, stream or `Work` in the region
(`Event.query()`, `Stream.query()`, `Work.is_completed()`) answers "not
yet" without asking, a legal answer, inside a "collsim::query_not_yet"
range: a program that polls asks again and the trace shows the query that
returned true; one that asks once and goes on shows none
(probe_record_stream=False turns all of these off; the importer then says
it guessed).

As a command, it records a whole script (its module-level code is the
region; warm-up is the script's own business):

    python3 collsim_record.py OUT_PREFIX script.py [args...]

The only dependency is torch (2.4 or later; recorded and tested with 2.11).
"""
import contextlib
import json
import os
import runpy
import shutil
import sys
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile, record_function

__all__ = ["record", "profiler_settings", "clear_captures"]

_recording = False   # inside a record() region: captures are in its trace already
_captures = []       # directories of captures profiled outside a region: c.json, c.et.json


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
    orig_rec = torch.cuda.Event.record
    orig_query = torch.cuda.Stream.query
    orig_equery = torch.cuda.Event.query
    work, orig_done = _work_class()
    if probe_record_stream:
        torch.Tensor.record_stream = _probed(orig)
        torch.cuda.Event.record = _probed_event_record(orig_rec)
        torch.cuda.Stream.query = _not_yet_first(_probed_query(orig_query))
        torch.cuda.Event.query = _not_yet_first(orig_equery)
        if work is not None:
            try:
                work.is_completed = _not_yet_first(orig_done)
            except (AttributeError, TypeError):
                work = None
    _asked.clear()
    global _recording
    _recording = True
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
        torch.cuda.Event.record = orig_rec
        torch.cuda.Stream.query = orig_query
        torch.cuda.Event.query = orig_equery
        if work is not None and probe_record_stream:
            work.is_completed = orig_done
        _asked.clear()
        _recording = False
    p.export_chrome_trace(prefix + ".json")
    _merge_captures(prefix, execution_trace)


def clear_captures():
    """Forget the captures profiled so far (the next record writes none of them)."""
    while _captures:
        shutil.rmtree(_captures.pop(0), ignore_errors=True)


def _merge_captures(prefix, execution_trace):
    """Put the captures profiled before the region into PREFIX.json (and
    PREFIX.et.json), ahead of the region's events. Each capture's External
    ids and execution-trace node ids are moved past the region's, so they
    name nothing of it; correlation and record-function ids are the
    process's own and stay."""
    if not _captures:
        return
    try:
        with open(prefix + ".json") as f:
            tr = json.load(f)
        et = None
        if execution_trace and os.path.exists(prefix + ".et.json"):
            with open(prefix + ".et.json") as f:
                et = json.load(f)
        events = []
        nodes = []
        for k, d in enumerate(_captures):
            off = (k + 1) * 1000000000
            with open(os.path.join(d, "c.json")) as f:
                ct = json.load(f)
            for e in ct.get("traceEvents", []):
                a = e.get("args")
                if isinstance(a, dict) and isinstance(a.get("External id"), int):
                    a["External id"] += off
                events.append(e)
            if et is not None and os.path.exists(os.path.join(d, "c.et.json")):
                with open(os.path.join(d, "c.et.json")) as f:
                    ce = json.load(f)
                for n in ce.get("nodes", []):
                    n["id"] = n.get("id", 0) + off
                    if n.get("ctrl_deps"):
                        n["ctrl_deps"] += off
                    nodes.append(n)
        tr["traceEvents"] = events + tr.get("traceEvents", [])
        with open(prefix + ".json", "w") as f:
            json.dump(tr, f)
        if et is not None:
            et["nodes"] = nodes + et.get("nodes", [])
            with open(prefix + ".et.json", "w") as f:
                json.dump(et, f)
    except Exception as e:   # never lose the region's own trace for this
        sys.stderr.write(f"collsim_record: the captures before the region were not added ({e!r})\n")
    clear_captures()


def _hook_captures():
    """Profile each CUDA graph capture made outside a record() region."""
    G = torch.cuda.CUDAGraph
    if getattr(G, "_collsim_hooked", False) or os.environ.get("COLLSIM_RECORD_CAPTURES", "1") == "0":
        return
    begin, end = G.capture_begin, G.capture_end

    def capture_begin(self, *a, **k):
        self._collsim_prof = None
        if not _recording:
            try:
                from torch.profiler import ExecutionTraceObserver
                d = tempfile.mkdtemp(prefix="collsim-capture-")
                kw = profiler_settings()
                kw["execution_trace_observer"] = ExecutionTraceObserver().register_callback(os.path.join(d, "c.et.json"))
                p = profile(**kw)
                p.__enter__()
                self._collsim_prof = (p, d)
            except Exception:
                self._collsim_prof = None
        return begin(self, *a, **k)

    def capture_end(self, *a, **k):
        r = end(self, *a, **k)
        pd = getattr(self, "_collsim_prof", None)
        self._collsim_prof = None
        if pd is not None:
            p, d = pd
            try:
                p.__exit__(None, None, None)
                p.export_chrome_trace(os.path.join(d, "c.json"))
                _captures.append(d)
            except Exception:
                shutil.rmtree(d, ignore_errors=True)
        return r

    G.capture_begin, G.capture_end = capture_begin, capture_end
    G._collsim_hooked = True


_hook_captures()


def _probed(orig):
    def record_stream(self, stream):
        with record_function("collsim::record_stream"):
            with torch.cuda.stream(stream):
                torch.cuda._sleep(0)
            return orig(self, stream)
    return record_stream


_probe_streams = {}


def _probed_event_record(orig):
    # CUPTI reports the stream a cudaStreamWaitEvent waits on but not the
    # stream a cudaEventRecord records on: one empty kernel on that stream,
    # inside a "collsim::event_record" range, names it. CUPTI names a
    # wait's event (wait_on_cuda_event_id) but not a record's: a wait of
    # a private stream (it runs only empty kernels) on the event just
    # recorded names it, so the importer pairs each wait with its own
    # event's record.
    # Not while the stream is being captured (the kernel would join the
    # graph).
    def record(self, stream=None):
        s = stream if stream is not None else torch.cuda.current_stream()
        try:
            capturing = torch.cuda.is_current_stream_capturing()
        except Exception:
            capturing = True
        if capturing:
            return orig(self, stream)
        with record_function("collsim::event_record"):
            with torch.cuda.stream(s):
                torch.cuda._sleep(0)
            out = orig(self, stream)
            dev = s.device
            if dev not in _probe_streams:
                _probe_streams[dev] = torch.cuda.Stream(device=dev)
            p = _probe_streams[dev]
            p.wait_event(self)
            # Kineto keeps a stream wait only on a stream that ran some
            # work in the window: one empty kernel after the wait.
            with torch.cuda.stream(p):
                torch.cuda._sleep(0)
            return out
    return record


_asked = []   # the events, streams and works queried so far in the region


def _work_class():
    """torch.distributed's Work and its is_completed, where there is one."""
    try:
        import torch.distributed as dist
        w = dist.Work
        return w, w.is_completed
    except Exception:
        return None, None


def _not_yet_first(orig):
    # A query (Event.query, Stream.query, Work.is_completed) may always
    # answer "not yet": work can take any time. The first query of each
    # event, stream or work in the region answers so without asking, inside
    # a "collsim::query_not_yet" range. A program that polls asks again,
    # and the trace shows its real query returning true; one that asks once
    # and goes on shows no query at all. Both are legal runs of the program,
    # and the trace then says which the program is.
    def query(self):
        if _recording and not any(o is self for o in _asked):
            _asked.append(self)
            with record_function("collsim::query_not_yet"):
                return False
        return orig(self)
    return query


def _probed_query(orig):
    # cudaStreamQuery's record does not name its stream: one empty kernel
    # on the queried stream, inside a "collsim::stream_query" range, names
    # it (the query then also waits for that kernel, which takes no time).
    def query(self):
        with record_function("collsim::stream_query"):
            with torch.cuda.stream(self):
                torch.cuda._sleep(0)
            return orig(self)
    return query


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
