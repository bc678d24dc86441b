"""Host scalars are frozen at capture: a Python step counter passed as a
kernel argument (x + step) is baked into the graph; every replay reads the
value it had at capture. A device-side counter (a tensor updated before each
replay) is read afresh. Prints the fraction of replays whose output is wrong
(not x + the replay's step) for both, and for one replay only."""
import torch

from common import emit, env_info

REPLAYS = 200


def run(device_counter):
    x = torch.randn(1 << 16, device="cuda")
    step_t = torch.zeros((), device="cuda")
    state = {"step": 1}
    out = torch.empty_like(x)

    def body():
        if device_counter:
            torch.add(x, step_t, out=out)
        else:
            torch.add(x, state["step"], out=out)   # a Python float: a kernel argument

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            body()
    torch.cuda.current_stream().wait_stream(s)
    step_t.fill_(1)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        body()
    wrong, first_wrong = 0, None
    for i in range(1, REPLAYS + 1):
        state["step"] = i
        step_t.fill_(i)
        g.replay()
        torch.cuda.synchronize()
        ok = torch.allclose(out, x + i)
        if not ok:
            wrong += 1
            if first_wrong is None:
                first_wrong = i
    return {"replays": REPLAYS, "wrong": wrong, "fraction": wrong / REPLAYS, "first_wrong_replay": first_wrong}


def main():
    emit({"program": "host_scalar", "env": env_info(), "cases": {
        "host-step": run(False), "device-step": run(True)}})


if __name__ == "__main__":
    main()
