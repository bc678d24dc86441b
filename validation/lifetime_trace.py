"""Why aux-stream-lifetime corrupts where it does: for several token counts,
(1) the caching allocator's own trace of one eager step and of the graph
capture (torch.cuda.memory._record_memory_history: every alloc and free with
address, size and stream), the ground truth for ranks/cachealloc/alloc.go's placement;
(2) a device timeline of one step: a timing event after every op on its
stream, in eager-queued mode (the whole step queued behind a device sleep, so
both streams start together as in a graph replay) and, where PyTorch allows
timing events in a capture, in the graph; (3) the wrong-output fraction of
eager-queued over TRIALS steps. Also times one big GEMM on the default stream,
on a side stream and in a graph replay (durations.py saw two different
speeds)."""
import os

import torch

from common import emit, env_info
from durations import gemm_case
from lifetime import Model, bad

TRIALS = 100


def alloc_trace(fn):
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(max_entries=100000)
    fn()
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    evs = []
    for tr in snap.get("device_traces", [[]])[0]:
        if tr["action"] in ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free"):
            evs.append({"action": tr["action"], "addr": tr["addr"], "size": tr["size"], "stream": tr["stream"]})
    segs = [{"address": s["address"], "total_size": s["total_size"], "stream": s["stream"],
             "pool": list(s.get("segment_pool_id", (0, 0)))} for s in snap["segments"]]
    return {"events": evs, "segments": segs}


class Marks:
    def __init__(self, external=False):
        self.evs, self.external = [], external

    def __call__(self, name, stream):
        e = torch.cuda.Event(enable_timing=True, external=True) if self.external else torch.cuda.Event(enable_timing=True)
        e.record(stream)
        self.evs.append((name, stream.stream_id, e))

    def times(self, t0):
        return [{"op": n, "stream": s, "end_ns": t0.elapsed_time(e) * 1e6} for n, s, e in self.evs]


def case(T, fp32):
    res = {"T": T, "routed": "fp32" if fp32 else "bf16"}
    m = Model(T, fp32, "buggy")
    ref = m.forward(m.x, one_stream=True).clone()
    for _ in range(3):
        m.forward(m.x)
    torch.cuda.synchronize()
    res["eager_alloc_trace"] = alloc_trace(lambda: m.forward(m.x))
    # eager-queued timeline and trials
    wrong = 0
    for i in range(TRIALS + 1):
        torch.cuda.synchronize()
        torch.cuda._sleep(4_000_000)
        t0 = torch.cuda.Event(enable_timing=True)
        t0.record()
        mk = Marks() if i == 0 else None
        y = m.forward(m.x, mark=mk)
        torch.cuda.synchronize()
        if i == 0:
            res["eager_queued_timeline"] = mk.times(t0)
        else:
            wrong += bad(y, ref)
    res["eager_queued"] = {"trials": TRIALS, "wrong": wrong}
    # graph: capture with the allocator trace, then a timed capture
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            m.forward(m.x)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    out = {}

    def cap():
        with torch.cuda.graph(g):
            out["y"] = m.forward(m.x)
    res["graph_alloc_trace"] = alloc_trace(cap)
    wrong = 0
    for _ in range(TRIALS):
        g.replay()
        torch.cuda.synchronize()
        wrong += bad(out["y"], ref)
    res["graph"] = {"trials": TRIALS, "wrong": wrong}
    del g, out
    try:
        g2 = torch.cuda.CUDAGraph()
        mk = Marks(external=True)
        t0 = torch.cuda.Event(enable_timing=True, external=True)
        with torch.cuda.graph(g2):
            t0.record()
            y2 = m.forward(m.x, mark=mk)
        g2.replay()
        torch.cuda.synchronize()
        tl = []
        for _ in range(5):
            g2.replay()
            torch.cuda.synchronize()
            tl.append(mk.times(t0))
        res["graph_timeline"] = tl
        res["graph_timed_wrong"] = bad(y2, ref)
    except Exception as e:
        res["graph_timeline_error"] = repr(e)[:300]
    return res


def gemm_speeds():
    fn = gemm_case(8, 4096, 16384)
    out = {}
    for label in ("default", "side", "default-again"):
        st = torch.cuda.default_stream() if label.startswith("default") else torch.cuda.Stream()
        with torch.cuda.stream(st):
            for i in range(10):
                fn(i)
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(4_000_000)
            a.record()
            for i in range(100):
                fn(i)
            b.record()
            torch.cuda.synchronize()
            out[label] = a.elapsed_time(b) * 1e6 / 100
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn(0)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(20):
            fn(i)
    g.replay()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(5):
        g.replay()
    b.record()
    torch.cuda.synchronize()
    out["graph"] = a.elapsed_time(b) * 1e6 / 100
    return out


def main():
    res = {"program": "lifetime_trace", "env": env_info(), "gemm_8x4096x16384_ns": gemm_speeds(), "cases": []}
    for T, fp32 in ((1, False), (1, True), (8, False), (8, True), (64, False), (128, False), (256, False), (256, True)):
        try:
            res["cases"].append(case(T, fp32))
        except Exception as e:
            res["cases"].append({"T": T, "routed": "fp32" if fp32 else "bf16", "error": repr(e)[:400]})
    res["gemm_8x4096x16384_ns_after"] = gemm_speeds()
    emit(res)


if __name__ == "__main__":
    main()
