"""Slow-down of concurrent kernels: two kernel loops on two streams started
together (both wait on one event behind a device sleep), each timed with its
own event pair, against the same loop alone. Prints, per pair, each side's
time alone, together, and the ratio (together / alone)."""
import torch

from common import emit, env_info
from durations import elementwise_case, gemm_case, grouped_case

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


def main():
    pairs = {
        "tp8 sh_up 8x8192x1024 | expert_up 8x8192x256": (lambda: gemm_case(8, 8192, 1024), lambda: gemm_case(8, 8192, 256)),
        "tp8 sh_down 8x1024x8192 | grouped_up 8e": (lambda: gemm_case(8, 1024, 8192), lambda: grouped_case(8, 8, 8192, 256)),
        "lifetime sh_up 8x4096x16384 | expert_up 8x4096x512": (lambda: gemm_case(8, 4096, 16384), lambda: gemm_case(8, 4096, 512)),
        "gemm 8x4096x16384 | add 8x4096": (lambda: gemm_case(8, 4096, 16384), lambda: elementwise_case(8, 4096, "add")),
        "copy 8192x16384 | copy 8192x16384": (lambda: elementwise_case(8192, 16384, "copy"), lambda: elementwise_case(8192, 16384, "copy")),
        "gemm 256x4096x16384 | gemm 256x4096x16384": (lambda: gemm_case(256, 4096, 16384), lambda: gemm_case(256, 4096, 16384)),
    }
    res = {"program": "concurrency", "env": env_info(), "reps": REPS, "pairs": {}}
    for name, (m1, m2) in pairs.items():
        res["pairs"][name] = measure(m1(), m2())
        torch.cuda.empty_cache()
    emit(res)


if __name__ == "__main__":
    main()
