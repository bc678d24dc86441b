import contextlib, os
_cur = None
def set_device(i): pass
def device_count(): return int(os.environ.get("FAKE_GPUS", "1"))
def get_device_name(i=0): return "fake"
def synchronize(): pass
def _sleep(c): pass
class nccl:
    @staticmethod
    def version(): return (2, 0, 0)
class Stream:
    def wait_event(self, e): pass
    def wait_stream(self, s): pass
_default = Stream()
def current_stream(): return _cur or _default
@contextlib.contextmanager
def stream(s):
    global _cur
    old, _cur = _cur, s
    try: yield
    finally: _cur = old
class Event:
    HANG = os.environ.get("FAKE_HANG") == "1"
    def __init__(self, enable_timing=False): pass
    def record(self, stream=None): pass
    def query(self): return not Event.HANG
    def elapsed_time(self, o): return 0.01
class CUDAGraph:
    def replay(self): pass
@contextlib.contextmanager
def graph(g):
    yield
