"""Run every multi-GPU program in one call and write one results file.

  python3 validation/multigpu/run_all.py OUTDIR [--world-size N] [--only NAME,...] [--trials T] [--deadline S]

Each entry of PROGRAMS runs in its own process group (the program spawns one
process per rank with torch.multiprocessing; no torchrun), with NVLink
multicast kept off, killed with its ranks when it runs past its limit. The
world size is --world-size, else MG_WORLD_SIZE, else every visible GPU. The
cases that may hang (a hang leaves their communicators stuck) run in
processes of their own; at world size 1 nothing can hang (no peer to wait
for), so the NCCL cases share one process per NCCL_LAUNCH_ORDER_IMPLICIT
setting and the whole run stays within about three minutes.

Writes OUTDIR/results.json after every program: the machine (GPUs, driver,
NVLink topology, torch, CUDA, NCCL) and, per program, its exit status, time,
each rank's record (OUTDIR/NAME/rank<r>.json) and a summary per case (wrong
trials: the most any rank saw; hang: whether any rank did). OUTDIR/log.txt
holds every program's output."""
import argparse
import glob
import json
import os
import platform
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
            "PYTHONUNBUFFERED": "1"}
IMPLICIT_OFF = {"NCCL_LAUNCH_ORDER_IMPLICIT": "0"}
IMPLICIT_ON = {"NCCL_LAUNCH_ORDER_IMPLICIT": "1"}


def _oneshot(placement, delays, modes=("graph", "eager")):
    return [f"{m}-{placement}-{d}" for d in delays for m in modes]


EVEN, ODD = ["none", "aux", "main"], ["aux-odd", "main-odd"]
ONESHOT_SAFE = ",".join(["alone"] + _oneshot("fixed", EVEN + ODD) + _oneshot("buggy", EVEN))

# (name, script, cases (empty: all), extra environment, limit in seconds)
PROGRAMS = [
    ("race_probe", "race_probe.py", "", {"REPLAYS": "2000"}, 150),
    ("oneshot", "oneshot_two_streams.py", ONESHOT_SAFE, {}, 150),
    ("oneshot-buggy-odd-graph", "oneshot_two_streams.py", ",".join(_oneshot("buggy", ODD, ["graph"])), {}, 90),
    ("oneshot-buggy-odd-eager", "oneshot_two_streams.py", ",".join(_oneshot("buggy", ODD, ["eager"])), {}, 90),
    ("symm_pad_groups", "symm_pad_groups.py", "", {}, 120),
    ("nccl", "nccl_streams.py", "timing,one-comm-consistent,one-comm-swapped", IMPLICIT_OFF, 150),
    ("nccl-two-comms-consistent", "nccl_streams.py", "two-comms-consistent", IMPLICIT_OFF, 90),
    ("nccl-two-comms-opposite", "nccl_streams.py", "two-comms-opposite", IMPLICIT_OFF, 90),
    ("nccl-implicit-two-comms-consistent", "nccl_streams.py", "two-comms-consistent", IMPLICIT_ON, 90),
    ("nccl-implicit-two-comms-opposite", "nccl_streams.py", "two-comms-opposite", IMPLICIT_ON, 90),
    ("nccl-one-comm-count", "nccl_streams.py", "one-comm-count", IMPLICIT_OFF, 90),
    ("nccl-one-comm-op", "nccl_streams.py", "one-comm-op", IMPLICIT_OFF, 90),
]

# At one rank nothing can hang: the one-shot cases run in one process, the NCCL cases in one per
# launch-order setting, and a program gets at most 75 s (a stuck one must not eat the dry run).
PROGRAMS_WS1 = [(n, sc, c, e, min(lim, 75)) for n, sc, c, e, lim in PROGRAMS
                if sc not in ("nccl_streams.py", "oneshot_two_streams.py")] + [
    ("oneshot", "oneshot_two_streams.py", "", {}, 75),
    ("nccl", "nccl_streams.py", "", IMPLICIT_OFF, 75),
    ("nccl-implicit", "nccl_streams.py", "two-comms-consistent,two-comms-opposite", IMPLICIT_ON, 60),
]


def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception as e:
        return repr(e)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except Exception as e:
        return {"unreadable": repr(e)}


def summarize(ranks):
    """Per case: the most wrong trials any rank saw, whether any rank hung or failed."""
    out = {}
    names = sorted({c for r in ranks for c in r.get("cases", {})})
    for c in names:
        recs = [r.get("cases", {}).get(c) for r in ranks]
        recs = [x for x in recs if x is not None]
        s = {"ranks_reporting": len(recs)}
        wrong = [x["wrong"] for x in recs if "wrong" in x]
        if wrong:
            s["wrong_max"] = max(wrong)
            s["trials"] = max(x.get("trials", 0) for x in recs)
        s["hang"] = any(x.get("hang") for x in recs)
        errs = [x["error"] for x in recs if "error" in x]
        if errs:
            s["errors"] = errs[:2]
        not_run = [x["not_run"] for x in recs if "not_run" in x]
        if not_run:
            s["not_run"] = not_run[0]
        out[c] = s
    return out


def run_program(entry, ws, trials, out, log, limit):
    name, script, cases, extra, _ = entry
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    env = dict(os.environ, **SAFE_ENV, **extra, MG_WORLD_SIZE=str(ws), OUT=d)
    cmd = [sys.executable, os.path.join(HERE, script)]
    if script != "race_probe.py":
        cmd += ["--out", d, "--world-size", str(ws), "--trials", str(trials)]
        if cases:
            cmd += ["--cases", cases]
    log.write(f"== {name}: {' '.join(cmd[1:])} (limit {limit:.0f} s)\n")
    log.flush()
    t0 = time.time()
    p = subprocess.Popen(cmd, env=env, cwd=HERE, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        rc = p.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)   # the program and the ranks it spawned
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout=30)
            rc = f"killed after {limit:.0f} s"
        except subprocess.TimeoutExpired:   # stuck in the driver: leave it, go on
            rc = f"killed after {limit:.0f} s, still exiting"
    r = {"rc": rc, "seconds": round(time.time() - t0, 1), "cases_run": cases or "all", "env": extra}
    if script == "race_probe.py":
        files = sorted(glob.glob(os.path.join(d, "race_probe_*.json")))
        r["result"] = load(files[0]) if files else {"missing": "the probe wrote no result"}
        return r
    r["meta"] = load(os.path.join(d, "meta.json"))
    ranks = [load(f) for f in sorted(glob.glob(os.path.join(d, "rank*.json")))]
    r["ranks"] = ranks
    r["summary"] = summarize(ranks)
    errors = [f"rank {x.get('rank')}: {x['error']}" for x in ranks if x.get("error")]
    if errors:
        r["rank_errors"] = errors
    running = sorted({x["running"] for x in ranks if x.get("running")})
    if running:
        r["killed_while_running"] = running
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--world-size", type=int, default=int(os.environ.get("MG_WORLD_SIZE", "0")) or None)
    ap.add_argument("--only", default="", help="comma-separated program names")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--deadline", type=float, default=None,
                    help="seconds for the whole run (default: 200 at world size 1, else 560)")
    a = ap.parse_args()
    a.out = os.path.abspath(a.out)   # the programs run in this folder
    os.makedirs(a.out, exist_ok=True)
    ws = a.world_size
    if ws is None:
        gpus = sh(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"]).split()
        ws = max(1, len([g for g in gpus if g.isdigit()]))
    deadline = time.time() + (a.deadline or (200 if ws == 1 else 560))
    only = {n for n in a.only.split(",") if n}
    res = {"machine": {
        "nvidia_smi": sh(["nvidia-smi", "--query-gpu=index,name,driver_version,memory.total,clocks.max.sm",
                          "--format=csv,noheader"]),
        "topology": sh(["nvidia-smi", "topo", "-m"]),
        "host": platform.node(), "python": platform.python_version(), "started_unix": int(time.time())},
        "world_size": ws, "trials": a.trials, "programs": {}}
    path = os.path.join(a.out, "results.json")

    def save():
        with open(path + ".tmp", "w") as f:
            json.dump(res, f, indent=1, sort_keys=True)
        os.replace(path + ".tmp", path)

    save()
    with open(os.path.join(a.out, "log.txt"), "a") as log:
        for entry in (PROGRAMS_WS1 if ws == 1 else PROGRAMS):
            name, limit = entry[0], entry[4]
            if only and name not in only:
                continue
            left = deadline - time.time()
            if left < 25:
                res["programs"][name] = {"skipped": "out of time"}
                save()
                continue
            try:
                res["programs"][name] = run_program(entry, ws, a.trials, a.out, log, min(limit, left))
            except Exception as e:
                res["programs"][name] = {"driver_error": repr(e)}
            pr = res["programs"][name]
            print(f"{name}: rc={pr.get('rc')} {pr.get('seconds')} s "
                  f"{json.dumps(pr.get('summary', ''), sort_keys=True)[:300]}", flush=True)
            save()
    for pr in res["programs"].values():
        meta = pr.get("meta") or (pr.get("result") or {}).get("meta")
        if isinstance(meta, dict) and "torch" in meta:
            res["machine"].update({k: meta[k] for k in ("torch", "cuda", "nccl", "gpu") if k in meta})
            break
    res["finished_unix"] = int(time.time())
    save()


if __name__ == "__main__":
    main()
