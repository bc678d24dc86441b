"""Real-hardware anchor: do two all-reduces that share one symmetric workspace corrupt data when
they sit on two CUDA streams inside a replayed CUDA graph, and does NCCL stay correct in the same
placement?  Run: torchrun --nproc_per_node=2 race_probe.py  (multicast stays off: P2P kernels only).
Without torchrun it spawns MG_WORLD_SIZE (default 2) ranks itself (run_all.py does that)."""
import json, os, sys, time
os.environ.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
import torch
import torch.distributed as dist

REPLAYS = int(os.environ.get("REPLAYS", "2000"))
N = int(os.environ.get("NELEM", str(1 << 15)))


def log(*a):
    if dist.get_rank() == 0:
        print(*a, flush=True)


def build(kind, placement, bufs, gname, x_sh, x_rt, w):
    """Return (graph, out_sh, out_rt). kind: symm|nccl. placement: buggy|fixed."""
    import torch.distributed._symmetric_memory as symm_mem  # noqa: F401
    aux = torch.cuda.Stream()
    ev_main, ev_aux = torch.cuda.Event(), torch.cuda.Event()
    buf = bufs

    def allreduce(t):
        if kind == "nccl":
            y = t.clone()
            dist.all_reduce(y)
            return y
        buf.copy_(t)                                     # copy into the shared workspace
        return torch.ops.symm_mem.one_shot_all_reduce(buf, "sum", gname)

    outs = {}

    def body():
        cur = torch.cuda.current_stream()
        ev_main.record(cur)
        with torch.cuda.stream(aux):
            aux.wait_event(ev_main)
            y_sh = (x_sh * w) + 0.0                      # shared-expert "GEMM" stand-in
            if placement == "buggy":
                outs["sh"] = allreduce(y_sh)             # trailing all-reduce on the aux stream
            ev_aux.record(aux)
        y_rt = (x_rt * w) + 0.0                          # routed-expert work on main
        if placement == "buggy":
            outs["rt"] = allreduce(y_rt)
            cur.wait_event(ev_aux)
        else:
            cur.wait_event(ev_aux)                       # fixed: join before the collective
            outs["sh"] = allreduce(y_sh)
            outs["rt"] = allreduce(y_rt)
        outs["merge"] = outs["sh"] + outs["rt"]

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            body()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    dist.barrier()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        body()
    torch.cuda.synchronize()
    return g, outs


def main():
    dist.init_process_group("nccl")
    rank, ws = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    import torch.distributed._symmetric_memory as symm_mem
    gname = dist.group.WORLD.group_name
    try:
        symm_mem.enable_symm_mem_for_group(gname)
    except Exception as e:  # newer versions need no opt-in
        log("enable_symm_mem_for_group:", repr(e))
    buf = symm_mem.empty(N, dtype=torch.float32, device=dev)
    symm_mem.rendezvous(buf, gname)
    x_sh = torch.full((N,), 100.0 * (rank + 1), device=dev)
    x_rt = torch.full((N,), 1.0 * (rank + 1), device=dev)
    w = torch.ones((N,), device=dev)
    want_sh = 100.0 * sum(r + 1 for r in range(ws))
    want_rt = 1.0 * sum(r + 1 for r in range(ws))
    results = {}
    kinds = os.environ.get("KINDS", "nccl,symm").split(",")
    for kind in kinds:
        for placement in ("fixed", "buggy"):
            key = f"{kind}-{placement}"
            try:
                g, outs = build(kind, placement, buf, gname, x_sh, x_rt, w)
            except Exception as e:
                results[key] = {"error": repr(e)[:300]}
                log(key, "build error", repr(e)[:300])
                continue
            bad = 0
            bad_elems_max = 0
            t0 = time.time()
            for i in range(REPLAYS):
                g.replay()
                ok_sh = outs["sh"] == want_sh
                ok_rt = outs["rt"] == want_rt
                nbad = int((~ok_sh).sum().item() + (~ok_rt).sum().item())
                if nbad:
                    bad += 1
                    bad_elems_max = max(bad_elems_max, nbad)
            torch.cuda.synchronize()
            t = torch.tensor([bad, bad_elems_max], device=dev)
            allb = [torch.zeros_like(t) for _ in range(ws)]
            dist.all_gather(allb, t)
            results[key] = {"replays": REPLAYS, "corrupted_replays_per_rank": [int(a[0]) for a in allb],
                            "max_bad_elems": [int(a[1]) for a in allb], "secs": round(time.time() - t0, 2)}
            log(key, json.dumps(results[key]))
            dist.barrier()
    if rank == 0:
        out = os.environ.get("OUT", ".")
        meta = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "world": ws, "nelem": N,
                "nccl": ".".join(map(str, torch.cuda.nccl.version()))}
        with open(os.path.join(out, f"race_probe_{'_'.join(kinds)}.json"), "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)
        print(json.dumps(meta))
    dist.destroy_process_group()


def _spawned(rank, ws, port):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(ws), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    main()


if __name__ == "__main__":
    if "RANK" in os.environ:   # under torchrun
        main()
    else:
        import socket
        import torch.multiprocessing as mp
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        ws = int(os.environ.get("MG_WORLD_SIZE", "2"))
        mp.spawn(_spawned, args=(ws, port), nprocs=ws, join=True)
