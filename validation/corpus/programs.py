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
