"""Slow-down of concurrent kernels: two kernel loops on two streams started
together (both wait on one event behind a device sleep), each timed with its
own event pair, against the same loop alone. Prints, per pair, each side's
time alone, together, and the ratio (together / alone)."""
import torch

from common import emit, env_info
from durations import elementwise_case, gemm_case, grouped_case
from moe_decode import moe_cases

REPS = 100


def loop_time(fn, stream, start_ev):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(stream):
        stream.wait_event(start_ev)
        a.record(stream)
        for i in range(REPS):
            fn(i)
        b.record(stream)
    return a, b


def measure(f1, f2):
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    for i in range(10):
        f1(i), f2(i)
    torch.cuda.synchronize()
    out = {}
    for label, pair in (("alone1", (f1, None)), ("alone2", (None, f2)), ("together", (f1, f2))):
        times = []
        for _ in range(5):
            go = torch.cuda.Event()
            torch.cuda._sleep(10_000_000)
            go.record()
            ev = []
            if pair[0]:
                ev.append(loop_time(pair[0], s1, go))
            if pair[1]:
                ev.append(loop_time(pair[1], s2, go))
            torch.cuda.synchronize()
            times.append([a.elapsed_time(b) * 1e6 / REPS for a, b in ev])
        times.sort()
        out[label] = times[len(times) // 2]
    t1, t2 = out["together"]
    return {"alone_ns": [out["alone1"][0], out["alone2"][0]], "together_ns": [t1, t2],
            "slowdown": [t1 / out["alone1"][0], t2 / out["alone2"][0]]}


def order(big, small, lead_cycles=8000, trials=21):
    """One launch each: the first kernel starts at go on s1, the second on
    s2 behind a short device sleep (lead_cycles, about 4 µs at 1.98 GHz),
    and the other way round. Median end times (ns after go) of each: which
    one the block scheduler serves first when both want the SMs."""
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    for i in range(5):
        big(i), small(i)
    torch.cuda.synchronize()
    out = {}
    for label, (first, second) in (("big_first", (big, small)), ("small_first", (small, big))):
        ends = []
        for t in range(trials):
            go = torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(10_000_000)
            go.record()
            e1, e2 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with torch.cuda.stream(s1):
                s1.wait_event(go)
                first(t)
                e1.record(s1)
            with torch.cuda.stream(s2):
                s2.wait_event(go)
                torch.cuda._sleep(lead_cycles)
                second(t)
                e2.record(s2)
            torch.cuda.synchronize()
            ends.append((go.elapsed_time(e1) * 1e6, go.elapsed_time(e2) * 1e6))
        ends.sort(key=lambda p: p[0])
        out[label] = {"first_end_ns": sorted(p[0] for p in ends)[trials // 2], "second_end_ns": sorted(p[1] for p in ends)[trials // 2]}
    # each alone, started the same way
    for label, fn, lead in (("big_alone", big, 0), ("small_alone", small, 0)):
        ends = []
        for t in range(trials):
            go = torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(10_000_000)
            go.record()
            e = torch.cuda.Event(enable_timing=True)
            with torch.cuda.stream(s1):
                s1.wait_event(go)
                fn(t)
                e.record(s1)
            torch.cuda.synchronize()
            ends.append(go.elapsed_time(e) * 1e6)
        out[label] = sorted(ends)[trials // 2]
    return out


def main():
    pairs = {
        "tp8 sh_up 8x8192x1024 | expert_up 8x8192x256": (lambda: gemm_case(8, 8192, 1024), lambda: gemm_case(8, 8192, 256)),
        "tp8 sh_down 8x1024x8192 | grouped_up 8e": (lambda: gemm_case(8, 1024, 8192), lambda: grouped_case(8, 8, 8192, 256)),
        "lifetime sh_up 8x4096x16384 | expert_up 8x4096x512": (lambda: gemm_case(8, 4096, 16384), lambda: gemm_case(8, 4096, 512)),
        "gemm 8x4096x16384 | add 8x4096": (lambda: gemm_case(8, 4096, 16384), lambda: elementwise_case(8, 4096, "add")),
        "copy 8192x16384 | copy 8192x16384": (lambda: elementwise_case(8192, 16384, "copy"), lambda: elementwise_case(8192, 16384, "copy")),
        "gemm 256x4096x16384 | gemm 256x4096x16384": (lambda: gemm_case(256, 4096, 16384), lambda: gemm_case(256, 4096, 16384)),
        # added for the concurrency model (ranks/concurrency.go): the pairs
        # aux-stream-lifetime's graph overlaps at 64 and 256 tokens, a GEMM
        # with a GEMM of a quarter of its weight, and tp8's routed MoE
        # (moe_decode.py) beside the shared expert's GEMMs
        "lifetime T64 sh_down 64x16384x4096 | expert_up 64x4096x512": (lambda: gemm_case(64, 16384, 4096), lambda: gemm_case(64, 4096, 512)),
        "lifetime T64 sh_gate 64x4096x4096 | mul 64x4096": (lambda: gemm_case(64, 4096, 4096), lambda: elementwise_case(64, 4096, "mul")),
        "lifetime T256 sh_down 256x16384x4096 | expert_down 256x512x4096": (lambda: gemm_case(256, 16384, 4096), lambda: gemm_case(256, 512, 4096)),
        "gemm 8x4096x16384 | gemm 8x4096x4096": (lambda: gemm_case(8, 4096, 16384), lambda: gemm_case(8, 4096, 4096)),
        "add 8x4096 | add 8x4096": (lambda: elementwise_case(8, 4096, "add"), lambda: elementwise_case(8, 4096, "add")),
        "tp8 sh_up 8x8192x1024 | moe fc1": (lambda: gemm_case(8, 8192, 1024), lambda: moe_cases()["tp8moe/fc1 grouped 64x8192x512"]()),
        "tp8 sh_down 8x1024x8192 | moe fc2": (lambda: gemm_case(8, 1024, 8192), lambda: moe_cases()["tp8moe/fc2 grouped 64x256x8192"]()),
        "copy 8192x16384 | add 8x4096": (lambda: elementwise_case(8192, 16384, "copy"), lambda: elementwise_case(8, 4096, "add")),
    }
    res = {"program": "concurrency", "env": env_info(), "reps": REPS, "pairs": {}}
    for name, (m1, m2) in pairs.items():
        try:
            res["pairs"][name] = measure(m1(), m2())
        except Exception as e:  # one pair failing must not lose the others
            res["pairs"][name] = {"error": repr(e)[:300]}
        torch.cuda.empty_cache()
    res["order"] = {}
    for name, (m1, m2) in {
        "gemm 8x4096x16384 / expert_up 8x4096x512": (lambda: gemm_case(8, 4096, 16384), lambda: gemm_case(8, 4096, 512)),
        "gemm 8x4096x16384 / add 8x4096": (lambda: gemm_case(8, 4096, 16384), lambda: elementwise_case(8, 4096, "add")),
        "gemm 64x16384x4096 / gemm 64x4096x4096": (lambda: gemm_case(64, 16384, 4096), lambda: gemm_case(64, 4096, 4096)),
    }.items():
        try:
            res["order"][name] = order(m1(), m2())
        except Exception as e:
            res["order"][name] = {"error": repr(e)[:300]}
        torch.cuda.empty_cache()
    emit(res)


if __name__ == "__main__":
    main()
