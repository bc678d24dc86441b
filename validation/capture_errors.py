"""What invalidates a CUDA graph capture. Each case runs in a fresh process
(an invalidated capture can leave the context unusable):
  nocache-alloc        PYTORCH_NO_CUDA_MEMORY_CACHING=1, a tensor allocated
                       (cudaMalloc) inside the capture and kept alive
  nocache-alloc-free   the same, and a temporary freed inside it (cudaFree)
  caching-new-segment  caching on: a 64 MiB tensor inside the capture (the
                       graph's private pool takes a new segment): allowed
  item                 tensor.item() inside the capture (a host sync)
  synchronize          torch.cuda.synchronize() inside the capture
  to-cpu               tensor.cpu() inside the capture
Prints per case: ok or the error, and at which op it was raised."""
import json
import os
import subprocess
import sys

CASES = ["nocache-alloc", "nocache-alloc-free", "caching-new-segment", "item", "synchronize", "to-cpu"]


def one(case):
    import torch
    x = torch.randn(1 << 16, device="cuda")
    keep = []
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    at = "capture_begin"
    try:
        with torch.cuda.graph(g):
            at = "op"
            if case == "nocache-alloc":
                keep.append(x * 2)
            elif case == "nocache-alloc-free":
                y = x * 2
                keep.append(y + 1)
                at = "free"
                del y
                at = "op after free"
                keep.append(keep[0] * 3)
            elif case == "caching-new-segment":
                keep.append(torch.empty(64 << 20, dtype=torch.uint8, device="cuda").fill_(1))
            elif case == "item":
                keep.append((x.sum()).item())
            elif case == "synchronize":
                y = x * 2
                keep.append(y)
                torch.cuda.synchronize()
            elif case == "to-cpu":
                keep.append(x.cpu())
            at = "capture_end"
        g.replay()
        torch.cuda.synchronize()
        return {"case": case, "outcome": "ok"}
    except Exception as e:
        return {"case": case, "outcome": "error", "at": at, "error": repr(e)[:500]}


def main():
    if len(sys.argv) > 1:
        print(json.dumps(one(sys.argv[1])))
        return
    from common import emit, env_info
    out = {"program": "capture_errors", "env": env_info(), "cases": {}}
    for case in CASES:
        env = dict(os.environ)
        if case.startswith("nocache"):
            env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
        p = subprocess.run([sys.executable, __file__, case], env=env, capture_output=True, text=True, timeout=120)
        try:
            out["cases"][case] = json.loads(p.stdout.strip().splitlines()[-1])
        except Exception:
            out["cases"][case] = {"case": case, "outcome": "crashed", "rc": p.returncode, "stderr": p.stderr[-800:]}
    emit(out)


if __name__ == "__main__":
    main()
