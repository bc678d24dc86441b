"""Check the multi-GPU harness without a GPU: run_all.py and the programs over a stand-in torch.

  python3 validation/multigpu/selftest/selftest.py

The stand-in (selftest/torch) runs each program's Python: spawning, the
store's barriers, records per case, the driver's merge. Four runs (about a
minute): every program at world size 1 (every case 200 trials, none wrong);
every program at two ranks (each case the driver names exists, both ranks
report it); two ranks with every event left unfinished (the watchdog
reports a hang on both ranks, and the cases after it are recorded as not
run); and a program that blocks past the driver's limit (killed, with the
case it was in). It
says nothing about what real torch, NCCL or a GPU do: that is run_all.py's
job on a GPU machine."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RUN_ALL = os.path.join(os.path.dirname(HERE), "run_all.py")


def run(out, env, *args):
    e = dict(os.environ, PYTHONPATH=HERE, NELEM="64", PYTHONDONTWRITEBYTECODE="1", FAKE_STORE_DIR=out, **env)
    p = subprocess.run([sys.executable, RUN_ALL, out, *args], env=e, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    with open(os.path.join(out, "results.json")) as f:
        return json.load(f)


def check(cond, what):
    if not cond:
        raise SystemExit(f"selftest: FAIL: {what}")
    print(f"ok: {what}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        r = run(os.path.join(tmp, "ws1"), {}, "--world-size", "1")
        progs = r["programs"]
        check(set(progs) == {"race_probe", "oneshot", "symm_pad_groups", "nccl", "nccl-implicit"},
              f"world size 1 runs every program ({sorted(progs)})")
        check(all(p.get("rc") == 0 for p in progs.values()), "every program exits 0")
        probe = progs["race_probe"]["result"]["results"]
        check(len(probe) == 4 and all(v["replays"] == 2000 for v in probe.values()), "the probe's four configurations")
        cases = {(n, c): s for n, p in progs.items() for c, s in p.get("summary", {}).items()}
        trials = {k: s for k, s in cases.items() if "trials" in s}
        check(len(trials) == 32 and all(s["trials"] == 200 and s["wrong_max"] == 0 and not s["hang"]
                                        for s in trials.values()),
              f"{len(trials)} cases of 200 trials, none wrong or hung")

        r = run(os.path.join(tmp, "ws2"), {"FAKE_GPUS": "2"}, "--world-size", "2")
        sys.path.insert(0, os.path.dirname(RUN_ALL))
        import run_all
        progs = r["programs"]
        check(sorted(progs) == sorted(p[0] for p in run_all.PROGRAMS), "world size 2 runs every program")
        bad = [(n, c, s) for n, p in progs.items() for c, s in p.get("summary", {}).items()
               if s.get("errors") or s.get("not_run") or s["ranks_reporting"] != 2]
        check(not bad and all(p.get("rc") == 0 for p in progs.values()),
              f"every case it names exists and reports from both ranks {bad[:2]}")

        r = run(os.path.join(tmp, "hang"), {"FAKE_GPUS": "2", "FAKE_HANG": "1", "MG_HANG_S": "1"},
                "--world-size", "2", "--only", "symm_pad_groups")
        p = r["programs"]["symm_pad_groups"]
        check(len(p["ranks"]) == 2 and p["summary"]["alone"]["hang"], "a hang is seen on both ranks")
        check(all("not_run" in s for c, s in p["summary"].items() if c != "alone"), "the cases after it are not run")

        r = run(os.path.join(tmp, "kill"), {"FAKE_GPUS": "2", "FAKE_HANG": "1", "MG_HANG_S": "1000"},
                "--world-size", "2", "--only", "nccl-one-comm-op", "--deadline", "30")
        p = r["programs"]["nccl-one-comm-op"]
        check(str(p["rc"]).startswith("killed") and p.get("killed_while_running") == ["one-comm-op"],
              f"a program past its limit is killed with the case it was in ({p['rc']})")
    print("selftest: PASS")


if __name__ == "__main__":
    main()
