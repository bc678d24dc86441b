"""The stand-in's torch.distributed: a TCPStore kept in a locked file, collectives of one rank's data."""
import fcntl, json, os, tempfile
_rank, _ws = 0, 1
class TCPStore:
    def __init__(self, host, port, ws, is_master, timeout=None):
        d = os.environ.get("FAKE_STORE_DIR", tempfile.gettempdir())
        self.path = os.path.join(d, f"faketorch-store-{port}.json")
    def _op(self, f):
        with open(self.path + ".lock", "a") as l:
            fcntl.flock(l, fcntl.LOCK_EX)
            d = json.load(open(self.path)) if os.path.exists(self.path) else {}
            r = f(d)
            json.dump(d, open(self.path, "w"))
            return r
    def set(self, k, v): self._op(lambda d: d.__setitem__(k, v))
    def add(self, k, n):
        def f(d):
            d[k] = d.get(k, 0) + n
            return d[k]
        return self._op(f)
    def check(self, ks): return self._op(lambda d: all(k in d for k in ks))
def init_process_group(backend, store=None, rank=None, world_size=None, timeout=None):
    global _rank, _ws
    if rank is None:
        rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    _rank, _ws = rank, world_size
def get_rank(): return _rank
def get_world_size(): return _ws
class _G:
    def __init__(self, name): self.group_name = name
class group:
    WORLD = _G("0")
_n = [0]
def new_group(ranks):
    _n[0] += 1
    return _G(str(_n[0]))
def all_reduce(t, group=None): return None
def all_gather_into_tensor(out, t, group=None): out.copy_(type(t)(t.vals() * (out.n // t.n)))
def all_gather(lst, t): lst[0].copy_(t)
def barrier(): pass
def destroy_process_group(): pass
