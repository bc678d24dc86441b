"""What a captured graph executes: the kernels the capture path issued,
once per replay, and nothing at capture time.
  capture-runs-nothing  a counter incremented inside the capture is unchanged
                        after capture_end
  per-replay            it grows by one per replay
  double-shared         SGLang #37948's shape: the capture path calls the
                        shared expert twice (out += shared(x) twice) while eager
                        calls it once: every replay's output is wrong
  single-shared         the fix: the capture path calls it once
Prints, per case, the fraction of wrong outputs over the replays."""
import torch

from common import emit, env_info

REPLAYS = 100


def counter_case():
    c = torch.zeros((), device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        c.add_(1)
    torch.cuda.synchronize()
    after_capture = c.item()
    vals = []
    for _ in range(5):
        g.replay()
        torch.cuda.synchronize()
        vals.append(c.item())
    return {"after_capture": after_capture, "after_replays": vals,
            "capture_runs_nothing": after_capture == 0.0, "once_per_replay": vals == [1.0, 2.0, 3.0, 4.0, 5.0]}


def shared_case(calls_in_capture):
    T, H = 8, 1024
    x = torch.randn(T, H, device="cuda")
    w_sh = torch.randn(H, H, device="cuda") / 32
    w_rt = torch.randn(H, H, device="cuda") / 32
    out = torch.empty(T, H, device="cuda")

    def step(calls):
        torch.mm(x, w_rt, out=out)
        for _ in range(calls):
            out.add_(x @ w_sh)

    step(1)
    ref = out.clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step(1)  # warm-up runs the eager path
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step(calls_in_capture)
    wrong = 0
    for _ in range(REPLAYS):
        out.zero_()
        g.replay()
        torch.cuda.synchronize()
        wrong += not torch.allclose(out, ref, rtol=1e-3, atol=1e-3)
    eager_ok = True
    step(1)
    eager_ok = torch.allclose(out, ref, rtol=1e-3, atol=1e-3)
    return {"replays": REPLAYS, "wrong": wrong, "fraction": wrong / REPLAYS, "eager_ok": bool(eager_ok)}


def main():
    emit({"program": "graph_double", "env": env_info(), "cases": {
        "counter": counter_case(),
        "double-shared": shared_case(2),
        "single-shared": shared_case(1)}})


if __name__ == "__main__":
    main()
