"""Kernel durations for the decode shapes the built-in scenarios use, and
their run-to-run variation. Each kernel is timed with a CUDA event pair per
iteration (ITERS iterations, weights rotated among copies so they are not
served from L2), queued behind a device sleep so host issue costs stay out;
also the mean of ITERS back-to-back launches between one event pair (that
includes the gap between kernels). Three runs of everything give the
run-to-run spread. Prints quantiles in ns (ranks/gpu/hw.go stores them)."""
import torch

from common import emit, env_info, quantiles

ITERS = 200
L2 = 50 << 20  # bytes; H200 L2 is 60 MB, rotate over more than twice that


def gemm_case(M, K, N):
    nbytes = K * N * 2
    copies = max(1, min(64, (3 * L2) // nbytes + 1))
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    ws = [torch.randn(K, N, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    return lambda i: torch.mm(x, ws[i % copies], out=out)


def grouped_case(E, M, K, N):
    """top-k experts as one batched GEMM (E experts, M tokens each)."""
    copies = max(1, min(16, (3 * L2) // (E * K * N * 2) + 1))
    x = torch.randn(E, M, K, device="cuda", dtype=torch.bfloat16)
    ws = [torch.randn(E, K, N, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
    out = torch.empty(E, M, N, device="cuda", dtype=torch.bfloat16)
    return lambda i: torch.bmm(x, ws[i % copies], out=out)


def elementwise_case(M, N, op):
    copies = max(1, min(64, (3 * L2) // (M * N * 2) + 1))
    xs = [torch.randn(M, N, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
    y = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    if op == "add":
        return lambda i: torch.add(xs[i % copies], y, out=out)
    if op == "copy":
        return lambda i: out.copy_(xs[i % copies])
    return lambda i: torch.mul(xs[i % copies], 0.5, out=out)


def shapes():
    s = {}
    H = 4096  # aux-stream-lifetime (H is bound per lambda below: a late-bound H read 8192)
    for T in (1, 8, 64, 256):
        s[f"lifetime/T{T}/sh_up {T}x{H}x{4*H}"] = lambda T=T, H=H: gemm_case(T, H, 4 * H)
        s[f"lifetime/T{T}/sh_down {T}x{4*H}x{H}"] = lambda T=T, H=H: gemm_case(T, 4 * H, H)
        s[f"lifetime/T{T}/sh_gate {T}x{H}x{H}"] = lambda T=T, H=H: gemm_case(T, H, H)
        s[f"lifetime/T{T}/router {T}x{H}x128"] = lambda T=T, H=H: gemm_case(T, H, 128)
        s[f"lifetime/T{T}/expert_up {T}x{H}x{H//8}"] = lambda T=T, H=H: gemm_case(T, H, H // 8)
        s[f"lifetime/T{T}/expert_down {T}x{H//8}x{H}"] = lambda T=T, H=H: gemm_case(T, H // 8, H)
        s[f"lifetime/T{T}/mul {T}x{H}"] = lambda T=T, H=H: elementwise_case(T, H, "mul")
        s[f"lifetime/T{T}/add {T}x{H}"] = lambda T=T, H=H: elementwise_case(T, H, "add")
    H, TP = 8192, 8  # tp8-shared-expert decode: tokens 8, hidden 8192
    s["tp8/gate 8x8192x128"] = lambda: gemm_case(8, H, 128)
    s["tp8/sh_up 8x8192x1024"] = lambda: gemm_case(8, H, H // TP)
    s["tp8/sh_down 8x1024x8192"] = lambda: gemm_case(8, H // TP, H)
    s["tp8/expert_up 8x8192x256"] = lambda: gemm_case(8, H, H // 4 // TP)
    s["tp8/expert_down 8x256x8192"] = lambda: gemm_case(8, H // 4 // TP, H)
    s["tp8/grouped_up 8e x 8x8192x256"] = lambda: grouped_case(8, 8, H, H // 4 // TP)
    s["tp8/grouped_down 8e x 8x256x8192"] = lambda: grouped_case(8, 8, H // 4 // TP, H)
    s["tp8/add 8x8192"] = lambda: elementwise_case(8, H, "add")
    s["tp8/copy 8x8192"] = lambda: elementwise_case(8, H, "copy")
    s["hbm/copy 8192x16384"] = lambda: elementwise_case(8192, 16384, "copy")
    return s


def time_case(fn):
    for i in range(20):
        fn(i)
    torch.cuda.synchronize()
    st = [torch.cuda.Event(enable_timing=True) for _ in range(ITERS + 1)]
    torch.cuda._sleep(20_000_000)
    for i in range(ITERS):
        st[i].record()
        fn(i)
    st[ITERS].record()
    # per-iteration times include one event record between kernels
    torch.cuda.synchronize()
    per = [st[i].elapsed_time(st[i + 1]) * 1e6 for i in range(ITERS)]
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(20_000_000)
    a.record()
    for i in range(ITERS):
        fn(i)
    b.record()
    torch.cuda.synchronize()
    return per, a.elapsed_time(b) * 1e6 / ITERS


def main():
    import os
    res = {"program": "durations", "env": env_info(), "iters": ITERS, "shapes": {},
           "stream": os.environ.get("DURATIONS_STREAM", "default")}
    if res["stream"] == "side":
        torch.cuda.set_stream(torch.cuda.Stream())
    for name, mk in shapes().items():
        fn = mk()
        runs, pers, means = [], [], []
        for _ in range(3):
            per, mean = time_case(fn)
            pers += per
            runs.append(sorted(per)[len(per) // 2])
            means.append(mean)
        q = quantiles(pers)
        res["shapes"][name] = {"per_iter_ns": q, "run_medians_ns": runs, "back_to_back_mean_ns": means}
        del fn
        torch.cuda.empty_cache()
    emit(res)


if __name__ == "__main__":
    main()
