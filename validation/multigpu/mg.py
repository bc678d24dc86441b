"""Shared harness of the multi-GPU programs (run by run_all.py; see README.md).

A program calls launch(worker, cases): it reads --world-size, --out, --cases,
--trials and --hang-s, spawns one process per rank with
torch.multiprocessing.spawn (no torchrun), and gives worker(ctx) a Ctx: rank,
world size, device, a TCPStore of its own (barriers and the hang flag that
keep working when NCCL is stuck) and a record(case, dict) that rewrites
OUT/rank<r>.json after every case, so a killed run still leaves what it did.

NVLink multicast stays off (the environment below is set before torch loads
NCCL or symmetric memory); nothing here calls cuMulticastCreate or a
multimem op.

Hangs: a trial's completion is an event polled on the host until --hang-s
seconds have passed (wait_done). A rank that sees a hang records it, sets the
store's hang flag so the other ranks stop too, and leaves with os._exit (a
spinning kernel would block a clean shutdown); the cases after it are
recorded as not run."""
import argparse
import datetime
import json
import os
import socket
import statistics
import sys
import time
import traceback

SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
            "PYTHONUNBUFFERED": "1"}
os.environ.update(SAFE_ENV)

SLEEP_CYCLES = int(os.environ.get("MG_SLEEP", "2000000"))   # torch.cuda._sleep: about 1 ms at 1.98 GHz


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Hang(Exception):
    """A trial did not finish within --hang-s seconds (or a peer said so)."""


class Ctx:
    def __init__(self, rank, ws, args, store):
        import torch
        self.rank, self.ws, self.args, self.store = rank, ws, args, store
        self.device = torch.device("cuda", rank)
        self.trials = args.trials
        self.hang_s = args.hang_s
        self.path = os.path.join(args.out, f"rank{rank}.json")
        self.res = {"rank": rank, "world_size": ws, "cases": {}}
        self._seq = 0
        self.write()

    def write(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.res, f, indent=1, sort_keys=True)
        os.replace(tmp, self.path)

    def record(self, case, obj):
        self.res["cases"][case] = obj
        self.write()

    def log(self, *a):
        if self.rank == 0:
            print(*a, flush=True)

    def hung(self):
        """Whether some rank has flagged a hang."""
        try:
            return self.store.check(["mg/hang"])
        except Exception:
            return False

    def flag_hang(self, case):
        try:
            self.store.set("mg/hang", f"{case} on rank {self.rank}")
        except Exception:
            pass

    def barrier(self, name, timeout_s=None):
        """A barrier through the store (not NCCL): False if not every rank came within timeout_s."""
        timeout_s = self.hang_s if timeout_s is None else timeout_s
        self._seq += 1
        key = f"mg/barrier/{self._seq}/{name}"   # every rank calls barriers in one order
        self.store.add(key, 1)
        deadline = time.time() + timeout_s
        while self.store.add(key, 0) < self.ws:
            if time.time() > deadline or self.hung():
                return False
            time.sleep(0.002)
        return True

    def wait_done(self, ev):
        """Poll a CUDA event until it completes; raise Hang after hang_s seconds or when a peer flagged one."""
        deadline = time.time() + self.hang_s
        n = 0
        while not ev.query():
            n += 1
            if n % 64 == 0:
                if time.time() > deadline:
                    raise Hang(f"not done after {self.hang_s} s")
                if self.hung():
                    raise Hang("a peer flagged a hang")
            time.sleep(0.0001)


def median_us(samples_ms):
    return round(statistics.median(samples_ms) * 1000.0, 2) if samples_ms else None


def time_us(ctx, fn, iters=30, warm=3):
    """Median device time (µs) of fn() on the current stream, by CUDA events; each iteration waited with the watchdog."""
    import torch
    for _ in range(warm):
        fn()
        ev = torch.cuda.Event()
        ev.record()
        ctx.wait_done(ev)
    ms = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        ctx.wait_done(b)
        ms.append(a.elapsed_time(b))
    return median_us(ms)


def run_cases(ctx, cases, wanted):
    """Run cases (an ordered list of (name, fn)) whose names are wanted (all if empty); fn(ctx) returns a dict.

    An exception is recorded as the case's error and the next case runs; a hang is recorded and ends
    the program (the communicators it used are stuck), the cases left recorded as not run."""
    names = [n for n, _ in cases if not wanted or n in wanted]
    for n in wanted:
        if n not in [c for c, _ in cases]:
            ctx.record(n, {"error": "no such case in this program"})
    for i, (name, fn) in enumerate([c for c in cases if c[0] in names]):
        if not ctx.barrier(f"start/{name}", timeout_s=max(60.0, ctx.hang_s)):
            ctx.record(name, {"not_run": "the ranks did not all reach this case (a peer hung or failed)"})
            _stop(ctx, names[i + 1:], name)
        ctx.res["running"] = name   # what a killed run was doing
        ctx.write()
        t0 = time.time()
        try:
            r = fn(ctx)
        except Hang as e:
            ctx.flag_hang(name)
            ctx.record(name, {"hang": True, "detail": str(e), "seconds": round(time.time() - t0, 1),
                              **getattr(e, "partial", {})})
            ctx.log(name, "HANG", str(e))
            _stop(ctx, names[i + 1:], name)
        except Exception as e:
            r = {"error": repr(e)[:600], "trace": traceback.format_exc()[-1500:]}
        r["seconds"] = round(time.time() - t0, 1)
        ctx.record(name, r)
        ctx.log(name, json.dumps(r, sort_keys=True)[:400])
    ctx.res.pop("running", None)
    ctx.res["finished"] = True
    ctx.write()


def _stop(ctx, rest, after):
    for n in rest:
        ctx.res["cases"][n] = {"not_run": f"{after} hung or stopped the ranks; its communicators are stuck"}
    ctx.write()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)   # a spinning kernel would block destroy_process_group and interpreter exit


def _entry(rank, worker, args, port, ws):
    import torch
    import torch.distributed as dist
    torch.cuda.set_device(rank)
    store = dist.TCPStore("127.0.0.1", port, ws, rank == 0, timeout=datetime.timedelta(seconds=120))
    timeout = datetime.timedelta(seconds=max(60, int(4 * args.hang_s)))
    dist.init_process_group("nccl", store=store, rank=rank, world_size=ws, timeout=timeout)
    ctx = Ctx(rank, ws, args, store)
    ctx.res["env"] = {k: os.environ.get(k) for k in sorted(SAFE_ENV) + ["NCCL_LAUNCH_ORDER_IMPLICIT"]}
    try:
        worker(ctx)
    except Exception as e:
        ctx.res["error"] = repr(e)[:600]
        ctx.res["trace"] = traceback.format_exc()[-2000:]
        ctx.write()
        os._exit(1)
    # Every rank done: leave without destroy_process_group, which can block on a communicator
    # that an earlier, abandoned trial left busy.
    ctx.barrier("exit", timeout_s=30)
    sys.stdout.flush()
    os._exit(0)


def launch(worker, cases_help=""):
    """Parse the common arguments, write OUT/meta.json, and spawn worker on every rank."""
    ap = argparse.ArgumentParser(description=cases_help)
    ap.add_argument("--world-size", type=int, default=int(os.environ.get("MG_WORLD_SIZE", "2")))
    ap.add_argument("--out", required=True, help="folder for meta.json and rank<r>.json")
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all, in order)")
    ap.add_argument("--trials", type=int, default=int(os.environ.get("MG_TRIALS", "200")))
    ap.add_argument("--hang-s", type=float, default=float(os.environ.get("MG_HANG_S", "15")),
                    help="seconds a trial may take before it counts as a hang")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import torch
    import torch.multiprocessing as mp
    meta = {"argv": sys.argv[1:], "world_size": args.world_size, "trials": args.trials, "hang_s": args.hang_s,
            "sleep_cycles": SLEEP_CYCLES, "torch": torch.__version__, "cuda": torch.version.cuda,
            "gpus": torch.cuda.device_count()}
    try:
        meta["gpu"] = torch.cuda.get_device_name(0)
        meta["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    except Exception as e:
        meta["version_error"] = repr(e)
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
    if args.world_size > torch.cuda.device_count():
        print(json.dumps({"error": f"world size {args.world_size} needs that many GPUs; "
                                   f"{torch.cuda.device_count()} visible"}), flush=True)
        sys.exit(3)
    args.cases = [c for c in args.cases.split(",") if c]
    mp.spawn(_entry, args=(worker, args, free_port(), args.world_size), nprocs=args.world_size, join=True)
