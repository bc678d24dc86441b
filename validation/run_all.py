"""Run every validation program on the device and write one results file.

  python3 validation/run_all.py OUTDIR      (the device call: see README.md)

Each program runs in its own process (its own CUDA context and allocator),
with NVLink multicast kept off. Writes OUTDIR/results.json: the machine
(GPU, driver, torch, CUDA) and each program's JSON; OUTDIR/log.txt: stderr."""
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = [
    ("alloc_placement", {}, 120),
    ("capture_errors", {}, 150),
    ("streams_events", {}, 90),
    ("host_scalar", {}, 60),
    ("graph_double", {}, 60),
    ("lifetime", {}, 200),
    ("lifetime-nocache", {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}, 90),
    ("host_costs", {}, 120),
    ("durations", {}, 150),
    ("concurrency", {}, 90),
    ("moe_decode", {}, 90),
    ("kernel_shapes", {}, 90),
    ("durations-side", {"DURATIONS_STREAM": "side"}, 150),
    ("lifetime_trace", {}, 240),
]
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
            "PYTHONUNBUFFERED": "1"}


def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception as e:
        return repr(e)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", ".")
    only = set(sys.argv[2].split(",")) if len(sys.argv) > 2 else None
    os.makedirs(out, exist_ok=True)
    res = {"machine": {
        "nvidia_smi": sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.sm,power.limit",
                          "--format=csv,noheader"]),
        "host": platform.node(), "python": platform.python_version(), "started_unix": int(time.time())},
        "programs": {}}
    log = open(os.path.join(out, "log.txt"), "w")
    t_start = time.time()
    for name, extra, limit in PROGRAMS:
        if only and name not in only:
            continue
        limit = min(limit, 500 - (time.time() - t_start))
        if limit < 20:
            res["programs"][name] = {"error": "skipped: out of time"}
            continue
        env = dict(os.environ, **SAFE_ENV, **extra)
        script = os.path.join(HERE, name.split("-")[0] + ".py")  # lifetime-nocache runs lifetime.py
        t0 = time.time()
        try:
            p = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, timeout=limit, cwd=HERE)
            rc, stdout, stderr = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, stdout, stderr = "timeout", (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), str(e)
        dt = time.time() - t0
        log.write(f"== {name} rc={rc} {dt:.1f}s\n{stderr}\n")
        log.flush()
        try:
            res["programs"][name] = json.loads(stdout.strip().splitlines()[-1])
        except Exception:
            res["programs"][name] = {"error": f"rc={rc}", "stdout_tail": stdout[-1500:], "stderr_tail": stderr[-1500:]}
        res["programs"][name]["seconds"] = round(dt, 1)
        print(f"{name}: rc={rc} {dt:.1f}s", flush=True)
        with open(os.path.join(out, "results.json"), "w") as f:
            json.dump(res, f, indent=1, sort_keys=True)
    try:
        import torch
        res["machine"].update(torch=torch.__version__, cuda=torch.version.cuda,
                              gpu=torch.cuda.get_device_name(0))
    except Exception as e:
        res["machine"]["torch_error"] = repr(e)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
