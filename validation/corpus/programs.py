"""The corpus: short real PyTorch programs of the cross-stream bug class, each
with its ground truth measured on the GPU (see corpus.py, the driver).

A program is a class with
  mechanism   the family it belongs to (the benchmark scores per family)
  intent      what its author meant: "racy" or "clean" (the label is what the
              GPU shows, measured by corpus.py; intent only names the twin)
  delay       where the injected delay goes, in words: the stream that must lose
  kind        "eager", "graph" or "compile"
  setup()     allocate inputs, warm up; graph programs capture here
  step(sleep) run one step (sleep > 0: torch.cuda._sleep(sleep) at the place
              named by `delay`); returns [(got, want), ...] to compare after a sync
  record()    the region recorded for the importer (default: one step)
Programs only use torch. Nothing here knows what collsim will say.
"""
import os
import tempfile

import torch

N = 1 << 22        # 16 MiB of float32: the large pool
NS = 1 << 14       # 64 KiB: the small pool (blocks of 1 MiB and under)
M = 4096           # bf16 matmul of ~180 us: keeps the main stream busy

PROGRAMS = []


def program(cls):
    PROGRAMS.append(cls)
    return cls


def nap(sleep):
    if sleep:
        torch.cuda._sleep(sleep)


class Base:
    kind = "eager"
    step_mark = True
    delay = "aux, before its read"

    def setup(self):
        torch.manual_seed(0)
        self.main = torch.cuda.current_stream()
        self.aux = torch.cuda.Stream()
        self.aux2 = torch.cuda.Stream()
        self.src = torch.randn(N, device="cuda")
        self.A = torch.randn(M, M, device="cuda", dtype=torch.bfloat16)
        self.B = torch.randn(M, M, device="cuda", dtype=torch.bfloat16)
        self.extra()
        torch.cuda.synchronize()

    def extra(self):
        pass

    def record(self, rec):
        with rec():
            out = self.step(0)
        return out


# --- 1. allocation APIs: aux reads x, main frees it and the allocator reuses its block -------------

class FreeWhileRead(Base):
    """aux reads x; main frees x and allocates w, which may take x's block."""
    fix = None        # None: racy; "record_stream": x.record_stream(aux); "join": main waits for aux first

    def make_x(self):
        return self.src * 2.0

    def make_w(self):
        return self.src.cos()

    def read(self, x):
        return x.sin()

    def extra(self):
        self.y_ref = self.read(self.make_x())

    def step(self, sleep):
        main, aux = self.main, self.aux
        x = self.make_x()
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            y = self.read(x)
        if self.fix == "record_stream":
            x.record_stream(aux)
        if self.fix == "join":
            main.wait_stream(aux)
        c = self.A @ self.B
        del x
        w = self.make_w()
        main.wait_stream(aux)
        z = y + w
        return [(y, self.y_ref)]


@program
class EmptyLikeOut(FreeWhileRead):
    mechanism = "alloc-api"
    intent = "racy"

    def make_x(self):
        x = torch.empty_like(self.src)
        torch.mul(self.src, 2.0, out=x)
        return x

    def make_w(self):
        w = torch.empty_like(self.src)
        torch.cos(self.src, out=w)
        return w


@program
class EmptyLikeOutRecordStream(EmptyLikeOut):
    intent = "clean"
    fix = "record_stream"


@program
class EmptyOut(FreeWhileRead):
    mechanism = "alloc-api"
    intent = "racy"

    def make_x(self):
        x = torch.empty(N, device="cuda")
        torch.mul(self.src, 2.0, out=x)
        return x

    def make_w(self):
        w = torch.empty(N, device="cuda")
        torch.cos(self.src, out=w)
        return w


@program
class EmptyOutJoin(EmptyOut):
    intent = "clean"
    fix = "join"


@program
class NewEmptyCopy(FreeWhileRead):
    mechanism = "alloc-api"
    intent = "racy"

    def make_x(self):
        x = self.src.new_empty(N)
        x.copy_(self.src)
        x.mul_(2.0)
        return x

    def make_w(self):
        w = self.src.new_empty(N)
        w.copy_(self.src)
        w.cos_()
        return w


@program
class NewEmptyCopyRecordStream(NewEmptyCopy):
    intent = "clean"
    fix = "record_stream"


@program
class ZerosAdd(FreeWhileRead):
    mechanism = "alloc-api"
    intent = "racy"

    def make_x(self):
        x = torch.zeros(N, device="cuda")
        x.add_(self.src, alpha=2.0)
        return x

    def make_w(self):
        w = torch.zeros(N, device="cuda")
        w.add_(self.src.cos())
        return w


@program
class ZerosAddRecordStream(ZerosAdd):
    intent = "clean"
    fix = "record_stream"


@program
class SliceOfFreedBase(FreeWhileRead):
    """aux reads a slice (a view) of x; main drops the base and the view."""
    mechanism = "views"
    intent = "racy"

    def make_x(self):
        return torch.cat([self.src, self.src]) * 2.0

    def read(self, x):
        return x[N // 2: N + N // 2].sin()

    def make_w(self):
        return torch.cat([self.src, self.src]).cos()[:N]


@program
class SliceOfFreedBaseRecordStream(SliceOfFreedBase):
    intent = "clean"
    fix = "record_stream"


@program
class ViewReadDelBase(Base):
    """aux reads v = x.view(2048, -1).t(), a transposed view; main deletes x and v."""
    mechanism = "views"
    intent = "racy"
    fix = False

    def extra(self):
        self.y_ref = (self.src * 3.0).view(2048, -1).t().sin()

    def step(self, sleep):
        main, aux = self.main, self.aux
        x = self.src * 3.0
        v = x.view(2048, -1).t()
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            y = v.sin()
        if self.fix:
            v.record_stream(aux)       # a view's record_stream marks its base's block
        c = self.A @ self.B
        del x, v
        w = self.src.cos()
        main.wait_stream(aux)
        return [(y, self.y_ref)]


@program
class ViewReadDelBaseRecordStream(ViewReadDelBase):
    intent = "clean"
    fix = True


@program
class CatOutput(FreeWhileRead):
    mechanism = "alloc-api"
    intent = "racy"

    def make_x(self):
        h = self.src[: N // 2]
        return torch.cat([h * 2.0, h * 3.0])

    def make_w(self):
        h = self.src[N // 2:]
        return torch.cat([h.cos(), h.sin()])


@program
class CatOutputJoin(CatOutput):
    intent = "clean"
    fix = "join"


@program
class StackOutput(FreeWhileRead):
    mechanism = "alloc-api"
    intent = "racy"

    def make_x(self):
        h = self.src[: N // 2]
        return torch.stack([h * 2.0, h * 3.0])

    def make_w(self):
        h = self.src[N // 2:]
        return torch.stack([h.cos(), h.sin()])


@program
class StackOutputRecordStream(StackOutput):
    intent = "clean"
    fix = "record_stream"


@program
class OutOfScope(Base):
    """x is a local of a helper that launches aux's read: freed when the helper returns."""
    mechanism = "lifetime"
    intent = "racy"
    fix = False

    def extra(self):
        self.y_ref = (self.src * 2.0).sin()

    def launch(self, sleep):
        x = self.src * 2.0
        self.aux.wait_stream(self.main)
        with torch.cuda.stream(self.aux):
            nap(sleep)
            y = x.sin()
        if self.fix:
            x.record_stream(self.aux)
        return y

    def step(self, sleep):
        y = self.launch(sleep)
        c = self.A @ self.B
        w = self.src.cos()
        self.main.wait_stream(self.aux)
        return [(y, self.y_ref)]


@program
class OutOfScopeRecordStream(OutOfScope):
    intent = "clean"
    fix = True


@program
class SmallPool(FreeWhileRead):
    """The same free-while-read with 64 KiB tensors: the small pool's 2 MiB segments."""
    mechanism = "lifetime"
    intent = "racy"

    def extra(self):
        self.s = self.src[:NS].clone()
        self.y_ref = (self.s * 2.0).sin()

    def make_x(self):
        return self.s * 2.0

    def make_w(self):
        return self.s.cos()


@program
class SmallPoolRecordStream(SmallPool):
    intent = "clean"
    fix = "record_stream"


# --- 2. record_stream: before first use, on the wrong stream ---------------------------------------

@program
class RecordStreamBeforeUse(FreeWhileRead):
    """x.record_stream(aux) is called right after x is made, before aux's first use."""
    mechanism = "record-stream"
    intent = "clean"

    def step(self, sleep):
        main, aux = self.main, self.aux
        x = self.make_x()
        x.record_stream(aux)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            y = self.read(x)
        c = self.A @ self.B
        del x
        w = self.make_w()
        main.wait_stream(aux)
        return [(y, self.y_ref)]


@program
class RecordStreamWrongStream(FreeWhileRead):
    """aux reads x; x.record_stream(aux2) names a stream that never touches x."""
    mechanism = "record-stream"
    intent = "racy"

    def step(self, sleep):
        main, aux = self.main, self.aux
        x = self.make_x()
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            y = self.read(x)
        x.record_stream(self.aux2)
        c = self.A @ self.B
        del x
        w = self.make_w()
        main.wait_stream(aux)
        return [(y, self.y_ref)]


@program
class ThreeStreamsOneRecorded(Base):
    """Two side streams read x; only one is recorded with record_stream."""
    mechanism = "record-stream"
    intent = "racy"
    delay = "aux2, before its read"
    both = False

    def extra(self):
        self.y_ref = (self.src * 2.0).sin()
        self.u_ref = (self.src * 2.0).exp()

    def step(self, sleep):
        main, aux, aux2 = self.main, self.aux, self.aux2
        x = self.src * 2.0
        aux.wait_stream(main)
        aux2.wait_stream(main)
        with torch.cuda.stream(aux):
            y = x.sin()
        with torch.cuda.stream(aux2):
            nap(sleep)
            u = x.exp()
        x.record_stream(aux)
        if self.both:
            x.record_stream(aux2)
        c = self.A @ self.B
        del x
        w = self.src.cos()
        main.wait_stream(aux)
        main.wait_stream(aux2)
        return [(y, self.y_ref), (u, self.u_ref)]


@program
class ThreeStreamsBothRecorded(ThreeStreamsOneRecorded):
    intent = "clean"
    both = True


# --- 3. events and forks/joins ---------------------------------------------------------------------

class EventBase(Base):
    delay = "main, before it writes buf"

    def extra(self):
        self.buf = torch.empty(N, device="cuda")
        self.ev = torch.cuda.Event()
        self.y_ref = (self.src * 2.0).sin()


@program
class EventTooEarly(EventBase):
    """The event is recorded on main before main writes buf; aux waits on it and reads buf."""
    mechanism = "events"
    intent = "racy"
    early = True

    def step(self, sleep):
        main, aux, buf, ev = self.main, self.aux, self.buf, self.ev
        buf.zero_()
        if self.early:
            ev.record(main)
        nap(sleep)
        torch.mul(self.src, 2.0, out=buf)
        if not self.early:
            ev.record(main)
        aux.wait_event(ev)
        with torch.cuda.stream(aux):
            y = buf.sin()
        main.wait_stream(aux)
        return [(y, self.y_ref)]


@program
class EventAfterWrite(EventTooEarly):
    intent = "clean"
    early = False


@program
class EventWrongStream(EventBase):
    """The event is recorded on aux (the reader) instead of main (the writer)."""
    mechanism = "events"
    intent = "racy"

    def step(self, sleep):
        main, aux, buf, ev = self.main, self.aux, self.buf, self.ev
        buf.zero_()
        ev.record(aux)
        nap(sleep)
        torch.mul(self.src, 2.0, out=buf)
        aux.wait_event(ev)
        with torch.cuda.stream(aux):
            y = buf.sin()
        main.wait_stream(aux)
        return [(y, self.y_ref)]


@program
class EventNeverRecorded(EventBase):
    """aux waits on an event that was never recorded: the wait does nothing."""
    mechanism = "events"
    intent = "racy"

    def step(self, sleep):
        main, aux, buf = self.main, self.aux, self.buf
        ev = torch.cuda.Event()
        buf.zero_()
        nap(sleep)
        torch.mul(self.src, 2.0, out=buf)
        aux.wait_event(ev)
        with torch.cuda.stream(aux):
            y = buf.sin()
        main.wait_stream(aux)
        return [(y, self.y_ref)]


@program
class MissingFork(EventBase):
    """aux reads buf, which main writes, with no wait on main."""
    mechanism = "fork-join"
    intent = "racy"
    fork = False

    def step(self, sleep):
        main, aux, buf = self.main, self.aux, self.buf
        buf.zero_()
        nap(sleep)
        torch.mul(self.src, 2.0, out=buf)
        if self.fork:
            aux.wait_stream(main)
        with torch.cuda.stream(aux):
            y = buf.sin()
        main.wait_stream(aux)
        return [(y, self.y_ref)]


@program
class WithFork(MissingFork):
    intent = "clean"
    fork = True


@program
class MissingJoin(Base):
    """The side stream writes y; main adds y into z with no wait on the side stream."""
    mechanism = "fork-join"
    intent = "racy"
    join = False
    priority = 0
    delay = "the side stream, before it writes y"

    def extra(self):
        self.side = torch.cuda.Stream(priority=self.priority)
        self.y = torch.empty(N, device="cuda")
        self.n = 0

    def step(self, sleep):
        # the scale alternates, so a read of the previous step's y is a wrong value, not a lucky one
        main, side, y = self.main, self.side, self.y
        self.n += 1
        k = 1.0 + (self.n % 2)
        y.zero_()
        side.wait_stream(main)
        with torch.cuda.stream(side):
            nap(sleep)
            torch.mul(self.src, k, out=y)
            y.sin_()
        w = self.src.cos()
        if self.join:
            main.wait_stream(side)
        z = y + w
        main.wait_stream(side)
        return [(z, (self.src * k).sin() + self.src.cos())]


@program
class WithJoin(MissingJoin):
    intent = "clean"
    join = True


@program
class MissingJoinHighPriority(MissingJoin):
    """The same missing join with the side stream at high priority."""
    mechanism = "priorities"
    priority = -1


@program
class WithJoinHighPriority(MissingJoinHighPriority):
    intent = "clean"
    join = True


# --- 4. non_blocking copies with pinned host memory ------------------------------------------------

@program
class PinnedH2DNoWait(Base):
    """aux copies a pinned host tensor to the device (non_blocking); main uses it without waiting."""
    mechanism = "copies"
    intent = "racy"
    delay = "aux, before its copy"
    wait = False

    def extra(self):
        self.h = torch.randn(N).pin_memory()
        self.d = torch.empty(N, device="cuda")
        self.z_ref = self.h.to("cuda") * 2.0

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.d.zero_()
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            self.d.copy_(self.h, non_blocking=True)
        if self.wait:
            main.wait_stream(aux)
        z = self.d * 2.0
        main.wait_stream(aux)
        return [(z, self.z_ref)]


@program
class PinnedH2DWait(PinnedH2DNoWait):
    intent = "clean"
    wait = True


@program
class PinnedD2HFreed(FreeWhileRead):
    """aux copies x to pinned host memory (non_blocking); main frees x and reuses its block."""
    mechanism = "copies"
    intent = "racy"
    delay = "aux, before its copy"

    def extra(self):
        self.hp = torch.empty(N).pin_memory()
        self.h_ref = (self.src * 2.0).cpu()

    def step(self, sleep):
        main, aux = self.main, self.aux
        x = self.src * 2.0
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            self.hp.copy_(x, non_blocking=True)
        if self.fix == "record_stream":
            x.record_stream(aux)
        c = self.A @ self.B
        del x
        w = self.src.cos()
        main.wait_stream(aux)
        torch.cuda.synchronize()
        return [(self.hp, self.h_ref)]


@program
class PinnedD2HFreedRecordStream(PinnedD2HFreed):
    intent = "clean"
    fix = "record_stream"


# --- 5. CUDA graphs --------------------------------------------------------------------------------

class GraphBase(Base):
    kind = "graph"

    def capture(self, sleep):
        raise NotImplementedError

    def extra(self):
        self.refs()
        # warm up on a side stream, as torch.cuda.graph's documentation asks
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                self.body(0)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        self.g0 = self.capture(0)
        self.gs = {}

    def graph(self, sleep):
        if sleep == 0:
            return self.g0
        if sleep not in self.gs:
            self.gs[sleep] = self.capture(sleep)
        return self.gs[sleep]

    def capture_one(self, sleep):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            outs = self.body(sleep)
        return g, outs

    def capture(self, sleep):
        return self.capture_one(sleep)

    def step(self, sleep):
        g, outs = self.graph(sleep)
        self.before_replay()
        g.replay()
        return self.check(outs)

    def before_replay(self):
        pass

    def record(self, rec):
        # the recorded region holds the capture and two replays
        from torch.profiler import record_function
        with rec(step=False):
            g, outs = self.capture_one(0)
            torch.cuda.synchronize()
            for _ in range(2):
                self.before_replay()
                if self.step_mark:
                    with record_function("step"):
                        g.replay()
                else:
                    g.replay()
                torch.cuda.synchronize()
        return self.check(outs)


@program
class GraphFreeWhileRead(GraphBase):
    """The free-while-read program captured into one graph (fork and join inside), no step marks."""
    mechanism = "graphs"
    intent = "racy"
    step_mark = False
    fix = False

    def refs(self):
        self.y_ref = (self.src * 2.0).sin()

    def body(self, sleep):
        main = torch.cuda.current_stream()
        x = self.src * 2.0
        self.aux.wait_stream(main)
        with torch.cuda.stream(self.aux):
            nap(sleep)
            y = x.sin()
        if self.fix:
            x.record_stream(self.aux)
        c = self.A @ self.B
        del x
        w = self.src.cos()
        main.wait_stream(self.aux)
        z = y + w
        return [y]

    def check(self, outs):
        return [(outs[0], self.y_ref)]


@program
class GraphFreeWhileReadMarked(GraphFreeWhileRead):
    """The same graph, each replay inside record_function("step")."""
    step_mark = True


@program
class GraphFreeWhileReadJoin(GraphFreeWhileRead):
    """The graph with aux joined into main before x is freed."""
    intent = "clean"

    def body(self, sleep):
        main = torch.cuda.current_stream()
        x = self.src * 2.0
        self.aux.wait_stream(main)
        with torch.cuda.stream(self.aux):
            nap(sleep)
            y = x.sin()
        main.wait_stream(self.aux)
        c = self.A @ self.B
        del x
        w = self.src.cos()
        z = y + w
        return [y]


@program
class GraphReplayOnSideReadEager(GraphBase):
    """A graph replayed on a side stream; main reads its static output eagerly without waiting."""
    mechanism = "graphs"
    intent = "racy"
    delay = "the side stream, inside the graph"
    join = False

    def refs(self):
        self.z_ref = (self.src * 2.0).sin() + 1.0
        self.side = torch.cuda.Stream()

    def body(self, sleep):
        nap(sleep)
        return [(self.src * 2.0).sin()]

    def step(self, sleep):
        g, outs = self.graph(sleep)
        outs[0].zero_()
        self.side.wait_stream(self.main)
        with torch.cuda.stream(self.side):
            g.replay()
        if self.join:
            self.main.wait_stream(self.side)
        z = outs[0] + 1.0
        self.main.wait_stream(self.side)
        return [(z, self.z_ref)]

    def record(self, rec):
        with rec(step=False):
            self.g0 = self.capture_one(0)
            torch.cuda.synchronize()
            from torch.profiler import record_function
            with record_function("step"):
                r = self.step(0)
            torch.cuda.synchronize()
        return r

    def capture(self, sleep):
        return self.capture_one(sleep)


@program
class GraphReplayOnSideJoined(GraphReplayOnSideReadEager):
    intent = "clean"
    join = True


@program
class TwoGraphsSideStream(GraphBase):
    """g1 writes a static tensor; g2 reads it. g2 is replayed on a side stream that does not wait for g1."""
    mechanism = "graphs"
    intent = "racy"
    delay = "main, inside g1"
    wait = False

    def refs(self):
        self.side = torch.cuda.Stream()
        self.o1 = torch.empty(N, device="cuda")
        self.o_ref = ((self.src * 2.0).sin() * 3.0)

    def body(self, sleep):
        return []

    def capture(self, sleep):
        g1 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g1):
            nap(sleep)
            torch.mul(self.src, 2.0, out=self.o1)
            self.o1.sin_()
        g2 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g2):
            o2 = self.o1 * 3.0
        return (g1, g2), [o2]

    def step(self, sleep):
        (g1, g2), outs = self.graph(sleep)
        self.o1.zero_()
        g1.replay()
        if self.wait:
            self.side.wait_stream(self.main)
        with torch.cuda.stream(self.side):
            g2.replay()
        self.main.wait_stream(self.side)
        return [(outs[0], self.o_ref)]

    def record(self, rec):
        from torch.profiler import record_function
        with rec(step=False):
            gs, outs = self.capture(0)
            torch.cuda.synchronize()
            self.g0 = (gs, outs)
            with record_function("step"):
                r = self.step(0)
            torch.cuda.synchronize()
        return r


@program
class TwoGraphsSideStreamWaited(TwoGraphsSideStream):
    intent = "clean"
    wait = True


@program
class StaticOutputHeldAcrossReplays(GraphBase):
    """aux reads the graph's static output of replay 1 while main runs replay 2, which overwrites it."""
    mechanism = "graphs"
    intent = "racy"
    delay = "aux, before its read"
    join = False

    def refs(self):
        self.k = torch.ones(1, device="cuda")
        self.r_ref = ((self.src * 1.0).sin()).exp()

    def body(self, sleep):
        return [(self.src * self.k).sin()]

    def step(self, sleep):
        g, outs = self.graph(0)
        self.k.fill_(1.0)
        g.replay()
        self.aux.wait_stream(self.main)
        with torch.cuda.stream(self.aux):
            nap(sleep)
            r = outs[0].exp()
        if self.join:
            self.main.wait_stream(self.aux)
        self.k.fill_(2.0)
        g.replay()
        self.main.wait_stream(self.aux)
        return [(r, self.r_ref)]

    def record(self, rec):
        from torch.profiler import record_function
        with rec(step=False):
            self.g0 = self.capture_one(0)
            torch.cuda.synchronize()
            with record_function("step"):
                r = self.step(0)
            torch.cuda.synchronize()
        return r


@program
class StaticOutputJoinedBeforeReplay(StaticOutputHeldAcrossReplays):
    intent = "clean"
    join = True


@program
class HostScalarCaptured(GraphBase):
    """A Python float is captured by value: replays keep the value it had at capture."""
    mechanism = "host-scalar"
    intent = "frozen"
    delay = "(none: not a race)"
    device_scalar = False

    def refs(self):
        self.scale = 1.0
        self.t = torch.ones(1, device="cuda")

    def body(self, sleep):
        if self.device_scalar:
            return [self.src * self.t]
        return [self.src * self.scale]

    def step(self, sleep):
        g, outs = self.graph(0)
        self.scale = 2.0 + sleep * 0
        self.t.fill_(self.scale)
        g.replay()
        return [(outs[0], self.src * self.scale)]

    def record(self, rec):
        from torch.profiler import record_function
        with rec(step=False):
            self.scale = 1.0
            self.g0 = self.capture_one(0)
            torch.cuda.synchronize()
            with record_function("step"):
                r = self.step(0)
            torch.cuda.synchronize()
        self.scale = 1.0
        return r


@program
class HostScalarAsDeviceTensor(HostScalarCaptured):
    """The same scale kept in a device tensor that is updated before each replay."""
    intent = "clean"
    device_scalar = True


# --- 6. torch.compile ------------------------------------------------------------------------------

class CompiledFreeWhileRead(FreeWhileRead):
    kind = "compile"
    mechanism = "compile"
    mode = None

    def extra(self):
        kw = {"mode": self.mode} if self.mode else {}
        self.f = torch.compile(lambda t: t.sin() + 1.0, **kw)
        self.y_ref = self.f(self.src * 2.0).clone()
        with torch.cuda.stream(self.aux):
            for _ in range(3):
                self.f(self.src)
        torch.cuda.synchronize()

    def read(self, x):
        return self.f(x)


@program
class CompiledTritonFreeWhileRead(CompiledFreeWhileRead):
    """A torch.compile'd (Triton) function on aux reads x while main frees and reuses it."""
    intent = "racy"


@program
class CompiledTritonRecordStream(CompiledFreeWhileRead):
    intent = "clean"
    fix = "record_stream"


@program
class CompiledReduceOverheadNoFork(Base):
    """torch.compile(mode="reduce-overhead") on main; aux reads its output without waiting."""
    kind = "compile"
    mechanism = "compile"
    intent = "racy"
    delay = "main, before the compiled call"
    fork = False

    def extra(self):
        self.f = torch.compile(lambda t: (t * 2.0).sin(), mode="reduce-overhead")
        self.inp = self.src.clone()
        for _ in range(4):
            self.f(self.inp)
        torch.cuda.synchronize()
        self.n = 0

    def step(self, sleep):
        # the input alternates between two scales, so a read of the previous output is a wrong value
        main, aux = self.main, self.aux
        self.n += 1
        k = 1.0 + (self.n % 2)
        torch.mul(self.src, k, out=self.inp)
        want = (self.inp * 2.0).sin().exp()
        torch.compiler.cudagraph_mark_step_begin()
        nap(sleep)
        o = self.f(self.inp)
        if self.fork:
            aux.wait_stream(main)
        with torch.cuda.stream(aux):
            r = o.exp()
        main.wait_stream(aux)
        return [(r, want)]


@program
class CompiledReduceOverheadForked(CompiledReduceOverheadNoFork):
    intent = "clean"
    fork = True


# --- 7. a one-rank NCCL process group, the collective on a side stream -----------------------------

@program
class NcclSideStreamNoJoin(Base):
    """all_gather_into_tensor on aux copies x into out; main overwrites x without waiting for aux."""
    kind = "nccl"
    mechanism = "collective"
    intent = "racy"
    delay = "aux, before the collective"
    join = False

    def extra(self):
        import torch.distributed as dist
        if not dist.is_initialized():
            dist.init_process_group("nccl", init_method="file://" + os.path.join(tempfile.mkdtemp(), "pg"), rank=0, world_size=1,
                                    device_id=torch.device("cuda", 0))
        self.dist = dist
        self.x = torch.empty(N, device="cuda")
        self.out = torch.empty(N, device="cuda")
        self.o_ref = self.src * 2.0
        with torch.cuda.stream(self.aux):
            dist.all_gather_into_tensor(self.out, self.src)
        torch.cuda.synchronize()

    def step(self, sleep):
        main, aux = self.main, self.aux
        torch.mul(self.src, 2.0, out=self.x)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            self.dist.all_gather_into_tensor(self.out, self.x)
        if self.join:
            main.wait_stream(aux)
        self.x.copy_(self.src)
        main.wait_stream(aux)
        return [(self.out, self.o_ref)]


@program
class NcclSideStreamJoined(NcclSideStreamNoJoin):
    intent = "clean"
    join = True


# --- 8. held out: written after the importer was mended, to check its rules on programs it had not seen

@program
class IndexSelectOut(FreeWhileRead):
    """x is torch.empty filled by index_select(out=x); aux reads it; main frees and reuses the block."""
    mechanism = "held-out"
    intent = "racy"

    def extra(self):
        self.idx = torch.arange(N - 1, -1, -1, device="cuda")
        self.y_ref = self.read(self.make_x())

    def make_x(self):
        x = torch.empty(N, device="cuda")
        torch.index_select(self.src, 0, self.idx, out=x)
        return x

    def make_w(self):
        w = torch.empty(N, device="cuda")
        torch.neg(self.src, out=w)
        return w


@program
class SplitViewsRecordStream(FreeWhileRead):
    """aux reads the second half of torch.split(x); record_stream on that view before the free."""
    mechanism = "held-out"
    intent = "clean"
    fix = "record_stream"

    def read(self, x):
        return torch.split(x, N // 2)[1].exp()

    def step(self, sleep):
        main, aux = self.main, self.aux
        x = self.make_x()
        parts = torch.split(x, N // 2)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            y = parts[1].exp()
        parts[1].record_stream(aux)
        c = self.A @ self.B
        del x, parts
        w = self.make_w()
        main.wait_stream(aux)
        return [(y, self.y_ref)]


@program
class GraphTwoSideStreams(GraphBase):
    """A graph forks two side streams; only one is joined before x is freed inside the capture."""
    mechanism = "held-out"
    intent = "racy"
    delay = "aux2, inside the graph, before its read"
    step_mark = False

    def refs(self):
        self.y_ref = (self.src * 2.0).sin()
        self.u_ref = (self.src * 2.0).exp()

    def body(self, sleep):
        main = torch.cuda.current_stream()
        x = self.src * 2.0
        self.aux.wait_stream(main)
        self.aux2.wait_stream(main)
        with torch.cuda.stream(self.aux):
            y = x.sin()
        with torch.cuda.stream(self.aux2):
            nap(sleep)
            u = x.exp()
        main.wait_stream(self.aux)
        c = self.A @ self.B
        del x
        w = self.src.cos()
        main.wait_stream(self.aux2)
        return [y, u]

    def check(self, outs):
        return [(outs[0], self.y_ref), (outs[1], self.u_ref)]


# --- 9. held out, second batch: other idioms, written before anything was mended for them ----------
# Each names its own pattern; none shares FreeWhileRead's step. Their labels are what the GPU showed.

class WriteAfterRead(Base):
    """main reads buf; aux overwrites buf with no wait on main's read (a write-after-read race)."""
    mechanism = "held-out-b"
    intent = "racy"
    delay = "main, before its read"
    fixed = False

    def extra(self):
        self.buf = torch.empty(N, device="cuda")
        self.y_ref = (self.src * 2.0).sin()

    def step(self, sleep):
        main, aux, buf = self.main, self.aux, self.buf
        torch.mul(self.src, 2.0, out=buf)
        nap(sleep)
        y = buf.sin()
        if self.fixed:
            aux.wait_stream(main)
        with torch.cuda.stream(aux):
            buf.fill_(0.0)
        main.wait_stream(aux)
        return [(y, self.y_ref)]


@program
class WriteAfterReadRacy(WriteAfterRead):
    pass


@program
class WriteAfterReadWaited(WriteAfterRead):
    intent = "clean"
    fixed = True


class AuxAllocMainFree(Base):
    """aux allocates t (aux's pool); main reads t; t is freed while main reads; aux's next alloc takes it."""
    mechanism = "held-out-b"
    intent = "racy"
    delay = "main, before its read"
    fixed = False

    def extra(self):
        self.y_ref = (self.src * 2.0).sin()

    def step(self, sleep):
        main, aux = self.main, self.aux
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            t = self.src * 2.0
        main.wait_stream(aux)
        nap(sleep)
        y = t.sin()
        if self.fixed:
            t.record_stream(main)
        del t
        with torch.cuda.stream(aux):
            w = self.src.cos()
        main.wait_stream(aux)
        return [(y, self.y_ref)]


@program
class AuxAllocMainFreeRacy(AuxAllocMainFree):
    pass


@program
class AuxAllocMainFreeRecordStream(AuxAllocMainFree):
    intent = "clean"
    fixed = True


class Halves(Base):
    """aux reads the first half of x while main rewrites a half of x in place."""
    mechanism = "held-out-b"
    delay = "aux, before its read"
    half = 1          # the half main rewrites: 1 = the other half (clean), 0 = the half aux reads (racy)

    def extra(self):
        H = N // 2
        self.out = torch.empty(N, device="cuda")
        self.want = torch.cat([(self.src[:H] * 2.0).sin(), (self.src[H:] * 2.0).cos()])

    def step(self, sleep):
        main, aux, out, H = self.main, self.aux, self.out, N // 2
        out.zero_()
        x = self.src * 2.0
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            torch.sin(x[:H], out=out[:H])
        torch.cos(x[H:], out=out[H:])
        if self.half == 1:
            x[H:].mul_(3.0)
        else:
            x[:H].mul_(3.0)
        main.wait_stream(aux)
        return [(out, self.want)]


@program
class HalvesDisjoint(Halves):
    intent = "clean"


@program
class HalvesOverlap(Halves):
    intent = "racy"
    half = 0


class SetStream(Base):
    """torch.cuda.set_stream switches to aux to read buf, which main just wrote."""
    mechanism = "held-out-b"
    delay = "main, before it writes buf"
    fork = False

    def extra(self):
        self.buf = torch.empty(N, device="cuda")
        self.y_ref = (self.src * 2.0).sin()

    def step(self, sleep):
        main, aux, buf = self.main, self.aux, self.buf
        buf.zero_()
        nap(sleep)
        torch.mul(self.src, 2.0, out=buf)
        if self.fork:
            aux.wait_stream(main)
        torch.cuda.set_stream(aux)
        y = buf.sin()
        torch.cuda.set_stream(main)
        main.wait_stream(aux)
        return [(y, self.y_ref)]


@program
class SetStreamNoFork(SetStream):
    intent = "racy"


@program
class SetStreamForked(SetStream):
    intent = "clean"
    fork = True


class HostSyncThenAux(Base):
    """main writes buf; the host waits for it in some way; aux then reads buf with no device-side wait."""
    mechanism = "held-out-b"
    intent = "clean"
    delay = "main, before it writes buf"

    def extra(self):
        self.buf = torch.empty(N, device="cuda")
        self.ev = torch.cuda.Event()
        self.y_ref = (self.src * 2.0).sin()

    def wait(self):
        raise NotImplementedError

    def step(self, sleep):
        main, aux, buf = self.main, self.aux, self.buf
        buf.zero_()
        nap(sleep)
        torch.mul(self.src, 2.0, out=buf)
        self.wait()
        with torch.cuda.stream(aux):
            y = buf.sin()
        main.wait_stream(aux)
        return [(y, self.y_ref)]


@program
class StreamSynchronizeThenAux(HostSyncThenAux):
    def wait(self):
        self.main.synchronize()


@program
class EventSynchronizeThenAux(HostSyncThenAux):
    def wait(self):
        self.ev.record(self.main)
        self.ev.synchronize()


@program
class ItemThenAux(HostSyncThenAux):
    def wait(self):
        self.s = self.buf[:16].sum().item()


@program
class EventQueryPollThenAux(HostSyncThenAux):
    def wait(self):
        self.ev.record(self.main)
        while not self.ev.query():
            pass


class D2HHostRead(Base):
    """y goes to pinned host memory with non_blocking=True; the host reads it at once."""
    mechanism = "held-out-b"
    delay = "main, before the copy"
    synced = False

    def extra(self):
        self.h = torch.empty(N).pin_memory()
        self.h_ref = (self.src * 2.0).sin().cpu()

    def step(self, sleep):
        self.h.zero_()
        y = (self.src * 2.0).sin()
        nap(sleep)
        self.h.copy_(y, non_blocking=True)
        if self.synced:
            self.main.synchronize()
        snap = self.h.clone()
        return [(snap, self.h_ref)]


@program
class D2HHostReadNoSync(D2HHostRead):
    intent = "racy"


@program
class D2HHostReadSynced(D2HHostRead):
    intent = "clean"
    synced = True


class HostBufferReuse(Base):
    """The host refills a pinned staging buffer while the non_blocking copy out of it may still run."""
    mechanism = "held-out-b"
    delay = "main, before the first copy"
    synced = False

    def extra(self):
        self.h = torch.empty(N).pin_memory()
        self.b1 = torch.randn(N)
        self.b2 = torch.randn(N)
        self.d1 = torch.empty(N, device="cuda")
        self.d2 = torch.empty(N, device="cuda")
        self.ev = torch.cuda.Event()
        self.r1 = self.b1.cuda()
        self.r2 = self.b2.cuda()

    def step(self, sleep):
        self.h.copy_(self.b1)
        nap(sleep)
        self.d1.copy_(self.h, non_blocking=True)
        if self.synced:
            self.ev.record()
            self.ev.synchronize()
        self.h.copy_(self.b2)
        self.d2.copy_(self.h, non_blocking=True)
        return [(self.d1, self.r1), (self.d2, self.r2)]


@program
class HostBufferReuseRacy(HostBufferReuse):
    intent = "racy"


@program
class HostBufferReuseSynced(HostBufferReuse):
    intent = "clean"
    synced = True


class ThreadHandoff(Base):
    """A second host thread writes buf on aux and tells the main thread by a threading.Event only."""
    mechanism = "held-out-b"
    delay = "aux (the producer thread), before it writes buf"
    fixed = False

    def extra(self):
        self.buf = torch.empty(N, device="cuda")
        self.ev = torch.cuda.Event()
        self.y_ref = (self.src * 2.0).sin()

    def step(self, sleep):
        import threading
        main, aux, buf = self.main, self.aux, self.buf
        buf.zero_()
        done = threading.Event()

        def producer():
            with torch.cuda.stream(aux):
                aux.wait_stream(main)
                nap(sleep)
                torch.mul(self.src, 2.0, out=buf)
                if self.fixed:
                    self.ev.record(aux)
            done.set()

        t = threading.Thread(target=producer)
        t.start()
        done.wait()
        if self.fixed:
            main.wait_event(self.ev)
        y = buf.sin()
        t.join()
        main.wait_stream(aux)
        return [(y, self.y_ref)]


@program
class ThreadHandoffNoEvent(ThreadHandoff):
    intent = "racy"


@program
class ThreadHandoffEvent(ThreadHandoff):
    intent = "clean"
    fixed = True


class MicrobatchLoop(Base):
    """Three microbatches in a loop: aux reads each x_i; x_i is dropped and x_{i+1} may take its block."""
    mechanism = "held-out-b"
    delay = "aux, before each read"
    fixed = False

    def extra(self):
        self.refs = [(self.src * float(i + 1)).sin() for i in range(3)]

    def step(self, sleep):
        main, aux = self.main, self.aux
        ys = []
        for i in range(3):
            x = self.src * float(i + 1)
            aux.wait_stream(main)
            with torch.cuda.stream(aux):
                nap(sleep)
                ys.append(x.sin())
            if self.fixed:
                x.record_stream(aux)
            c = self.A @ self.B
            x = None
        main.wait_stream(aux)
        return list(zip(ys, self.refs))


@program
class MicrobatchLoopRacy(MicrobatchLoop):
    intent = "racy"


@program
class MicrobatchLoopRecordStream(MicrobatchLoop):
    intent = "clean"
    fixed = True


class OwnStreams(Base):
    """The whole step runs on two created streams (none is the default stream); x is freed while s1 reads."""
    mechanism = "held-out-b"
    delay = "s1, before its read"
    fixed = False

    def extra(self):
        self.s0 = torch.cuda.Stream()
        self.s1 = torch.cuda.Stream()
        self.y_ref = (self.src * 2.0).sin()

    def step(self, sleep):
        s0, s1 = self.s0, self.s1
        s0.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s0):
            x = self.src * 2.0
            s1.wait_stream(s0)
            with torch.cuda.stream(s1):
                nap(sleep)
                y = x.sin()
            if self.fixed:
                x.record_stream(s1)
            c = self.A @ self.B
            del x
            w = self.src.cos()
            s0.wait_stream(s1)
        torch.cuda.current_stream().wait_stream(s0)
        return [(y, self.y_ref)]


@program
class OwnStreamsRacy(OwnStreams):
    intent = "racy"


@program
class OwnStreamsRecordStream(OwnStreams):
    intent = "clean"
    fixed = True


class BackwardThenAux(Base):
    """loss.backward() writes w.grad (on the autograd engine's thread); aux reads the gradient."""
    mechanism = "held-out-b"
    delay = "main, before backward"
    fork = False

    def extra(self):
        self.w = torch.randn(N, device="cuda", requires_grad=True)
        self.n = 0

    def step(self, sleep):
        # the loss scale alternates, so a read of the previous step's gradient is a wrong value
        main, aux = self.main, self.aux
        self.n += 1
        k = 1.0 + (self.n % 2)
        self.w.grad = None
        loss = torch.sin(self.w * self.src).sum() * k
        nap(sleep)
        loss.backward()
        if self.fork:
            aux.wait_stream(main)
        with torch.cuda.stream(aux):
            g = self.w.grad * 2.0
        main.wait_stream(aux)
        with torch.no_grad():
            want = torch.cos(self.w * self.src) * self.src * (2.0 * k)
        return [(g, want)]


@program
class BackwardThenAuxNoFork(BackwardThenAux):
    intent = "racy"


@program
class BackwardThenAuxForked(BackwardThenAux):
    intent = "clean"
    fork = True


class DoubleBuffer(Base):
    """A copy stream prefetches four batches into two device buffers; main computes on each."""
    mechanism = "held-out-b"
    delay = "main, before each compute"
    fixed = False

    def extra(self):
        g = torch.Generator().manual_seed(1)
        self.host = [torch.randn(N, generator=g).pin_memory() for _ in range(4)]
        self.dbuf = [torch.empty(N, device="cuda") for _ in range(2)]
        self.refs = [h.cuda().sin() for h in self.host]
        self.cs = torch.cuda.Stream()

    def step(self, sleep):
        main, cs = self.main, self.cs
        copied = [torch.cuda.Event() for _ in range(4)]
        consumed = [torch.cuda.Event() for _ in range(4)]
        cs.wait_stream(main)
        outs = []
        for i in range(4):
            b = self.dbuf[i % 2]
            with torch.cuda.stream(cs):
                if self.fixed and i >= 2:
                    cs.wait_event(consumed[i - 2])
                b.copy_(self.host[i], non_blocking=True)
                copied[i].record(cs)
            main.wait_event(copied[i])
            nap(sleep)
            outs.append(b.sin())
            consumed[i].record(main)
        main.wait_stream(cs)
        return list(zip(outs, self.refs))


@program
class DoubleBufferNoConsumedWait(DoubleBuffer):
    intent = "racy"


@program
class DoubleBufferConsumedWait(DoubleBuffer):
    intent = "clean"
    fixed = True


@program
class EmptyCacheAfterDel(FreeWhileRead):
    """FreeWhileRead with torch.cuda.empty_cache() between the del and the next allocation."""
    mechanism = "held-out-b"
    intent = "clean"

    def step(self, sleep):
        main, aux = self.main, self.aux
        x = self.make_x()
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            y = self.read(x)
        c = self.A @ self.B
        del x
        torch.cuda.empty_cache()
        w = self.make_w()
        main.wait_stream(aux)
        return [(y, self.y_ref)]


class WarmGraph(Base):
    """A graph captured during warm-up (outside the recorded region, as the recording docs advise)."""
    kind = "graph"
    mechanism = "held-out-b"

    def body(self):
        raise NotImplementedError

    def extra(self):
        self.static_in = self.src.clone()
        self.n = 0
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                self.body()
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        self.g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.g):
            self.outs = self.body()
        torch.cuda.synchronize()


class WarmGraphAuxRead(WarmGraph):
    """main replays the warm graph; aux reads its static output; the input alternates per step."""
    delay = "main, before the replay"
    fork = False

    def body(self):
        return [(self.static_in * 2.0).sin()]

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.n += 1
        k = 1.0 + (self.n % 2)
        torch.mul(self.src, k, out=self.static_in)
        nap(sleep)
        self.g.replay()
        if self.fork:
            aux.wait_stream(main)
        with torch.cuda.stream(aux):
            r = self.outs[0].exp()
        main.wait_stream(aux)
        return [(r, (self.src * k * 2.0).sin().exp())]


@program
class WarmGraphAuxReadNoFork(WarmGraphAuxRead):
    intent = "racy"


@program
class WarmGraphAuxReadForked(WarmGraphAuxRead):
    intent = "clean"
    fork = True


class WarmGraphSideReplay(WarmGraph):
    """The warm graph replays on a side stream; main refills the static input for the next step."""
    delay = "side, before the replay"
    fixed = False

    def body(self):
        return [self.static_in.sin()]

    def step(self, sleep):
        main, side = self.main, self.aux
        self.n += 1
        k = 1.0 + (self.n % 2)
        torch.mul(self.src, k, out=self.static_in)
        side.wait_stream(main)
        with torch.cuda.stream(side):
            nap(sleep)
            self.g.replay()
        if self.fixed:
            main.wait_stream(side)
        torch.mul(self.src, 5.0, out=self.static_in)    # the next step's input, too early
        main.wait_stream(side)
        return [(self.outs[0], (self.src * k).sin())]


@program
class WarmGraphSideReplayOverwrite(WarmGraphSideReplay):
    intent = "racy"


@program
class WarmGraphSideReplayJoined(WarmGraphSideReplay):
    intent = "clean"
    fixed = True


@program
class WarmGraphInternalFree(WarmGraph):
    """The free-while-read program inside a graph captured at warm-up; the region holds replays only."""
    intent = "racy"
    delay = "aux, inside the graph, before its read"

    def body(self, sleep=0):
        main = torch.cuda.current_stream()
        x = self.static_in * 2.0
        self.aux.wait_stream(main)
        with torch.cuda.stream(self.aux):
            nap(sleep)
            y = x.sin()
        c = self.A @ self.B
        del x
        w = self.static_in.cos()
        main.wait_stream(self.aux)
        return [y]

    def extra(self):
        super().extra()
        self.gs = {0: (self.g, self.outs)}
        self.y_ref = (self.src * 2.0).sin()

    def step(self, sleep):
        if sleep not in self.gs:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                outs = self.body(sleep)
            self.gs[sleep] = (g, outs)
        g, outs = self.gs[sleep]
        self.static_in.copy_(self.src)
        g.replay()
        return [(outs[0], self.y_ref)]


class AsyncCollective(Base):
    """all_gather_into_tensor with async_op=True on a one-rank NCCL group; main reads out."""
    kind = "nccl"
    mechanism = "held-out-b"
    delay = "NCCL's stream: a large collective issued before it"
    waited = False

    def extra(self):
        import torch.distributed as dist
        if not dist.is_initialized():
            dist.init_process_group("nccl", init_method="file://" + os.path.join(tempfile.mkdtemp(), "pg"), rank=0, world_size=1,
                                    device_id=torch.device("cuda", 0))
        self.dist = dist
        self.out = torch.empty(N, device="cuda")
        self.big_in = torch.empty(64 * N, device="cuda")
        self.big_out = torch.empty(64 * N, device="cuda")
        self.o_ref = (self.src * 2.0).sin()
        dist.all_gather_into_tensor(self.big_out, self.big_in)
        torch.cuda.synchronize()

    def step(self, sleep):
        main = self.main
        x = self.src * 2.0
        self.out.zero_()
        if sleep:
            self.dist.all_gather_into_tensor(self.big_out, self.big_in, async_op=True)
        work = self.dist.all_gather_into_tensor(self.out, x, async_op=True)
        if self.waited:
            work.wait()
        r = self.out.sin()
        work.wait()
        return [(r, self.o_ref)]


@program
class AsyncCollectiveNoWait(AsyncCollective):
    intent = "racy"


@program
class AsyncCollectiveWaited(AsyncCollective):
    intent = "clean"
    waited = True


# --- 10. held out, third batch: written after the second batch's mending, before any mending for them

class StaleEvent(Base):
    """aux waits on an event recorded once at setup (stale) instead of one recorded after main's write."""
    mechanism = "held-out-c"
    delay = "main, before it writes buf"
    fresh = False

    def extra(self):
        self.buf = torch.empty(N, device="cuda")
        self.ev = torch.cuda.Event()
        self.ev.record(self.main)
        self.y_ref = (self.src * 2.0).sin()

    def step(self, sleep):
        main, aux, buf, ev = self.main, self.aux, self.buf, self.ev
        buf.zero_()
        nap(sleep)
        torch.mul(self.src, 2.0, out=buf)
        if self.fresh:
            ev.record(main)
        ev.wait(aux)
        with torch.cuda.stream(aux):
            y = buf.sin()
        main.wait_stream(aux)
        return [(y, self.y_ref)]


@program
class StaleEventRacy(StaleEvent):
    intent = "racy"


@program
class StaleEventFresh(StaleEvent):
    intent = "clean"
    fresh = True


class Transitive(Base):
    """main writes buf; aux2 waits on aux, which waited on main: aux2's read of buf is ordered through aux."""
    mechanism = "held-out-c"
    delay = "main, before it writes buf"
    early = False

    def extra(self):
        self.buf = torch.empty(N, device="cuda")
        self.y_ref = (self.src * 2.0).sin()

    def step(self, sleep):
        main, aux, aux2, buf = self.main, self.aux, self.aux2, self.buf
        e1, e2 = torch.cuda.Event(), torch.cuda.Event()
        buf.zero_()
        nap(sleep)
        torch.mul(self.src, 2.0, out=buf)
        e1.record(main)
        if self.early:
            e2.record(aux)          # recorded before aux waits on main: orders nothing of main's
        aux.wait_event(e1)
        with torch.cuda.stream(aux):
            t = self.src.cos()
        if not self.early:
            e2.record(aux)
        aux2.wait_event(e2)
        with torch.cuda.stream(aux2):
            y = buf.sin()
        main.wait_stream(aux)
        main.wait_stream(aux2)
        return [(y, self.y_ref)]


@program
class TransitiveEvents(Transitive):
    intent = "clean"


@program
class TransitiveRecordTooEarly(Transitive):
    intent = "racy"
    early = True


class D2DCopy(Base):
    """aux copies x into dst (a device-to-device copy); main overwrites x in place."""
    mechanism = "held-out-c"
    delay = "aux, before its copy"
    joined = False

    def extra(self):
        self.x = torch.empty(N, device="cuda")
        self.dst = torch.empty(N, device="cuda")
        self.d_ref = self.src * 2.0

    def step(self, sleep):
        main, aux = self.main, self.aux
        torch.mul(self.src, 2.0, out=self.x)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            self.dst.copy_(self.x)
        if self.joined:
            main.wait_stream(aux)
        self.x.mul_(0.5)
        main.wait_stream(aux)
        return [(self.dst, self.d_ref)]


@program
class D2DCopyOverwrite(D2DCopy):
    intent = "racy"


@program
class D2DCopyJoined(D2DCopy):
    intent = "clean"
    joined = True


class IndexPut(Base):
    """aux scatters rows into buf with index_put_; main reads buf."""
    mechanism = "held-out-c"
    delay = "aux, before its scatter"
    joined = False

    def extra(self):
        self.buf = torch.zeros(N, device="cuda")
        self.idx = torch.arange(0, N, 2, device="cuda")
        self.vals = torch.randn(N // 2, device="cuda")
        ref = torch.zeros(N, device="cuda")
        ref[self.idx] = self.vals
        self.r_ref = ref.sin()

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.buf.zero_()
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            self.buf.index_put_((self.idx,), self.vals)
        if self.joined:
            main.wait_stream(aux)
        r = self.buf.sin()
        main.wait_stream(aux)
        return [(r, self.r_ref)]


@program
class IndexPutNoJoin(IndexPut):
    intent = "racy"


@program
class IndexPutJoined(IndexPut):
    intent = "clean"
    joined = True


class StorageResize(Base):
    """aux reads x; the host frees x's storage with untyped_storage().resize_(0); main allocates again."""
    mechanism = "held-out-c"
    delay = "aux, before its read"
    fixed = False

    def extra(self):
        self.y_ref = (self.src * 2.0).sin()

    def step(self, sleep):
        main, aux = self.main, self.aux
        x = self.src * 2.0
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            y = x.sin()
        if self.fixed:
            x.record_stream(aux)
        c = self.A @ self.B
        x.untyped_storage().resize_(0)
        w = self.src.cos()
        main.wait_stream(aux)
        return [(y, self.y_ref)]


@program
class StorageResizeRacy(StorageResize):
    intent = "racy"


@program
class StorageResizeRecordStream(StorageResize):
    intent = "clean"
    fixed = True


class AsyncCollectiveFreeInput(Base):
    """all_gather_into_tensor(async_op=True) of x; the host drops x before work.wait(); main allocates."""
    kind = "nccl"
    mechanism = "held-out-c"
    intent = "clean"
    delay = "NCCL's stream: a large collective issued before it"

    def extra(self):
        AsyncCollective.extra(self)
        self.o_ref = self.src * 2.0

    def step(self, sleep):
        x = self.src * 2.0
        if sleep:
            self.dist.all_gather_into_tensor(self.big_out, self.big_in, async_op=True)
        work = self.dist.all_gather_into_tensor(self.out, x, async_op=True)
        del x
        w = self.src.cos()
        work.wait()
        return [(self.out, self.o_ref)]


@program
class AsyncCollectiveFreeInputClean(AsyncCollectiveFreeInput):
    pass


@program
class WarmGraphInternalFreeHooked(WarmGraphInternalFree):
    """WarmGraphInternalFree recorded by a recorder that also records captures made before the region."""
    mechanism = "held-out-c"


@program
class WarmGraphInternalJoinedHooked(WarmGraphInternalFree):
    """The same graph with aux joined before x is freed inside the capture."""
    mechanism = "held-out-c"
    intent = "clean"

    def body(self, sleep=0):
        main = torch.cuda.current_stream()
        x = self.static_in * 2.0
        self.aux.wait_stream(main)
        with torch.cuda.stream(self.aux):
            nap(sleep)
            y = x.sin()
        c = self.A @ self.B
        main.wait_stream(self.aux)
        del x
        w = self.static_in.cos()
        return [y]


@program
class CompiledReduceOverheadNoForkHooked(CompiledReduceOverheadNoFork):
    mechanism = "held-out-c"


@program
class CompiledReduceOverheadForkedHooked(CompiledReduceOverheadNoFork):
    mechanism = "held-out-c"
    intent = "clean"
    fork = True


# --- 11. generality checks: one more program per importer rule, in another idiom, not looked at first

@program
class ForeachAddNoJoin(Base):
    """aux adds in place into two tensors with torch._foreach_add_; main reads one without waiting."""
    mechanism = "held-out-d"
    intent = "racy"
    delay = "aux, before its _foreach_add_"

    def extra(self):
        self.a = torch.empty(N, device="cuda")
        self.b = torch.empty(N, device="cuda")
        self.r_ref = (self.src + 1.0).sin()

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.a.copy_(self.src)
        self.b.copy_(self.src)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            torch._foreach_add_([self.a, self.b], 1.0)
        r = self.a.sin()
        main.wait_stream(aux)
        return [(r, self.r_ref)]


@program
class WarmGraphTwoOutputs(WarmGraph):
    """A warm-up-captured graph with two outputs; aux reads the second without waiting for the replay."""
    mechanism = "held-out-d"
    intent = "racy"
    delay = "main, before the replay"

    def body(self):
        return [self.static_in * 2.0, self.static_in.cos()]

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.n += 1
        k = 1.0 + (self.n % 2)
        torch.mul(self.src, k, out=self.static_in)
        nap(sleep)
        self.g.replay()
        with torch.cuda.stream(aux):
            r = self.outs[1] * 3.0
        main.wait_stream(aux)
        return [(r, (self.src * k).cos() * 3.0)]


@program
class ThreadCopyNoEvent(Base):
    """A thread started in the step copies src into buf on aux (copy_); the main thread reads buf after a threading.Event."""
    mechanism = "held-out-d"
    intent = "racy"
    delay = "aux (the producer thread), before its copy"

    def extra(self):
        self.buf = torch.empty(N, device="cuda")
        self.y_ref = self.src.sin()

    def step(self, sleep):
        import threading
        main, aux, buf = self.main, self.aux, self.buf
        buf.zero_()
        done = threading.Event()

        def producer():
            with torch.cuda.stream(aux):
                aux.wait_stream(main)
                nap(sleep)
                buf.copy_(self.src)
            done.set()

        t = threading.Thread(target=producer)
        t.start()
        done.wait()
        y = buf.sin()
        t.join()
        main.wait_stream(aux)
        return [(y, self.y_ref)]


@program
class HostInplaceAfterH2D(Base):
    """A non_blocking H2D copy out of pinned h; the host then adds to h in place before the copy is done."""
    mechanism = "held-out-d"
    intent = "racy"
    delay = "main, before the copy"

    def extra(self):
        self.h = torch.empty(N).pin_memory()
        self.base = torch.randn(N)
        self.d = torch.empty(N, device="cuda")
        self.d_ref = self.base.cuda()

    def step(self, sleep):
        self.h.copy_(self.base)
        nap(sleep)
        self.d.copy_(self.h, non_blocking=True)
        self.h.add_(1.0)
        return [(self.d, self.d_ref)]


@program
class EmptyCacheMatmulLoop(Base):
    """Two iterations: aux reads the matmul output c, main drops it and calls empty_cache before the next matmul."""
    mechanism = "held-out-d"
    intent = "clean"
    delay = "aux, before its read"

    def extra(self):
        self.c_ref = (self.A @ self.B).float().sin()

    def step(self, sleep):
        main, aux = self.main, self.aux
        outs = []
        for _ in range(2):
            c = self.A @ self.B
            aux.wait_stream(main)
            with torch.cuda.stream(aux):
                nap(sleep)
                outs.append(c.float().sin())
            del c
            torch.cuda.empty_cache()
            w = self.B @ self.A
        main.wait_stream(aux)
        return [(o, self.c_ref) for o in outs]


@program
class EventQueryPollAux(Base):
    """aux writes buf and records ev; the host polls ev.query(); main then reads buf with no device wait."""
    mechanism = "held-out-d"
    intent = "clean"
    delay = "aux, before it writes buf"

    def extra(self):
        self.buf = torch.empty(N, device="cuda")
        self.ev = torch.cuda.Event()
        self.y_ref = (self.src * 3.0).sin()

    def step(self, sleep):
        main, aux, buf = self.main, self.aux, self.buf
        buf.zero_()
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            torch.mul(self.src, 3.0, out=buf)
            self.ev.record()
        while not self.ev.query():
            pass
        y = buf.sin()
        main.wait_stream(aux)
        return [(y, self.y_ref)]


@program
class QuartersDisjoint(Base):
    """torch.chunk into quarters: aux writes the first quarter of out while main writes the last."""
    mechanism = "held-out-d"
    intent = "clean"
    delay = "aux, before its write"

    def extra(self):
        self.out = torch.empty(N, device="cuda")
        q = torch.chunk(self.src, 4)
        self.want = torch.cat([q[0].sin(), q[1] * 0, q[2] * 0, q[3].cos()])

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.out.zero_()
        qs, qo = torch.chunk(self.src, 4), torch.chunk(self.out, 4)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            torch.sin(qs[0], out=qo[0])
        torch.cos(qs[3], out=qo[3])
        main.wait_stream(aux)
        return [(self.out, self.want)]


@program
class RecordEventBeforeLaunch(Base):
    """e = aux.record_event() before aux waits on main; aux2 waits on e and reads what main wrote."""
    mechanism = "held-out-d"
    intent = "racy"
    delay = "main, before it writes buf"

    def extra(self):
        self.buf = torch.empty(N, device="cuda")
        self.y_ref = (self.src * 2.0).sin()

    def step(self, sleep):
        main, aux, aux2, buf = self.main, self.aux, self.aux2, self.buf
        buf.zero_()
        e = aux.record_event()
        nap(sleep)
        torch.mul(self.src, 2.0, out=buf)
        aux.wait_stream(main)
        aux2.wait_event(e)
        with torch.cuda.stream(aux2):
            y = buf.sin()
        main.wait_stream(aux)
        main.wait_stream(aux2)
        return [(y, self.y_ref)]


# --- 12. held-out-e: idioms the corpus did not use (unbind, index_copy_ into a cache, addmm(out=), a
# Module forward beside optimizer.step(), a generator prefetcher, graphs sharing a pool,
# make_graphed_callables, torch.cuda.MemPool, reduce_scatter_tensor). Written before being scored,
# by a helper who had not read the importer; each label is what the GPU shows.

class UnbindRow(Base):
    """x is a (4, N/4) activation; aux reads one of x.unbind(0)'s rows; main drops x and allocates."""
    mechanism = "held-out-e"
    delay = "aux, before its read of the row"
    keep = False      # True: main keeps the row (a view, so x's storage too) alive until after the join

    def extra(self):
        self.y_ref = torch.mul(self.src.view(4, -1), 2.0).unbind(0)[2].sin()

    def step(self, sleep):
        main, aux = self.main, self.aux
        x = torch.mul(self.src.view(4, -1), 2.0)
        row = x.unbind(0)[2]
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            y = row.sin()
        c = self.A @ self.B
        del x
        if not self.keep:
            del row
        w = self.src.cos()          # 16 MiB on main: takes x's block if it is free
        main.wait_stream(aux)
        return [(y, self.y_ref)]


@program
class UnbindRowDropped(UnbindRow):
    intent = "racy"


@program
class UnbindRowKeptAlive(UnbindRow):
    intent = "clean"
    keep = True


class KVCacheRing(Base):
    """A decode step: main attends over a KV cache with a compiled function while aux writes the next
    tokens into the ring's oldest slots with index_copy_ (entered with torch.cuda.StreamContext)."""
    kind = "compile"
    mechanism = "held-out-e"
    delay = "main, before the compiled attention reads the cache"
    waited = False    # True: aux waits for main's read before it overwrites the slots
    S, D, T = 4096, 1024, 256

    def extra(self):
        S, D, T = self.S, self.D, self.T
        scale = D ** -0.5
        self.cache0 = torch.randn(S, D, device="cuda")
        self.cache = self.cache0.clone()
        self.q = torch.randn(D, device="cuda")
        self.new = torch.randn(T, D, device="cuda")
        self.pos = torch.arange(T, device="cuda")
        self.attend = torch.compile(lambda c, q: (c * q).sum(1) * scale)
        for _ in range(3):
            self.attend(self.cache, self.q)
        self.a_ref = self.attend(self.cache0, self.q).clone()
        self.c_ref = self.cache0.index_copy(0, self.pos, self.new)

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.cache.copy_(self.cache0)           # the cache as this step finds it
        aux.wait_stream(main)
        nap(sleep)
        a = self.attend(self.cache, self.q)      # reads every slot
        if self.waited:
            aux.wait_stream(main)
        with torch.cuda.StreamContext(aux):
            self.cache.index_copy_(0, self.pos, self.new)
        main.wait_stream(aux)
        return [(a, self.a_ref), (self.cache, self.c_ref)]


@program
class KVCacheRingOverwrite(KVCacheRing):
    intent = "racy"


@program
class KVCacheRingWaited(KVCacheRing):
    intent = "clean"
    waited = True


class AddmmOut(FreeWhileRead):
    """x = torch.empty filled by torch.addmm(bias, a, b, out=x); aux reads x; main frees x and fills a
    new empty with torch.matmul(out=), which may take x's block."""
    mechanism = "held-out-e"
    K = 2048          # K * K float32 = 16 MiB, the large pool

    def extra(self):
        K = self.K
        self.a = torch.randn(K, K, device="cuda") * K ** -0.5
        self.b = torch.randn(K, K, device="cuda")
        self.bias = torch.randn(K, device="cuda")
        self.y_ref = self.read(self.make_x())

    def make_x(self):
        x = torch.empty(self.K, self.K, device="cuda")
        torch.addmm(self.bias, self.a, self.b, out=x)
        return x

    def make_w(self):
        w = torch.empty(self.K, self.K, device="cuda")
        torch.matmul(self.b, self.a, out=w)
        return w


@program
class AddmmOutFreed(AddmmOut):
    intent = "racy"


@program
class AddmmOutRecordStream(AddmmOut):
    intent = "clean"
    fix = "record_stream"


class LinearBesideOptimizer(Base):
    """aux runs an nn.Linear forward (an evaluation beside training); main runs torch.optim.SGD's
    step(), which updates the weight in place."""
    mechanism = "held-out-e"
    delay = "aux, before the forward"
    joined = False    # True: main waits for aux before the optimizer step

    def extra(self):
        self.lin = torch.nn.Linear(2048, 2048).cuda()
        self.inp = torch.randn(512, 2048, device="cuda")
        self.w0 = self.lin.weight.detach().clone()
        self.b0 = self.lin.bias.detach().clone()
        for p in self.lin.parameters():
            p.grad = torch.randn_like(p)
        self.opt = torch.optim.SGD(self.lin.parameters(), lr=0.5)
        with torch.no_grad():
            self.y_ref = self.lin(self.inp).clone()
        self.opt.step()
        self.restore()
        with torch.cuda.stream(self.aux), torch.no_grad():
            self.lin(self.inp)

    def restore(self):
        with torch.no_grad():
            self.lin.weight.copy_(self.w0)
            self.lin.bias.copy_(self.b0)

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.restore()                           # the weights as this step finds them
        aux.wait_stream(main)
        with torch.cuda.stream(aux), torch.no_grad():
            nap(sleep)
            y = self.lin(self.inp)
        if self.joined:
            main.wait_stream(aux)
        self.opt.step()
        main.wait_stream(aux)
        return [(y, self.y_ref)]


@program
class LinearBesideOptimizerRacy(LinearBesideOptimizer):
    intent = "racy"


@program
class LinearBesideOptimizerJoined(LinearBesideOptimizer):
    intent = "clean"
    joined = True


class Prefetcher(Base):
    """A generator prefetches the next batch on a copy stream (pinned h.to("cuda", non_blocking=True)),
    one batch ahead, and yields it with an event; main waits on the event, takes the batch with
    record_stream and normalises it in place."""
    mechanism = "held-out-e"
    delay = "cs (the copy stream), before each copy"
    early = False     # True: the event is recorded before the copy is issued

    def extra(self):
        g = torch.Generator().manual_seed(2)
        self.host = [torch.randn(N, generator=g).pin_memory() for _ in range(4)]
        self.refs = [(h.cuda() - 0.5) * 2.0 for h in self.host]
        self.cs = torch.cuda.Stream()

    def batches(self, sleep):
        for h in self.host:
            with torch.cuda.stream(self.cs):
                if self.early:
                    ev = self.cs.record_event()
                nap(sleep)
                d = h.to("cuda", non_blocking=True)
                if not self.early:
                    ev = self.cs.record_event()
            yield d, ev

    def step(self, sleep):
        main = self.main
        self.cs.wait_stream(main)
        it = self.batches(sleep)
        nxt = next(it)
        outs = []
        for _ in range(len(self.host)):
            d, ev = nxt
            nxt = next(it, None)                 # the next copy is issued before this batch is used
            main.wait_event(ev)
            d.record_stream(main)
            d.sub_(0.5).mul_(2.0)
            outs.append(d)
        main.wait_stream(self.cs)
        return list(zip(outs, self.refs))


@program
class PrefetcherEventBeforeCopy(Prefetcher):
    intent = "racy"
    early = True


@program
class PrefetcherEventAfterCopy(Prefetcher):
    intent = "clean"


class PoolGraphs(Base):
    """Two graphs, each with a 16 MiB temporary freed inside its capture; g1 replays on a side stream
    while main runs a matmul and replays g2. With one pool (torch.cuda.graph_pool_handle()) g2's
    temporary takes g1's freed block; with a pool each, they share nothing."""
    kind = "graph"
    mechanism = "held-out-e"
    delay = "side, inside g1, between writing its temporary and reading it"
    shared = False

    def extra(self):
        self.side = torch.cuda.Stream()
        self.o1_ref = (self.src * 2.0).sin()
        self.o2_ref = (self.src * 3.0).cos()
        s = torch.cuda.Stream()
        s.wait_stream(self.main)
        with torch.cuda.stream(s):
            for _ in range(2):
                self.body1(0)
                self.body2()
        self.main.wait_stream(s)
        torch.cuda.synchronize()
        self.gs = {0: self.capture(0)}

    def body1(self, sleep):
        t = self.src * 2.0
        nap(sleep)
        return t.sin()

    def body2(self):
        t = self.src * 3.0
        return t.cos()

    def capture(self, sleep):
        pool = torch.cuda.graph_pool_handle() if self.shared else None
        g1, g2 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        with torch.cuda.graph(g1, pool=pool):
            o1 = self.body1(sleep)
        with torch.cuda.graph(g2, pool=pool):
            o2 = self.body2()
        torch.cuda.synchronize()
        return g1, g2, o1, o2

    def step(self, sleep):
        if sleep not in self.gs:
            self.gs[sleep] = self.capture(sleep)
        g1, g2, o1, o2 = self.gs[sleep]
        self.side.wait_stream(self.main)
        with torch.cuda.stream(self.side):
            g1.replay()
        c = self.A @ self.B
        g2.replay()
        self.main.wait_stream(self.side)
        return [(o1, self.o1_ref), (o2, self.o2_ref)]

    def record(self, rec):
        from torch.profiler import record_function
        with rec(step=False):
            self.gs[0] = self.capture(0)
            with record_function("step"):
                r = self.step(0)
            torch.cuda.synchronize()
        return r


@program
class SharedPoolGraphsConcurrent(PoolGraphs):
    intent = "racy"
    shared = True


@program
class OwnPoolGraphsConcurrent(PoolGraphs):
    intent = "clean"


class GraphedCallable(Base):
    """An nn.Linear made a CUDA graph by torch.cuda.make_graphed_callables (captured at set-up); aux
    reads call 1's output while main makes call 2, which rewrites the same static output buffer."""
    kind = "graph"
    mechanism = "held-out-e"
    delay = "aux, before its read of call 1's output"
    cloned = False    # True: main clones call 1's output before call 2, and aux reads the clone

    def extra(self):
        self.lin = torch.nn.Linear(1024, 1024).cuda()
        self.x1 = torch.randn(256, 1024, device="cuda")
        self.x2 = torch.randn(256, 1024, device="cuda")
        with torch.no_grad():
            self.r1_ref = self.lin(self.x1).sin()
            self.o2_ref = self.lin(self.x2).clone()
        self.lin = torch.cuda.make_graphed_callables(self.lin, (torch.randn(256, 1024, device="cuda"),))
        torch.cuda.synchronize()

    def step(self, sleep):
        main, aux = self.main, self.aux
        with torch.no_grad():
            o1 = self.lin(self.x1)
            if self.cloned:
                o1 = o1.clone()
            aux.wait_stream(main)
            with torch.cuda.stream(aux):
                nap(sleep)
                r1 = o1.sin()
            o2 = self.lin(self.x2)
            main.wait_stream(aux)
        return [(r1, self.r1_ref), (o2, self.o2_ref)]


@program
class GraphedCallableOutputHeld(GraphedCallable):
    intent = "racy"


@program
class GraphedCallableOutputCloned(GraphedCallable):
    intent = "clean"
    cloned = True


class MemPoolStep(FreeWhileRead):
    """The free-while-read step with every allocation routed to a torch.cuda.MemPool by
    torch.cuda.use_mem_pool; set-up fails (the driver records the error) on a torch without them."""
    mechanism = "held-out-e"

    def extra(self):
        if not (hasattr(torch.cuda, "MemPool") and hasattr(torch.cuda, "use_mem_pool")):
            raise RuntimeError("torch.cuda.MemPool / use_mem_pool not in torch " + torch.__version__)
        self.pool = torch.cuda.MemPool()
        super().extra()

    def step(self, sleep):
        with torch.cuda.use_mem_pool(self.pool):
            return super().step(sleep)


@program
class MemPoolFreeWhileRead(MemPoolStep):
    intent = "racy"


@program
class MemPoolRecordStream(MemPoolStep):
    intent = "clean"
    fix = "record_stream"


class ReduceScatterRead(Base):
    """reduce_scatter_tensor on aux (a one-rank NCCL group: out is the whole input) writes out; main
    reads out."""
    kind = "nccl"
    mechanism = "held-out-e"
    delay = "aux, before the collective"
    joined = False    # True: main waits for aux before its read

    def extra(self):
        import torch.distributed as dist
        if not dist.is_initialized():
            dist.init_process_group("nccl", init_method="file://" + os.path.join(tempfile.mkdtemp(), "pg"), rank=0, world_size=1,
                                    device_id=torch.device("cuda", 0))
        self.dist = dist
        self.x = torch.empty(N, device="cuda")
        self.out = torch.empty(N, device="cuda")
        self.r_ref = (self.src * 2.0).sin()
        with torch.cuda.stream(self.aux):
            dist.reduce_scatter_tensor(self.out, self.src)
        torch.cuda.synchronize()

    def step(self, sleep):
        main, aux = self.main, self.aux
        torch.mul(self.src, 2.0, out=self.x)
        self.out.zero_()
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            self.dist.reduce_scatter_tensor(self.out, self.x)
        if self.joined:
            main.wait_stream(aux)
        r = self.out.sin()
        main.wait_stream(aux)
        return [(r, self.r_ref)]


@program
class ReduceScatterReadNoJoin(ReduceScatterRead):
    intent = "racy"


@program
class ReduceScatterReadJoined(ReduceScatterRead):
    intent = "clean"
    joined = True


# --- 13. held-out-f: idioms the corpus did not use (a DDP-like bucket all_reduce, an FSDP-like
# all-gather prefetch, logits to pinned memory read by the host, a chain of four streams, an external
# event recorded inside a graph, a graph's input refilled by a loader stream, a fork/join inside a
# capture, a compiled scaled_dot_product_attention on a side stream, torch.autograd.grad read on a side
# stream, new_zeros/arange blocks and a non_blocking device-to-device copy, a high-priority stream
# joined by a timing event, strided and expanded views). Written before being scored, by a helper who
# had not read the importer; each label is what the GPU shows.

def one_rank_group():
    """A one-rank NCCL process group (made once per process)."""
    import torch.distributed as dist
    if not dist.is_initialized():
        dist.init_process_group("nccl", init_method="file://" + os.path.join(tempfile.mkdtemp(), "pg"), rank=0, world_size=1,
                                device_id=torch.device("cuda", 0))
    return dist


class BucketAllReduce(Base):
    """DDP-like: a gradient g is copied into a flat bucket on the comm stream cs and all_reduce'd there
    (a one-rank group); main then averages the bucket in place with div_ (by a nominal world of 2)."""
    kind = "nccl"
    mechanism = "held-out-f"
    delay = "cs (the comm stream), before the bucket copy and the all_reduce"
    waited = False    # True: main waits for cs before its div_

    def extra(self):
        self.dist = one_rank_group()
        self.cs = torch.cuda.Stream()
        self.bucket = torch.full((N,), -1.0, device="cuda")
        self.n = 0
        self.cs.wait_stream(self.main)
        with torch.cuda.stream(self.cs):
            self.dist.all_reduce(self.bucket)
        torch.cuda.synchronize()

    def step(self, sleep):
        # the gradient's scale alternates, so a stale bucket is a wrong value, not a lucky one
        main, cs, bucket = self.main, self.cs, self.bucket
        self.n += 1
        k = 1.0 + (self.n % 2)
        bucket.fill_(-1.0)
        g = self.src * k
        cs.wait_stream(main)
        with torch.cuda.stream(cs):
            nap(sleep)
            bucket.copy_(g)
            self.dist.all_reduce(bucket)
        if self.waited:
            main.wait_stream(cs)
        bucket.div_(2.0)
        main.wait_stream(cs)
        return [(bucket, self.src * (k / 2.0))]


@program
class BucketDivBeforeAllReduce(BucketAllReduce):
    intent = "racy"


@program
class BucketDivAfterAllReduce(BucketAllReduce):
    intent = "clean"
    waited = True


class LayerPrefetch(Base):
    """FSDP-like: each layer's weight lives as a flat shard; all_gather_into_tensor (a one-rank group) on
    the ag stream unshards layer i+1 into its full buffer while main computes layer i."""
    kind = "nccl"
    mechanism = "held-out-f"
    delay = "ag (the all-gather stream), before each prefetch of the next layer"
    waited = False    # True: main waits for ag at the end of each layer, before it uses the next
    L, D = 3, 1024

    def extra(self):
        L, D = self.L, self.D
        self.dist = one_rank_group()
        self.ag = torch.cuda.Stream()
        self.shards = [torch.randn(D * D, device="cuda") * D ** -0.5 for _ in range(L)]
        self.full = [torch.empty(D * D, device="cuda") for _ in range(L)]
        self.x = torch.randn(256, D, device="cuda")
        h = self.x
        for s in self.shards:
            h = torch.relu(h @ s.view(D, D))
        self.h_ref = h
        self.ag.wait_stream(self.main)
        with torch.cuda.stream(self.ag):
            self.dist.all_gather_into_tensor(self.full[0], self.shards[0])
        torch.cuda.synchronize()

    def step(self, sleep):
        main, ag, L, D = self.main, self.ag, self.L, self.D
        for f in self.full:
            f.zero_()                            # resharded: no full weight survives a step
        ag.wait_stream(main)
        with torch.cuda.stream(ag):
            self.dist.all_gather_into_tensor(self.full[0], self.shards[0])
        main.wait_stream(ag)
        h = self.x
        for i in range(L):
            if i + 1 < L:
                with torch.cuda.stream(ag):
                    nap(sleep)
                    self.dist.all_gather_into_tensor(self.full[i + 1], self.shards[i + 1])
            h = torch.relu(h @ self.full[i].view(D, D))
            if self.waited:
                main.wait_stream(ag)
        main.wait_stream(ag)
        return [(h, self.h_ref)]


@program
class LayerPrefetchNoWait(LayerPrefetch):
    intent = "racy"


@program
class LayerPrefetchWaited(LayerPrefetch):
    intent = "clean"
    waited = True


class LogitsToHost(Base):
    """Logits (a matmul on main) go to pinned host memory by a non_blocking copy on a copy stream, which
    records an event; the host takes log_softmax of the pinned copy after event.synchronize() (or after
    nothing)."""
    mechanism = "held-out-f"
    delay = "cs (the copy stream), before the copy"
    synced = False

    def extra(self):
        self.cs = torch.cuda.Stream()
        self.x = torch.randn(512, 1024, device="cuda")
        self.W = torch.randn(1024, 1000, device="cuda") * 1024 ** -0.5
        self.hl = torch.empty(512, 1000).pin_memory()
        self.n = 0
        self.p_refs = {k: torch.log_softmax((self.x * k) @ self.W, 1).cpu() for k in (1.0, 2.0)}

    def step(self, sleep):
        main, cs = self.main, self.cs
        self.n += 1
        k = 1.0 + (self.n % 2)
        self.hl.zero_()
        logits = (self.x * k) @ self.W
        cs.wait_stream(main)
        with torch.cuda.stream(cs):
            nap(sleep)
            self.hl.copy_(logits, non_blocking=True)
            ev = cs.record_event()
        logits.record_stream(cs)
        if self.synced:
            ev.synchronize()
        p = torch.log_softmax(self.hl, 1)        # on the host
        return [(p, self.p_refs[k])]


@program
class LogitsToHostNoSync(LogitsToHost):
    intent = "racy"


@program
class LogitsToHostEventSync(LogitsToHost):
    intent = "clean"
    synced = True


class FourStreamChain(Base):
    """main writes buf; s1, s2, s3 each wait_stream on the one before and do their own small work; s3
    then reads buf transposed (view(2048, -1).t().contiguous()): ordered after main's write only
    through the whole chain."""
    mechanism = "held-out-f"
    delay = "main, before it writes buf"
    broken = False    # True: s2 does not wait on s1 (the chain's middle link is missing)

    def extra(self):
        self.s = [torch.cuda.Stream() for _ in range(3)]
        self.buf = torch.empty(N, device="cuda")
        self.t = [torch.empty(NS, device="cuda") for _ in range(3)]
        self.n = 0

    def step(self, sleep):
        main, buf = self.main, self.buf
        self.n += 1
        k = 1.0 + (self.n % 2)
        buf.zero_()
        nap(sleep)
        torch.mul(self.src, k, out=buf)
        prev = main
        for i, s in enumerate(self.s):
            if not (self.broken and i == 1):
                s.wait_stream(prev)
            with torch.cuda.stream(s):
                torch.mul(self.src[:NS], float(i + 1), out=self.t[i])
            prev = s
        with torch.cuda.stream(self.s[2]):
            y = buf.view(2048, -1).t().contiguous().sin()
        for s in self.s:
            main.wait_stream(s)
        return [(y, (self.src * k).view(2048, -1).t().contiguous().sin())]


@program
class FourStreamChainBroken(FourStreamChain):
    intent = "racy"
    broken = True


@program
class FourStreamChainWhole(FourStreamChain):
    intent = "clean"


class GraphExternalEvent(Base):
    """A graph (captured at set-up) writes out and records an external event inside the capture
    (torch.cuda.Event(external=True): an event-record node); after main replays it, aux waits on the
    event and reads out. Set-up fails (the driver records the error) on a torch without external events."""
    kind = "graph"
    mechanism = "held-out-f"
    delay = "main, inside the graph, before it writes out"
    early = False     # True: the event is recorded inside the capture before the write

    def extra(self):
        try:
            self.ev = torch.cuda.Event(external=True)
        except TypeError as e:
            raise RuntimeError("torch.cuda.Event(external=True) not in torch " + torch.__version__) from e
        self.k = torch.ones(1, device="cuda")
        self.out = torch.empty(N, device="cuda")
        self.n = 0
        s = torch.cuda.Stream()
        s.wait_stream(self.main)
        with torch.cuda.stream(s):
            for _ in range(2):
                self.body(0)
        self.main.wait_stream(s)
        torch.cuda.synchronize()
        self.gs = {}
        self.graph(0)

    def body(self, sleep):
        if self.early:
            self.ev.record()
        nap(sleep)
        torch.mul(self.src, self.k, out=self.out)
        if not self.early:
            self.ev.record()

    def graph(self, sleep):
        if sleep not in self.gs:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                self.body(sleep)
            torch.cuda.synchronize()
            self.gs[sleep] = g
        return self.gs[sleep]

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.n += 1
        k = 1.0 + (self.n % 2)
        g = self.graph(sleep)
        self.k.fill_(k)
        self.out.zero_()
        g.replay()
        aux.wait_event(self.ev)
        with torch.cuda.stream(aux):
            y = self.out.sin()
        main.wait_stream(aux)
        return [(y, (self.src * k).sin())]


@program
class GraphExternalEventEarly(GraphExternalEvent):
    intent = "racy"
    early = True


@program
class GraphExternalEventLate(GraphExternalEvent):
    intent = "clean"


class GraphInputRefill(Base):
    """A loader stream ls refills a graph's static input from pinned host memory (a non_blocking H2D
    copy, batches alternating); main replays the graph, captured at set-up."""
    kind = "graph"
    mechanism = "held-out-f"
    delay = "ls (the loader stream), before its refill"
    waited = False    # True: main waits for ls before the replay

    def extra(self):
        g = torch.Generator().manual_seed(3)
        self.host = [torch.randn(N, generator=g).pin_memory() for _ in range(2)]
        self.want = [(h.cuda() * 2.0).sin() for h in self.host]
        self.ls = torch.cuda.Stream()
        self.static_in = self.host[0].cuda()
        self.n = 0
        s = torch.cuda.Stream()
        s.wait_stream(self.main)
        with torch.cuda.stream(s):
            for _ in range(2):
                (self.static_in * 2.0).sin()
        self.main.wait_stream(s)
        torch.cuda.synchronize()
        self.g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.g):
            self.out = (self.static_in * 2.0).sin()
        torch.cuda.synchronize()

    def step(self, sleep):
        main, ls = self.main, self.ls
        self.n += 1
        i = self.n % 2
        ls.wait_stream(main)
        with torch.cuda.stream(ls):
            nap(sleep)
            self.static_in.copy_(self.host[i], non_blocking=True)
        if self.waited:
            main.wait_stream(ls)
        self.g.replay()
        main.wait_stream(ls)
        return [(self.out, self.want[i])]


@program
class GraphInputRefillNoWait(GraphInputRefill):
    intent = "racy"


@program
class GraphInputRefillWaited(GraphInputRefill):
    intent = "clean"
    waited = True


class GraphForkJoin(GraphBase):
    """Inside one capture (in the recorded region) main forks aux: aux computes y from the static input,
    main reads y into z; the capture joins aux back only at its end (late) or before main's read."""
    mechanism = "held-out-f"
    delay = "aux, inside the graph, before it computes y"
    join_before_read = False

    def refs(self):
        self.static_in = self.src.clone()
        self.k = 1.0
        self.n = 0

    def body(self, sleep):
        main = torch.cuda.current_stream()
        x = self.static_in * 2.0
        self.aux.wait_stream(main)
        with torch.cuda.stream(self.aux):
            nap(sleep)
            y = x.sin()
        if self.join_before_read:
            main.wait_stream(self.aux)
        z = y * 3.0
        main.wait_stream(self.aux)
        return [z]

    def before_replay(self):
        # the input alternates, so z made from the previous replay's y is a wrong value
        self.n += 1
        self.k = 1.0 + (self.n % 2)
        torch.mul(self.src, self.k, out=self.static_in)

    def check(self, outs):
        return [(outs[0], (self.src * (2.0 * self.k)).sin() * 3.0)]


@program
class GraphForkJoinLate(GraphForkJoin):
    intent = "racy"


@program
class GraphForkJoinBeforeRead(GraphForkJoin):
    intent = "clean"
    join_before_read = True


class CompiledAttentionSide(Base):
    """A torch.compile'd causal scaled_dot_product_attention (fp16) runs on aux over q, k, v; main wrote
    q this step; main then reads aux's output o."""
    kind = "compile"
    mechanism = "held-out-f"
    delay = "aux, before the compiled attention"
    joined = False    # True: main waits for aux before it reads o
    SHAPE = (4, 8, 1024, 64)      # batch, heads, length, head size (Base.setup's self.B is a matrix)

    def extra(self):
        shape = self.SHAPE
        self.q0 = torch.randn(shape, device="cuda", dtype=torch.float16)
        self.kk = torch.randn(shape, device="cuda", dtype=torch.float16)
        self.v = torch.randn(shape, device="cuda", dtype=torch.float16)
        self.q = torch.empty_like(self.q0)
        self.attn = torch.compile(
            lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True))
        self.aux.wait_stream(self.main)
        with torch.cuda.stream(self.aux):
            for s in (1.0, 2.0, 1.0):
                self.attn(self.q0 * s, self.kk, self.v)
        torch.cuda.synchronize()
        self.o_refs = {s: self.attn(self.q0 * s, self.kk, self.v).float() + 1.0 for s in (1.0, 2.0)}
        torch.cuda.synchronize()
        self.n = 0

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.n += 1
        s = 1.0 + (self.n % 2)
        torch.mul(self.q0, s, out=self.q)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            o = self.attn(self.q, self.kk, self.v)
        if self.joined:
            main.wait_stream(aux)
        r = o.float() + 1.0
        main.wait_stream(aux)
        return [(r, self.o_refs[s])]


@program
class CompiledAttentionSideNoJoin(CompiledAttentionSide):
    intent = "racy"


@program
class CompiledAttentionSideJoined(CompiledAttentionSide):
    intent = "clean"
    joined = True


class GradOnSide(Base):
    """torch.autograd.grad of an nn.Linear's loss gives the weight's gradient (4 MiB, the large pool) and
    the bias's (4 KiB, the small pool); aux reads both."""
    mechanism = "held-out-f"
    delay = "main, before the forward and torch.autograd.grad"
    forked = False    # True: aux waits for main before its reads

    def extra(self):
        self.lin = torch.nn.Linear(1024, 1024).cuda()
        self.x = torch.randn(512, 1024, device="cuda")
        self.n = 0
        self.want = {}
        for s in (1.0, 2.0):
            gw, gb = self.grads(s)
            self.want[s] = (gw * 2.0, gb * 2.0)
        torch.cuda.synchronize()

    def grads(self, s):
        loss = self.lin(self.x * s).square().sum()
        return torch.autograd.grad(loss, [self.lin.weight, self.lin.bias])

    def step(self, sleep):
        # the input's scale alternates, so a stale gradient is a wrong value
        main, aux = self.main, self.aux
        self.n += 1
        s = 1.0 + (self.n % 2)
        nap(sleep)
        gw, gb = self.grads(s)
        if self.forked:
            aux.wait_stream(main)
        with torch.cuda.stream(aux):
            rw = gw * 2.0
            rb = gb * 2.0
        main.wait_stream(aux)
        return [(rw, self.want[s][0]), (rb, self.want[s][1])]


@program
class GradOnSideNoFork(GradOnSide):
    intent = "racy"


@program
class GradOnSideForked(GradOnSide):
    intent = "clean"
    forked = True


class D2DNonBlocking(FreeWhileRead):
    """x = src.new_zeros(N) then add_; aux copies x into its own tensor with copy_(non_blocking=True)
    (device to device); main frees x and torch.arange's output may take x's block."""
    mechanism = "held-out-f"
    delay = "aux, before its copy"

    def make_x(self):
        x = self.src.new_zeros(N)
        x.add_(self.src, alpha=2.0)
        return x

    def read(self, x):
        y = torch.empty_like(x)
        y.copy_(x, non_blocking=True)
        return y

    def make_w(self):
        return torch.arange(N, device="cuda", dtype=torch.float32)


@program
class D2DNonBlockingFreed(D2DNonBlocking):
    intent = "racy"


@program
class D2DNonBlockingRecordStream(D2DNonBlocking):
    intent = "clean"
    fix = "record_stream"


class PriorityTimingJoin(Base):
    """A low-priority stream lo writes buf between two timing events (torch.cuda.Event(enable_timing=True));
    a high-priority stream hi joins by waiting on one of them, then reads buf."""
    mechanism = "held-out-f"
    delay = "lo, after its start event, before it writes buf"
    on_end = False    # True: hi waits on the end event (after the write); False: on the start event

    def extra(self):
        self.lo = torch.cuda.Stream(priority=0)
        self.hi = torch.cuda.Stream(priority=-1)
        self.buf = torch.empty(N, device="cuda")
        self.n = 0

    def step(self, sleep):
        main, lo, hi, buf = self.main, self.lo, self.hi, self.buf
        self.n += 1
        k = 1.0 + (self.n % 2)
        t0 = torch.cuda.Event(enable_timing=True)
        t1 = torch.cuda.Event(enable_timing=True)
        buf.zero_()
        lo.wait_stream(main)
        with torch.cuda.stream(lo):
            t0.record()
            nap(sleep)
            torch.mul(self.src, k, out=buf)
            t1.record()
        hi.wait_event(t1 if self.on_end else t0)
        with torch.cuda.stream(hi):
            y = buf.sin()
        main.wait_stream(hi)
        main.wait_stream(lo)
        return [(y, (self.src * k).sin())]


@program
class PriorityTimingJoinStart(PriorityTimingJoin):
    intent = "racy"


@program
class PriorityTimingJoinEnd(PriorityTimingJoin):
    intent = "clean"
    on_end = True


class StridedWrites(Base):
    """aux writes the even elements of out (torch.sin(out=out[::2])); main writes src * scale.expand(...)
    (an expand view, stride 0) into a strided slice of out: every fourth element (out[::4], inside aux's:
    racy) or the odd ones (out[1::2], disjoint)."""
    mechanism = "held-out-f"
    delay = "aux, before its strided write"
    overlap = False

    def main_slice(self):
        return slice(None, None, 4) if self.overlap else slice(1, None, 2)

    def extra(self):
        self.out = torch.empty(N, device="cuda")
        self.scale = torch.full((1,), 3.0, device="cuda")
        want = torch.zeros(N, device="cuda")
        want[::2] = self.src[::2].sin()
        sl = self.main_slice()
        want[sl] = self.src[sl] * 3.0             # main's write comes after aux's in program order
        self.want = want

    def step(self, sleep):
        main, aux, out = self.main, self.aux, self.out
        out.zero_()
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            torch.sin(self.src[::2], out=out[::2])
        sl = self.main_slice()
        part = out[sl]
        torch.mul(self.src[sl], self.scale.expand(part.shape[0]), out=part)
        main.wait_stream(aux)
        return [(out, self.want)]


@program
class StridedWritesOverlap(StridedWrites):
    intent = "racy"
    overlap = True


@program
class StridedWritesDisjoint(StridedWrites):
    intent = "clean"


# --- 14. held-out-g: idioms the corpus did not use (Stream.query() polling as the join, all_to_all_single
# and broadcast on a comm stream, one graph replayed twice with a side read between, three graphs in one
# shared pool, a graph's input filled by a pinned H2D copy marked by an event, a ring of reused events, one
# event re-recorded in a loop, record_stream on a head view, a tensor freed inside a helper, torch.split
# parts read by torch.cat, a bf16 bmm into a reused out= buffer, torch.cuda.synchronize() against a
# stream's synchronize() before a host read). Written before being scored, by a helper who had not read
# the importer; each label is what the GPU shows.

class StreamQueryJoin(Base):
    """aux writes buf; the host polls a stream's query() until it reports idle, then main reads buf with
    no device-side wait. Polling aux.query() is a host join; polling main.query() (the wrong stream) is not."""
    mechanism = "held-out-g"
    delay = "aux, before it writes buf"
    poll_aux = False

    def extra(self):
        self.buf = torch.empty(N, device="cuda")
        self.n = 0

    def step(self, sleep):
        main, aux, buf = self.main, self.aux, self.buf
        self.n += 1
        k = 1.0 + (self.n % 2)
        buf.zero_()
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            torch.mul(self.src, k, out=buf)
        polled = aux if self.poll_aux else main
        while not polled.query():
            pass
        y = buf.sin()
        main.wait_stream(aux)
        return [(y, (self.src * k).sin())]


@program
class StreamQueryPollMain(StreamQueryJoin):
    intent = "racy"


@program
class StreamQueryPollAux(StreamQueryJoin):
    intent = "clean"
    poll_aux = True


class AllToAllBroadcast(Base):
    """A one-rank NCCL group on the comm stream cs: all_to_all_single(out, inp) (with one rank, a copy)
    and then broadcast(out, 0) in place; main reads out after waiting for cs, or without waiting."""
    kind = "nccl"
    mechanism = "held-out-g"
    delay = "cs (the comm stream), before the all_to_all_single"
    waited = False

    def extra(self):
        self.dist = one_rank_group()
        self.cs = torch.cuda.Stream()
        self.inp = torch.empty(N, device="cuda")
        self.out = torch.empty(N, device="cuda")
        self.n = 0
        self.cs.wait_stream(self.main)
        with torch.cuda.stream(self.cs):
            self.dist.all_to_all_single(self.out, self.src)
            self.dist.broadcast(self.out, 0)
        self.main.wait_stream(self.cs)
        torch.cuda.synchronize()

    def step(self, sleep):
        main, cs = self.main, self.cs
        self.n += 1
        k = 1.0 + (self.n % 2)
        self.out.zero_()
        torch.mul(self.src, k, out=self.inp)
        cs.wait_stream(main)
        with torch.cuda.stream(cs):
            nap(sleep)
            self.dist.all_to_all_single(self.out, self.inp)
            self.dist.broadcast(self.out, 0)
        if self.waited:
            main.wait_stream(cs)
        y = self.out * 3.0
        main.wait_stream(cs)
        return [(y, self.src * (3.0 * k))]


@program
class AllToAllBroadcastNoWait(AllToAllBroadcast):
    intent = "racy"


@program
class AllToAllBroadcastWaited(AllToAllBroadcast):
    intent = "clean"
    waited = True


class GraphTwiceSideRead(Base):
    """One graph (captured at set-up) is replayed twice per step on main, its static input refilled
    between (scale 1, then 3); between the replays aux reads the static output of replay 1, forked by an
    event recorded on main, and main waits for aux before replay 2. The event is recorded after replay 1
    (clean) or before it (too early: aux reads the previous step's replay 2)."""
    kind = "graph"
    mechanism = "held-out-g"
    delay = "main, before replay 1"
    late_event = False

    def extra(self):
        self.static_in = self.src.clone()
        self.ev = torch.cuda.Event()
        s = torch.cuda.Stream()
        s.wait_stream(self.main)
        with torch.cuda.stream(s):
            for _ in range(2):
                (self.static_in * 2.0).sin()
        self.main.wait_stream(s)
        torch.cuda.synchronize()
        self.g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.g):
            self.gout = (self.static_in * 2.0).sin()
        torch.cuda.synchronize()
        self.r_ref = (self.src * 1.0 * 2.0).sin() + 1.0
        self.o_ref = (self.src * 3.0 * 2.0).sin()

    def step(self, sleep):
        main, aux = self.main, self.aux
        torch.mul(self.src, 1.0, out=self.static_in)
        if not self.late_event:
            self.ev.record(main)
        nap(sleep)
        self.g.replay()
        if self.late_event:
            self.ev.record(main)
        aux.wait_event(self.ev)
        with torch.cuda.stream(aux):
            r = self.gout + 1.0
        main.wait_stream(aux)
        torch.mul(self.src, 3.0, out=self.static_in)
        self.g.replay()
        return [(r, self.r_ref), (self.gout, self.o_ref)]


@program
class GraphTwiceEventEarly(GraphTwiceSideRead):
    intent = "racy"


@program
class GraphTwiceEventAfter(GraphTwiceSideRead):
    intent = "clean"
    late_event = True


class ThreeGraphsOnePool(Base):
    """Three graphs captured at set-up into one shared pool (torch.cuda.graph_pool_handle()), a chain
    o1 = g1(in), o2 = g2(o1), o3 = g3(o2), each with a 16 MiB temporary freed inside its capture (g2's and
    g3's temporaries may take g1's freed block; o1 stays alive). main replays g1, g2, g3 in order; aux
    reads o1 while main runs g2 and g3, forked from main after g1 (clean) or not forked (racy)."""
    kind = "graph"
    mechanism = "held-out-g"
    delay = "main, before replaying g1"
    forked = False

    def b1(self):
        t = self.static_in * 2.0
        return t.sin()

    def b2(self, o1):
        t = o1 * 3.0
        return t.cos()

    def b3(self, o2):
        t = o2 + 1.0
        return t.exp()

    def extra(self):
        self.static_in = self.src.clone()
        self.n = 0
        self.refs = {}
        for k in (1.0, 2.0):
            o1 = (self.src * k * 2.0).sin()
            o3 = ((o1 * 3.0).cos() + 1.0).exp()
            self.refs[k] = (o1 * 2.0, o3)
        s = torch.cuda.Stream()
        s.wait_stream(self.main)
        with torch.cuda.stream(s):
            for _ in range(2):
                self.b3(self.b2(self.b1()))
        self.main.wait_stream(s)
        torch.cuda.synchronize()
        pool = torch.cuda.graph_pool_handle()
        self.g1, self.g2, self.g3 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.g1, pool=pool):
            self.o1 = self.b1()
        with torch.cuda.graph(self.g2, pool=pool):
            self.o2 = self.b2(self.o1)
        with torch.cuda.graph(self.g3, pool=pool):
            self.o3 = self.b3(self.o2)
        torch.cuda.synchronize()

    def step(self, sleep):
        # the input's scale alternates, so a read of the previous step's o1 is a wrong value
        main, aux = self.main, self.aux
        self.n += 1
        k = 1.0 + (self.n % 2)
        torch.mul(self.src, k, out=self.static_in)
        nap(sleep)
        self.g1.replay()
        if self.forked:
            aux.wait_stream(main)
        with torch.cuda.stream(aux):
            r = self.o1 * 2.0
        self.g2.replay()
        self.g3.replay()
        main.wait_stream(aux)
        return [(r, self.refs[k][0]), (self.o3, self.refs[k][1])]


@program
class ThreeGraphsOnePoolNoFork(ThreeGraphsOnePool):
    intent = "racy"


@program
class ThreeGraphsOnePoolForked(ThreeGraphsOnePool):
    intent = "clean"
    forked = True


class GraphH2DInputEvent(Base):
    """A copy stream cs refills a graph's static input from pinned host memory (non_blocking, batches
    alternating); an event marks the copy and main waits on it, then replays the graph (captured at
    set-up). The event is recorded inside cs's stream context (clean) or, by mistake, just after leaving
    it: on main, where it orders nothing (racy)."""
    kind = "graph"
    mechanism = "held-out-g"
    delay = "cs (the copy stream), before its copy"
    on_cs = False

    def extra(self):
        g = torch.Generator().manual_seed(7)
        self.host = [torch.randn(N, generator=g).pin_memory() for _ in range(2)]
        self.want = [h.cuda().cos() * 2.0 for h in self.host]
        self.cs = torch.cuda.Stream()
        self.ev = torch.cuda.Event()
        self.static_in = self.host[0].cuda()
        self.n = 0
        s = torch.cuda.Stream()
        s.wait_stream(self.main)
        with torch.cuda.stream(s):
            for _ in range(2):
                self.static_in.cos() * 2.0
        self.main.wait_stream(s)
        torch.cuda.synchronize()
        self.g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.g):
            self.gout = self.static_in.cos() * 2.0
        torch.cuda.synchronize()

    def step(self, sleep):
        main, cs = self.main, self.cs
        self.n += 1
        i = self.n % 2
        cs.wait_stream(main)
        with torch.cuda.stream(cs):
            nap(sleep)
            self.static_in.copy_(self.host[i], non_blocking=True)
            if self.on_cs:
                self.ev.record()
        if not self.on_cs:
            self.ev.record()
        main.wait_event(self.ev)
        self.g.replay()
        main.wait_stream(cs)
        return [(self.gout, self.want[i])]


@program
class GraphH2DEventOnMain(GraphH2DInputEvent):
    intent = "racy"


@program
class GraphH2DEventOnCopyStream(GraphH2DInputEvent):
    intent = "clean"
    on_cs = True


class EventRing(Base):
    """A producer on aux fills four slot buffers in a loop, recording slot i's event from a ring of four
    torch.cuda.Event reused every step; main, the consumer, waits on an event and reads slot i. Waiting on
    slot i's event is right; waiting on slot i-1's (off by one; for slot 0, the last step's slot 3) is not."""
    mechanism = "held-out-g"
    delay = "aux, before each slot's write"
    off_by_one = False

    def extra(self):
        q = N // 4
        self.slots = [torch.empty(q, device="cuda") for _ in range(4)]
        self.ring = [torch.cuda.Event() for _ in range(4)]
        self.n = 0

    def step(self, sleep):
        main, aux, q = self.main, self.aux, N // 4
        self.n += 1
        k = 1.0 + (self.n % 2)
        for sl in self.slots:
            sl.zero_()
        aux.wait_stream(main)
        outs = []
        for i in range(4):
            with torch.cuda.stream(aux):
                nap(sleep)
                torch.mul(self.src[i * q:(i + 1) * q], k, out=self.slots[i])
                self.ring[i].record()
            main.wait_event(self.ring[(i - 1) % 4] if self.off_by_one else self.ring[i])
            outs.append(self.slots[i].sin())
        main.wait_stream(aux)
        return [(torch.cat(outs), (self.src * k).sin())]


@program
class EventRingOffByOne(EventRing):
    intent = "racy"
    off_by_one = True


@program
class EventRingSameSlot(EventRing):
    intent = "clean"


class EventRerecord(Base):
    """aux layer-normalizes four chunks of x in a loop (F.layer_norm over rows of 1024, times a scale,
    into y[i]) and re-records ONE event after each chunk; main waits on that event and reads y[i]. Waiting
    after this chunk's re-record is right; waiting before it takes the previous chunk's record
    (cudaStreamWaitEvent waits on the latest record at the time of the call)."""
    mechanism = "held-out-g"
    delay = "aux, before each chunk"
    wait_after = False

    def extra(self):
        self.x = self.src.view(4, 1024, 1024)
        self.y = torch.empty(4, 1024, 1024, device="cuda")
        self.ev = torch.cuda.Event()
        self.n = 0
        self.refs = {k: torch.stack([torch.nn.functional.layer_norm(self.x[i], (1024,)) * k for i in range(4)]) + 0.5
                     for k in (1.0, 2.0)}

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.n += 1
        k = 1.0 + (self.n % 2)
        self.y.zero_()
        aux.wait_stream(main)
        outs = []
        for i in range(4):
            if not self.wait_after:
                main.wait_event(self.ev)
            with torch.cuda.stream(aux):
                nap(sleep)
                torch.mul(torch.nn.functional.layer_norm(self.x[i], (1024,)), k, out=self.y[i])
                self.ev.record()
            if self.wait_after:
                main.wait_event(self.ev)
            outs.append(self.y[i] + 0.5)
        main.wait_stream(aux)
        return [(torch.stack(outs), self.refs[k])]


@program
class EventRerecordWaitBefore(EventRerecord):
    intent = "racy"


@program
class EventRerecordWaitAfter(EventRerecord):
    intent = "clean"
    wait_after = True


class HeadViewRecordStream(Base):
    """x = cat([src, src]) * 2 (32 MiB); aux reads its second half x[N:]; main drops x and makes two more
    32 MiB tensors (which may take x's block). record_stream is called on x[:N], the head view, which the
    caching allocator applies to the whole block (clean), or not at all (racy)."""
    mechanism = "held-out-g"
    delay = "aux, before its read"
    recorded = False

    def extra(self):
        self.y_ref = (self.src * 2.0).sin()

    def step(self, sleep):
        main, aux = self.main, self.aux
        x = torch.cat([self.src, self.src]) * 2.0
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            y = x[N:].sin()
        if self.recorded:
            x[:N].record_stream(aux)
        c = self.A @ self.B
        del x
        w = torch.cat([self.src, self.src]).cos()
        main.wait_stream(aux)
        return [(y, self.y_ref)]


@program
class HeadViewNoRecordStream(HeadViewRecordStream):
    intent = "racy"


@program
class HeadViewRecordStreamed(HeadViewRecordStream):
    intent = "clean"
    recorded = True


class HelperPopsActivation(Base):
    """Activations kept in a dict: aux reads acts["h"]; then a helper on main pops it (h = acts.pop("h"))
    and returns h.cos(), so h is freed when the helper returns and main's next tensor may take its block.
    The clean twin's helper calls h.record_stream(aux) before returning."""
    mechanism = "held-out-g"
    delay = "aux, before its read"
    recorded = False

    def extra(self):
        self.y_ref = (self.src * 2.0).sin()

    def consume(self, acts):
        h = acts.pop("h")
        if self.recorded:
            h.record_stream(self.aux)
        return h.cos()

    def step(self, sleep):
        main, aux = self.main, self.aux
        acts = {"h": self.src * 2.0}
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            y = acts["h"].sin()
        u = self.consume(acts)
        w = self.src * 5.0
        main.wait_stream(aux)
        return [(y, self.y_ref)]


@program
class HelperPopsActivationFreed(HelperPopsActivation):
    intent = "racy"


@program
class HelperPopsActivationRecorded(HelperPopsActivation):
    intent = "clean"
    recorded = True


class SplitCatSide(Base):
    """parts = torch.split(buf, N // 4) (four views of one buffer); aux concatenates parts 1 and 3 with
    torch.cat; main, without waiting for aux, zeroes the positive entries of one part in place
    (masked_fill_): part 1, which aux reads (racy), or part 2, disjoint from aux's reads (clean)."""
    mechanism = "held-out-g"
    delay = "aux, before its cat"
    part = 1

    def extra(self):
        self.buf = torch.empty(N, device="cuda")
        self.n = 0

    def step(self, sleep):
        main, aux, q = self.main, self.aux, N // 4
        self.n += 1
        k = 1.0 + (self.n % 2)
        torch.mul(self.src, k, out=self.buf)
        parts = torch.split(self.buf, q)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            y = torch.cat([parts[1], parts[3]])
        p = parts[self.part]
        p.masked_fill_(p > 0, 0.0)
        main.wait_stream(aux)
        s = self.src * k
        want_y = torch.cat([s[q:2 * q], s[3 * q:]])
        want_buf = s.clone()
        wp = want_buf[self.part * q:(self.part + 1) * q]
        wp.masked_fill_(wp > 0, 0.0)
        return [(y, want_y), (self.buf, want_buf)]


@program
class SplitCatSideSamePart(SplitCatSide):
    intent = "racy"


@program
class SplitCatSideOtherPart(SplitCatSide):
    intent = "clean"
    part = 2


class BmmOutReuse(Base):
    """A bf16 torch.bmm writes into one preallocated out= buffer three times per step (three inputs); after
    each, aux reads the result (as float, times 2); main's next bmm rewrites the buffer, after waiting for
    aux (clean) or not (racy: aux reads a later iteration's product)."""
    mechanism = "held-out-g"
    delay = "aux, before its read"
    waited = False

    def extra(self):
        g = torch.Generator(device="cuda").manual_seed(11)
        self.xs = [torch.randn(8, 512, 512, device="cuda", dtype=torch.bfloat16, generator=g) * (i + 1) for i in range(3)]
        self.wt = torch.randn(8, 512, 512, device="cuda", dtype=torch.bfloat16, generator=g) * 512 ** -0.5
        self.obuf = torch.empty(8, 512, 512, device="cuda", dtype=torch.bfloat16)
        self.refs = []
        for x in self.xs:
            torch.bmm(x, self.wt, out=self.obuf)
            self.refs.append(self.obuf.float() * 2.0)
        torch.cuda.synchronize()

    def step(self, sleep):
        main, aux = self.main, self.aux
        rs = []
        for i in range(3):
            if self.waited and i:
                main.wait_stream(aux)
            torch.bmm(self.xs[i], self.wt, out=self.obuf)
            aux.wait_stream(main)
            with torch.cuda.stream(aux):
                nap(sleep)
                rs.append(self.obuf.float() * 2.0)
        main.wait_stream(aux)
        return list(zip(rs, self.refs))


@program
class BmmOutReuseUnwaited(BmmOutReuse):
    intent = "racy"


@program
class BmmOutReuseWaited(BmmOutReuse):
    intent = "clean"
    waited = True


class PinnedHostJoin(Base):
    """aux computes d; main waits for aux and copies d to pinned host memory (non_blocking); the host
    then reads the pinned buffer after torch.cuda.synchronize() (clean) or after aux.synchronize()
    (racy: the copy was issued on main, which aux's synchronize does not wait for)."""
    mechanism = "held-out-g"
    delay = "main, before its copy"
    device_sync = False

    def extra(self):
        self.hp = torch.empty(N).pin_memory()
        self.d = torch.empty(N, device="cuda")
        self.n = 0
        self.refs = {k: (self.src * k).sin().cpu() for k in (1.0, 2.0)}

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.n += 1
        k = 1.0 + (self.n % 2)
        self.hp.zero_()
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            torch.mul(self.src, k, out=self.d)
            self.d.sin_()
        main.wait_stream(aux)
        nap(sleep)
        self.hp.copy_(self.d, non_blocking=True)
        if self.device_sync:
            torch.cuda.synchronize()
        else:
            aux.synchronize()
        got = self.hp.clone()
        return [(got, self.refs[k])]


@program
class PinnedHostJoinStreamSync(PinnedHostJoin):
    intent = "racy"


@program
class PinnedHostJoinDeviceSync(PinnedHostJoin):
    intent = "clean"
    device_sync = True


# --- 15. held-out-h: idioms the corpus did not use (column slices of a fused qkv buffer, torch.chunk along
# dim 1 against narrow(1, ...), unfold windows against an as_strided view, a view of a view with offsets
# against a .view() of a slice, a channels_last conv on a side stream, torch.empty_strided blocks under
# expandable segments, an async all_gather whose Work.is_completed() the host polls, a graph captured on a
# user-given stream, torch.compile(mode="reduce-overhead") with two input shapes, the program's own nested
# record_function ranges, two marked iterations of one region racing across the iteration boundary, a
# host-side copy_ after a non_blocking device-to-host copy into pageable against pinned memory). Written
# before being scored, by a helper who had not read the importer; each label is what the GPU shows.

class FusedQkv(Base):
    """A fused qkv buffer (R, 3D) written by main; aux reads the q columns qkv[:, :D]; main then scales
    the columns qkv[:, D:2D] in place (the k part: disjoint) or qkv[:, D/2:3D/2] (half of it is q's:
    overlap)."""
    mechanism = "held-out-h"
    delay = "aux, before its read of the q columns"
    overlap = False
    R, D = 2048, 512

    def extra(self):
        R, D = self.R, self.D
        self.x2 = self.src[:R * 3 * D].view(R, 3 * D)
        self.qkv = torch.empty(R, 3 * D, device="cuda")
        self.n = 0
        self.refs = {k: (self.x2[:, :D] * k).sin() for k in (1.0, 2.0)}

    def step(self, sleep):
        main, aux, qkv, D = self.main, self.aux, self.qkv, self.D
        self.n += 1
        k = 1.0 + (self.n % 2)
        torch.mul(self.x2, k, out=qkv)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            q = qkv[:, :D].sin()
        lo = D // 2 if self.overlap else D
        qkv[:, lo:lo + D].mul_(3.0)
        main.wait_stream(aux)
        return [(q, self.refs[k])]


@program
class FusedQkvColumnsDisjoint(FusedQkv):
    intent = "clean"


@program
class FusedQkvColumnsOverlap(FusedQkv):
    intent = "racy"
    overlap = True


class ChunkNarrowWrites(Base):
    """out (R, 2C), zeroed by main. aux writes sin(x) into the left half, torch.chunk(out, 2, dim=1)[0],
    through out=; main then writes 3x into out.narrow(1, start, C): start C is the right half (disjoint),
    start 3C/4 also covers the left half's last quarter, where program order says main's value stays (a late
    aux write leaves sin there)."""
    mechanism = "held-out-h"
    delay = "aux, before its write into the left chunk"
    overlap = False
    R, C = 1024, 1024

    def start(self):
        return self.C - self.C // 4 if self.overlap else self.C

    def extra(self):
        R, C = self.R, self.C
        self.x2 = self.src[:R * 2 * C].view(R, 2 * C)
        self.out = torch.empty(R, 2 * C, device="cuda")
        s = self.start()
        want = torch.zeros(R, 2 * C, device="cuda")
        want[:, :C] = self.x2[:, :C].sin()
        want[:, s:s + C] = self.x2[:, s:s + C] * 3.0
        self.want = want

    def step(self, sleep):
        main, aux, out, C = self.main, self.aux, self.out, self.C
        out.zero_()
        left = torch.chunk(out, 2, dim=1)[0]
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            torch.sin(self.x2[:, :C], out=left)
        s = self.start()
        torch.mul(self.x2.narrow(1, s, C), 3.0, out=out.narrow(1, s, C))
        main.wait_stream(aux)
        return [(out, self.want)]


@program
class ChunkNarrowWritesDisjoint(ChunkNarrowWrites):
    intent = "clean"


@program
class ChunkNarrowWritesOverlap(ChunkNarrowWrites):
    intent = "racy"
    overlap = True


class UnfoldAsStrided(Base):
    """buf (1 Mi floats) written by main; aux sums windows buf.unfold(0, 256, 1024) (elements [1024i,
    1024i+256)); main then negates buf.as_strided((1024, 256), (1024, 1), off) in place: off 512 misses
    every window (disjoint), off 128 covers each window's second half (overlap)."""
    mechanism = "held-out-h"
    delay = "aux, before its windowed sum"
    overlap = False
    L = 1 << 20

    def extra(self):
        L = self.L
        self.buf = torch.empty(L, device="cuda")
        self.n = 0
        self.refs = {k: (self.src[:L] * k).unfold(0, 256, 1024).sum(-1) for k in (1.0, 2.0)}

    def step(self, sleep):
        main, aux, buf, L = self.main, self.aux, self.buf, self.L
        self.n += 1
        k = 1.0 + (self.n % 2)
        torch.mul(self.src[:L], k, out=buf)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            r = buf.unfold(0, 256, 1024).sum(-1)
        off = 128 if self.overlap else 512
        buf.as_strided((L // 1024, 256), (1024, 1), off).neg_()
        main.wait_stream(aux)
        return [(r, self.refs[k])]


@program
class UnfoldAsStridedDisjoint(UnfoldAsStrided):
    intent = "clean"


@program
class UnfoldAsStridedOverlap(UnfoldAsStrided):
    intent = "racy"
    overlap = True


class ViewOfViewOffsets(Base):
    """aux reads buf[4:][::2] (a view of a view: the even elements from 4); main then zeroes the first
    column of a .view(-1, 4) of a slice: buf[5:L-3] gives elements 5, 9, 13, ... (odd: disjoint), buf[8:]
    gives 8, 12, 16, ... (even, inside aux's view: overlap)."""
    mechanism = "held-out-h"
    delay = "aux, before its read"
    overlap = False
    L = 1 << 20

    def extra(self):
        L = self.L
        self.buf = torch.empty(L, device="cuda")
        self.n = 0
        self.refs = {k: (self.src[:L] * k)[4:][::2] * 2.0 for k in (1.0, 2.0)}

    def step(self, sleep):
        main, aux, buf, L = self.main, self.aux, self.buf, self.L
        self.n += 1
        k = 1.0 + (self.n % 2)
        torch.mul(self.src[:L], k, out=buf)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            r = buf[4:][::2] * 2.0
        part = buf[8:] if self.overlap else buf[5:L - 3]
        part.view(-1, 4)[:, 0].zero_()
        main.wait_stream(aux)
        return [(r, self.refs[k])]


@program
class ViewOfViewOffsetsDisjoint(ViewOfViewOffsets):
    intent = "clean"


@program
class ViewOfViewOffsetsOverlap(ViewOfViewOffsets):
    intent = "racy"
    overlap = True


class ChannelsLastConvSide(Base):
    """A channels_last conv2d (8x64x56x56, 3x3) runs on aux over x, which main filled this step (x0 * k);
    main then zeroes x for its next use, after joining aux (clean) or not (racy: the late conv sees zeros)."""
    mechanism = "held-out-h"
    delay = "aux, before the conv"
    joined = False

    def extra(self):
        import torch.nn.functional as F
        self.conv = lambda t: F.conv2d(t, self.w, padding=1)
        self.x0 = torch.randn(8, 64, 56, 56, device="cuda").to(memory_format=torch.channels_last)
        self.w = (torch.randn(64, 64, 3, 3, device="cuda") * 0.05).to(memory_format=torch.channels_last)
        self.x = torch.empty_like(self.x0)
        self.n = 0
        self.refs = {k: self.conv(self.x0 * k) for k in (1.0, 2.0)}

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.n += 1
        k = 1.0 + (self.n % 2)
        torch.mul(self.x0, k, out=self.x)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            y = self.conv(self.x)
        if self.joined:
            main.wait_stream(aux)
        self.x.zero_()
        main.wait_stream(aux)
        return [(y, self.refs[k])]


@program
class ChannelsLastConvSideNoJoin(ChannelsLastConvSide):
    intent = "racy"


@program
class ChannelsLastConvSideJoined(ChannelsLastConvSide):
    intent = "clean"
    joined = True


def _expandable(on):
    try:
        torch.cuda.memory._set_allocator_settings("expandable_segments:" + ("True" if on else "False"))
    except Exception:
        pass


class EmptyStridedExpandable(FreeWhileRead):
    """The free-while-read program with column-major blocks from torch.empty_strided((2048, 2048),
    (1, 2048)) filled through out=, run with the allocator's expandable segments on (switched on for the
    step only, so the programs after it see the default allocator): x's 16 MiB block is reused by w on main
    while aux may still read x. The clean twin calls x.record_stream(aux)."""
    mechanism = "held-out-h"

    def make_x(self):
        x = torch.empty_strided((2048, 2048), (1, 2048), device="cuda")
        torch.mul(self.src.view(2048, 2048), 2.0, out=x)
        return x

    def make_w(self):
        w = torch.empty_strided((2048, 2048), (1, 2048), device="cuda")
        torch.cos(self.src.view(2048, 2048), out=w)
        return w

    def step(self, sleep):
        _expandable(True)
        try:
            return FreeWhileRead.step(self, sleep)
        finally:
            _expandable(False)


@program
class EmptyStridedExpandableFreed(EmptyStridedExpandable):
    intent = "racy"


@program
class EmptyStridedExpandableRecordStream(EmptyStridedExpandable):
    intent = "clean"
    fix = "record_stream"


class AllGatherPolled(Base):
    """all_gather_into_tensor(out, x, async_op=True) on a one-rank NCCL group; the host asks
    work.is_completed() once and goes on whatever it says (racy), or polls it until it says True (clean),
    then main reads out (zeroed this step) with no work.wait() before the read."""
    kind = "nccl"
    mechanism = "held-out-h"
    delay = "NCCL's stream: a large all_gather issued before it"
    until_done = False

    def extra(self):
        import torch.distributed as dist
        if not dist.is_initialized():
            dist.init_process_group("nccl", init_method="file://" + os.path.join(tempfile.mkdtemp(), "pg"), rank=0, world_size=1,
                                    device_id=torch.device("cuda", 0))
        self.dist = dist
        self.out = torch.empty(N, device="cuda")
        self.big_in = torch.empty(64 * N, device="cuda")
        self.big_out = torch.empty(64 * N, device="cuda")
        self.n = 0
        self.refs = {k: (self.src * k).sin() for k in (1.0, 2.0)}
        dist.all_gather_into_tensor(self.big_out, self.big_in)
        torch.cuda.synchronize()

    def step(self, sleep):
        self.n += 1
        k = 1.0 + (self.n % 2)
        x = self.src * k
        self.out.zero_()
        if sleep:
            self.dist.all_gather_into_tensor(self.big_out, self.big_in, async_op=True)
        work = self.dist.all_gather_into_tensor(self.out, x, async_op=True)
        if self.until_done:
            while not work.is_completed():
                pass
        else:
            work.is_completed()
        r = self.out.sin()
        work.wait()
        return [(r, self.refs[k])]


@program
class AllGatherPolledOnce(AllGatherPolled):
    intent = "racy"


@program
class AllGatherPolledUntilDone(AllGatherPolled):
    intent = "clean"
    until_done = True


class GraphGivenStream(Base):
    """A graph captured with torch.cuda.graph(g, stream=cs), a stream of the program's own; it is replayed
    on main (a replay runs on the current stream, not the capture's). aux reads the static output after
    waiting for cs (the capture stream, idle: racy) or for main (clean)."""
    kind = "graph"
    mechanism = "held-out-h"
    delay = "main, before the replay"
    wait_main = False

    def extra(self):
        self.static_in = self.src.clone()
        self.cs = torch.cuda.Stream()
        self.cs.wait_stream(self.main)
        with torch.cuda.stream(self.cs):
            for _ in range(2):
                (self.static_in * 2.0).sin()
        self.main.wait_stream(self.cs)
        torch.cuda.synchronize()
        self.g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.g, stream=self.cs):
            self.gout = (self.static_in * 2.0).sin()
        torch.cuda.synchronize()
        self.n = 0
        self.refs = {k: (self.src * k * 2.0).sin() + 1.0 for k in (1.0, 2.0)}

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.n += 1
        k = 1.0 + (self.n % 2)
        torch.mul(self.src, k, out=self.static_in)
        nap(sleep)
        self.g.replay()
        aux.wait_stream(main if self.wait_main else self.cs)
        with torch.cuda.stream(aux):
            r = self.gout + 1.0
        main.wait_stream(aux)
        return [(r, self.refs[k])]


@program
class GraphGivenStreamWaitCapture(GraphGivenStream):
    intent = "racy"


@program
class GraphGivenStreamWaitMain(GraphGivenStream):
    intent = "clean"
    wait_main = True


class CompiledTwoShapes(Base):
    """torch.compile(mode="reduce-overhead", dynamic=False) called twice per step, with an input of N and
    one of N/2 elements (two CUDA graphs); aux reads the first call's output o1 after waiting an event
    recorded on main before the first call (too early: racy) or between the two calls (clean)."""
    kind = "compile"
    mechanism = "held-out-h"
    delay = "main, before the first compiled call"
    late_event = False

    def extra(self):
        self.f = torch.compile(lambda t: (t * 2.0).sin(), mode="reduce-overhead", dynamic=False)
        self.in1 = self.src.clone()
        self.in2 = self.src[:N // 2].clone()
        self.ev = torch.cuda.Event()
        for _ in range(4):
            torch.compiler.cudagraph_mark_step_begin()
            o1 = self.f(self.in1)     # o1 held across the second call, as in step
            o2 = self.f(self.in2)
            del o1, o2
        torch.cuda.synchronize()
        self.n = 0
        self.refs = {k: (self.src * k * 2.0).sin().exp() for k in (1.0, 2.0)}

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.n += 1
        k = 1.0 + (self.n % 2)
        torch.mul(self.src, k, out=self.in1)
        torch.mul(self.src[:N // 2], 3.0, out=self.in2)
        torch.compiler.cudagraph_mark_step_begin()
        if not self.late_event:
            self.ev.record(main)
        nap(sleep)
        o1 = self.f(self.in1)
        if self.late_event:
            self.ev.record(main)
        o2 = self.f(self.in2)
        aux.wait_event(self.ev)
        with torch.cuda.stream(aux):
            r = o1.exp()
        main.wait_stream(aux)
        del o2
        return [(r, self.refs[k])]


@program
class CompiledTwoShapesEventEarly(CompiledTwoShapes):
    intent = "racy"


@program
class CompiledTwoShapesEventAfter(CompiledTwoShapes):
    intent = "clean"
    late_event = True


class NestedRanges(Base):
    """The step carries the program's own nested ranges, record_function("train_step") around
    record_function("forward"). In forward main writes h and aux writes t = cos(h) (t zeroed first on
    main); after forward, still in train_step, main reads t. main joins aux inside forward (clean) or
    only after reading (racy)."""
    mechanism = "held-out-h"
    delay = "aux, before its write of t"
    joined = False

    def extra(self):
        self.h = torch.empty(N, device="cuda")
        self.t = torch.empty(N, device="cuda")
        self.n = 0
        self.refs = {k: (self.src * k).cos() * 2.0 for k in (1.0, 2.0)}

    def step(self, sleep):
        from torch.profiler import record_function
        main, aux = self.main, self.aux
        self.n += 1
        k = 1.0 + (self.n % 2)
        with record_function("train_step"):
            self.t.zero_()
            with record_function("forward"):
                torch.mul(self.src, k, out=self.h)
                aux.wait_stream(main)
                with torch.cuda.stream(aux):
                    nap(sleep)
                    torch.cos(self.h, out=self.t)
                if self.joined:
                    main.wait_stream(aux)
            loss = self.t * 2.0
        main.wait_stream(aux)
        return [(loss, self.refs[k])]


@program
class NestedRangesNoJoin(NestedRanges):
    intent = "racy"


@program
class NestedRangesJoinedInForward(NestedRanges):
    intent = "clean"
    joined = True


class CrossIteration(Base):
    """Two iterations per step over one buffer: main writes buf = src * (i + 1), aux reads sin(buf). With
    no join at the end of an iteration, iteration 1's write races with iteration 0's read (racy); the clean
    twin joins main to aux at the end of each iteration. The recorded region marks each iteration with
    its own record_function("step") (two step ranges, the race crosses from the first to the second)."""
    mechanism = "held-out-h"
    delay = "aux, before each read"
    joined = False

    def extra(self):
        self.buf = torch.empty(N, device="cuda")
        self.refs = [(self.src * float(i + 1)).sin() for i in range(2)]

    def iteration(self, i, sleep):
        main, aux = self.main, self.aux
        torch.mul(self.src, float(i + 1), out=self.buf)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            r = self.buf.sin()
        if self.joined:
            main.wait_stream(aux)
        return r

    def step(self, sleep):
        rs = [self.iteration(i, sleep) for i in range(2)]
        self.main.wait_stream(self.aux)
        return list(zip(rs, self.refs))

    def record(self, rec):
        from torch.profiler import record_function
        with rec(step=False):
            rs = []
            for i in range(2):
                with record_function("step"):
                    rs.append(self.iteration(i, 0))
            self.main.wait_stream(self.aux)
        return list(zip(rs, self.refs))


@program
class CrossIterationNoJoin(CrossIteration):
    intent = "racy"


@program
class CrossIterationJoined(CrossIteration):
    intent = "clean"
    joined = True


class HostCopyAfterD2H(Base):
    """y = sin(src[:L] * k) goes to the host with non_blocking=True, then the host thread copies it on
    (got.copy_(h), a CPU copy). Into a pageable tensor (hp.copy_(y, non_blocking=True)) the copy returns
    only when done, as CUDA does for device-to-pageable copies (clean); y.to("cpu", non_blocking=True)
    gives pinned memory and returns at once (racy: got holds an older block's values)."""
    mechanism = "held-out-h"
    delay = "main, before the device-to-host copy"
    pageable = True
    L = N // 4

    def extra(self):
        L = self.L
        self.hp = torch.empty(L)
        self.got = torch.empty(L)
        self.n = 0
        self.refs = {k: (self.src[:L] * k).sin().cpu() for k in (1.0, 2.0)}

    def step(self, sleep):
        self.n += 1
        k = 1.0 + (self.n % 2)
        y = (self.src[:self.L] * k).sin()
        nap(sleep)
        if self.pageable:
            self.hp.copy_(y, non_blocking=True)
            h = self.hp
        else:
            h = y.to("cpu", non_blocking=True)
        self.got.copy_(h)
        return [(self.got.clone(), self.refs[k])]


@program
class PageableD2HHostCopy(HostCopyAfterD2H):
    intent = "clean"


@program
class ToCpuNonBlockingHostCopy(HostCopyAfterD2H):
    intent = "racy"
    pageable = False


# --- 16. held-out-i: idioms the corpus did not use (two host threads each on its own stream,
# default_stream() mistaken for current_stream() inside a stream block, an ExternalStream wrapping
# another stream's handle, Event(blocking=True) + synchronize() before a host read, an embedding lookup
# beside index_copy_ on its table, Tensor.copy_ from a host scalar tensor, torch.where over a mask main
# fills, a sum(dim=0, out=) buffer reused, Tensor.pin_memory() + .cuda(non_blocking=True) with the host
# overwriting the pinned source, a tensor handed to a side stream through a queue.Queue, a graph captured
# with capture_error_mode="thread_local"). Written before being scored, by a helper who had not read the
# importer; each label is what the GPU shows.

class TwoThreadStreams(Base):
    """Two host threads started in the step, each on its own stream: the writer (aux) fills buf, the
    reader (aux2) reads it after a threading.Event; the device order is an event, or nothing."""
    mechanism = "held-out-i"
    delay = "aux (the writer thread), before it writes buf"
    evented = False   # True: the writer records ev after its write, the reader's stream waits on it

    def extra(self):
        self.buf = torch.zeros(N, device="cuda")
        self.ev = torch.cuda.Event()
        self.y_ref = (self.src * 2.0).sin()

    def step(self, sleep):
        import threading
        main, aux, aux2, buf = self.main, self.aux, self.aux2, self.buf
        buf.zero_()
        written = threading.Event()
        res = []

        def writer():
            with torch.cuda.stream(aux):
                aux.wait_stream(main)
                nap(sleep)
                torch.mul(self.src, 2.0, out=buf)
                if self.evented:
                    self.ev.record(aux)
            written.set()

        def reader():
            written.wait()
            with torch.cuda.stream(aux2):
                aux2.wait_stream(main)
                if self.evented:
                    aux2.wait_event(self.ev)
                res.append(buf.sin())

        tw = threading.Thread(target=writer)
        tr = threading.Thread(target=reader)
        tr.start()
        tw.start()
        tw.join()
        tr.join()
        main.wait_stream(aux)
        main.wait_stream(aux2)
        return [(res[0], self.y_ref)]


@program
class TwoThreadStreamsNoEvent(TwoThreadStreams):
    intent = "racy"


@program
class TwoThreadStreamsEvent(TwoThreadStreams):
    intent = "clean"
    evented = True


class DefaultVsCurrent(Base):
    """Inside `with torch.cuda.stream(aux)` the fork is written as torch.cuda.default_stream().wait_stream(main)
    (main waits on itself: no fork) or as torch.cuda.current_stream().wait_stream(main) (aux waits on main)."""
    mechanism = "held-out-i"
    delay = "main, before it writes buf"
    current = False

    def extra(self):
        self.buf = torch.zeros(N, device="cuda")
        self.n = 0
        self.refs = {k: (self.src * k).sin() for k in (1.0, 2.0)}

    def step(self, sleep):
        main, aux, buf = self.main, self.aux, self.buf
        self.n += 1
        k = 1.0 + (self.n % 2)
        nap(sleep)
        torch.mul(self.src, k, out=buf)
        with torch.cuda.stream(aux):
            if self.current:
                torch.cuda.current_stream().wait_stream(main)
            else:
                torch.cuda.default_stream().wait_stream(main)
            y = buf.sin()
        main.wait_stream(aux)
        return [(y, self.refs[k])]


@program
class DefaultStreamWaitInBlock(DefaultVsCurrent):
    intent = "racy"


@program
class CurrentStreamWaitInBlock(DefaultVsCurrent):
    intent = "clean"
    current = True


class ExternalStreamWrap(Base):
    """ext = torch.cuda.ExternalStream(aux.cuda_stream) wraps aux's handle; the read is issued on ext. The fork
    is made on another stream object: aux2 (a different stream) or aux (the same CUDA stream as ext)."""
    mechanism = "held-out-i"
    delay = "main, before it writes buf"
    same = False

    def extra(self):
        self.ext = torch.cuda.ExternalStream(self.aux.cuda_stream)
        self.buf = torch.zeros(N, device="cuda")
        self.n = 0
        self.refs = {k: (self.src * k).sin() for k in (1.0, 2.0)}

    def step(self, sleep):
        main, buf = self.main, self.buf
        self.n += 1
        k = 1.0 + (self.n % 2)
        nap(sleep)
        torch.mul(self.src, k, out=buf)
        (self.aux if self.same else self.aux2).wait_stream(main)
        with torch.cuda.stream(self.ext):
            y = buf.sin()
        main.wait_stream(self.ext)
        main.wait_stream(self.aux2)
        return [(y, self.refs[k])]


@program
class ExternalStreamForkOther(ExternalStreamWrap):
    intent = "racy"


@program
class ExternalStreamForkSame(ExternalStreamWrap):
    intent = "clean"
    same = True


class BlockingEventHostRead(Base):
    """aux computes y and copies it non_blocking into pinned host memory; the host waits on a
    torch.cuda.Event(blocking=True) with synchronize() and reads the pinned buffer. The event is recorded
    before the copy, or after it."""
    mechanism = "held-out-i"
    delay = "aux, after the early event's place, before the copy"
    late = False

    def extra(self):
        self.h = torch.empty(N).pin_memory()
        self.ev = torch.cuda.Event(blocking=True)
        self.n = 0
        s = self.src.cpu()
        self.refs = {k: s * k for k in (1.0, 2.0)}

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.n += 1
        k = 1.0 + (self.n % 2)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            y = self.src * k
            if not self.late:
                self.ev.record(aux)
            nap(sleep)
            self.h.copy_(y, non_blocking=True)
            if self.late:
                self.ev.record(aux)
        self.ev.synchronize()
        got = self.h.clone()
        main.wait_stream(aux)
        return [(got, self.refs[k])]


@program
class BlockingEventRecordedEarly(BlockingEventHostRead):
    intent = "racy"


@program
class BlockingEventRecordedLate(BlockingEventHostRead):
    intent = "clean"
    late = True


class EmbeddingBesideUpdate(Base):
    """aux looks rows up with torch.nn.functional.embedding; main then updates every fourth row of the
    table in place with index_copy_ (write after read), joined first or not."""
    mechanism = "held-out-i"
    delay = "aux, before the lookup"
    joined = False

    def extra(self):
        g = torch.Generator(device="cuda")
        g.manual_seed(5)
        self.table0 = torch.randn(4096, 1024, device="cuda", generator=g)
        self.table = self.table0.clone()
        self.idx = torch.arange(0, 4096, 2, device="cuda")
        self.rows = torch.arange(0, 4096, 4, device="cuda")
        self.new = torch.randn(1024, 1024, device="cuda", generator=g)
        self.e_ref = torch.nn.functional.embedding(self.idx, self.table0)

    def step(self, sleep):
        main, aux, table = self.main, self.aux, self.table
        table.copy_(self.table0)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            e = torch.nn.functional.embedding(self.idx, table)
        if self.joined:
            main.wait_stream(aux)
        table.index_copy_(0, self.rows, self.new)
        main.wait_stream(aux)
        return [(e, self.e_ref)]


@program
class EmbeddingLookupTableUpdated(EmbeddingBesideUpdate):
    intent = "racy"


@program
class EmbeddingLookupJoined(EmbeddingBesideUpdate):
    intent = "clean"
    joined = True


class HostScalarCopyIn(Base):
    """A device scalar kt scales src on aux; main then sets kt for the next use with kt.copy_(torch.tensor(v)),
    a copy from a host (CPU, pageable) scalar tensor, joined first or not."""
    mechanism = "held-out-i"
    delay = "aux, before it reads kt"
    joined = False

    def extra(self):
        self.kt = torch.ones((), device="cuda")
        self.n = 0
        self.refs = {k: self.src * k for k in (1.0, 2.0)}

    def step(self, sleep):
        main, aux, kt = self.main, self.aux, self.kt
        self.n += 1
        k = 1.0 + (self.n % 2)
        kt.fill_(k)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            y = self.src * kt
        if self.joined:
            main.wait_stream(aux)
        kt.copy_(torch.tensor(k + 2.0))
        main.wait_stream(aux)
        return [(y, self.refs[k])]


@program
class HostScalarCopyUnjoined(HostScalarCopyIn):
    intent = "racy"


@program
class HostScalarCopyJoined(HostScalarCopyIn):
    intent = "clean"
    joined = True


class WhereOverMask(Base):
    """main fills a bool mask (src > t, the threshold alternates per step); aux computes
    torch.where(mask, src, 0.0). aux's fork is placed before main fills the mask, or after."""
    mechanism = "held-out-i"
    delay = "main, before it fills the mask"
    fork_after = False

    def extra(self):
        self.mask = torch.zeros(N, dtype=torch.bool, device="cuda")
        self.n = 0
        self.refs = {t: torch.where(self.src > t, self.src, 0.0) for t in (0.0, 1.0)}

    def step(self, sleep):
        main, aux, mask = self.main, self.aux, self.mask
        self.n += 1
        t = float(self.n % 2)
        if not self.fork_after:
            aux.wait_stream(main)
        nap(sleep)
        torch.gt(self.src, t, out=mask)
        if self.fork_after:
            aux.wait_stream(main)
        with torch.cuda.stream(aux):
            y = torch.where(mask, self.src, 0.0)
        main.wait_stream(aux)
        return [(y, self.refs[t])]


@program
class WhereMaskForkBeforeFill(WhereOverMask):
    intent = "racy"


@program
class WhereMaskForkAfterFill(WhereOverMask):
    intent = "clean"
    fork_after = True


class SumOutReused(Base):
    """main reduces X1 with torch.sum(dim=0, out=red); aux reads red; main reuses red for the sum of X2
    (write after read), after joining aux or not."""
    mechanism = "held-out-i"
    delay = "aux, before it reads red"
    joined = False

    def extra(self):
        g = torch.Generator(device="cuda")
        g.manual_seed(6)
        self.X1 = torch.randn(1024, 4096, device="cuda", generator=g)
        self.X2 = torch.randn(1024, 4096, device="cuda", generator=g) + 1.0
        self.red = torch.zeros(4096, device="cuda")
        self.y_ref = self.X1.sum(dim=0).sin()
        self.z_ref = self.X2.sum(dim=0).cos()

    def step(self, sleep):
        main, aux, red = self.main, self.aux, self.red
        torch.sum(self.X1, dim=0, out=red)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            y = red.sin()
        if self.joined:
            main.wait_stream(aux)
        torch.sum(self.X2, dim=0, out=red)
        z = red.cos()
        main.wait_stream(aux)
        return [(y, self.y_ref), (z, self.z_ref)]


@program
class SumOutReusedUnjoined(SumOutReused):
    intent = "racy"


@program
class SumOutReusedJoined(SumOutReused):
    intent = "clean"
    joined = True


class PinMemoryOverwrite(Base):
    """hp = h.pin_memory() (fresh pinned memory each step), d = hp.cuda(non_blocking=True) on main; the host
    then overwrites hp in place (the next batch), before or after main.synchronize()."""
    mechanism = "held-out-i"
    delay = "main, before the host-to-device copy"
    synced = False

    def extra(self):
        g = torch.Generator()
        g.manual_seed(7)
        self.hs = [torch.randn(N, generator=g) for _ in range(2)]
        self.n = 0
        self.refs = [h.cuda() * 2.0 for h in self.hs]

    def step(self, sleep):
        main = self.main
        self.n += 1
        i = self.n % 2
        hp = self.hs[i].pin_memory()
        nap(sleep)
        d = hp.cuda(non_blocking=True)
        y = d * 2.0
        if self.synced:
            main.synchronize()
        hp.copy_(self.hs[1 - i])
        return [(y, self.refs[i])]


@program
class PinMemoryOverwriteNoSync(PinMemoryOverwrite):
    intent = "racy"


@program
class PinMemoryOverwriteSynced(PinMemoryOverwrite):
    intent = "clean"
    synced = True


class QueueHandoff(Base):
    """A producer thread makes x = src * 2 (on main, the default stream) and hands it over a queue.Queue;
    the consumer reads it on aux, then drops it; main's next allocation of the same size may take x's block.
    The consumer calls t.record_stream(aux), or not."""
    mechanism = "held-out-i"
    delay = "aux, before its read of the handed-over tensor"
    recorded = False

    def extra(self):
        self.y_ref = (self.src * 2.0).sin()

    def step(self, sleep):
        import queue
        import threading
        main, aux = self.main, self.aux
        q = queue.Queue()

        def producer():
            q.put(self.src * 2.0)

        tp = threading.Thread(target=producer)
        tp.start()
        t = q.get()
        tp.join()
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            y = t.sin()
        if self.recorded:
            t.record_stream(aux)
        c = self.A @ self.B
        del t
        w = self.src.cos()
        main.wait_stream(aux)
        z = y + w
        return [(y, self.y_ref)]


@program
class QueueHandoffNoRecordStream(QueueHandoff):
    intent = "racy"


@program
class QueueHandoffRecordStream(QueueHandoff):
    intent = "clean"
    recorded = True


class ThreadLocalCapture(GraphBase):
    """A graph captured with torch.cuda.graph(g, capture_error_mode="thread_local") writes src * kt (kt a
    device scalar main refills each step); after the replay on main, aux reads the static output. aux's fork
    (aux.wait_stream(main)) is placed before the replay, or after it."""
    mechanism = "held-out-i"
    delay = "main, inside the graph, before the write"
    fork_after = False

    def refs(self):
        self.kt = torch.ones((), device="cuda")
        self.n = 0
        self.y_refs = {k: (self.src * k).sin() for k in (1.0, 2.0)}

    def body(self, sleep):
        nap(sleep)
        return [self.src * self.kt]

    def capture_one(self, sleep):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, capture_error_mode="thread_local"):
            outs = self.body(sleep)
        return g, outs

    def step(self, sleep):
        main, aux = self.main, self.aux
        g, outs = self.graph(sleep)
        self.n += 1
        k = 1.0 + (self.n % 2)
        self.kt.fill_(k)
        if not self.fork_after:
            aux.wait_stream(main)
        g.replay()
        if self.fork_after:
            aux.wait_stream(main)
        with torch.cuda.stream(aux):
            y = outs[0].sin()
        main.wait_stream(aux)
        return [(y, self.y_refs[k])]

    def record(self, rec):
        from torch.profiler import record_function
        with rec(step=False):
            self.g0 = self.capture_one(0)
            torch.cuda.synchronize()
            with record_function("step"):
                r = self.step(0)
            torch.cuda.synchronize()
        return r


@program
class ThreadLocalCaptureForkBeforeReplay(ThreadLocalCapture):
    intent = "racy"


@program
class ThreadLocalCaptureForkAfterReplay(ThreadLocalCapture):
    intent = "clean"
    fork_after = True


# --- 17. held-out-j: idioms the corpus did not use (resize_ of a tensor a side stream reads, set_() swapping
# storages, torch.stack into a freed block, one event waited by two streams, an event recorded in the previous
# step, torch.linalg.norm on a side stream beside a write after the fork, nested torch.cuda.stream blocks joined
# on the wrong one, a non_blocking H2D into a tensor a side stream reads, p.grad.add_ on a side stream beside
# the optimizer). Written before being scored, by someone who had not read the importer.

class ResizeWhileRead(Base):
    """aux reads buf (src * 2, made on main); main then grows buf with buf.resize_(2 * N), which moves it to a
    new storage and frees the old 16 MiB block; main's next 16 MiB allocation (src.cos()) takes that block.
    main joins aux before the resize_, or not."""
    mechanism = "held-out-j"
    delay = "aux, before its read of buf"
    joined = False

    def extra(self):
        self.y_ref = (self.src * 2.0).sin()

    def step(self, sleep):
        main, aux = self.main, self.aux
        buf = self.src * 2.0
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            y = buf.sin()
        if self.joined:
            main.wait_stream(aux)
        buf.resize_(2 * N)
        w = self.src.cos()
        main.wait_stream(aux)
        return [(y[:NS], self.y_ref[:NS])]     # small slices: the compare's temporaries stay out of the large pool


@program
class ResizeGrowUnjoined(ResizeWhileRead):
    intent = "racy"


@program
class ResizeGrowJoined(ResizeWhileRead):
    intent = "clean"
    joined = True


class SetSwapsStorage(Base):
    """aux reads x (src * 2); main points x at another storage with x.set_(src.cos()), which drops x's old
    block; main's next 16 MiB allocation (src * 3) takes it. x.record_stream(aux) is called before the set_,
    or not."""
    mechanism = "held-out-j"
    delay = "aux, before its read of x"
    recorded = False

    def extra(self):
        self.y_ref = (self.src * 2.0).sin()

    def step(self, sleep):
        main, aux = self.main, self.aux
        x = self.src * 2.0
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            y = x.sin()
        if self.recorded:
            x.record_stream(aux)
        x.set_(self.src.cos())
        w = self.src * 3.0
        main.wait_stream(aux)
        return [(y[:NS], self.y_ref[:NS])]     # small slices: the compare's temporaries stay out of the large pool


@program
class SetSwapNoRecordStream(SetSwapsStorage):
    intent = "racy"


@program
class SetSwapRecordStream(SetSwapsStorage):
    intent = "clean"
    recorded = True


class StackIntoFreedBlock(Base):
    """x = torch.stack([src, src * 2, src * 3]) (48 MiB) is read on aux; main drops x and stacks the next
    result (48 MiB, kept in self.stk until the next step), which takes x's block: the only free one of that
    size, since the previous self.stk is still alive. x.record_stream(aux) is called first, or not."""
    mechanism = "held-out-j"
    delay = "aux, before its read of x"
    recorded = False

    def extra(self):
        self.stk = torch.zeros(3, N, device="cuda")
        self.y_ref = torch.stack([self.src, self.src * 2.0, self.src * 3.0]).sin()
        self.s_ref = torch.stack([self.src.cos(), self.src.sin(), self.src])

    def step(self, sleep):
        main, aux = self.main, self.aux
        x = torch.stack([self.src, self.src * 2.0, self.src * 3.0])
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            y = x.sin()
        if self.recorded:
            x.record_stream(aux)
        del x
        s = torch.stack([self.src.cos(), self.src.sin(), self.src])
        self.stk = s
        main.wait_stream(aux)
        return [(y[:, :NS], self.y_ref[:, :NS]), (s[:, :NS], self.s_ref[:, :NS])]   # small: see ResizeWhileRead


@program
class StackIntoFreedNoRecordStream(StackIntoFreedBlock):
    intent = "racy"


@program
class StackIntoFreedRecordStream(StackIntoFreedBlock):
    intent = "clean"
    recorded = True


class EventWaitedByTwo(Base):
    """main writes v = src * k (k alternates per step) and records one torch.cuda.Event; aux reads v.sin()
    and aux2 reads v.cos(). aux waits the event; aux2 waits it too, or not (it was forked at the start)."""
    mechanism = "held-out-j"
    delay = "main, before its write of v"
    both = False

    def extra(self):
        self.v = torch.zeros(N, device="cuda")
        self.n = 0
        self.refs = {k: ((self.src * k).sin(), (self.src * k).cos()) for k in (1.0, 2.0)}

    def step(self, sleep):
        main, aux, aux2, v = self.main, self.aux, self.aux2, self.v
        self.n += 1
        k = 1.0 + (self.n % 2)
        ev = torch.cuda.Event()
        nap(sleep)
        torch.mul(self.src, k, out=v)
        ev.record(main)
        aux.wait_event(ev)
        if self.both:
            aux2.wait_event(ev)
        with torch.cuda.stream(aux):
            y1 = v.sin()
        with torch.cuda.stream(aux2):
            y2 = v.cos()
        main.wait_stream(aux)
        main.wait_stream(aux2)
        r1, r2 = self.refs[k]
        return [(y1, r1), (y2, r2)]


@program
class EventWaitedByOneOfTwo(EventWaitedByTwo):
    intent = "racy"


@program
class EventWaitedByBoth(EventWaitedByTwo):
    intent = "clean"
    both = True


class EventFromLastStep(Base):
    """A persistent torch.cuda.Event self.ev marks main's write of v = src * k (k alternates per step). aux
    waits self.ev before main re-records it this step (so it waits the previous step's record), or after."""
    mechanism = "held-out-j"
    delay = "main, before its write of v"
    wait_after = False

    def extra(self):
        self.v = torch.zeros(N, device="cuda")
        self.ev = torch.cuda.Event()
        self.n = 0
        self.refs = {k: (self.src * k).sin() for k in (1.0, 2.0)}

    def step(self, sleep):
        main, aux, v = self.main, self.aux, self.v
        self.n += 1
        k = 1.0 + (self.n % 2)
        if not self.wait_after:
            aux.wait_event(self.ev)
        nap(sleep)
        torch.mul(self.src, k, out=v)
        self.ev.record(main)
        if self.wait_after:
            aux.wait_event(self.ev)
        with torch.cuda.stream(aux):
            y = v.sin()
        main.wait_stream(aux)
        return [(y, self.refs[k])]


@program
class EventStaleFromLastStep(EventFromLastStep):
    intent = "racy"


@program
class EventReRecordedThenWaited(EventFromLastStep):
    intent = "clean"
    wait_after = True


class NormAfterFork(Base):
    """main writes xb = src * 2; aux forks (wait_stream) and takes torch.linalg.norm(xb); main then scales
    xb in place by 1.5 (a write after the fork), joining aux first or not."""
    mechanism = "held-out-j"
    delay = "aux, before the norm"
    joined = False

    def extra(self):
        self.xb = torch.zeros(N, device="cuda")
        self.n_ref = torch.linalg.norm(self.src * 2.0)
        self.x_ref = self.src * 3.0

    def step(self, sleep):
        main, aux, xb = self.main, self.aux, self.xb
        torch.mul(self.src, 2.0, out=xb)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            nrm = torch.linalg.norm(xb)
        if self.joined:
            main.wait_stream(aux)
        xb.mul_(1.5)
        main.wait_stream(aux)
        return [(nrm, self.n_ref), (xb, self.x_ref)]


@program
class NormWriteAfterForkUnjoined(NormAfterFork):
    intent = "racy"


@program
class NormWriteAfterForkJoined(NormAfterFork):
    intent = "clean"
    joined = True


class NestedStreamBlocks(Base):
    """`with torch.cuda.stream(aux2):` holds `with torch.cuda.stream(aux):` inside; the read of xb runs on
    the inner one (aux). main then joins aux2 (the outer block's stream: wrong) or aux, and overwrites xb."""
    mechanism = "held-out-j"
    delay = "aux, before its read of xb"
    join_inner = False

    def extra(self):
        self.xb = torch.zeros(N, device="cuda")
        self.y_ref = (self.src * 2.0).sin()

    def step(self, sleep):
        main, aux, aux2, xb = self.main, self.aux, self.aux2, self.xb
        torch.mul(self.src, 2.0, out=xb)
        aux.wait_stream(main)
        aux2.wait_stream(main)
        with torch.cuda.stream(aux2):
            with torch.cuda.stream(aux):
                nap(sleep)
                y = xb.sin()
        main.wait_stream(aux if self.join_inner else aux2)
        torch.mul(self.src, 3.0, out=xb)
        main.wait_stream(aux)
        return [(y, self.y_ref)]


@program
class NestedStreamsJoinOuter(NestedStreamBlocks):
    intent = "racy"


@program
class NestedStreamsJoinInner(NestedStreamBlocks):
    intent = "clean"
    join_inner = True


class PinnedRefillWhileRead(Base):
    """dbuf gets batch 0 by a non_blocking copy from pinned host memory on main; aux forks and reads dbuf;
    main then copies batch 1 into dbuf (non_blocking, from pinned memory), joining aux first or not."""
    mechanism = "held-out-j"
    delay = "aux, before its read of dbuf"
    joined = False

    def extra(self):
        g = torch.Generator()
        g.manual_seed(17)
        self.hbs = [torch.randn(N, generator=g).pin_memory() for _ in range(2)]
        self.dbuf = torch.zeros(N, device="cuda")
        self.y_ref = self.hbs[0].cuda() * 2.0
        self.d_ref = self.hbs[1].cuda()

    def step(self, sleep):
        main, aux, dbuf = self.main, self.aux, self.dbuf
        dbuf.copy_(self.hbs[0], non_blocking=True)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            y = dbuf * 2.0
        if self.joined:
            main.wait_stream(aux)
        dbuf.copy_(self.hbs[1], non_blocking=True)
        main.wait_stream(aux)
        return [(y, self.y_ref), (dbuf, self.d_ref)]


@program
class PinnedRefillUnjoined(PinnedRefillWhileRead):
    intent = "racy"


@program
class PinnedRefillJoined(PinnedRefillWhileRead):
    intent = "clean"
    joined = True


class GradAccumOnSide(Base):
    """A parameter's gradient is accumulated on aux (p.grad.add_(g), g = src.cos() made on main); the
    optimizer (torch.optim.SGD, lr 0.5) then steps on main, joining aux first or not. p and p.grad are
    zeroed at the start of each step."""
    mechanism = "held-out-j"
    delay = "aux, before its p.grad.add_"
    joined = False

    def extra(self):
        self.prm = torch.nn.Parameter(torch.zeros(N, device="cuda"))
        self.prm.grad = torch.zeros(N, device="cuda")
        self.opt = torch.optim.SGD([self.prm], lr=0.5)
        self.p_ref = self.src.cos() * -0.5

    def step(self, sleep):
        main, aux, prm = self.main, self.aux, self.prm
        with torch.no_grad():
            prm.zero_()
            prm.grad.zero_()
            g = self.src.cos()
            aux.wait_stream(main)
            with torch.cuda.stream(aux):
                nap(sleep)
                prm.grad.add_(g)
            if self.joined:
                main.wait_stream(aux)
            self.opt.step()
            main.wait_stream(aux)
        return [(prm.detach(), self.p_ref)]


@program
class GradAccumSideUnjoined(GradAccumOnSide):
    intent = "racy"


@program
class GradAccumSideJoined(GradAccumOnSide):
    intent = "clean"
    joined = True


# --- 18. held-out-k: idioms the corpus did not use (a loader stream's query() asked once and ignored, an
# Event.query() polling loop on the wrong event, loss.item() or y.tolist() taken for a device-wide sync,
# an inference loop whose iterations each sit in their own record_function("step") with the race across
# them, two CUDA graphs captured from one function at two shapes in one pool, Event.synchronize() on an
# event recorded before the copy, matmul(out=) scaled in place through mul(out=), accumulation through
# add(out=), a batch made on a threading.Thread and its block reallocated on another, loss.backward()
# inside a side stream's context, a foreach_lerp_ EMA beside the optimizer step). Written before being
# scored, by a helper who had not read the importer; each label is what the GPU shows.

class HostStagingRefill(Base):
    """Common to the staging programs below: the host fills the pinned staging buffer hs with batch 0, the
    loader stream aux copies hs into d (non_blocking H2D), the host waits in some way (wait_for_copy) and
    refills hs with batch 1 for the next copy; main reads d after waiting for aux. Refilling hs before the
    copy has read it puts batch 1 into d."""
    mechanism = "held-out-k"
    delay = "aux (the loader stream), before its copy"
    L = N // 4

    def extra(self):
        g = torch.Generator()
        g.manual_seed(29)
        self.hb = [torch.randn(self.L, generator=g) for _ in range(2)]
        self.hs = torch.empty(self.L).pin_memory()
        self.d = torch.zeros(self.L, device="cuda")
        self.d_ref = self.hb[0].cuda() * 2.0
        self.ev = torch.cuda.Event()
        self.last_loss = 0.0

    def before_copy(self):
        pass

    def after_copy(self):
        pass

    def wait_for_copy(self):
        raise NotImplementedError

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.hs.copy_(self.hb[0])
        self.d.zero_()
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            self.before_copy()
            nap(sleep)
            self.d.copy_(self.hs, non_blocking=True)
            self.after_copy()
        self.wait_for_copy()
        self.hs.copy_(self.hb[1])
        main.wait_stream(aux)
        y = self.d * 2.0
        return [(y, self.d_ref)]


class StagingStreamQuery(HostStagingRefill):
    """The host asks the loader stream aux.query() before refilling the staging buffer: once, only to
    count how often the loader is still busy, and then goes on (racy); or in a loop,
    `while not aux.query(): pass`, until the copy is done (clean)."""
    polled = False

    def extra(self):
        super().extra()
        self.busy = 0

    def wait_for_copy(self):
        if self.polled:
            while not self.aux.query():
                pass
        elif not self.aux.query():
            self.busy += 1


@program
class StagingQueryOnce(StagingStreamQuery):
    intent = "racy"


@program
class StagingQueryPolled(StagingStreamQuery):
    intent = "clean"
    polled = True


class StagingAfterLossItem(HostStagingRefill):
    """While the loader stream copies the staged batch, main computes a loss (mean of src squared) and the
    host logs loss.item() before refilling the staging buffer, taking .item() for a sync of everything:
    it waits for main only (racy). The clean twin calls torch.cuda.synchronize() before .item()."""
    synced = False

    def wait_for_copy(self):
        loss = self.src.square().mean()
        if self.synced:
            torch.cuda.synchronize()
        self.last_loss = loss.item()


@program
class StagingRefillAfterItem(StagingAfterLossItem):
    intent = "racy"


@program
class StagingRefillAfterDeviceSync(StagingAfterLossItem):
    intent = "clean"
    synced = True


class StagingEventSynchronize(HostStagingRefill):
    """The host waits with ev.synchronize() before refilling the staging buffer. ev is recorded on the
    loader stream right after it forked from main, before its copy, as a "batch handed over" mark (racy);
    or after the copy (clean)."""
    recorded_after = False

    def before_copy(self):
        if not self.recorded_after:
            self.ev.record()

    def after_copy(self):
        if self.recorded_after:
            self.ev.record()

    def wait_for_copy(self):
        self.ev.synchronize()


@program
class StagingEventBeforeCopy(StagingEventSynchronize):
    intent = "racy"


@program
class StagingEventAfterCopy(StagingEventSynchronize):
    intent = "clean"
    recorded_after = True


class LoggerEventQuery(Base):
    """Logging: main computes y = sin(src[:L] * k) (k alternates per step) and records ev_main; the logger
    stream aux waits for main, copies y into pinned host memory hp (non_blocking D2H) and records ev_log.
    The host polls `while not ev.query(): pass` and then reads hp: polling ev_main, main's "step done"
    event (racy: the logger's copy is not behind it), or ev_log (clean). hp is zeroed by the host first."""
    mechanism = "held-out-k"
    delay = "aux (the logger stream), before its copy"
    poll_log = False
    L = N // 4

    def extra(self):
        self.hp = torch.zeros(self.L).pin_memory()
        self.ev_main = torch.cuda.Event()
        self.ev_log = torch.cuda.Event()
        self.n = 0
        self.refs = {k: (self.src[:self.L] * k).sin().cpu() for k in (1.0, 2.0)}

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.n += 1
        k = 1.0 + (self.n % 2)
        self.hp.zero_()
        y = (self.src[:self.L] * k).sin()
        self.ev_main.record(main)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            self.hp.copy_(y, non_blocking=True)
            self.ev_log.record(aux)
        ev = self.ev_log if self.poll_log else self.ev_main
        while not ev.query():
            pass
        got = self.hp.clone()
        main.wait_stream(aux)
        return [(got, self.refs[k])]


@program
class LoggerPollsMainEvent(LoggerEventQuery):
    intent = "racy"


@program
class LoggerPollsLogEvent(LoggerEventQuery):
    intent = "clean"
    poll_log = True


class SnapshotThenToList(Base):
    """A checkpoint-style snapshot: y = sin(src[:L] * k) (k alternates per step) is copied into pinned host
    memory hp with non_blocking=True, the host logs y[:4].tolist() (a copy to pageable memory on main,
    which returns once main has done all it was given) and then reads hp. With the snapshot copy issued on
    main, .tolist() returns after it (clean: the pageable copy orders what matters); issued on a copy
    stream aux that forked from main, .tolist() does not wait for it (racy). hp is zeroed by the host first."""
    mechanism = "held-out-k"
    delay = "the stream that copies into hp (main or aux), before its copy"
    on_side = False
    L = N // 4

    def extra(self):
        self.hp = torch.zeros(self.L).pin_memory()
        self.n = 0
        self.head = []
        self.refs = {k: (self.src[:self.L] * k).sin().cpu() for k in (1.0, 2.0)}

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.n += 1
        k = 1.0 + (self.n % 2)
        self.hp.zero_()
        y = (self.src[:self.L] * k).sin()
        if self.on_side:
            aux.wait_stream(main)
            with torch.cuda.stream(aux):
                nap(sleep)
                self.hp.copy_(y, non_blocking=True)
        else:
            nap(sleep)
            self.hp.copy_(y, non_blocking=True)
        self.head = y[:4].tolist()
        got = self.hp.clone()
        main.wait_stream(aux)
        return [(got, self.refs[k])]


@program
class SnapshotCopiedOnSideToList(SnapshotThenToList):
    intent = "racy"
    on_side = True


@program
class SnapshotCopiedOnMainToList(SnapshotThenToList):
    intent = "clean"


class MetricsAcrossIterations(Base):
    """An inference loop of three iterations: main writes batch i's logits into one reused buffer
    (torch.matmul(x_i, W, out=out)); the metrics stream aux waits for main and accumulates out.sum(0)
    into acc. Joined only after the loop, iteration i+1's matmul(out=) can overwrite out before aux read
    iteration i's (racy); main waits for aux at the end of each iteration (clean). The recorded region
    puts each iteration in its own record_function("step"): the race crosses from one range to the next."""
    mechanism = "held-out-k"
    delay = "aux (the metrics stream), before each read of out"
    joined = False
    iters = 3

    def extra(self):
        self.W = torch.randn(1024, 1024, device="cuda") / 32.0
        self.xs = [torch.randn(2048, 1024, device="cuda") for _ in range(self.iters)]
        self.out = torch.empty(2048, 1024, device="cuda")
        self.acc = torch.zeros(1024, device="cuda")
        ref = torch.zeros(1024, device="cuda")
        for x in self.xs:
            ref += (x @ self.W).sum(0)
        self.acc_ref = ref

    def iteration(self, i, sleep):
        main, aux = self.main, self.aux
        if i == 0:
            self.acc.zero_()
        torch.matmul(self.xs[i], self.W, out=self.out)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            self.acc += self.out.sum(0)
        if self.joined:
            main.wait_stream(aux)

    def step(self, sleep):
        for i in range(self.iters):
            self.iteration(i, sleep)
        self.main.wait_stream(self.aux)
        return [(self.acc, self.acc_ref)]

    def record(self, rec):
        from torch.profiler import record_function
        with rec(step=False):
            for i in range(self.iters):
                with record_function("step"):
                    self.iteration(i, 0)
            self.main.wait_stream(self.aux)
        return [(self.acc, self.acc_ref)]


@program
class MetricsAcrossIterationsNoJoin(MetricsAcrossIterations):
    intent = "racy"


@program
class MetricsAcrossIterationsJoined(MetricsAcrossIterations):
    intent = "clean"
    joined = True


class TwoShapeGraphs(Base):
    """One function f(x) = sin(x * 2) captured as two CUDA graphs at set-up (torch.cuda.graph, a batch of N
    and one of N / 2, the second in the first's memory pool, pool=g.pool()). A step replays the large graph
    on batch 0, aux reads its static output, the small graph runs, then the large graph replays on batch 1
    and rewrites that output. main waits for aux before the second large replay (clean) or not (racy)."""
    kind = "graph"
    mechanism = "held-out-k"
    delay = "aux, before its read of the large graph's output"
    joined = False

    def f(self, x):
        return torch.sin(x * 2.0)

    def extra(self):
        self.b1 = torch.randn(N, device="cuda")
        self.sb = torch.randn(N // 2, device="cuda")
        self.xl = self.src.clone()
        self.xsm = self.sb.clone()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                self.f(self.xl)
                self.f(self.xsm)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        self.gl = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.gl):
            self.ol = self.f(self.xl)
        self.gsm = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.gsm, pool=self.gl.pool()):
            self.osm = self.f(self.xsm)
        torch.cuda.synchronize()
        self.r_ref = self.f(self.src).cos()
        self.ol_ref = self.f(self.b1)
        self.osm_ref = self.f(self.sb)

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.xl.copy_(self.src)
        self.gl.replay()
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            r = self.ol.cos()
        self.xsm.copy_(self.sb)
        self.gsm.replay()
        if self.joined:
            main.wait_stream(aux)
        self.xl.copy_(self.b1)
        self.gl.replay()
        main.wait_stream(aux)
        # The small graph's output is not compared: captured in the large graph's pool, it lives in memory
        # the large graph's capture freed, which every later replay of the large graph overwrites (graphs of
        # one pool replayed out of capture order). That is wrong in both twins, every time: a logic error,
        # not the race this pair is about (its first recording showed it).
        return [(r, self.r_ref), (self.ol, self.ol_ref)]


@program
class TwoShapeGraphsOutputOverwritten(TwoShapeGraphs):
    intent = "racy"


@program
class TwoShapeGraphsJoined(TwoShapeGraphs):
    intent = "clean"
    joined = True


class ActivationScaledOut(Base):
    """main computes activations with torch.matmul(x, W, out=h); the probe stream aux forks and takes
    activation statistics h.abs().amax(0); main then scales h in place for the next layer with
    torch.mul(h, 2.0, out=h), waiting for aux first (clean) or not (racy)."""
    mechanism = "held-out-k"
    delay = "aux (the probe stream), before its read of h"
    joined = False

    def extra(self):
        self.x = torch.randn(2048, 1024, device="cuda")
        self.W = torch.randn(1024, 1024, device="cuda") / 32.0
        self.h = torch.empty(2048, 1024, device="cuda")
        hr = self.x @ self.W
        self.s_ref = hr.abs().amax(0)
        self.h_ref = hr * 2.0

    def step(self, sleep):
        main, aux, h = self.main, self.aux, self.h
        torch.matmul(self.x, self.W, out=h)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            s = h.abs().amax(0)
        if self.joined:
            main.wait_stream(aux)
        torch.mul(h, 2.0, out=h)
        main.wait_stream(aux)
        return [(s, self.s_ref), (h, self.h_ref)]


@program
class ActivationScaledOutUnjoined(ActivationScaledOut):
    intent = "racy"


@program
class ActivationScaledOutJoined(ActivationScaledOut):
    intent = "clean"
    joined = True


class AccumulateAddOut(Base):
    """Micro-batch gradient accumulation through out=: main sets acc = g0 + g1 with torch.add(g0, g1,
    out=acc); the logging stream aux forks and copies acc into a snapshot (snap.copy_(acc)); main then
    adds the third micro-batch with torch.add(acc, g2, out=acc), waiting for aux first (clean) or not
    (racy: the snapshot holds g0 + g1 + g2)."""
    mechanism = "held-out-k"
    delay = "aux (the logging stream), before its copy of acc"
    joined = False

    def extra(self):
        self.g = [torch.randn(N, device="cuda") for _ in range(3)]
        self.acc = torch.empty(N, device="cuda")
        self.snap = torch.empty(N, device="cuda")
        self.snap_ref = self.g[0] + self.g[1]
        self.acc_ref = self.snap_ref + self.g[2]

    def step(self, sleep):
        main, aux = self.main, self.aux
        torch.add(self.g[0], self.g[1], out=self.acc)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            self.snap.copy_(self.acc)
        if self.joined:
            main.wait_stream(aux)
        torch.add(self.acc, self.g[2], out=self.acc)
        main.wait_stream(aux)
        return [(self.snap, self.snap_ref), (self.acc, self.acc_ref)]


@program
class AccumulateAddOutUnjoined(AccumulateAddOut):
    intent = "racy"


@program
class AccumulateAddOutJoined(AccumulateAddOut):
    intent = "clean"
    joined = True


class ThreadMadeBatch(Base):
    """A threading.Thread makes the batch on the GPU (x = src * 2, 16 MiB, on its current stream: the
    default stream, main's) and hands it over in a list; aux reads it; the main thread drops x and has
    another thread make the next tensor (src.cos(), the same size, main's stream), which the allocator
    places in x's block. x.record_stream(aux) is called before the drop (clean) or not (racy)."""
    mechanism = "held-out-k"
    delay = "aux, before its read of x"
    recorded = False

    def extra(self):
        self.y_ref = (self.src * 2.0).sin()
        self.w_ref = self.src.cos()

    def in_thread(self, fn):
        import threading
        box = []
        t = threading.Thread(target=lambda: box.append(fn()))
        t.start()
        t.join()
        return box.pop()

    def step(self, sleep):
        main, aux = self.main, self.aux
        x = self.in_thread(lambda: self.src * 2.0)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            y = x.sin()
        if self.recorded:
            x.record_stream(aux)
        del x
        w = self.in_thread(self.src.cos)
        main.wait_stream(aux)
        return [(y[:NS], self.y_ref[:NS]), (w[:NS], self.w_ref[:NS])]   # small: see ResizeWhileRead


@program
class ThreadMadeBatchDropped(ThreadMadeBatch):
    intent = "racy"


@program
class ThreadMadeBatchRecordStream(ThreadMadeBatch):
    intent = "clean"
    recorded = True


class BackwardInSideContext(Base):
    """The pattern PyTorch's notes on the stream semantics of backward passes call unsafe: an nn.Linear's
    forward and loss.backward() run inside `with torch.cuda.stream(aux):` (the gradients are accumulated
    in place on aux), then the optimizer (torch.optim.SGD, lr 0.01) steps on main. main waits for aux
    first (clean) or not (racy: the step reads the zeroed gradients). Parameters and gradients are reset
    on main at the start of each step."""
    mechanism = "held-out-k"
    delay = "aux, before the forward"
    joined = False

    def extra(self):
        self.lin = torch.nn.Linear(1024, 1024).cuda()
        self.x = torch.randn(256, 1024, device="cuda")
        self.prms = list(self.lin.parameters())
        self.p0 = [p.detach().clone() for p in self.prms]
        for p in self.prms:
            p.grad = torch.zeros_like(p)
        self.opt = torch.optim.SGD(self.prms, lr=0.01)
        self.reset()
        self.lin(self.x).square().sum().backward()
        self.opt.step()
        self.p_ref = [p.detach().clone() for p in self.prms]
        self.reset()

    def reset(self):
        with torch.no_grad():
            for p, p0 in zip(self.prms, self.p0):
                p.copy_(p0)
                p.grad.zero_()

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.reset()
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            loss = self.lin(self.x).square().sum()
            loss.backward()
        if self.joined:
            main.wait_stream(aux)
        self.opt.step()
        main.wait_stream(aux)
        return [(p.detach(), r) for p, r in zip(self.prms, self.p_ref)]


@program
class BackwardInSideContextNoWait(BackwardInSideContext):
    intent = "racy"


@program
class BackwardInSideContextWaited(BackwardInSideContext):
    intent = "clean"
    joined = True


class EmaLerpBesideOptimizer(Base):
    """Model EMA on a side stream, as timm's ModelEmaV3 does it: aux forks after main set the parameters
    and moves the EMA copies toward them with torch._foreach_lerp_(ema, params, 0.25); main then takes
    the optimizer step (torch.optim.SGD, lr 0.5, foreach) that rewrites the parameters in place, waiting
    for aux first (clean) or not (racy: the EMA lerps toward the updated parameters)."""
    mechanism = "held-out-k"
    delay = "aux, before the lerp"
    joined = False

    def extra(self):
        L = N // 4
        self.p0 = [torch.randn(L, device="cuda") for _ in range(2)]
        self.prms = [torch.nn.Parameter(p.clone()) for p in self.p0]
        for p in self.prms:
            p.grad = torch.randn(L, device="cuda")
        self.ema = [torch.zeros(L, device="cuda") for _ in range(2)]
        self.opt = torch.optim.SGD(self.prms, lr=0.5, foreach=True)
        self.ema_ref = [p * 0.25 for p in self.p0]
        self.p_ref = [p0 - 0.5 * p.grad for p0, p in zip(self.p0, self.prms)]

    def step(self, sleep):
        main, aux = self.main, self.aux
        with torch.no_grad():
            for p, p0, e in zip(self.prms, self.p0, self.ema):
                p.copy_(p0)
                e.zero_()
            aux.wait_stream(main)
            with torch.cuda.stream(aux):
                nap(sleep)
                torch._foreach_lerp_(self.ema, self.prms, 0.25)
            if self.joined:
                main.wait_stream(aux)
            self.opt.step()
            main.wait_stream(aux)
        pairs = [(e, r) for e, r in zip(self.ema, self.ema_ref)]
        return pairs + [(p.detach(), r) for p, r in zip(self.prms, self.p_ref)]


@program
class EmaLerpBesideOptimizerUnjoined(EmaLerpBesideOptimizer):
    intent = "racy"


@program
class EmaLerpJoinedBeforeStep(EmaLerpBesideOptimizer):
    intent = "clean"
    joined = True


# --- 19. held-out-l: idioms the corpus did not use (a ThreadPoolExecutor started inside the step making
# tensors the main thread hands to a side stream, a list of per-microbatch events polled at the wrong
# index, reductions with a workspace (vector_norm, topk) on a side stream over a buffer main rewrites in
# place, one function captured as CUDA graphs at three sizes in their own pools and replayed out of
# capture order, a long-lived logger thread fed through a queue.Queue that synchronizes an event while the
# main thread does not wait for it). Written before being scored, by a helper who had not read the
# importer; each label is what the GPU shows.

class PoolMadeBatch(Base):
    """Inside the step, a ThreadPoolExecutor with two workers makes the batch x = src * 2 (16 MiB) and a
    small bias b = src[:NS] + 1 on the GPU (each worker's current stream is the default stream: main's);
    aux reads both (y = x.sin(), v = x[:NS] + b). The main thread drops x and has a worker make the next
    tensor w = src.cos() (same size, main's stream), which the allocator places in x's freed block. The
    main stream waits for aux before x is dropped (clean) or not (racy: w overwrites x before aux reads)."""
    mechanism = "held-out-l"
    delay = "aux, before its read of x"
    joined = False

    def extra(self):
        self.y_ref = (self.src * 2.0).sin()
        self.v_ref = self.src[:NS] * 2.0 + (self.src[:NS] + 1.0)
        self.w_ref = self.src.cos()

    def step(self, sleep):
        from concurrent.futures import ThreadPoolExecutor
        main, aux, src = self.main, self.aux, self.src
        box = {}

        def make(name, fn):
            box[name] = fn()     # handed over in a dict, not as the future's result: no other reference

        with ThreadPoolExecutor(max_workers=2) as ex:
            fx = ex.submit(make, "x", lambda: src * 2.0)
            fb = ex.submit(make, "b", lambda: src[:NS] + 1.0)
            fx.result()
            fb.result()
            x, b = box.pop("x"), box.pop("b")
            aux.wait_stream(main)
            with torch.cuda.stream(aux):
                nap(sleep)
                y = x.sin()
                v = x[:NS] + b
            if self.joined:
                main.wait_stream(aux)
            del x
            ex.submit(make, "w", src.cos).result()
            w = box.pop("w")
        main.wait_stream(aux)
        return [(y[:NS], self.y_ref[:NS]), (v, self.v_ref), (w[:NS], self.w_ref[:NS])]   # small slices


@program
class PoolMadeBatchDroppedUnjoined(PoolMadeBatch):
    intent = "racy"


@program
class PoolMadeBatchJoinedBeforeDrop(PoolMadeBatch):
    intent = "clean"
    joined = True


class MicrobatchEventList(Base):
    """Four micro-batches: main computes y_i = sin(src_i * k) (src_i the i-th slice of L elements of src, k
    alternates per step); the copy stream aux waits for main, copies y_i into its slot of pinned host memory hp
    (non_blocking D2H) and records evs[i], one event per micro-batch, all live at once. The host then polls
    `while not evs[j].query(): pass` and reads hp: j the last index (clean), or j = len(evs) - 2, one too
    early (racy: the last slot's copy is not behind that event). hp is zeroed by the host first; slots are
    small (256 KiB) and the last slot is read first, so the host's read ends well inside the delay. Every
    y_i stays alive until main has waited for aux (no block of one is reused while its copy is pending)."""
    mechanism = "held-out-l"
    delay = "aux, before the last micro-batch's copy"
    right_index = False
    mbs = 4
    L = 1 << 16

    def extra(self):
        self.hp = torch.zeros(self.mbs, self.L).pin_memory()
        self.evs = [torch.cuda.Event() for _ in range(self.mbs)]
        self.n = 0
        src = self.src[:self.mbs * self.L].view(self.mbs, self.L)
        self.refs = {k: (src * k).sin().cpu() for k in (1.0, 2.0)}

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.n += 1
        k = 1.0 + (self.n % 2)
        self.hp.zero_()
        ys = []
        for i in range(self.mbs):
            ys.append((self.src[i * self.L:(i + 1) * self.L] * k).sin())
            aux.wait_stream(main)
            with torch.cuda.stream(aux):
                if i == self.mbs - 1:
                    nap(sleep)
                self.hp[i].copy_(ys[i], non_blocking=True)
                self.evs[i].record(aux)
        j = len(self.evs) - 1 if self.right_index else len(self.evs) - 2
        while not self.evs[j].query():
            pass
        last = self.hp[-1].clone()
        rest = self.hp[:-1].clone()
        main.wait_stream(aux)
        return [(last, self.refs[k][-1]), (rest, self.refs[k][:-1])]


@program
class MicrobatchEventsPolledOffByOne(MicrobatchEventList):
    intent = "racy"


@program
class MicrobatchEventsPolledLast(MicrobatchEventList):
    intent = "clean"
    right_index = True


class NormTopkBesideDecay(Base):
    """Monitoring on a side stream over a weight buffer P made at set-up: main resets P to P0; aux forks
    and takes torch.linalg.vector_norm(P) and torch.topk(P, 16) (reductions over 4M elements that use
    temporary workspace on aux); main then applies weight decay in place, P.mul_(0.5), waiting for aux
    first (clean) or not (racy: the norm and the top values come out halved)."""
    mechanism = "held-out-l"
    delay = "aux, before the norm"
    joined = False

    def extra(self):
        self.P0 = torch.randn(N, device="cuda")
        self.P = self.P0.clone()
        self.n_ref = torch.linalg.vector_norm(self.P0)
        self.t_ref = torch.topk(self.P0, 16).values
        self.P_ref = self.P0 * 0.5

    def step(self, sleep):
        main, aux, P = self.main, self.aux, self.P
        P.copy_(self.P0)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            nrm = torch.linalg.vector_norm(P)
            top = torch.topk(P, 16).values
        if self.joined:
            main.wait_stream(aux)
        P.mul_(0.5)
        main.wait_stream(aux)
        return [(nrm, self.n_ref), (top, self.t_ref), (P, self.P_ref)]


@program
class NormTopkBesideDecayUnjoined(NormTopkBesideDecay):
    intent = "racy"


@program
class NormTopkJoinedBeforeDecay(NormTopkBesideDecay):
    intent = "clean"
    joined = True


class ThreeSizeGraphs(Base):
    """One function f(x) = tanh(x * 3) + x captured as three CUDA graphs at set-up (torch.cuda.graph, batches
    of N, N / 2 and N / 4, captured in that order, each in its own private memory pool). A step replays
    them out of capture order: the quarter graph, the full graph on batch 0 (aux then reads its static
    output), the half graph, and the full graph again on batch 1, which rewrites that output. main waits
    for aux before the second full replay (clean) or not (racy). No other graph touches the full graph's
    output: each graph has its own pool."""
    kind = "graph"
    mechanism = "held-out-l"
    delay = "aux, before its read of the full graph's output"
    joined = False

    def f(self, x):
        return torch.tanh(x * 3.0) + x

    def extra(self):
        self.b1 = torch.randn(N, device="cuda")
        self.bh = torch.randn(N // 2, device="cuda")
        self.bq = torch.randn(N // 4, device="cuda")
        self.xf = self.src.clone()
        self.xh = self.bh.clone()
        self.xq = self.bq.clone()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                self.f(self.xf)
                self.f(self.xh)
                self.f(self.xq)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        self.gf = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.gf):
            self.of = self.f(self.xf)
        self.gh = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.gh):
            self.oh = self.f(self.xh)
        self.gq = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.gq):
            self.oq = self.f(self.xq)
        torch.cuda.synchronize()
        self.r_ref = self.f(self.src) * 2.0
        self.of_ref = self.f(self.b1)
        self.oh_ref = self.f(self.bh)
        self.oq_ref = self.f(self.bq)

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.xq.copy_(self.bq)
        self.gq.replay()
        self.xf.copy_(self.src)
        self.gf.replay()
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            r = self.of * 2.0
        self.xh.copy_(self.bh)
        self.gh.replay()
        if self.joined:
            main.wait_stream(aux)
        self.xf.copy_(self.b1)
        self.gf.replay()
        main.wait_stream(aux)
        return [(r, self.r_ref), (self.of, self.of_ref), (self.oh, self.oh_ref), (self.oq, self.oq_ref)]


@program
class ThreeSizeGraphsOutputRewritten(ThreeSizeGraphs):
    intent = "racy"


@program
class ThreeSizeGraphsJoined(ThreeSizeGraphs):
    intent = "clean"
    joined = True


class QueueLoggerThread(Base):
    """A logger thread started at set-up waits on a queue.Queue; each step main writes buf = src * k (k
    alternates per step), the stats stream aux forks, reads buf (s = buf.square()) and records ev, and the
    main thread puts ev on the queue. The logger thread calls ev.synchronize(), counts the step (host work
    only) and puts a note on a reply queue. The main thread then overwrites buf for the next step
    (torch.add(src, 1, out=buf)) after taking the logger's note from the reply queue (clean: ev, and so aux's
    read, is done by then) or without waiting for it (racy)."""
    mechanism = "held-out-l"
    delay = "aux, before its read of buf"
    waits = False

    def extra(self):
        import queue
        import threading
        self.todo = queue.Queue()
        self.done = queue.Queue()
        self.logged = 0
        self.buf = torch.empty(N, device="cuda")
        self.ev = torch.cuda.Event()
        self.n = 0
        self.refs = {k: (self.src * k).square() for k in (1.0, 2.0)}
        self.buf_ref = self.src + 1.0

        def logger():
            while True:
                ev = self.todo.get()
                ev.synchronize()
                self.logged += 1
                self.done.put(self.logged)

        threading.Thread(target=logger, daemon=True).start()

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.n += 1
        k = 1.0 + (self.n % 2)
        torch.mul(self.src, k, out=self.buf)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            s = self.buf.square()
            self.ev.record(aux)
        self.todo.put(self.ev)
        if self.waits:
            self.done.get()
        torch.add(self.src, 1.0, out=self.buf)
        if not self.waits:
            self.done.get()
        main.wait_stream(aux)
        return [(s[:NS], self.refs[k][:NS]), (self.buf[:NS], self.buf_ref[:NS])]


@program
class QueueLoggerMainNoWait(QueueLoggerThread):
    intent = "racy"


@program
class QueueLoggerMainWaitsNote(QueueLoggerThread):
    intent = "clean"
    waits = True


# --- 20. held-out-m: idioms the corpus did not use (one side stream handing a result to a second side
# stream through a torch.cuda.Event, scatter_add_ on a side stream into a buffer main zeroes, an async
# all_gather_into_tensor whose Work.wait() is skipped before main rewrites its input, an in-place relu_ on
# main while a side stream reads). Written before being scored, by a helper who had not read the importer;
# each label is what the GPU shows.

class SideToSideHandoff(Base):
    """main resets a buffer buf (made at set-up) to -1; aux forks and writes buf = src * 2 (torch.mul out=)
    and records ev; aux2 forks from main and reads r = buf * 2. aux2 waits for ev (clean) or only for main
    (racy: aux2 reads the -1s before aux's delayed write)."""
    mechanism = "held-out-m"
    delay = "aux, before its write of buf"
    waits_event = False

    def extra(self):
        self.buf = torch.full((N,), -1.0, device="cuda")
        self.ev = torch.cuda.Event()
        self.r_ref = self.src * 4.0

    def step(self, sleep):
        main, aux, aux2, buf = self.main, self.aux, self.aux2, self.buf
        buf.fill_(-1.0)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            torch.mul(self.src, 2.0, out=buf)
            self.ev.record(aux)
        aux2.wait_stream(main)
        if self.waits_event:
            aux2.wait_event(self.ev)
        with torch.cuda.stream(aux2):
            r = buf * 2.0
        main.wait_stream(aux2)
        main.wait_stream(aux)
        return [(r, self.r_ref)]


@program
class SideToSideNoEvent(SideToSideHandoff):
    intent = "racy"


@program
class SideToSideEventWaited(SideToSideHandoff):
    intent = "clean"
    waits_event = True


class ScatterAddSide(Base):
    """main zeroes an accumulator acc (made at set-up); aux forks and does acc.scatter_add_(0, idx, v) with
    idx a permutation (unique indices: no atomics order to vary); main then copies acc out (clone), waiting
    for aux first (clean) or not (racy: the clone is all zeros)."""
    mechanism = "held-out-m"
    delay = "aux, before its scatter_add_"
    joined = False

    def extra(self):
        self.acc = torch.zeros(N, device="cuda")
        self.idx = torch.randperm(N, device="cuda")
        self.v = torch.randn(N, device="cuda")
        self.ref = torch.zeros(N, device="cuda").scatter_add_(0, self.idx, self.v)

    def step(self, sleep):
        main, aux, acc = self.main, self.aux, self.acc
        acc.zero_()
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            acc.scatter_add_(0, self.idx, self.v)
        if self.joined:
            main.wait_stream(aux)
        out = acc.clone()
        main.wait_stream(aux)
        return [(out, self.ref)]


@program
class ScatterAddReadUnjoined(ScatterAddSide):
    intent = "racy"


@program
class ScatterAddReadJoined(ScatterAddSide):
    intent = "clean"
    joined = True


class AsyncAllGather(Base):
    """main writes inp = src * 2 and resets out to -1; the comm stream cs forks and issues
    dist.all_gather_into_tensor(out, inp, async_op=True) on a one-rank group (its NCCL stream waits for
    cs). main then rewrites inp with 7s, after work.wait() (clean: main waits for the gather) or before it
    (racy: the gather, behind cs's delay, copies the 7s)."""
    kind = "nccl"
    mechanism = "held-out-m"
    delay = "cs (the comm stream), before the all_gather"
    waited = False

    def extra(self):
        self.dist = one_rank_group()
        self.cs = torch.cuda.Stream()
        self.inp = torch.zeros(N, device="cuda")
        self.out = torch.zeros(N, device="cuda")
        self.cs.wait_stream(self.main)
        with torch.cuda.stream(self.cs):
            self.dist.all_gather_into_tensor(self.out, self.inp)
        torch.cuda.synchronize()
        self.ref = self.src * 2.0

    def step(self, sleep):
        main, cs, inp, out = self.main, self.cs, self.inp, self.out
        torch.mul(self.src, 2.0, out=inp)
        out.fill_(-1.0)
        cs.wait_stream(main)
        with torch.cuda.stream(cs):
            nap(sleep)
            work = self.dist.all_gather_into_tensor(out, inp, async_op=True)
        if self.waited:
            work.wait()          # current stream (main) waits for the gather
        inp.fill_(7.0)
        if not self.waited:
            work.wait()
        main.wait_stream(cs)
        return [(out, self.ref)]


@program
class AsyncAllGatherWaitSkipped(AsyncAllGather):
    intent = "racy"


@program
class AsyncAllGatherWaited(AsyncAllGather):
    intent = "clean"
    waited = True


class ReluInplaceBesideRead(Base):
    """main makes h = src * 2 (src has negatives); aux forks and reads s = h * 3; main applies h.relu_()
    in place, waiting for aux first (clean) or not (racy: aux's delayed read sees the zeroed negatives).
    h stays alive (returned), so no block is reused."""
    mechanism = "held-out-m"
    delay = "aux, before its read of h"
    joined = False

    def extra(self):
        self.s_ref = (self.src * 2.0) * 3.0
        self.h_ref = torch.relu(self.src * 2.0)

    def step(self, sleep):
        main, aux = self.main, self.aux
        h = self.src * 2.0
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            s = h * 3.0
        if self.joined:
            main.wait_stream(aux)
        h.relu_()
        main.wait_stream(aux)
        return [(s, self.s_ref), (h, self.h_ref)]


@program
class ReluInplaceUnjoined(ReluInplaceBesideRead):
    intent = "racy"


@program
class ReluInplaceJoined(ReluInplaceBesideRead):
    intent = "clean"
    joined = True


# --- 21. held-out-n: idioms the corpus did not use (host-side views of a pinned buffer taken between
# non_blocking copies and read after waiting on the wrong event, a long-lived helper thread that
# synchronizes a side stream on the main thread's behalf, one function captured as CUDA graphs at two sizes
# replayed out of capture order, worker threads that make a tensor and views of it before handing it over).
# Written before being scored, by a helper who had not read the importer; each label is what the GPU shows.

class PinnedViewsBetweenCopies(Base):
    """The host zeroes a pinned buffer hp (2 slots of 256 KiB); aux waits for main, copies y0 = src_0 * k
    into hp[0] (non_blocking D2H) and records e0, then copies y1 = src_1 * k into hp.narrow(0, 1, 1) and
    records e1. Between and after the copies the host only takes views (hp.view, hp[k], hp.narrow,
    hp.reshape), touching no data; then it synchronizes e1 (clean) or e0, the earlier event (racy: slot 1's
    delayed copy is not behind e0), and reads slot 1 first. y0, y1 stay alive until main waits for aux."""
    mechanism = "held-out-n"
    delay = "aux, before the second copy"
    right_event = False
    L = 1 << 16

    def extra(self):
        self.hp = torch.zeros(2, self.L).pin_memory()
        self.e0 = torch.cuda.Event()
        self.e1 = torch.cuda.Event()
        self.n = 0
        src = self.src[:2 * self.L].view(2, self.L)
        self.refs = {k: (src * k).cpu() for k in (1.0, 2.0)}

    def step(self, sleep):
        main, aux, hp = self.main, self.aux, self.hp
        self.n += 1
        k = 1.0 + (self.n % 2)
        hp.zero_()
        y0 = self.src[:self.L] * k
        y1 = self.src[self.L:2 * self.L] * k
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            hp[0].copy_(y0, non_blocking=True)
            self.e0.record(aux)
        flat = hp.view(-1)              # views only: no data touched
        s0 = hp[0]
        with torch.cuda.stream(aux):
            nap(sleep)
            hp.narrow(0, 1, 1).copy_(y1.view(1, -1), non_blocking=True)
            self.e1.record(aux)
        s1 = hp.reshape(2, self.L)[1]
        tail = flat.narrow(0, self.L, self.L)
        (self.e1 if self.right_event else self.e0).synchronize()
        last = tail.clone()
        first = s0.clone()
        also = s1.clone()
        main.wait_stream(aux)
        return [(last, self.refs[k][1]), (first, self.refs[k][0]), (also, self.refs[k][1])]


@program
class PinnedViewsEarlierEventWaited(PinnedViewsBetweenCopies):
    intent = "racy"


@program
class PinnedViewsLastEventWaited(PinnedViewsBetweenCopies):
    intent = "clean"
    right_event = True


class SyncHelperThread(Base):
    """A helper thread started at set-up takes a stream from a queue.Queue, makes it current (thread-local)
    and calls torch.cuda.current_stream().synchronize() on the main thread's behalf, then replies on a second
    queue. Each step main writes buf = src * k (k alternates), aux forks and reads s = buf.square(), and the
    main thread asks the helper to synchronize aux. main then overwrites buf (torch.add(src, 1, out=buf))
    after taking the helper's reply (clean: aux's read is done) or before (racy)."""
    mechanism = "held-out-n"
    delay = "aux, before its read of buf"
    waits = False

    def extra(self):
        import queue
        import threading
        self.ask = queue.Queue()
        self.reply = queue.Queue()
        self.buf = torch.empty(N, device="cuda")
        self.n = 0
        self.refs = {k: (self.src * k).square() for k in (1.0, 2.0)}
        self.buf_ref = self.src + 1.0

        def helper():
            while True:
                s = self.ask.get()
                with torch.cuda.stream(s):
                    torch.cuda.current_stream().synchronize()
                self.reply.put(True)

        threading.Thread(target=helper, daemon=True).start()

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.n += 1
        k = 1.0 + (self.n % 2)
        torch.mul(self.src, k, out=self.buf)
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            s = self.buf.square()
        self.ask.put(aux)
        if self.waits:
            self.reply.get()
        torch.add(self.src, 1.0, out=self.buf)
        if not self.waits:
            self.reply.get()
        main.wait_stream(aux)
        return [(s[:NS], self.refs[k][:NS]), (self.buf[:NS], self.buf_ref[:NS])]


@program
class SyncHelperReplyNotAwaited(SyncHelperThread):
    intent = "racy"


@program
class SyncHelperReplyAwaited(SyncHelperThread):
    intent = "clean"
    waits = True


class TwoSizeExpGraphs(Base):
    """One function f(x) = x.exp().mul_(0.5) captured as two CUDA graphs at set-up (torch.cuda.graph, the
    full batch N first, then N / 2, each in its own private pool). A step replays the half graph first, then
    the full graph on batch 0 (aux reads its static output), then the full graph again on batch 1, which
    rewrites that output. main waits for aux before the second full replay (clean) or not (racy)."""
    kind = "graph"
    mechanism = "held-out-n"
    delay = "aux, before its read of the full graph's output"
    joined = False

    def f(self, x):
        return x.exp().mul_(0.5)

    def extra(self):
        self.b1 = torch.randn(N, device="cuda")
        self.bh = torch.randn(N // 2, device="cuda")
        self.xf = self.src.clone()
        self.xh = self.bh.clone()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                self.f(self.xf)
                self.f(self.xh)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        self.gf = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.gf):
            self.of = self.f(self.xf)
        self.gh = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.gh):
            self.oh = self.f(self.xh)
        torch.cuda.synchronize()
        self.r_ref = self.f(self.src) * 2.0
        self.of_ref = self.f(self.b1)
        self.oh_ref = self.f(self.bh)

    def step(self, sleep):
        main, aux = self.main, self.aux
        self.xh.copy_(self.bh)
        self.gh.replay()
        self.xf.copy_(self.src)
        self.gf.replay()
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            r = self.of * 2.0
        if self.joined:
            main.wait_stream(aux)
        self.xf.copy_(self.b1)
        self.gf.replay()
        main.wait_stream(aux)
        return [(r[:NS], self.r_ref[:NS]), (self.of[:NS], self.of_ref[:NS]), (self.oh[:NS], self.oh_ref[:NS])]


@program
class TwoSizeExpGraphsRewritten(TwoSizeExpGraphs):
    intent = "racy"


@program
class TwoSizeExpGraphsJoined(TwoSizeExpGraphs):
    intent = "clean"
    joined = True


class ThreadMadeViews(Base):
    """Inside the step a plain threading.Thread makes x = src * 2 (16 MiB, on the default stream: main's)
    and views of it (x.view(-1, 1024), x[:NS], x.unsqueeze(0)) and hands all over in a dict. aux reads
    through the views (y = xv.sin(), v = head + 1). The main thread drops x and every view, and a second
    thread makes w = src.cos() (same size, main's stream), which the allocator places in x's freed block
    unless x.record_stream(aux) was called first (clean) (racy: w overwrites x before aux's delayed read)."""
    mechanism = "held-out-n"
    delay = "aux, before its read of x"
    recorded = False

    def extra(self):
        self.y_ref = (self.src * 2.0).sin()
        self.v_ref = self.src[:NS] * 2.0 + 1.0
        self.w_ref = self.src.cos()

    def step(self, sleep):
        import threading
        main, aux, src = self.main, self.aux, self.src
        box = {}

        def make_x():
            x = src * 2.0
            box["x"] = x
            box["xv"] = x.view(-1, 1024)
            box["head"] = x[:NS]
            box["xu"] = x.unsqueeze(0)

        t = threading.Thread(target=make_x)
        t.start()
        t.join()
        x, xv, head, xu = box.pop("x"), box.pop("xv"), box.pop("head"), box.pop("xu")
        aux.wait_stream(main)
        with torch.cuda.stream(aux):
            nap(sleep)
            y = xv.sin().view(-1)
            v = head + 1.0
        if self.recorded:
            x.record_stream(aux)
        del x, xv, head, xu

        def make_w():
            box["w"] = src.cos()

        t = threading.Thread(target=make_w)
        t.start()
        t.join()
        w = box.pop("w")
        main.wait_stream(aux)
        return [(y[:NS], self.y_ref[:NS]), (v, self.v_ref), (w[:NS], self.w_ref[:NS])]   # small slices


@program
class ThreadMadeViewsDroppedUnrecorded(ThreadMadeViews):
    intent = "racy"


@program
class ThreadMadeViewsRecordStream(ThreadMadeViews):
    intent = "clean"
    recorded = True
