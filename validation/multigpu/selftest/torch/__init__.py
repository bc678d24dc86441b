"""A stand-in for torch, for selftest.py only: runs the multi-GPU programs' Python on a machine without
torch or a GPU. A tensor is a list of floats; kernels run at once on the host; collectives see one rank's
data; FAKE_HANG=1 makes every CUDA event stay unfinished; FAKE_GPUS sets the device count."""
import os
__version__ = "fake"
float32 = "float32"
class version: cuda = "fake"
class device:
    def __init__(self, kind, idx=0): self.kind, self.idx = kind, idx
class Tensor:
    def __init__(self, buf, off=0, n=None):
        self.buf, self.off = buf, off
        self.n = len(buf) - off if n is None else n
    def vals(self): return self.buf[self.off:self.off + self.n]
    def numel(self): return self.n
    def _bin(self, o, f):
        ov = o.vals() if isinstance(o, Tensor) else [o] * self.n
        assert len(ov) == self.n, (len(ov), self.n)
        return Tensor([f(a, b) for a, b in zip(self.vals(), ov)])
    def __add__(self, o): return self._bin(o, lambda a, b: a + b)
    def __mul__(self, o): return self._bin(o, lambda a, b: a * b)
    def __ne__(self, o): return self._bin(o, lambda a, b: float(a != b))
    def __eq__(self, o): return self._bin(o, lambda a, b: float(a == b))
    def __invert__(self): return Tensor([1.0 - a for a in self.vals()])
    def sum(self): return Tensor([sum(self.vals())])
    def item(self): return self.vals()[0]
    def __int__(self): return int(self.item())
    def clone(self): return Tensor(list(self.vals()))
    def copy_(self, o):
        self.buf[self.off:self.off + self.n] = o.vals()
        return self
    def new_ones(self, shape): return Tensor([1.0])
    def zeros_like(self): return Tensor([0.0] * self.n)
    def __getitem__(self, s):
        if isinstance(s, int):
            return Tensor([self.vals()[s]])
        start, stop, _ = s.indices(self.n)
        return Tensor(self.buf, self.off + start, stop - start)
    def to(self, *a): return self
    def float(self): return self
def _n(shape): return shape[0] if isinstance(shape, tuple) else shape
def full(shape, v, device=None, dtype=None):
    n = _n(shape)
    if n > 1 << 20:   # only timed, never read: one element stands for all
        return Tensor([float(v)], 0, 1)
    return Tensor([float(v)] * n)
def ones(shape, device=None, dtype=None): return full(shape, 1.0)
def empty(n, device=None, dtype=None): return full(n, 0.0)
def zeros_like(t): return full(t.n, 0.0)
def tensor(vals, device=None): return Tensor([float(v) for v in vals])
class _SymmOps:
    @staticmethod
    def one_shot_all_reduce(buf, op, name): return buf.clone()
class ops:
    symm_mem = _SymmOps
from . import cuda, distributed, multiprocessing  # noqa
