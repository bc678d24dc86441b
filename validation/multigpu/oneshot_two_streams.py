"""Two one-shot symmetric-memory all-reduces over one workspace, from two streams.

race_probe.py's symmetric-memory half, widened: every rank runs a shared
branch (x_sh * w + 0, into the workspace, one_shot_all_reduce) and a routed
branch (the same on x_rt); buggy runs the shared branch's all-reduce on the
aux stream concurrently with the routed one on main, fixed joins the streams
first and runs both on main (TensorRT-LLM PR #14917's two placements). Each
in a replayed CUDA graph and eager, at natural timing and with
torch.cuda._sleep injected before one stream's all-reduce:

  delay none      natural timing
  delay aux       every rank sleeps on aux before the shared all-reduce
  delay main      every rank sleeps on main before the routed all-reduce
  delay aux-odd   odd ranks only, on aux (the ranks reach the two in different orders)
  delay main-odd  odd ranks only, on main

A replay is wrong when any element of either output differs from its sum
(shared 100·Σ(r+1), routed Σ(r+1)). Timings: one all-reduce alone (copy in
and the one-shot kernel, graph replay), and a whole step of each placement.
The buggy odd-rank delays can hang (the two ops' device order differs
across ranks; the same signal-pad slots): they run last, after every fixed
case, since a hang ends the program.

MULTIMEM (multimem_all_reduce_) is not run: it needs NVLink multicast
objects, which these programs keep off."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mg  # noqa: E402  (sets the multicast-off environment first)

N = int(os.environ.get("NELEM", str(1 << 15)))
DELAYS = ["none", "aux", "main", "aux-odd", "main-odd"]


class Setup:
    def __init__(self, ctx):
        import torch
        import torch.distributed as dist
        import torch.distributed._symmetric_memory as symm_mem
        self.gname = dist.group.WORLD.group_name
        try:
            symm_mem.enable_symm_mem_for_group(self.gname)
        except Exception as e:  # newer versions need no opt-in
            ctx.res["enable_symm_mem_for_group"] = repr(e)[:200]
        dev, r, ws = ctx.device, ctx.rank, ctx.ws
        self.buf = symm_mem.empty(N, dtype=torch.float32, device=dev)
        h = symm_mem.rendezvous(self.buf, self.gname)
        ctx.res["signal_pad_size"] = getattr(h, "signal_pad_size", None)
        self.x_sh = torch.full((N,), 100.0 * (r + 1), device=dev)
        self.x_rt = torch.full((N,), 1.0 * (r + 1), device=dev)
        self.w = torch.ones((N,), device=dev)
        self.want_sh = 100.0 * sum(i + 1 for i in range(ws))
        self.want_rt = 1.0 * sum(i + 1 for i in range(ws))
        self.aux = torch.cuda.Stream()

    def allreduce(self, t):
        import torch
        self.buf.copy_(t)
        return torch.ops.symm_mem.one_shot_all_reduce(self.buf, "sum", self.gname)


def make_body(s, ctx, placement, delay):
    """The step: returns a function filling outs["sh"], outs["rt"]."""
    import torch
    odd = ctx.rank % 2 == 1
    sleep_aux = delay == "aux" or (delay == "aux-odd" and odd)
    sleep_main = delay == "main" or (delay == "main-odd" and odd)
    ev_main, ev_aux = torch.cuda.Event(), torch.cuda.Event()
    outs = {}

    def body():
        cur = torch.cuda.current_stream()
        ev_main.record(cur)
        with torch.cuda.stream(s.aux):
            s.aux.wait_event(ev_main)
            y_sh = (s.x_sh * s.w) + 0.0
            if placement == "buggy":
                if sleep_aux:
                    torch.cuda._sleep(mg.SLEEP_CYCLES)
                outs["sh"] = s.allreduce(y_sh)
            ev_aux.record(s.aux)
        y_rt = (s.x_rt * s.w) + 0.0
        if placement == "buggy":
            if sleep_main:
                torch.cuda._sleep(mg.SLEEP_CYCLES)
            outs["rt"] = s.allreduce(y_rt)
            cur.wait_event(ev_aux)
        else:
            cur.wait_event(ev_aux)
            if sleep_aux:
                torch.cuda._sleep(mg.SLEEP_CYCLES)
            outs["sh"] = s.allreduce(y_sh)
            if sleep_main:
                torch.cuda._sleep(mg.SLEEP_CYCLES)
            outs["rt"] = s.allreduce(y_rt)
        outs["merge"] = outs["sh"] + outs["rt"]

    return body, outs


def capture(ctx, body):
    import torch
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            body()
    torch.cuda.current_stream().wait_stream(side)
    ev = torch.cuda.Event()
    ev.record()
    ctx.wait_done(ev)
    if not ctx.barrier("capture"):
        raise mg.Hang("a peer did not reach the capture")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        body()
    torch.cuda.synchronize()
    return g


def trials(ctx, s, mode, placement, delay):
    import torch
    body, outs = make_body(s, ctx, placement, delay)
    run = capture(ctx, body).replay if mode == "graph" else body
    bad = bad_elems_max = 0
    i = 0
    try:
        for i in range(ctx.trials):
            run()
            nbad = (outs["sh"] != s.want_sh).sum() + (outs["rt"] != s.want_rt).sum()
            ev = torch.cuda.Event()
            ev.record()
            ctx.wait_done(ev)
            n = int(nbad.item())
            if n:
                bad += 1
                bad_elems_max = max(bad_elems_max, n)
    except mg.Hang as e:
        e.partial = {"hang_at_trial": i, "wrong_before_hang": bad}
        raise
    r = {"trials": ctx.trials, "wrong": bad, "wrong_elems_max": bad_elems_max, "elems_per_trial": 2 * N}
    if delay == "none":
        r["step_us"] = mg.time_us(ctx, run)
    return r


def worker(ctx):
    s = Setup(ctx)
    ctx.res["multimem"] = {"not_run": "MULTIMEM needs NVLink multicast (cuMulticastCreate), which these programs keep off"}
    if ctx.ws == 1:
        ctx.res["world_size_1"] = ("one rank: the one-shot reads only its own workspace and no peer can "
                                   "pair with the other op; the two streams still share the one workspace")

    def alone(c):
        import torch
        t = (s.x_rt * s.w) + 0.0
        g = torch.cuda.CUDAGraph()
        s.allreduce(t)
        torch.cuda.synchronize()
        with torch.cuda.graph(g):
            s.allreduce(t)
        return {"allreduce_alone_us": mg.time_us(c, g.replay), "bytes": 4 * N}

    # Those that may hang last: every fixed case, then buggy at one order on every rank, then buggy with
    # the odd ranks late (the two ops' device order differs across ranks).
    cases = [("alone", alone)]
    even = [d for d in DELAYS if not d.endswith("-odd")]
    odd = [d for d in DELAYS if d.endswith("-odd")]
    for placement, delays in (("fixed", even + odd), ("buggy", even), ("buggy", odd)):
        for delay in delays:
            for mode in ("graph", "eager"):
                cases.append((f"{mode}-{placement}-{delay}",
                              lambda c, m=mode, p=placement, d=delay: trials(c, s, m, p, d)))
    mg.run_cases(ctx, cases, ctx.args.cases)


if __name__ == "__main__":
    mg.launch(worker, __doc__)
