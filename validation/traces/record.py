"""Record the real PyTorch traces that collsim's importer is tested on (validation/traces/).

Programs, one GPU, two streams (main = the current stream, aux):
  a  eager:  x = src*2 on main; aux reads x (y = sin x); main runs a long matmul, frees x
             (no record_stream) and allocates w = cos(src), which the caching allocator
             may place in x's block while aux still reads it.  Clean in the recorded run
             when aux's read ends before main's matmul does.
  b  eager:  the same with x.record_stream(aux) before the free (clean in every schedule).
  c  graph:  program a captured into a CUDA graph (capture and two replays profiled).
  d  comm:   a world-size-1 NCCL all_reduce on aux (record_param_comms events).
Each trace: torch.profiler with CUDA sync events on, profile_memory=True, record_shapes=True,
plus the execution trace (ExecutionTraceObserver) for a, b and c.
Also counts, over many real iterations, how often y is wrong (a, b; and a with aux delayed
by torch.cuda._sleep, the schedule the simulator predicts breaks it).
Run: OUT=dir python3 record.py
"""
import json, os, sys, tarfile, time, traceback
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
import torch
from torch.profiler import profile, ProfilerActivity, record_function
from torch._C._profiler import _ExperimentalConfig

OUT = os.environ.get("OUT", ".")
TR = os.path.join(OUT, "traces")
os.makedirs(TR, exist_ok=True)
N = 1 << 22          # 16 MiB of float32
M = 4096
torch.manual_seed(0)
src = torch.randn(N, device="cuda")
A = torch.randn(M, M, device="cuda", dtype=torch.bfloat16)
B = torch.randn(M, M, device="cuda", dtype=torch.bfloat16)
aux = torch.cuda.Stream()
y_ref = (src * 2.0).sin()


def step(rs, sleep=0):
    main = torch.cuda.current_stream()
    with record_function("x"):
        x = src * 2.0
    aux.wait_stream(main)
    with torch.cuda.stream(aux):
        if sleep:
            torch.cuda._sleep(sleep)
        with record_function("y"):
            y = x.sin()
    if rs:
        x.record_stream(aux)
    with record_function("mm"):
        c = A @ B
    del x
    with record_function("w"):
        w = src.cos()
    main.wait_stream(aux)
    with record_function("z"):
        z = y + w
    return y, z, c


def count_bad(rs, sleep=0, iters=200):
    bad = 0
    for _ in range(iters):
        y, z, c = step(rs, sleep)
        torch.cuda.synchronize()
        if not torch.equal(y, y_ref):
            bad += 1
    return bad


def prof(**kw):
    return profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                   record_shapes=True, profile_memory=True, with_stack=False,
                   experimental_config=_ExperimentalConfig(enable_cuda_sync_events=True), **kw)


def etobs(path):
    try:
        from torch.profiler import ExecutionTraceObserver
        return ExecutionTraceObserver().register_callback(path)
    except Exception:
        traceback.print_exc()
        return None


def record_eager(name, rs):
    for _ in range(20):
        step(rs)
    torch.cuda.synchronize()
    et = etobs(os.path.join(TR, name + ".et.json"))
    kw = {"execution_trace_observer": et} if et is not None else {}
    t0 = time.perf_counter()
    with prof(**kw) as p:
        with record_function("step"):
            y, z, c = step(rs)
        torch.cuda.synchronize()
    print(name, "profiled wall", time.perf_counter() - t0, "y ok", torch.equal(y, y_ref), flush=True)
    p.export_chrome_trace(os.path.join(TR, name + ".json"))
    # GPU step time measured with events, outside the profiler
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(50):
        torch.cuda.synchronize()
        e0.record()
        step(rs)
        e1.record()
        torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1) * 1000)
    ts.sort()
    print(name, "event-timed step us median", ts[len(ts) // 2], flush=True)


def record_graph(name):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step(False)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    et = etobs(os.path.join(TR, name + ".et.json"))
    kw = {"execution_trace_observer": et} if et is not None else {}
    with prof(**kw) as p:
        with record_function("capture"):
            with torch.cuda.graph(g):
                y, z, c = step(False)
        torch.cuda.synchronize()
        for _ in range(2):
            with record_function("step"):
                g.replay()
            torch.cuda.synchronize()
    print(name, "graph y ok", torch.equal(y, y_ref), flush=True)
    p.export_chrome_trace(os.path.join(TR, name + ".json"))
    bad = 0
    for _ in range(200):
        g.replay()
        torch.cuda.synchronize()
        bad += 0 if torch.equal(y, y_ref) else 1
    print(name, "graph replays with wrong y:", bad, "/ 200", flush=True)


def record_comm(name):
    import torch.distributed as dist
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29517", rank=0, world_size=1,
                            device_id=torch.device("cuda", 0))
    t = torch.ones(1 << 20, device="cuda")
    for _ in range(3):
        dist.all_reduce(t)
    torch.cuda.synchronize()
    with prof() as p:
        with record_function("step"):
            u = t * 2.0
            aux.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(aux):
                dist.all_reduce(u)
            torch.cuda.current_stream().wait_stream(aux)
            v = u + 1.0
        torch.cuda.synchronize()
    p.export_chrome_trace(os.path.join(TR, name + ".json"))
    dist.destroy_process_group()


ver = {"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0),
       "cudnn": torch.backends.cudnn.version(), "python": sys.version.split()[0]}
try:
    ver["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
except Exception:
    pass
try:
    import subprocess
    ver["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                   capture_output=True, text=True).stdout.strip()
except Exception:
    pass
print(json.dumps(ver), flush=True)
json.dump(ver, open(os.path.join(TR, "versions.json"), "w"), indent=1)

for label, fn in [("a", lambda: record_eager("a_eager", False)),
                  ("b", lambda: record_eager("b_record_stream", True)),
                  ("c", lambda: record_graph("c_graph")),
                  ("d", lambda: record_comm("d_comm"))]:
    try:
        fn()
    except Exception:
        traceback.print_exc()
try:
    print("real runs, y wrong out of 200: a", count_bad(False), "b", count_bad(True),
          "a+aux sleep", count_bad(False, sleep=2_000_000),
          "b+aux sleep", count_bad(True, sleep=2_000_000), flush=True)
except Exception:
    traceback.print_exc()
with tarfile.open(os.path.join(OUT, "traces.tar.gz"), "w:gz") as tf:
    tf.add(TR, arcname="traces")
for f in sorted(os.listdir(TR)):
    print(f, os.path.getsize(os.path.join(TR, f)))
import shutil
shutil.rmtree(TR)
