"""Run the corpus on a GPU: record each program's trace and measure its ground truth.

    python3 validation/corpus/corpus.py run OUTDIR [NAME,...]      traces + wrong-output counts
    python3 validation/corpus/corpus.py sanitize OUTDIR [NAME,...] PyTorch's CUDA sanitizer on each

run: each kind of program (eager and graph; torch.compile; NCCL) in its own
process. For each program: set up and warm up, record one step with
collsim_record.record (the importer's documented settings) into
OUTDIR/traces/NAME.json and NAME.et.json, then run TRIALS steps at natural
timing and TRIALS with torch.cuda._sleep(SLEEP) injected where the program
says (the stream that must lose), each checked against a serial reference
after a device sync. Writes OUTDIR/run.json and OUTDIR/traces.tar.gz.

sanitize: each program in its own process with TORCH_CUDA_SANITIZER=1
(torch.cuda._sanitizer), three steps at natural timing; detected means the
sanitizer raised or reported a data race. Eight processes at a time (the
sanitizer judges the order of issue, not timing). Writes OUTDIR/sanitize.json.
"""
import json
import os
import subprocess
import sys
import tarfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
            "PYTHONUNBUFFERED": "1"}
TRIALS = int(os.environ.get("CORPUS_TRIALS", "200"))
SLEEP = int(os.environ.get("CORPUS_SLEEP", "2000000"))   # cycles: about 1 ms at 1.98 GHz


def wrong(pairs):
    import torch
    bad = []
    for i, (got, want) in enumerate(pairs):
        want = want.to(got.device)
        if got.shape != want.shape or not torch.allclose(got.float(), want.float(), rtol=1e-3, atol=1e-3):
            bad.append(i)
    return bad


def trials(p, sleep, n):
    import torch
    bad = 0
    for _ in range(n):
        pairs = p.step(sleep)
        torch.cuda.synchronize()
        if wrong(pairs):
            bad += 1
    return bad


def run_one(cls, out):
    import torch
    from collsim_record import record
    name = cls.__name__
    r = {"mechanism": cls.mechanism, "intent": cls.intent, "kind": cls.kind, "delay": cls.delay,
         "doc": (cls.__doc__ or "").strip(), "step_mark": cls.step_mark}
    import collsim_record
    collsim_record.clear_captures()     # captures of earlier programs in this process are not this one's
    t0 = time.time()
    p = cls()
    p.setup()
    prefix = os.path.join(out, "traces", name)
    pairs = p.record(lambda step=True: record(prefix, step=step))
    torch.cuda.synchronize()
    r["recorded_step_wrong"] = bool(wrong(pairs))
    for _ in range(3):
        p.step(0)
    torch.cuda.synchronize()
    r["trials"] = TRIALS
    r["wrong_natural"] = trials(p, 0, TRIALS)
    r["sleep_cycles"] = SLEEP
    r["wrong_delayed"] = trials(p, SLEEP, TRIALS)
    # step time at natural timing, by events, outside the profiler
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(20):
        torch.cuda.synchronize()
        e0.record()
        p.step(0)
        e1.record()
        torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1) * 1000)
    ts.sort()
    r["step_us_median"] = round(ts[len(ts) // 2], 1)
    if cls.intent == "frozen":
        r["label"] = "frozen" if r["wrong_natural"] == TRIALS else ("racy" if r["wrong_natural"] or r["wrong_delayed"] else "clean")
    else:
        r["label"] = "racy" if (r["wrong_natural"] or r["wrong_delayed"]) else "clean"
    r["seconds"] = round(time.time() - t0, 1)
    del p
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return r


def child_run(out, names):
    """Run the named programs in this process, appending one JSON line per program to run.jsonl."""
    import torch
    from programs import PROGRAMS
    by = {c.__name__: c for c in PROGRAMS}
    for n in names:
        with open(os.path.join(out, "progress"), "w") as f:
            f.write(n)
        try:
            r = run_one(by[n], out)
        except Exception as e:
            r = {"error": repr(e), "trace": traceback.format_exc()[-2000:]}
            torch.cuda.synchronize()
        with open(os.path.join(out, "run.jsonl"), "a") as f:
            f.write(json.dumps({"name": n, **r}, sort_keys=True) + "\n")
        print(n, json.dumps(r)[:300], flush=True)


def supervise(out, names, env, limit, log, deadline):
    """Run names in a child; a program that runs past limit seconds is killed, marked, and the rest go on."""
    done = set()
    path = os.path.join(out, "run.jsonl")
    while True:
        if os.path.exists(path):
            done = {json.loads(l)["name"] for l in open(path) if l.strip()}
        rest = [n for n in names if n not in done]
        if not rest or time.time() > deadline:
            return
        prog = os.path.join(out, "progress")
        if os.path.exists(prog):
            os.remove(prog)
        pr = subprocess.Popen([sys.executable, __file__, "child-run", out, ",".join(rest)], env=env,
                              stdout=log, stderr=subprocess.STDOUT)
        cur, since = None, time.time()
        while pr.poll() is None:
            time.sleep(0.5)
            c = open(prog).read() if os.path.exists(prog) else None
            if c != cur:
                cur, since = c, time.time()
            if time.time() - since > limit or time.time() > deadline:
                pr.kill()
                pr.wait()
                if cur:
                    with open(path, "a") as f:
                        f.write(json.dumps({"name": cur, "error": f"timeout after {limit} s"}) + "\n")
                break


def child_sanitize(name, out):
    import torch
    import torch.cuda._sanitizer as csan
    from programs import PROGRAMS
    cls = {c.__name__: c for c in PROGRAMS}[name]
    r = {"enabled": csan.TORCH_CUDA_SANITIZER_ENABLED if hasattr(csan, "TORCH_CUDA_SANITIZER_ENABLED") else None}
    try:
        p = cls()
        p.setup()
        for _ in range(3):
            p.step(0)
        torch.cuda.synchronize()
        r["detected"] = False
    except Exception as e:   # the sanitizer raises CUDASanitizerErrors on a race
        r["detected"] = "CUDASanitizer" in type(e).__name__ or "data race" in str(e).lower()
        r["exception"] = type(e).__name__
        r["message"] = str(e)[:1500]
    print("CSAN-RESULT " + json.dumps(r), flush=True)


def versions():
    import torch
    v = {"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0)}
    try:
        v["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    except Exception:
        pass
    try:
        v["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                     capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:
        pass
    return v


def main():
    mode, out = sys.argv[1], sys.argv[2]
    only = set(sys.argv[3].split(",")) if len(sys.argv) > 3 and sys.argv[3] else None
    os.makedirs(os.path.join(out, "traces"), exist_ok=True)
    env = dict(os.environ, **SAFE_ENV)
    if mode == "child-run":
        return child_run(out, sys.argv[3].split(","))
    if mode == "child-sanitize":
        return child_sanitize(sys.argv[3], out)
    if mode == "run":
        t0 = time.time()
        from_programs = __import__("programs").PROGRAMS
        names = [c.__name__ for c in from_programs if not only or c.__name__ in only]
        log = open(os.path.join(out, "log.txt"), "a")
        deadline = t0 + float(os.environ.get("CORPUS_DEADLINE", "420"))
        # one child per kind: eager and graph programs, then torch.compile, then NCCL
        for kinds in [("eager", "graph"), ("compile",), ("nccl",)]:
            sel = [c.__name__ for c in from_programs if c.kind in kinds and c.__name__ in names]
            supervise(out, sel, env, 150 if "compile" in kinds else 60, log, deadline)
        res = {"programs": {}}
        for l in open(os.path.join(out, "run.jsonl")):
            if l.strip():
                d = json.loads(l)
                res["programs"][d.pop("name")] = d
        res["versions"] = json.loads(subprocess.run([sys.executable, "-c",
                                                     "import sys; sys.path.insert(0, %r); import corpus, json; print(json.dumps(corpus.versions()))" % HERE],
                                                    env=env, capture_output=True, text=True).stdout or "{}")
        res["seconds"] = round(time.time() - t0, 1)
        with open(os.path.join(out, "run.json"), "w") as f:
            json.dump(res, f, indent=1, sort_keys=True)
        with tarfile.open(os.path.join(out, "traces.tar.gz"), "w:gz") as t:
            t.add(os.path.join(out, "traces"), arcname="traces")
        return
    if mode == "sanitize":
        from programs import PROGRAMS
        names = [c.__name__ for c in PROGRAMS if not only or c.__name__ in only]
        senv = dict(env, TORCH_CUDA_SANITIZER="1")
        deadline = time.time() + float(os.environ.get("CORPUS_DEADLINE", "150"))
        procs, res = {}, {}
        pending = list(names)
        while (pending and time.time() < deadline) or procs:
            while pending and len(procs) < 8 and time.time() < deadline:
                n = pending.pop(0)
                procs[n] = (subprocess.Popen([sys.executable, __file__, "child-sanitize", out, n], env=senv,
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), time.time())
            for n, (pr, ts) in list(procs.items()):
                if pr.poll() is None and time.time() - ts < 90 and time.time() < deadline:
                    continue
                if pr.poll() is None:
                    pr.kill()
                so, se = pr.communicate()
                line = [l for l in so.splitlines() if l.startswith("CSAN-RESULT ")]
                r = json.loads(line[-1][len("CSAN-RESULT "):]) if line else {"error": f"rc={pr.returncode}"}
                if "CSAN" in se or "data race" in se.lower():
                    r["stderr_race"] = True
                r["stderr_tail"] = se[-800:]
                res[n] = r
                del procs[n]
                print(n, r.get("detected"), r.get("error", ""), flush=True)
            time.sleep(0.2)
        with open(os.path.join(out, "sanitize.json"), "w") as f:
            json.dump(res, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
