"""Stream/event ordering: a producer on stream P writes a buffer, a consumer
on stream C copies it. Cases:
  waited        C waits on an event recorded after the producer: never stale
  no-wait       no event: stale whenever C runs before P's write
  early-event   event recorded before the producer's write: C waits for nothing
  unrecorded    C waits on an event never recorded (cudaStreamWaitEvent on it
                is a no-op): stale like no-wait
Each with and without a long kernel (torch.cuda._sleep) ahead of the write on
P, so "natural timing" (small kernels only) and "producer late" both show.
Prints the fraction of trials whose consumer saw a stale value."""
import torch

from common import emit, env_info

N = 1 << 20
TRIALS = 300


def trial_set(case, sleep_cycles):
    P, C = torch.cuda.Stream(), torch.cuda.Stream()
    buf = torch.zeros(N, device="cuda")
    out = torch.empty(N, device="cuda")
    stale = 0
    for i in range(1, TRIALS + 1):
        torch.cuda.synchronize()
        ev = torch.cuda.Event()
        with torch.cuda.stream(P):
            if case == "early-event":
                ev.record(P)
            if sleep_cycles:
                torch.cuda._sleep(sleep_cycles)
            buf.fill_(float(i))
            if case == "waited":
                ev.record(P)
        with torch.cuda.stream(C):
            if case in ("waited", "early-event", "unrecorded"):
                C.wait_event(ev)
            out.copy_(buf)
        torch.cuda.synchronize()
        v = out[0].item(), out[-1].item()
        if v != (float(i), float(i)):
            stale += 1
    return {"trials": TRIALS, "stale": stale, "fraction": stale / TRIALS}


def main():
    res = {"program": "streams_events", "env": env_info(), "cases": {}}
    for case in ("waited", "no-wait", "early-event", "unrecorded"):
        for label, cyc in (("natural", 0), ("producer-late", 2_000_000)):
            res["cases"][f"{case}/{label}"] = trial_set(case, cyc)
    emit(res)


if __name__ == "__main__":
    main()
