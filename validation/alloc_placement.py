"""The caching allocator's placement: run recorded sequences of
malloc/free/record_stream (and capture) requests through real PyTorch and
print where every block landed, as (segment ordinal, offset in segment,
segment size). The Go allocator (ranks/cachealloc/alloc.go) is tested against this
output: ranks/cachealloc/testdata/alloc_h200.json.

Sequence ops (the same JSON the Go test reads):
  {"op":"malloc","id":k,"bytes":n,"stream":"main"|"aux"}
  {"op":"free","id":k}
  {"op":"record_stream","id":k,"stream":s}
  {"op":"sleep","stream":s,"ms":t}          a device sleep of about t ms
  {"op":"sync"}                               torch.cuda.synchronize()
  {"op":"empty_cache"}
  {"op":"capture_begin"} / {"op":"capture_end"}   a CUDA graph capture on main
Segment ordinals count segments in the order they were first seen; a
segment released by empty_cache is never seen again under its ordinal."""
import random

import torch

from common import emit, env_info

KiB, MiB = 1 << 10, 1 << 20


def lifetime_seq(T, H=4096, fp32=False, layers=2, record_stream=False):
    """The host-order allocation sequence of scenarios' aux-stream-lifetime
    (buildLifetime), per layer; sizes in bytes of bf16 tensors."""
    act = T * H * 2
    ops, nid = [], [0]

    def m(stream, n):
        nid[0] += 1
        ops.append({"op": "malloc", "id": nid[0], "bytes": n, "stream": stream})
        return nid[0]

    def f(i):
        ops.append({"op": "free", "id": i})

    x = m("main", act)
    inp = x
    for l in range(layers):
        xn = m("main", act)
        if l > 0:
            f(inp)
        if record_stream:
            ops.append({"op": "record_stream", "id": xn, "stream": "aux"})
            ops.append({"op": "sleep", "stream": "aux", "ms": 20})
        shH = m("aux", T * 4 * H * 2)
        shY = m("aux", act)
        f(shH)
        shG = m("aux", act)
        shO = m("aux", act)
        f(shY)
        f(shG)
        lg = m("main", T * 128 * 2)
        rtY = m("main", act)
        f(lg)
        f(xn)
        rtO = m("main", 2 * act if fp32 else act)
        f(rtY)
        out = m("main", act)
        f(rtO)
        f(shO)
        inp = out
    return ops


def fixed_seqs():
    s = {}
    s["split-coalesce"] = [
        {"op": "malloc", "id": 1, "bytes": 64 * KiB, "stream": "main"},
        {"op": "malloc", "id": 2, "bytes": 64 * KiB, "stream": "main"},
        {"op": "malloc", "id": 3, "bytes": 64 * KiB, "stream": "main"},
        {"op": "free", "id": 2},
        {"op": "malloc", "id": 4, "bytes": 128 * KiB, "stream": "main"},
        {"op": "free", "id": 1},
        {"op": "malloc", "id": 5, "bytes": 128 * KiB, "stream": "main"},
        {"op": "malloc", "id": 6, "bytes": 100, "stream": "main"},
        {"op": "free", "id": 3},
        {"op": "malloc", "id": 7, "bytes": 1000, "stream": "main"},
        {"op": "malloc", "id": 8, "bytes": 64 * KiB, "stream": "aux"},
        {"op": "free", "id": 5},
        {"op": "malloc", "id": 9, "bytes": 64 * KiB, "stream": "aux"},
        {"op": "malloc", "id": 10, "bytes": 64 * KiB, "stream": "main"},
        {"op": "malloc", "id": 11, "bytes": MiB, "stream": "main"},
        {"op": "malloc", "id": 12, "bytes": MiB + 1, "stream": "main"},
    ]
    s["large"] = [
        {"op": "malloc", "id": 1, "bytes": 3 * MiB, "stream": "main"},
        {"op": "malloc", "id": 2, "bytes": 5 * MiB, "stream": "main"},
        {"op": "malloc", "id": 3, "bytes": 1536 * KiB, "stream": "main"},
        {"op": "free", "id": 2},
        {"op": "malloc", "id": 4, "bytes": 4 * MiB + 512 * KiB, "stream": "main"},
        {"op": "malloc", "id": 5, "bytes": 12 * MiB, "stream": "main"},
        {"op": "malloc", "id": 6, "bytes": 9 * MiB, "stream": "main"},
        {"op": "free", "id": 1},
        {"op": "free", "id": 3},
        {"op": "malloc", "id": 7, "bytes": 4 * MiB, "stream": "main"},
        {"op": "free", "id": 5},
        {"op": "malloc", "id": 8, "bytes": 11 * MiB, "stream": "main"},
        {"op": "malloc", "id": 9, "bytes": 21 * MiB, "stream": "main"},
        {"op": "malloc", "id": 10, "bytes": 2 * MiB, "stream": "aux"},
    ]
    s["record-stream"] = [
        {"op": "malloc", "id": 1, "bytes": 256 * KiB, "stream": "main"},
        {"op": "record_stream", "id": 1, "stream": "aux"},
        {"op": "sleep", "stream": "aux", "ms": 50},
        {"op": "free", "id": 1},
        {"op": "malloc", "id": 2, "bytes": 256 * KiB, "stream": "main"},
        {"op": "sync"},
        {"op": "malloc", "id": 3, "bytes": 256 * KiB, "stream": "main"},
        {"op": "malloc", "id": 4, "bytes": 3 * MiB, "stream": "main"},
        {"op": "record_stream", "id": 4, "stream": "aux"},
        {"op": "sleep", "stream": "aux", "ms": 50},
        {"op": "free", "id": 4},
        {"op": "malloc", "id": 5, "bytes": 3 * MiB, "stream": "main"},
        {"op": "sync"},
        {"op": "malloc", "id": 6, "bytes": 3 * MiB, "stream": "main"},
    ]
    s["empty-cache"] = [
        {"op": "malloc", "id": 1, "bytes": 64 * KiB, "stream": "main"},
        {"op": "malloc", "id": 2, "bytes": 3 * MiB, "stream": "main"},
        {"op": "malloc", "id": 3, "bytes": 64 * KiB, "stream": "aux"},
        {"op": "free", "id": 1},
        {"op": "free", "id": 2},
        {"op": "empty_cache"},
        {"op": "malloc", "id": 4, "bytes": 64 * KiB, "stream": "main"},
        {"op": "malloc", "id": 5, "bytes": 64 * KiB, "stream": "aux"},
        {"op": "malloc", "id": 6, "bytes": 3 * MiB, "stream": "main"},
    ]
    s["capture"] = [
        {"op": "malloc", "id": 1, "bytes": 64 * KiB, "stream": "main"},
        {"op": "free", "id": 1},
        {"op": "capture_begin"},
        {"op": "malloc", "id": 2, "bytes": 64 * KiB, "stream": "main"},
        {"op": "malloc", "id": 3, "bytes": 64 * KiB, "stream": "main"},
        {"op": "free", "id": 2},
        {"op": "malloc", "id": 4, "bytes": 128 * KiB, "stream": "main"},
        {"op": "malloc", "id": 5, "bytes": 32 * KiB, "stream": "main"},
        {"op": "capture_end"},
        {"op": "malloc", "id": 6, "bytes": 64 * KiB, "stream": "main"},
    ]
    for T in (1, 8, 64, 128, 256):
        for fp32 in (False, True):
            s[f"lifetime-T{T}-{'fp32' if fp32 else 'bf16'}"] = lifetime_seq(T, fp32=fp32)
    s["lifetime-T8-bf16-record-stream"] = lifetime_seq(8, record_stream=True)
    for seed in (1, 2, 3):
        rng = random.Random(seed)
        ops, live, nid = [], [], 0
        for _ in range(160):
            if live and rng.random() < 0.45:
                i = live.pop(rng.randrange(len(live)))
                ops.append({"op": "free", "id": i})
                continue
            nid += 1
            # log-uniform sizes from 1 B to 24 MiB, a few exact repeats
            n = int(2 ** rng.uniform(0, 24.6)) if rng.random() < 0.8 else rng.choice([512, 64 * KiB, MiB, 2 * MiB])
            ops.append({"op": "malloc", "id": nid, "bytes": max(1, n), "stream": rng.choice(["main", "main", "aux"])})
            live.append(nid)
        s[f"random-{seed}"] = ops
    return s


def run_seq(ops):
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    streams = {"main": torch.cuda.Stream(), "aux": torch.cuda.Stream()}
    live, out = {}, []
    seg_ord, nseg = {}, [0]
    graph, graphs = None, []

    def seg_of(ptr):
        for seg in torch.cuda.memory_snapshot():
            base, size = seg["address"], seg["total_size"]
            if base <= ptr < base + size:
                if base not in seg_ord:
                    seg_ord[base] = nseg[0]
                    nseg[0] += 1
                return seg_ord[base], ptr - base, size, seg.get("segment_pool_id")
        return -1, 0, 0, None

    for op in ops:
        k = op["op"]
        if k == "malloc":
            s = streams[op["stream"]]
            with torch.cuda.stream(s):
                t = torch.empty(op["bytes"], dtype=torch.uint8, device="cuda")
                if graph is not None:
                    t.zero_()
            live[op["id"]] = t
            sg, off, ssz, pool = seg_of(t.data_ptr())
            out.append({"id": op["id"], "seg": sg, "offset": off, "seg_size": ssz,
                        "private_pool": bool(pool and tuple(pool) != (0, 0))})
            del t  # the run recorded in results/h200.json lacked this line: see "holds_last"
        elif k == "free":
            del live[op["id"]]
        elif k == "record_stream":
            live[op["id"]].record_stream(streams[op["stream"]])
        elif k == "sleep":
            with torch.cuda.stream(streams[op["stream"]]):
                torch.cuda._sleep(int(op["ms"] * 1.9e6))  # ~1.9 GHz SM clock
        elif k == "sync":
            torch.cuda.synchronize()
        elif k == "empty_cache":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            alive = {seg["address"] for seg in torch.cuda.memory_snapshot()}
            for b in list(seg_ord):
                if b not in alive:
                    del seg_ord[b]
        elif k == "capture_begin":
            streams["main"].wait_stream(torch.cuda.current_stream())
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            torch.cuda.set_stream(streams["main"])
            graph.capture_begin()
        elif k == "capture_end":
            graph.capture_end()
            torch.cuda.set_stream(torch.cuda.default_stream())
            graphs.append(graph)
            graph = None
    torch.cuda.synchronize()
    live.clear()
    return out


def main():
    seqs = fixed_seqs()
    res = {"program": "alloc_placement", "env": env_info(), "sequences": {}}
    for name, ops in seqs.items():
        try:
            res["sequences"][name] = {"ops": ops, "placed": run_seq(ops), "holds_last": False}
        except Exception as e:  # keep the others
            res["sequences"][name] = {"ops": ops, "error": repr(e)}
    emit(res)


if __name__ == "__main__":
    main()
