import multiprocessing as _mp
def spawn(fn, args=(), nprocs=1, join=True):
    ctx = _mp.get_context("spawn")
    ps = [ctx.Process(target=fn, args=(i,) + tuple(args)) for i in range(nprocs)]
    for p in ps: p.start()
    for p in ps: p.join()
    bad = [p.exitcode for p in ps if p.exitcode]
    if bad: raise RuntimeError(f"process exited with {bad}")
