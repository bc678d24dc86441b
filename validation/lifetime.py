"""aux-stream-lifetime on real PyTorch: a tensor (x_norm) allocated on the
main stream is read on the aux stream (the shared expert's up GEMM and, late,
its gate GEMM) and dropped on main after main's routed experts are issued,
without record_stream. The caching allocator hands its block to main's next
allocation (rt_out) at once. The program mirrors scenarios' buildLifetime op
for op and allocation for allocation (hidden 4096, 2 layers).

Variants: buggy, record-stream, joined (main waits for aux before the free),
routed dtype bf16|fp32 (rt_out twice as large), tokens T. Modes: eager-sync
(synchronize after every step, like a decode loop that reads its tokens),
eager-pipelined (host runs ahead, no sync between steps), graph (captured
once, replayed). Without the caching allocator
(PYTORCH_NO_CUDA_MEMORY_CACHING=1, set by the driver for a second run) the
graph capture is tried and its error reported.

Prints, per case: trials, wrong outputs, and where x_norm and rt_out landed
(does rt_out's range overlap x_norm's?)."""
import os
import sys

import torch

from common import emit, env_info, ranges_overlap

H = 4096
LAYERS = 2
TRIALS = int(os.environ.get("TRIALS", "200"))


class Model:
    def __init__(self, T, fp32, variant, seed=0):
        g = torch.Generator(device="cuda").manual_seed(seed)
        r = lambda *s: (torch.randn(*s, device="cuda", generator=g) / (s[0] ** 0.5)).to(torch.bfloat16)
        self.T, self.fp32, self.variant = T, fp32, variant
        self.W = []
        for _ in range(LAYERS):
            self.W.append(dict(norm=(1 + 0.1 * torch.randn(H, device="cuda", generator=g)).to(torch.bfloat16),
                               up=r(H, 4 * H), down=r(4 * H, H), sgate=r(H, H), router=r(H, 128),
                               e1=r(H, H // 8), e2=r(H // 8, H)))
        self.h = torch.empty(T, H // 8, device="cuda", dtype=torch.bfloat16)  # scratch, allocated once
        self.x = torch.randn(T, H, device="cuda", generator=g).to(torch.bfloat16)
        self.aux = torch.cuda.Stream()
        self.places = []

    def forward(self, x, one_stream=False, mark=None):
        """One decode step; allocation order = buildLifetime's host order."""
        main = torch.cuda.current_stream()
        aux = main if one_stream else self.aux
        mk = mark or (lambda name, stream: None)
        v = self.variant
        inp = x
        self.places = []
        for l in range(LAYERS):
            W = self.W[l]
            xn = inp * W["norm"]                       # malloc x_norm (main)
            mk(f"L{l}.norm", main)
            if l > 0:
                del inp                                # free previous layer's out
            ev_fork = torch.cuda.Event()
            ev_fork.record(main)
            aux.wait_event(ev_fork)
            if v == "record-stream" and not one_stream:
                xn.record_stream(aux)
            with torch.cuda.stream(aux):
                shH = xn @ W["up"]                     # malloc sh_h (aux)
                mk(f"L{l}.sh_up", aux)
                shY = shH @ W["down"]                  # malloc sh_y
                mk(f"L{l}.sh_down", aux)
                del shH
                shG = xn @ W["sgate"]                  # the late read of x_norm
                mk(f"L{l}.sh_gate", aux)
                shO = shY * shG
                mk(f"L{l}.sh_mul", aux)
                del shY, shG
                ev_join = torch.cuda.Event()
                ev_join.record(aux)
            lg = xn @ W["router"]                      # malloc logits (main)
            mk(f"L{l}.gate", main)
            torch.mm(xn, W["e1"], out=self.h)
            rtY = self.h @ W["e2"]                     # malloc rt_y
            rtY.mul_(lg[:, :1])
            mk(f"L{l}.moe", main)
            del lg
            if v == "joined":
                main.wait_event(ev_join)
            xn_place = (xn.data_ptr(), xn.numel() * xn.element_size())
            del xn                                     # main's last use issued
            rtO = rtY.float() * 0.5 if self.fp32 else rtY * 0.5   # malloc rt_out
            mk(f"L{l}.rt_scale", main)
            rt_place = (rtO.data_ptr(), rtO.numel() * rtO.element_size())
            self.places.append({"x_norm": xn_place, "rt_out": rt_place,
                                "overlap": ranges_overlap(*xn_place, *rt_place)})
            del rtY
            main.wait_event(ev_join)
            out = torch.empty_like(shO)
            torch.add(rtO, shO, out=out)
            mk(f"L{l}.merge", main)
            del rtO, shO
            inp = out
            del out
        return inp


def bad(y, ref):
    return bool(((y.float() - ref.float()).abs().max() > 1e-2 * (ref.float().abs().max() + 1e-6)).item())


def run_case(T, fp32, variant, mode):
    m = Model(T, fp32, variant)
    ref = m.forward(m.x, one_stream=True).clone()
    torch.cuda.synchronize()
    res = {"T": T, "routed": "fp32" if fp32 else "bf16", "variant": variant, "mode": mode}
    if mode == "graph":
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                m.forward(m.x)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(g):
                y = m.forward(m.x)
        except Exception as e:
            res["capture_error"] = repr(e)[:400]
            return res
        res["placement"] = m.places
        wrong = 0
        for _ in range(TRIALS):
            g.replay()
            torch.cuda.synchronize()
            wrong += bad(y, ref)
    else:
        for _ in range(3):
            m.forward(m.x)
        torch.cuda.synchronize()
        wrong = 0
        if mode == "eager-sync":
            for i in range(TRIALS):
                y = m.forward(m.x)
                if i == 0:
                    res["placement"] = m.places
                torch.cuda.synchronize()
                wrong += bad(y, ref)
        else:  # eager-pipelined: keep issuing; compare at the end
            ys = []
            for i in range(TRIALS):
                ys.append(m.forward(m.x))
                if i == 0:
                    res["placement"] = m.places
            torch.cuda.synchronize()
            wrong = sum(bad(y, ref) for y in ys)
    res.update(trials=TRIALS, wrong=wrong, fraction=wrong / TRIALS)
    return res


def main():
    no_cache = os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1"
    cases = []
    if no_cache:
        for mode in ("eager-sync", "eager-pipelined", "graph"):
            cases.append(run_case(8, False, "buggy", mode))
    else:
        Ts = [int(t) for t in os.environ.get("TOKENS", "1,8,64,128,256").split(",")]
        for T in Ts:
            for fp32 in (False, True):
                for variant in ("buggy", "record-stream", "joined"):
                    for mode in ("eager-sync", "eager-pipelined", "graph"):
                        if variant != "buggy" and fp32:
                            continue
                        try:
                            cases.append(run_case(T, fp32, variant, mode))
                        except Exception as e:
                            cases.append({"T": T, "routed": "fp32" if fp32 else "bf16", "variant": variant,
                                          "mode": mode, "error": repr(e)[:400]})
                        print(cases[-1], file=sys.stderr, flush=True)
    emit({"program": "lifetime", "env": env_info(), "cases": cases})


if __name__ == "__main__":
    main()
