"""Shared helpers for the validation programs: each program prints one JSON
object on its last line of stdout (the driver, run_all.py, collects them)."""
import json
import os
import statistics
import sys
import time

import torch


def emit(obj):
    """Print obj as the program's single JSON result line."""
    sys.stdout.write(json.dumps(obj, sort_keys=True) + "\n")
    sys.stdout.flush()


def env_info():
    p = torch.cuda.get_device_properties(0)
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": p.name,
        "sms": p.multi_processor_count,
        "caching": os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING", "") != "1",
    }


def quantiles(xs, n=20):
    """n+1 evenly spaced quantiles of xs (min .. max), plus summary numbers."""
    s = sorted(xs)
    q = [s[min(len(s) - 1, round(i * (len(s) - 1) / n))] for i in range(n + 1)]
    return {
        "n": len(s),
        "median": statistics.median(s),
        "mean": statistics.fmean(s),
        "stdev": statistics.pstdev(s),
        "p01": s[int(0.01 * (len(s) - 1))],
        "p05": s[int(0.05 * (len(s) - 1))],
        "p95": s[int(0.95 * (len(s) - 1))],
        "p99": s[int(0.99 * (len(s) - 1))],
        "q": q,
    }


def host_ns():
    return time.perf_counter_ns()


def ranges_overlap(a_ptr, a_bytes, b_ptr, b_bytes):
    return a_ptr < b_ptr + b_bytes and b_ptr < a_ptr + a_bytes
