"""One symmetric-memory allocation, two process groups, two streams: is the signal pad shared?

Groups A (the world group) and B (a second group over the same ranks) both
rendezvous on one symm_mem allocation of 2N floats; A's one-shot all-reduce
works on its first half (stream a), B's on its second half (stream b), both in
flight at once. The data never overlap; only the signal pad can (PyTorch
#192581: a pad per allocation, slot world_size·channel + rank, no group id).
The program records whether the two rendezvous handles give the same
signal-pad address on this rank (the aliasing itself), then:

  shared-none      both groups on the one allocation, natural timing
  shared-odd       the same with torch.cuda._sleep before A on odd ranks
  separate-none    each group on an allocation of its own (its own pad)
  separate-odd     the same with the odd-rank delay

A trial is wrong when any element of either output differs from its sum; the
shared cases may hang (a signal of one group completes the other's wait)
and run last. The model's symm-pad-aliasing has three ranks and groups
{0,1,2} and {0,2}; with two GPUs both groups hold both ranks, so the two
groups' slots coincide outright (scenarios/symm-pad-two-groups.yaml)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mg  # noqa: E402

N = int(os.environ.get("NELEM", str(1 << 14)))


def pad_ptr(h, rank):
    """This rank's signal-pad address in a rendezvous handle, or None where the handle does not say."""
    try:
        return int(h.signal_pad_ptrs[rank])
    except Exception:
        return None


class Setup:
    def __init__(self, ctx):
        import torch
        import torch.distributed as dist
        import torch.distributed._symmetric_memory as symm_mem
        r, ws, dev = ctx.rank, ctx.ws, ctx.device
        self.gb = dist.new_group(list(range(ws)))
        t = torch.ones(8, device=dev)
        dist.all_reduce(t, group=self.gb)        # create B's communicator in one order everywhere
        torch.cuda.synchronize()
        self.na = dist.group.WORLD.group_name
        self.nb = self.gb.group_name
        for n in (self.na, self.nb):
            try:
                symm_mem.enable_symm_mem_for_group(n)
            except Exception as e:
                ctx.res.setdefault("enable_symm_mem_for_group", repr(e)[:200])
        self.one = symm_mem.empty(2 * N, dtype=torch.float32, device=dev)
        try:   # the shared-* cases fail on their own if this does
            ha = symm_mem.rendezvous(self.one, self.na)
            hb = symm_mem.rendezvous(self.one, self.nb)
            pa, pb = pad_ptr(ha, r), pad_ptr(hb, r)
            ctx.res["one_allocation"] = {"pad_A": pa, "pad_B": pb,
                                         "same_pad": (pa == pb) if pa is not None else None}
        except Exception as e:
            ctx.res["one_allocation"] = {"error": repr(e)[:400]}
        self.sep_a = symm_mem.empty(N, dtype=torch.float32, device=dev)
        self.sep_b = symm_mem.empty(N, dtype=torch.float32, device=dev)
        sa = symm_mem.rendezvous(self.sep_a, self.na)
        sb = symm_mem.rendezvous(self.sep_b, self.nb)
        qa, qb = pad_ptr(sa, r), pad_ptr(sb, r)
        ctx.res["separate_allocations"] = {"pad_A": qa, "pad_B": qb,
                                           "same_pad": (qa == qb) if qa is not None else None}
        self.x_a = torch.full((N,), 10.0 + r, device=dev)
        self.x_b = torch.full((N,), 1000.0 + r, device=dev)
        self.want_a = sum(10.0 + i for i in range(ws))
        self.want_b = sum(1000.0 + i for i in range(ws))
        self.sa, self.sb = torch.cuda.Stream(), torch.cuda.Stream()


def step(s, ctx, shared, delay):
    import torch
    wa = s.one[:N] if shared else s.sep_a
    wb = s.one[N:] if shared else s.sep_b
    s.sa.wait_stream(torch.cuda.current_stream())
    s.sb.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s.sa):
        if delay and ctx.rank % 2 == 1:
            torch.cuda._sleep(mg.SLEEP_CYCLES)
        wa.copy_(s.x_a)
        out_a = torch.ops.symm_mem.one_shot_all_reduce(wa, "sum", s.na)
    with torch.cuda.stream(s.sb):
        wb.copy_(s.x_b)
        out_b = torch.ops.symm_mem.one_shot_all_reduce(wb, "sum", s.nb)
    cur = torch.cuda.current_stream()
    cur.wait_stream(s.sa)
    cur.wait_stream(s.sb)
    return out_a, out_b


def trials(ctx, s, shared, delay):
    import torch
    bad = 0
    i = 0
    try:
        for i in range(ctx.trials):
            out_a, out_b = step(s, ctx, shared, delay)
            nbad = (out_a != s.want_a).sum() + (out_b != s.want_b).sum()
            ev = torch.cuda.Event()
            ev.record()
            ctx.wait_done(ev)
            if int(nbad.item()):
                bad += 1
    except mg.Hang as e:
        e.partial = {"hang_at_trial": i, "wrong_before_hang": bad}
        raise
    r = {"trials": ctx.trials, "wrong": bad, "hang": False}
    if not delay:
        r["both_overlapped_us"] = mg.time_us(ctx, lambda: step(s, ctx, shared, False))
    return r


def alone(ctx, s):
    import torch

    def a():
        s.sep_a.copy_(s.x_a)
        torch.ops.symm_mem.one_shot_all_reduce(s.sep_a, "sum", s.na)
    return {"allreduce_alone_us": mg.time_us(ctx, a), "bytes": 4 * N}


def worker(ctx):
    s = Setup(ctx)
    if ctx.ws == 1:
        ctx.res["world_size_1"] = "one rank: no peer signals, so a shared pad cannot pair the two groups' ops"
    cases = [("alone", lambda c: alone(c, s)),
             ("separate-none", lambda c: trials(c, s, False, False)),
             ("separate-odd", lambda c: trials(c, s, False, True)),
             ("shared-none", lambda c: trials(c, s, True, False)),    # these two may hang: last
             ("shared-odd", lambda c: trials(c, s, True, True))]
    mg.run_cases(ctx, cases, ctx.args.cases)


if __name__ == "__main__":
    mg.launch(worker, __doc__)
