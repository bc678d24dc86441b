"""Host issue costs: what the host spends per eager PyTorch op, per bare CUDA
runtime call (host_costs.cu, built here with nvcc), per event record/wait
and per graph launch; and the device-side gap between back-to-back kernels.
Host costs are measured while the device is busy behind a long kernel, so
the host never waits for a full launch queue. Prints one JSON object."""
import json
import os
import subprocess
import tempfile
import time

import torch

from common import emit, env_info

B, R = 100, 40


def busy():
    torch.cuda._sleep(40_000_000)  # ~20 ms: the device stays busy while we issue


def per_call(fn, setup=None):
    xs = []
    for _ in range(R):
        if setup:
            setup()
        busy()
        t0 = time.perf_counter_ns()
        for _ in range(B):
            fn()
        xs.append((time.perf_counter_ns() - t0) / B)
        torch.cuda.synchronize()
    xs.sort()
    return {"median_ns": xs[len(xs) // 2], "p05_ns": xs[len(xs) // 20], "p95_ns": xs[(len(xs) * 19) // 20]}


def main():
    res = {"program": "host_costs", "env": env_info(), "python": {}}
    a = torch.randn(8, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8, 4096, device="cuda", dtype=torch.bfloat16)
    c = torch.empty_like(a)
    w = torch.randn(4096, 512, device="cuda", dtype=torch.bfloat16)
    w2 = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    s2 = torch.cuda.Stream()
    ev = torch.cuda.Event()
    for _ in range(10):
        a @ w, a @ w2, a + b
    torch.cuda.synchronize()
    P = res["python"]
    P["add_out"] = per_call(lambda: torch.add(a, b, out=c))
    P["add_alloc"] = per_call(lambda: a + b)
    P["mul_scalar"] = per_call(lambda: a * 0.5)
    P["mm_8x4096x512"] = per_call(lambda: a @ w)
    P["mm_8x4096x4096"] = per_call(lambda: a @ w2)
    P["linear_8x4096x4096"] = per_call(lambda: torch.nn.functional.linear(a, w2.t()))
    P["event_record"] = per_call(lambda: ev.record())
    P["wait_event"] = per_call(lambda: s2.wait_event(ev))
    P["event_record_new"] = per_call(lambda: torch.cuda.Event().record())

    def stream_ctx():
        with torch.cuda.stream(s2):
            pass
    P["stream_context"] = per_call(stream_ctx)
    P["record_stream"] = per_call(lambda: c.record_stream(s2))
    # graph replays: 1 node and ~30 nodes
    for n in (1, 30):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(n):
                torch.add(a, b, out=c)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(n):
                torch.add(a, b, out=c)
        torch.cuda.synchronize()
        P[f"graph_replay_{n}node"] = per_call(g.replay)
    # bare runtime costs from the C++ program
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as d:
        exe = os.path.join(d, "hc")
        cc = subprocess.run(["nvcc", "-O2", "-arch=sm_90", "-o", exe, os.path.join(here, "host_costs.cu")],
                            capture_output=True, text=True)
        if cc.returncode != 0:
            res["bare_error"] = cc.stderr[-800:]
        else:
            p = subprocess.run([exe], capture_output=True, text=True, timeout=120)
            try:
                res["bare"] = json.loads(p.stdout)
            except Exception:
                res["bare_error"] = (p.stdout + p.stderr)[-800:]
    emit(res)


if __name__ == "__main__":
    main()
