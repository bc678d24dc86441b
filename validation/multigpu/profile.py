"""Measured collective times against the model's, and a fit for the hardware profile.

  python3 validation/multigpu/profile.py OUTDIR/results.json [validation/multigpu/predictions.json]

Reads run_all.py's results (the world group's NCCL all-reduce from 4 KiB to
256 MiB, case nccl/timing; the one-shot all-reduce of 128 KiB, case
oneshot/alone; each rank's median, the slowest rank taken) and prints, per
size, the measured time next to the model's (predictions.json,
allreduce_alone), then a least-squares fit of the ring all-reduce's time,
t = 2(n-1)·step + 2(n-1)/n · bytes / bw, which gives the profile's StepLat
(step) and NVLink (bw, bytes/s per direction) for ranks/gpu/hw.go. Needs no
GPU and no torch."""
import json
import sys


def slowest(ranks, case, key):
    vals = []
    for r in ranks:
        c = r.get("cases", {}).get(case, {})
        if c.get(key) is not None:
            vals.append(c[key])
    return max(vals) if vals else None


def main():
    res = json.load(open(sys.argv[1]))
    pred = json.load(open(sys.argv[2] if len(sys.argv) > 2 else "validation/multigpu/predictions.json"))
    n = res.get("world_size", 2)
    model = {(t["strategy"], t["bytes"]): t["step_time_ns"] / 1000.0 for t in pred.get("allreduce_alone", [])}
    nccl = res.get("programs", {}).get("nccl", {}).get("ranks", [])
    by = {}
    for r in nccl:
        for b, us in (r.get("cases", {}).get("timing", {}).get("world_allreduce_us_by_bytes") or {}).items():
            if us is not None:
                by[int(b)] = max(by.get(int(b), 0.0), us)
    print(f"world size {n}")
    print(f"{'bytes':>10} {'NCCL µs':>10} {'model µs':>10} {'ratio':>7}")
    for b in sorted(by):
        m = model.get(("nccl", b))
        ratio = f"{by[b] / m:7.2f}" if m else "      -"
        print(f"{b:>10} {by[b]:>10.2f} {m if m is not None else float('nan'):>10.2f} {ratio}")
    one = slowest(res.get("programs", {}).get("oneshot", {}).get("ranks", []), "alone", "allreduce_alone_us")
    if one is not None:
        m = model.get(("oneshot", 131072))
        print(f"one-shot 128 KiB: {one:.2f} µs measured, {m} µs model")
    if n < 2 or len(by) < 2:
        print("no fit: it needs two ranks and two sizes")
        return
    # t = a + b·x with x = 2(n-1)/n·bytes; a = 2(n-1)·step, b = 1/bw
    xs = [2 * (n - 1) / n * b for b in sorted(by)]
    ys = [by[b] * 1e-6 for b in sorted(by)]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    a = my - b * mx
    print(f"fit: StepLat {a / (2 * (n - 1)) * 1e9:.0f} ns, NVLink {1 / b / 1e9:.0f} GB/s per direction "
          f"(h200 profile: StepLat 1200 ns, NVLink 450 GB/s)")


if __name__ == "__main__":
    main()
