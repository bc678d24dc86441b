"""What each decode kernel asks of the GPU: its grid, block, registers and
shared memory as the profiler (Kineto/CUPTI) records them, for the kernels
of the built-ins' decode shapes (durations.py) and the routed MoE path
(moe_decode.py). From these, the share of the GPU's SMs a kernel's grid
can fill at once: blocks / (SMs × blocks resident per SM), where blocks
resident per SM is the least of the thread, register, shared-memory and
block limits of an SM (H100/H200: 2,048 threads, 65,536 registers,
228 KiB shared memory, 32 blocks). ranks/gpu/hw.go's concurrency model reads
that share as the kernel's SM demand."""
import json
import os
import tempfile

import torch

from common import emit, env_info
from durations import shapes
from moe_decode import moe_cases

SM_THREADS, SM_REGS, SM_SMEM, SM_BLOCKS = 2048, 65536, 228 * 1024, 32


def per_sm(block_threads, regs, smem):
    lim = [SM_BLOCKS, SM_THREADS // max(1, block_threads)]
    if regs:
        lim.append(SM_REGS // max(1, regs * block_threads))
    if smem:
        lim.append(SM_SMEM // (smem + 1024))  # 1 KiB reserved per block (CUDA 11+)
    return max(1, min(lim))


def profile(fn, sms):
    for i in range(5):
        fn(i)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for i in range(3):
            fn(i)
        torch.cuda.synchronize()
    path = tempfile.mktemp(suffix=".json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        tr = json.load(f)
    os.unlink(path)
    out, seen = [], set()
    for e in tr.get("traceEvents", []):
        if e.get("cat") != "kernel":
            continue
        a = e.get("args", {})
        name = e.get("name", "")[:120]
        if name in seen:
            continue
        seen.add(name)
        g, b = a.get("grid", [0, 0, 0]), a.get("block", [0, 0, 0])
        blocks = g[0] * g[1] * g[2]
        threads = b[0] * b[1] * b[2]
        regs = a.get("registers per thread", 0)
        smem = a.get("shared memory", 0)
        k = per_sm(threads, regs, smem)
        out.append({"kernel": name, "grid": g, "block": b, "regs": regs, "smem": smem,
                    "blocks_per_sm_max": k, "sm_share": min(1.0, blocks / (sms * k)),
                    "sms_touched": min(1.0, blocks / sms), "dur_us": e.get("dur"),
                    "occupancy_pct": a.get("est. achieved occupancy %")})
    return out


def main():
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    res = {"program": "kernel_shapes", "env": env_info(), "limits": {
        "threads": SM_THREADS, "regs": SM_REGS, "smem": SM_SMEM, "blocks": SM_BLOCKS}, "shapes": {}}
    cases = dict(shapes())
    cases.update(moe_cases())
    for name, mk in cases.items():
        try:
            res["shapes"][name] = profile(mk(), sms)
        except Exception as e:  # one shape failing must not lose the others
            res["shapes"][name] = {"error": repr(e)[:300]}
        torch.cuda.empty_cache()
    emit(res)


if __name__ == "__main__":
    main()
