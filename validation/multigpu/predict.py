"""What collsim predicts for each multi-GPU case, before any two-GPU run.

  python3 validation/multigpu/predict.py [SIMCTL] > validation/multigpu/predictions.json

For every row: the nominal schedule's verdict (`simctl run ... --budget 0`)
and 200 random schedules with the measured noise (`simctl explore ...
--strategy random --budget 200 --set jitter=measured`): how many schedules
showed each kind of finding; and the nominal step time of one all-reduce
alone (NCCL and the one-shot kernel) at the sizes the programs time
(scenarios/allreduce-alone.yaml). Runs on a CPU (no GPU, no torch); from the
repository root. The rows name the program case each will be compared with
(run_all.py's results.json: programs.PROGRAM.summary.CASE)."""
import json
import subprocess
import sys

D = "validation/multigpu/scenarios/"
ONESHOT = D + "oneshot-two-streams.yaml"
ALONE = D + "allreduce-alone.yaml"
SIZES = [("4k", 4096), ("64k", 65536), ("128k", 131072), ("1m", 1 << 20), ("16m", 1 << 24), ("256m", 1 << 28)]

# (row, program case it predicts, simctl target, variant, extra --set knobs)
ROWS = [
    ("one-shot, graph, buggy, natural", "oneshot graph-buggy-none; race_probe symm-buggy", ONESHOT, "buggy", []),
    ("one-shot, graph, fixed, natural", "oneshot graph-fixed-none; race_probe symm-fixed", ONESHOT, "fixed", []),
    ("one-shot, graph, buggy, sleep on aux (every rank)", "oneshot graph-buggy-aux", ONESHOT, "buggy", ["delay=aux"]),
    ("one-shot, graph, buggy, sleep on main (every rank)", "oneshot graph-buggy-main", ONESHOT, "buggy", ["delay=main"]),
    ("one-shot, graph, buggy, sleep on aux (odd rank)", "oneshot-buggy-odd-graph graph-buggy-aux-odd", ONESHOT, "buggy", ["delay=aux-odd"]),
    ("one-shot, graph, buggy, sleep on main (odd rank)", "oneshot-buggy-odd-graph graph-buggy-main-odd", ONESHOT, "buggy", ["delay=main-odd"]),
    ("one-shot, graph, fixed, sleep on aux (odd rank)", "oneshot graph-fixed-aux-odd", ONESHOT, "fixed", ["delay=aux-odd"]),
    ("one-shot, graph, fixed, sleep on main (odd rank)", "oneshot graph-fixed-main-odd", ONESHOT, "fixed", ["delay=main-odd"]),
    ("one-shot, eager, buggy, natural", "oneshot eager-buggy-none", ONESHOT, "buggy", ["mode=eager"]),
    ("one-shot, eager, fixed, natural", "oneshot eager-fixed-none", ONESHOT, "fixed", ["mode=eager"]),
    ("built-in p2p-oneshot-probe, buggy (the probe's op graph at its own times)", "race_probe symm-buggy",
     "p2p-oneshot-probe", "buggy", ["arch=h200"]),
    ("built-in p2p-oneshot-probe, NCCL, buggy", "race_probe nccl-buggy", "p2p-oneshot-probe", "buggy",
     ["arch=h200", "strategy=nccl"]),
    ("built-in p2p-oneshot-probe, NCCL, fixed", "race_probe nccl-fixed", "p2p-oneshot-probe", "fixed",
     ["arch=h200", "strategy=nccl"]),
    ("two NCCL communicators, GPUs reach them in opposite orders", "nccl-two-comms-consistent two-comms-consistent",
     D + "nccl-two-comms.yaml", "per-comm-order", []),
    ("the same, rank 1 also issues B first on the host", "nccl-two-comms-opposite two-comms-opposite",
     D + "nccl-two-comms.yaml", "per-comm-host-opposite", []),
    ("the same with NCCL_LAUNCH_ORDER_IMPLICIT=1", "nccl-implicit-two-comms-consistent two-comms-consistent",
     D + "nccl-two-comms.yaml", "implicit-order", []),
    ("NCCL_LAUNCH_ORDER_IMPLICIT=1, host orders opposite", "nccl-implicit-two-comms-opposite two-comms-opposite",
     D + "nccl-two-comms.yaml", "implicit-host-opposite", []),
    ("one NCCL communicator from two streams, same host order", "nccl one-comm-consistent",
     D + "nccl-one-comm.yaml", "consistent", []),
    ("one communicator, rank 1 swaps the two calls", "nccl one-comm-swapped", D + "nccl-one-comm.yaml", "swapped", []),
    ("one communicator, rank 1 passes a 4x count", "nccl-one-comm-count one-comm-count",
     D + "nccl-one-comm.yaml", "count-differs", []),
    ("one communicator, all-gather against all-reduce", "nccl-one-comm-op one-comm-op",
     D + "nccl-one-comm.yaml", "op-differs", []),
    ("two groups on one symmetric allocation, natural", "symm_pad_groups shared-none",
     D + "symm-pad-two-groups.yaml", "shared", []),
    ("two groups on one allocation, rank 1 late to A", "symm_pad_groups shared-odd",
     D + "symm-pad-two-groups.yaml", "shared-odd", []),
    ("an allocation per group, natural", "symm_pad_groups separate-none",
     D + "symm-pad-two-groups.yaml", "separate", []),
    ("an allocation per group, rank 1 late to A", "symm_pad_groups separate-odd",
     D + "symm-pad-two-groups.yaml", "separate-odd", []),
]


def simctl(exe, *args):
    p = subprocess.run([exe, *args, "--format", "json", "--no-expect"], capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"simctl {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    return json.loads(p.stdout)


def main():
    exe = sys.argv[1] if len(sys.argv) > 1 else "simctl"
    out = []
    for row, case, target, variant, sets in ROWS:
        s = [a for kv in sets for a in ("--set", kv)]
        run = simctl(exe, "run", target, "--variant", variant, "--budget", "0", *s)["variants"][0]
        ex = simctl(exe, "explore", target, "--variant", variant, "--strategy", "random", "--budget", "200",
                    "--set", "jitter=measured", *s)
        out.append({"row": row, "program_case": case,
                    "simctl": " ".join(["simctl run", target, "--variant", variant] + s),
                    "nominal": run["verdict"], "step_time_ns": run["step_time_ns"],
                    "explored": {"schedules": ex["schedules"], "verdict": ex["verdict"], "findings": ex["findings"]}})
    timings = []
    for size, nbytes in SIZES:
        d = simctl(exe, "run", ALONE, "--set", f"size={size}")
        for v in d["variants"]:
            timings.append({"bytes": nbytes, "strategy": v["name"], "step_time_ns": v["step_time_ns"],
                            "simctl": f"simctl run {ALONE} --variant {v['name']} --set size={size}"})
    json.dump({"rows": out, "allreduce_alone": timings}, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
