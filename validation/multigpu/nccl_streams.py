"""NCCL all-reduces issued from two CUDA streams: two communicators, and one.

Two communicators A and B (two process groups over every rank, each with its
own NCCL communicator and internal stream), A issued under stream s1 and B
under s2 (the two-comms-opposite-order shape):

  two-comms-consistent  every rank issues A then B; a prep kernel before each,
                        short before A and long (torch.cuda._sleep) before B on
                        even ranks, the other way on odd ranks: the GPUs reach
                        A and B in opposite orders
  two-comms-opposite    the same, but odd ranks also issue B before A on the host

Whether these hang depends on NCCL_LAUNCH_ORDER_IMPLICIT, which run_all.py
sets per process (0 and 1). One communicator (the world group) used from two
streams, X under s1 and Y under s2, 1 MiB each (nccl-order-mismatch and
tp8-shared-expert's NCCL placements; the scenario file names them aux and
main):

  one-comm-consistent   every rank issues X (aux) then Y (main)
  one-comm-swapped      odd ranks issue Y then X: equal sizes
  one-comm-count        odd ranks pass X a 4x larger count
  one-comm-op           odd ranks call all_gather where even ranks call all_reduce (X of 256 KiB)

A trial is wrong when any element of an output differs from its sum; a trial
that does not finish within --hang-s seconds is a hang, and ends the program
(its communicators are stuck), so run_all.py runs the cases that may hang in
processes of their own. The "timing" case times A alone, B alone and A with B
overlapped on two communicators, X with Y on one, and one all-reduce of the
world group from 4 KiB to 256 MiB (latency and bandwidth for a profile)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mg  # noqa: E402

N = int(os.environ.get("NELEM", str(1 << 18)))   # 1 MiB of fp32


class Setup:
    def __init__(self, ctx):
        import torch
        import torch.distributed as dist
        r, ws, dev = ctx.rank, ctx.ws, ctx.device
        self.ga = dist.new_group(list(range(ws)))
        self.gb = dist.new_group(list(range(ws)))
        self.world = dist.group.WORLD
        self.s1, self.s2 = torch.cuda.Stream(), torch.cuda.Stream()
        self.vals = {"A": 10.0, "B": 1000.0, "X": 5000.0, "Y": 7000.0}
        self.inp = {k: torch.full((N,), v + r, device=dev) for k, v in self.vals.items()}
        self.inp["X4"] = torch.full((4 * N,), self.vals["X"] + r, device=dev)
        self.inp["Xq"] = torch.full((N // 4,), self.vals["X"] + r, device=dev)
        self.want = {k: sum(v + i for i in range(ws)) for k, v in self.vals.items()}
        self.want["Xq"] = self.want["X"]
        # Create every communicator in one order on every rank (NCCL's init blocks the host).
        for g in (self.world, self.ga, self.gb):
            t = torch.ones(8, device=dev)
            dist.all_reduce(t, group=g)
            torch.cuda.synchronize()
        ctx.res["nccl_launch_order_implicit"] = os.environ.get("NCCL_LAUNCH_ORDER_IMPLICIT", "")


def issue(s, ctx, name, group, stream, sleep, op="all_reduce", count4=False):
    """Issue one collective of name's input under stream, after a prep kernel; return (output, want)."""
    import torch
    import torch.distributed as dist
    with torch.cuda.stream(stream):
        if sleep:
            torch.cuda._sleep(mg.SLEEP_CYCLES)
        src = s.inp["X4"] if count4 else s.inp[name]
        if op == "all_gather":
            out = torch.empty(src.numel() * ctx.ws, device=ctx.device)
            dist.all_gather_into_tensor(out, src.clone(), group=group)
            want = None   # a gather is never right in a world that all-reduces
        else:
            out = src.clone()
            dist.all_reduce(out, group=group)
            want = s.want[name]
    return out, want


def wrong(results):
    bad = None
    for out, want in results:
        b = (out != want).sum() if want is not None else out.new_ones(()).sum()
        bad = b if bad is None else bad + b
    return bad


def run_trials(ctx, s, step):
    import torch
    bad = 0
    i = 0
    try:
        for i in range(ctx.trials):
            results = step()
            cur = torch.cuda.current_stream()
            cur.wait_stream(s.s1)
            cur.wait_stream(s.s2)
            nbad = wrong(results)
            ev = torch.cuda.Event()
            ev.record()
            ctx.wait_done(ev)
            if int(nbad.item()):
                bad += 1
    except mg.Hang as e:
        e.partial = {"hang_at_trial": i, "wrong_before_hang": bad}
        raise
    return {"trials": ctx.trials, "wrong": bad, "hang": False}


def fork(s):
    import torch
    s.s1.wait_stream(torch.cuda.current_stream())
    s.s2.wait_stream(torch.cuda.current_stream())


def two_comms(ctx, s, opposite):
    odd = ctx.rank % 2 == 1

    def step():
        fork(s)
        a_first = not (opposite and odd)
        calls = [("A", s.ga, s.s1, odd), ("B", s.gb, s.s2, not odd)]
        if not a_first:
            calls.reverse()
        return [issue(s, ctx, n, g, st, sl) for n, g, st, sl in calls]

    r = run_trials(ctx, s, step)
    r["host_order"] = "B then A" if (opposite and odd) else "A then B"
    r["long_prep_before"] = "A" if odd else "B"
    return r


def one_comm(ctx, s, how):
    odd = ctx.rank % 2 == 1

    def step():
        fork(s)
        x = dict(name="X", group=s.world, stream=s.s1, sleep=False)
        y = dict(name="Y", group=s.world, stream=s.s2, sleep=False)
        if odd and how == "count":
            x["count4"] = True
        if how == "op":   # 256 KiB: one piece per ring step either way, as in the model
            x["name"] = "Xq"
            if odd:
                x["op"] = "all_gather"
        calls = [y, x] if (odd and how == "swapped") else [x, y]
        return [issue(s, ctx, **c) for c in calls]

    r = run_trials(ctx, s, step)
    r["host_order"] = "Y then X" if (odd and how == "swapped") else "X then Y"
    return r


def timing(ctx, s):
    import torch

    def one(name, group, stream):
        def f():
            fork(s)
            issue(s, ctx, name, group, stream, False)
            torch.cuda.current_stream().wait_stream(stream)
        return f

    def both(pairs):
        def f():
            fork(s)
            for name, group, stream in pairs:
                issue(s, ctx, name, group, stream, False)
            torch.cuda.current_stream().wait_stream(s.s1)
            torch.cuda.current_stream().wait_stream(s.s2)
        return f

    import torch.distributed as dist
    by_size = {}
    for k in (1 << 10, 1 << 14, 1 << 18, 1 << 22, 1 << 26):   # 4 KiB .. 256 MiB: latency and NVLink bandwidth
        t = torch.ones(k, device=ctx.device)
        by_size[str(4 * k)] = mg.time_us(ctx, lambda t=t: dist.all_reduce(t, group=s.world), iters=20)
        del t
    return {"bytes": 4 * N, "world_allreduce_us_by_bytes": by_size,
            "A_alone_us": mg.time_us(ctx, one("A", s.ga, s.s1)),
            "B_alone_us": mg.time_us(ctx, one("B", s.gb, s.s2)),
            "A_B_two_comms_overlapped_us": mg.time_us(ctx, both([("A", s.ga, s.s1), ("B", s.gb, s.s2)])),
            "X_alone_us": mg.time_us(ctx, one("X", s.world, s.s1)),
            "X_Y_one_comm_two_streams_us": mg.time_us(ctx, both([("X", s.world, s.s1), ("Y", s.world, s.s2)]))}


def worker(ctx):
    s = Setup(ctx)
    if ctx.ws == 1:
        ctx.res["world_size_1"] = ("one rank: no odd rank, so every case issues in one order, and a collective "
                                   "has no peer to wait for: nothing here can hang or mix data at one rank")
    cases = [
        ("timing", lambda c: timing(c, s)),
        ("one-comm-consistent", lambda c: one_comm(c, s, "consistent")),
        ("one-comm-swapped", lambda c: one_comm(c, s, "swapped")),
        ("two-comms-consistent", lambda c: two_comms(c, s, False)),
        ("two-comms-opposite", lambda c: two_comms(c, s, True)),
        ("one-comm-count", lambda c: one_comm(c, s, "count")),
        ("one-comm-op", lambda c: one_comm(c, s, "op")),
    ]
    mg.run_cases(ctx, cases, ctx.args.cases)


if __name__ == "__main__":
    mg.launch(worker, __doc__)
