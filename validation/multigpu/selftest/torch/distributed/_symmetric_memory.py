import torch
class _H:
    signal_pad_size = 4096
    def __init__(self, ptr):
        from torch import distributed
        self.signal_pad_ptrs = [ptr] * distributed.get_world_size()
def enable_symm_mem_for_group(n): raise RuntimeError("deprecated (fake)")
def empty(n, dtype=None, device=None): return torch.full(n, 0.0)
def rendezvous(t, name): return _H(id(t.buf))
