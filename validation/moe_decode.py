"""The routed MoE at decode as TensorRT-LLM runs it, timed on the device.

AutoDeploy's fused MoE op calls torch.ops.trtllm.fused_moe, TensorRT-LLM's
CutlassMoeFCRunner (cpp/tensorrt_llm/kernels/mixtureOfExperts/
moe_kernels.cu, runMoe): the tokens' rows are expanded and sorted by expert
(expandInputRowsKernel), the first expert GEMM runs as one grouped GEMM over
every active expert (CUTLASS, fc1 = gate and up projection), a gated
activation kernel (SwiGLU), the second grouped GEMM (fc2), and
finalizeMoeRoutingKernel scales each row by its routing weight and sums a
token's top-k rows. TensorRT-LLM is not installed where this was measured, so
this times the same sequence with PyTorch's own CUTLASS grouped GEMM
(torch._grouped_mm, sm90) and plain kernels for the rest; it also times the
router's softmax and top-k. Shape: tp8-shared-expert's decode layer (8
tokens, hidden 8192, 128 experts, top-8, expert intermediate 2048 split over
TP=8 ranks: 256 per rank, fc1 2×256 wide). The tokens' top-8 choices are
drawn at random (seeded): 8 tokens × 8 choices hit about 52 distinct experts,
and their weights are what the grouped GEMMs read. Prints per-kernel
quantiles (ns) like durations.py."""
import torch

from common import emit, env_info, quantiles

T, H, E, K, I = 8, 8192, 128, 8, 2048 // 8
ROUTINGS = 4  # rotate among a few routings: different experts each step


def routing(seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    logits = torch.randn(T, E, device="cuda", generator=g)
    w, idx = torch.topk(torch.softmax(logits, -1), K, dim=-1)
    flat = idx.flatten()
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=E)
    offs = torch.cumsum(counts, 0).to(torch.int32)
    return {"logits": logits, "order": order, "rows": order // K, "offs": offs, "w": w.flatten()[order].to(torch.bfloat16),
            "active": int((counts > 0).sum().item())}


class Moe:
    def __init__(self):
        self.x = torch.randn(T, H, device="cuda", dtype=torch.bfloat16)
        self.w1 = torch.randn(E, H, 2 * I, device="cuda", dtype=torch.bfloat16) / H ** 0.5
        self.w2 = torch.randn(E, I, H, device="cuda", dtype=torch.bfloat16) / I ** 0.5
        self.r = [routing(s) for s in range(ROUTINGS)]
        self.xe = torch.empty(T * K, H, device="cuda", dtype=torch.bfloat16)
        self.h1 = self.fc1(0)
        self.a = self.act(0)
        self.y2 = self.fc2(0)
        self.out = torch.empty(T, H, device="cuda", dtype=torch.bfloat16)

    def expand(self, i):
        torch.index_select(self.x, 0, self.r[i % ROUTINGS]["rows"], out=self.xe)

    def fc1(self, i):
        return torch._grouped_mm(self.xe, self.w1, offs=self.r[i % ROUTINGS]["offs"])

    def act(self, i):
        g, u = self.h1[:, :I], self.h1[:, I:]
        return torch.nn.functional.silu(g) * u

    def fc2(self, i):
        return torch._grouped_mm(self.a, self.w2, offs=self.r[i % ROUTINGS]["offs"])

    def finalize(self, i):
        r = self.r[i % ROUTINGS]
        self.out.zero_()
        self.out.index_add_(0, r["rows"], self.y2 * r["w"][:, None])

    def route(self, i):
        lg = self.r[i % ROUTINGS]["logits"]
        return torch.topk(torch.softmax(lg, -1), K, dim=-1)


def moe_cases():
    """name → maker of fn(i), one kernel (or short kernel sequence) each."""
    m = []

    def get():
        if not m:
            m.append(Moe())
        return m[0]

    return {
        "tp8moe/route softmax+topk 8x128": lambda: get().route,
        "tp8moe/expand 64x8192": lambda: get().expand,
        "tp8moe/fc1 grouped 64x8192x512": lambda: get().fc1,
        "tp8moe/act swiglu 64x256": lambda: get().act,
        "tp8moe/fc2 grouped 64x256x8192": lambda: get().fc2,
        "tp8moe/finalize 64x8192": lambda: get().finalize,
    }


def time_case(fn, iters=200):
    for i in range(10):
        fn(i)
    torch.cuda.synchronize()
    st = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
    torch.cuda._sleep(20_000_000)
    for i in range(iters):
        st[i].record()
        fn(i)
    st[iters].record()
    torch.cuda.synchronize()
    return [st[i].elapsed_time(st[i + 1]) * 1e6 for i in range(iters)]


def main():
    res = {"program": "moe_decode", "env": env_info(), "shape": {"tokens": T, "hidden": H, "experts": E, "topk": K, "inter_per_rank": I},
           "kernels": {}}
    try:
        mo = Moe()
        res["active_experts"] = [r["active"] for r in mo.r]
    except Exception as e:
        res["error"] = repr(e)[:400]
        emit(res)
        return
    for name, mk in moe_cases().items():
        try:
            fn = mk()
            per = []
            for _ in range(3):
                per += time_case(fn)
            res["kernels"][name] = quantiles(per)
        except Exception as e:
            res["kernels"][name] = {"error": repr(e)[:300]}

    def whole(i):
        mo.expand(i); mo.h1 = mo.fc1(i); mo.a = mo.act(i); mo.y2 = mo.fc2(i); mo.finalize(i)
    per = []
    for _ in range(3):
        per += time_case(whole)
    res["kernels"]["tp8moe/whole expand..finalize"] = quantiles(per)
    emit(res)


if __name__ == "__main__":
    main()
