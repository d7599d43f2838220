"""Profiling and debug logging: a timeline of everything the devices run, and submission logs.

```python
import runtime.hcq
with runtime.hcq.profile() as p:          # or HCQ_PROFILE=trace.json for a whole run
    prg(a, b, c, global_size=g, local_size=l)
    dev.copyout(out, c)
p.save("trace.json")                      # open in ui.perfetto.dev or chrome://tracing
print(p.summary())                        # kernels ranked by total GPU time
```

While a profile is open (or `HCQ_DEBUG` is set, or the `runtime.hcq` logger logs DEBUG when a
device opens), every device carries a `Tracer` in `Device.tracer`; otherwise that attribute is
None and the launch, copy, fill, graph and wait paths pay one attribute test for it. A traced launch
is built as a queue with a GPU timestamp before and after the kernel (AMD RELEASE_MEM, NVIDIA
semaphore release with timer), a traced copy or fill likewise on the copy engine, a graph replay
gets timestamps around its segments, and host-side spans (building and submitting, waiting on a
signal) are timed with `time.perf_counter`. GPU timestamps become host times through a fit of
(GPU timestamp, host time) pairs taken when the device first meets a profile and when the
profile ends (`_Clock`), so the trace shows host and device work on one time axis.

The profile's event list and the set of open profiles are module state, as a profiler's must be:
a device opened while a profile is open is traced by it, and `HCQ_PROFILE` covers a whole run.

`HCQ_DEBUG=1` prints one line per submission (device, queue, what it does, timeline value) and
per blocking wait to stderr through the `runtime.hcq` logger; `HCQ_DEBUG=2` adds the decoded
commands of every queue submitted. Nothing is printed by default.
"""
from __future__ import annotations

import atexit
import json
import logging
import os
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from runtime.hcq.device import Device
    from runtime.hcq.graph import Graph
    from runtime.hcq.memory import Buffer
    from runtime.hcq.program import ArgValue, Program
    from runtime.hcq.queue import HWQueue
    from runtime.hcq.signal import Signal

#: the logger of the runtime (submissions and waits at DEBUG, device life at INFO)
log = logging.getLogger("runtime.hcq")
#: environment variable: write a trace of the whole run to this path at exit
PROFILE_ENV = "HCQ_PROFILE"
#: environment variable: 1 logs submissions and waits to stderr, 2 also their decoded commands
DEBUG_ENV = "HCQ_DEBUG"

_lock = threading.Lock()
_active: list["Profile"] = []                       # open profiles, oldest first
_devices: "weakref.WeakSet[Device]" = weakref.WeakSet()  # open devices (to attach new profiles)
_env_profile: "Profile | None" = None
_debug_handler: logging.Handler | None = None


def debug_level() -> int:
    """$HCQ_DEBUG as an integer (0 when unset or not a number)."""
    try:
        return int(os.environ.get(DEBUG_ENV, "0") or 0)
    except ValueError:
        return 0


def _setup_debug(level: int) -> None:
    global _debug_handler
    if level and _debug_handler is None:
        _debug_handler = logging.StreamHandler()
        _debug_handler.setFormatter(logging.Formatter("hcq: %(message)s"))
        log.addHandler(_debug_handler)
        log.setLevel(logging.DEBUG)


@dataclass(frozen=True)
class TraceEvent:
    """One span of the timeline, in seconds of the host's `time.perf_counter` clock."""

    kind: str        #: "launch", "copy", "fill", "graph", "submit", "wait"
    name: str        #: kernel name, "copy 4096 B", ...
    device: str      #: device name ("host" for host spans)
    queue: str       #: "compute", "copy", "stream 1", or the host thread's name
    start_s: float
    end_s: float
    args: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def duration_s(self) -> float:
        """end_s - start_s."""
        return self.end_s - self.start_s


@dataclass(frozen=True)
class KernelStats:
    """One row of `Profile.summary`: a kernel's launches and GPU time."""

    name: str
    count: int
    total_s: float
    mean_s: float
    min_s: float
    max_s: float


class _Clock:
    """GPU ticks -> host seconds: host = a + ticks * b, from (ticks, host) pairs (each the
    timestamp of a command submitted and waited for, paired with the midpoint of the host's
    submit and wake-up; the pair with the shortest round trip of a few tries is kept)."""

    def __init__(self, device: "Device") -> None:
        self.device = device
        self.points: list[tuple[int, float]] = []

    def sample(self) -> None:
        dev = self.device
        best: tuple[float, int, float] | None = None
        sig = dev.new_signal()
        try:
            for _ in range(3):
                v = dev.timeline_value + 1
                q = dev.compute_queue().wait(dev.timeline_signal, v - 1).timestamp(sig)
                t0 = time.perf_counter()
                dev.submit_timeline(q.signal(dev.timeline_signal, v), v)
                dev.timeline_signal.wait(v)
                t1 = time.perf_counter()
                if best is None or t1 - t0 < best[0]:
                    best = (t1 - t0, sig.timestamp, (t0 + t1) / 2)
        finally:
            sig.release()
        assert best is not None
        self.points.append((best[1], best[2]))

    def to_host(self, ticks: int) -> float:
        dev = self.device
        (g0, h0), (g1, h1) = self.points[0], self.points[-1]
        if g1 != g0 and abs(h1 - h0) > 1e-3:  # enough spread to fit a rate
            rate = (h1 - h0) / (g1 - g0)
            if 0.5 < rate * dev.clock_hz < 2.0:  # else trust the nominal clock
                return h0 + (ticks - g0) * rate
        return h0 + (ticks - g0) / dev.clock_hz


@dataclass
class _Pending:
    """A GPU span whose timestamps are read once the work is done."""

    kind: str
    name: str
    queue: str
    t0: "Signal"
    t1: "Signal"
    args: dict[str, Any]


class Tracer:
    """What a device carries while it is profiled or debug-logged (`Device.tracer`)."""

    def __init__(self, device: "Device", debug: int) -> None:
        self.device = device
        self.debug = debug
        self.profiles: list[Profile] = []
        self.pending: list[_Pending] = []
        self.clock: _Clock | None = None
        self._free: list["Signal"] = []
        self._depth = 0  # > 0 inside a traced device operation (its queue submits are its own)

    @property
    def profiling(self) -> bool:
        """Whether any profile records this device."""
        return bool(self.profiles)

    # -------------------------------------------------------------- helpers
    def _signals(self) -> tuple["Signal", "Signal"]:
        try:  # signals of spans already read, else new ones (another thread may take them)
            return self._free.pop(), self._free.pop()
        except IndexError:
            return self.device.new_signal(), self.device.new_signal()

    def _host(self, kind: str, name: str, t0: float, t1: float, **args: Any) -> None:
        ev = TraceEvent(kind, name, "host", threading.current_thread().name, t0, t1, args)
        for p in self.profiles:
            p._events.append(ev)

    def _ensure_clock(self) -> None:
        if self.clock is None:
            self.clock = _Clock(self.device)
            self._depth += 1
            try:
                self.clock.sample()
            finally:
                self._depth -= 1

    # -------------------------------------------------------------- hooks
    def launch(self, prg: "Program", args: Sequence["ArgValue"], global_size: Sequence[int],
               local_size: Sequence[int], wait: bool, timeout_ms: float | None) -> float | None:
        """`Program.__call__` while traced: the launch between two GPU timestamps."""
        dev = prg.device
        h0 = time.perf_counter()
        dev.check_usable()
        with dev.submit_lock:  # built and published as one submission
            kargs = prg.fill_kernargs(tuple(args), global_size, local_size)
            timed = self.profiling or wait
            if timed:
                self._ensure_clock()
                s0, s1 = self._signals()
            v = dev.timeline_value + 1
            q = dev.compute_queue().wait(dev.timeline_signal, v - 1).memory_barrier()
            if timed:
                q.timestamp(s0)
            q.exec(prg, kargs, global_size, local_size)
            if timed:
                q.timestamp(s1)
            info = launch_args(prg, args, global_size, local_size)
            if self.debug:
                log.debug("%s compute: launch %s grid=%s block=%s -> timeline %d", dev.name,
                          prg.name, info["grid"], info["block"], v)
            self._depth += 1
            try:
                dev.submit_timeline(q.signal(dev.timeline_signal, v), v)
            finally:
                self._depth -= 1
        h1 = time.perf_counter()
        if self.profiling:
            self._host("submit", f"launch {prg.name}", h0, h1)
            self.pending.append(_Pending("launch", prg.name, "compute", s0, s1, info))
        if not wait:
            return None
        dev.timeline_signal.wait(v, timeout_ms)
        dev.check_fault()
        seconds = (s1.timestamp - s0.timestamp) / dev.clock_hz
        if not self.profiling:
            self._free += [s0, s1]
        return seconds

    def copy(self, dst_va: int, src_va: int, size: int, fill: int | None = None) -> int:
        """`Device._submit_copy` / `_submit_fill` while traced."""
        dev = self.device
        h0 = time.perf_counter()
        if self.profiling:
            self._ensure_clock()
            s0, s1 = self._signals()
        with dev.submit_lock:  # built and published as one submission
            v = dev.timeline_value + 1
            tl = dev.timeline_signal
            q = dev.copy_queue().wait(tl, v - 1)
            if self.profiling:
                q.timestamp(s0)
            if fill is None:
                q.copy(dst_va, src_va, size)
            else:
                q.fill(dst_va, fill, size)
            if self.profiling:
                q.timestamp(s1)
            kind = "copy" if fill is None else "fill"
            if self.debug:
                what = f"{src_va:#x} -> {dst_va:#x}" if fill is None else \
                    f"{fill:#010x} -> {dst_va:#x}"
                log.debug("%s copy: %s %d B %s -> timeline %d", dev.name, kind, size, what, v)
            self._depth += 1
            try:
                dev.submit_timeline(q.signal(tl, v), v)
            finally:
                self._depth -= 1
        if self.profiling:
            self._host("submit", f"{kind} {size} B", h0, time.perf_counter())
            args: dict[str, Any] = {"bytes": size, "dst": f"{dst_va:#x}"}
            if fill is None:
                args["src"] = f"{src_va:#x}"
            else:
                args["pattern"] = f"{fill:#010x}"
            self.pending.append(_Pending(kind, f"{kind} {_size_text(size)}", "copy", s0, s1,
                                         args))
        return v

    def graph_signals(self) -> tuple["Signal", "Signal"] | None:
        """Timestamp signals for a graph replay (None when not profiling)."""
        if not self.profiling:
            return None
        self._ensure_clock()
        return self._signals()

    def graph(self, graph: "Graph", first: int, last: int, h0: float,
              stamps: tuple["Signal", "Signal"] | None) -> None:
        """A graph replay was submitted (timeline values `first`..`last`)."""
        dev = self.device
        if self.debug:
            log.debug("%s: graph replay of %d nodes (%d launches) -> timeline %d..%d", dev.name,
                      len(graph.nodes), len(graph.launches), first, last)
        if stamps is not None:
            self._host("submit", "graph replay", h0, time.perf_counter())
            names = [ln.prg.name for ln in graph.launches]
            self.pending.append(_Pending("graph", f"graph ({len(graph.nodes)} nodes)", "compute",
                                         stamps[0], stamps[1],
                                         {"nodes": len(graph.nodes), "kernels": names}))

    def enter(self) -> None:
        """Starts a device operation whose queue submissions are traced by its own hook."""
        self._depth += 1

    def leave(self) -> None:
        """Ends what `enter` started."""
        self._depth -= 1

    def stream_launch(self, queue: str, prg: "Program", args: Sequence["ArgValue"],
                      global_size: Sequence[int], local_size: Sequence[int],
                      stamps: tuple["Signal", "Signal"] | None, value: int, h0: float) -> None:
        """A launch on a stream was submitted (`stamps` bracket its kernel when profiling)."""
        info = launch_args(prg, args, global_size, local_size)
        if self.debug:
            log.debug("%s %s: launch %s grid=%s block=%s -> value %d", self.device.name, queue,
                      prg.name, info["grid"], info["block"], value)
        if stamps is not None:
            self._host("submit", f"launch {prg.name} ({queue})", h0, time.perf_counter())
            self.pending.append(_Pending("launch", prg.name, queue, stamps[0], stamps[1], info))

    def stream_copy(self, queue: str, dst_va: int, src_va: int, size: int,
                    stamps: tuple["Signal", "Signal"] | None, value: int, h0: float) -> None:
        """A copy on a stream was submitted (on the copy engine, in the stream's order)."""
        if self.debug:
            log.debug("%s %s: copy %d B %#x -> %#x -> value %d", self.device.name, queue, size,
                      src_va, dst_va, value)
        if stamps is not None:
            self._host("submit", f"copy {size} B ({queue})", h0, time.perf_counter())
            self.pending.append(_Pending("copy", f"copy {_size_text(size)}", f"{queue} copy",
                                         stamps[0], stamps[1],
                                         {"bytes": size, "dst": f"{dst_va:#x}",
                                          "src": f"{src_va:#x}"}))

    def stream_signals(self) -> tuple["Signal", "Signal"] | None:
        """Timestamp signals for a stream launch (None when not profiling)."""
        return self.graph_signals()

    def submitted(self, q: "HWQueue") -> None:
        """`HWQueue.submit` (of a queue built outside the device's own operations, unless
        inside one: then only its commands are logged, at HCQ_DEBUG=2)."""
        if self._depth:
            if self.debug >= 2:
                self._log_commands(q)
            return
        dev = self.device
        if self.debug:
            log.debug("%s %s: submit of a %d-dword queue", dev.name, q.engine, len(q._d))
            if self.debug >= 2:
                self._log_commands(q)
        if self.profiling:
            now = time.perf_counter()
            self._host("submit", f"{q.engine} queue ({len(q._d)} dwords)", now, now,
                       device=dev.name)

    def _log_commands(self, q: "HWQueue") -> None:
        for line in q.describe_commands():
            log.debug("    %s", line)

    def waited(self, sig: "Signal", value: int, t0: float) -> None:
        """A host wait on `sig` for `value` that blocked from `t0` until now."""
        t1 = time.perf_counter()
        dev = self.device
        what = "timeline" if sig is getattr(dev, "timeline_signal", None) else f"{sig.va:#x}"
        if self.debug:
            log.debug("%s: waited %.1f us for %s >= %d", dev.name, (t1 - t0) * 1e6, what, value)
        if self.profiling and not self._depth:  # not the profiler's own waits
            self._host("wait", f"wait {dev.name} {what} >= {value}", t0, t1)

    # -------------------------------------------------------------- results
    def collect(self, closing: bool = False) -> None:
        """Turns finished spans into events of every profile that records the device (waits
        for the device first)."""
        if not self.pending:
            return
        dev = self.device
        self._depth += 1
        try:
            dev.synchronize()
            assert self.clock is not None
            self.clock.sample()
        finally:
            self._depth -= 1
        pending, self.pending = self.pending, []
        for pend in pending:
            t0, t1 = pend.t0.timestamp, pend.t1.timestamp
            args = dict(pend.args)
            args["gpu_us"] = round((t1 - t0) / dev.clock_hz * 1e6, 3)
            if "bytes" in args and t1 > t0:
                args["GB/s"] = round(args["bytes"] / ((t1 - t0) / dev.clock_hz) / 1e9, 3)
            if self._mock():
                args["clock"] = "mock GPU: emulator time, not GPU time"
            ev = TraceEvent(pend.kind, pend.name, dev.name, pend.queue,
                            self.clock.to_host(t0), self.clock.to_host(t1), args)
            for p in self.profiles:
                p._events.append(ev)
            if not closing:
                self._free += [pend.t0, pend.t1]

    def _mock(self) -> bool:
        from runtime.hcq.seam import RealOS
        return not isinstance(self.device.os, RealOS)


def _size_text(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % (scale // 16) == 0:
            return f"{n / scale:g} {unit}"
    return f"{n} B"


def _arg_text(value: Any) -> Any:
    from runtime.hcq.memory import Buffer
    if isinstance(value, Buffer):
        return f"buffer {value.va:#x} ({value.size} B)"
    if isinstance(value, (bytes, bytearray)):
        return f"{len(value)} bytes"
    if isinstance(value, (int, float)):
        return value
    return repr(value)


def launch_args(prg: "Program", args: Sequence["ArgValue"], global_size: Sequence[int],
                local_size: Sequence[int]) -> dict[str, Any]:
    """A launch's trace arguments: grid and block sizes and the kernel's arguments by their own
    parameter names."""
    from runtime.hcq.queue import as_tuple3
    names = [s.name for s in prg.slots]
    out: dict[str, Any] = {"grid": list(as_tuple3(global_size, "global_size")),
                           "block": list(as_tuple3(local_size, "local_size"))}
    for i, value in enumerate(args):
        out[names[i] if i < len(names) else f"arg{i}"] = _arg_text(value)
    return out


class Profile:
    """A recording of every device's work (see the module docstring). Use it as a context
    manager (`with runtime.hcq.profile() as p:`), or `start()` and `stop()`."""

    def __init__(self) -> None:
        self._events: list[TraceEvent] = []
        self.running = False
        self._tracers: list[Tracer] = []

    @property
    def events(self) -> list[TraceEvent]:
        """The recorded events, ordered by start time (complete once the profile stopped)."""
        return sorted(self._events, key=lambda e: e.start_s)

    def start(self) -> "Profile":
        """Starts recording on every open device and every device opened from now on."""
        with _lock:
            if self.running:
                return self
            self.running = True
            _active.append(self)
            devices = [d for d in list(_devices) if not d.closed]
        for dev in devices:
            self._join(_tracer_of(dev))
        return self

    def _join(self, tracer: Tracer) -> None:
        if self not in tracer.profiles:
            tracer.profiles.append(self)
            self._tracers.append(tracer)

    def stop(self) -> None:
        """Stops recording: waits for each traced device and reads its timestamps."""
        with _lock:
            if not self.running:
                return
            self.running = False
            _active.remove(self)
        for tracer in self._tracers:
            dev = tracer.device
            if not dev.closed:
                try:
                    tracer.collect()
                except Exception as e:  # a faulted device still gives what it recorded before
                    log.warning("profile: %s: %s", dev.name, e)
            tracer.profiles.remove(self)
            if not tracer.profiles and not tracer.debug and dev.tracer is tracer:
                dev.tracer = None
        self._tracers.clear()

    def __enter__(self) -> "Profile":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -------------------------------------------------------------- output
    def kernels(self) -> list[KernelStats]:
        """Kernels ranked by total GPU time (launches on queues and streams; graph replays
        count as one span each, under the graph's name)."""
        by: dict[str, list[float]] = {}
        for e in self._events:
            if e.kind in ("launch", "graph"):
                by.setdefault(e.name, []).append(e.duration_s)
        rows = [KernelStats(n, len(d), sum(d), sum(d) / len(d), min(d), max(d))
                for n, d in by.items()]
        return sorted(rows, key=lambda r: -r.total_s)

    def summary(self) -> str:
        """A table of `kernels()`, then copies and fills with their bandwidth, and the host's
        submit and wait time."""
        rows = self.kernels()
        total = sum(r.total_s for r in rows) or 1.0
        lines = [f"{'kernel':<32} {'calls':>6} {'total us':>11} {'mean us':>10} "
                 f"{'min us':>9} {'max us':>9} {'%':>6}"]
        for r in rows:
            lines.append(f"{r.name[:32]:<32} {r.count:>6} {r.total_s * 1e6:>11.1f} "
                         f"{r.mean_s * 1e6:>10.2f} {r.min_s * 1e6:>9.2f} {r.max_s * 1e6:>9.2f} "
                         f"{100 * r.total_s / total:>6.1f}")
        for kind in ("copy", "fill"):
            evs = [e for e in self._events if e.kind == kind]
            if evs:
                n_B = sum(e.args.get("bytes", 0) for e in evs)
                t = sum(e.duration_s for e in evs)
                rate = f", {n_B / t / 1e9:.2f} GB/s" if t > 0 else ""
                lines.append(f"{kind}: {len(evs)} x, {n_B} B in {t * 1e6:.1f} us{rate}")
        for kind in ("submit", "wait"):
            evs = [e for e in self._events if e.kind == kind]
            if evs:
                lines.append(f"host {kind}: {len(evs)} x, "
                             f"{sum(e.duration_s for e in evs) * 1e6:.1f} us")
        if any(e.args.get("clock") for e in self._events):
            lines.append("(mock GPU: device times are the emulator's, not a GPU's)")
        return "\n".join(lines)

    def trace(self) -> dict[str, Any]:
        """The Chrome trace-event JSON object (what `save` writes): one process per device with
        one thread per queue, and a "host" process with one thread per Python thread."""
        events = self.events
        t_base = events[0].start_s if events else 0.0
        pids: dict[str, int] = {"host": 1}
        tids: dict[tuple[str, str], int] = {}
        out: list[dict[str, Any]] = []
        for e in events:
            pid = pids.setdefault(e.device, len(pids) + 1)
            tid = tids.setdefault((e.device, e.queue), len(tids) + 1)
            out.append({"name": e.name, "cat": e.kind, "ph": "X", "pid": pid, "tid": tid,
                        "ts": round((e.start_s - t_base) * 1e6, 3),
                        "dur": round(max(e.duration_s, 0.0) * 1e6, 3), "args": e.args})
        meta: list[dict[str, Any]] = []
        for name, pid in pids.items():
            meta.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                         "args": {"name": name}})
            meta.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
                         "args": {"sort_index": pid}})
        for (dev, queue), tid in tids.items():
            meta.append({"name": "thread_name", "ph": "M", "pid": pids[dev], "tid": tid,
                         "args": {"name": queue}})
        return {"traceEvents": meta + out, "displayTimeUnit": "ns"}

    def save(self, path: str | os.PathLike[str]) -> None:
        """Writes the trace (Chrome trace-event JSON, which ui.perfetto.dev and
        chrome://tracing open) to `path`, whole (a temporary file renamed into place)."""
        tmp = f"{os.fspath(path)}.tmp"
        with open(tmp, "w") as f:
            json.dump(self.trace(), f)
        os.replace(tmp, path)


def profile() -> Profile:
    """A new profile; `with runtime.hcq.profile() as p:` records everything the devices do in
    the block (see the module `runtime.hcq.profiler`)."""
    return Profile()


def _tracer_of(dev: "Device") -> Tracer:
    t = dev.tracer
    if t is None:
        t = dev.tracer = Tracer(dev, debug_level())
    return t


def attach(dev: "Device") -> None:
    """Called by every device once its core is set up: traces it when a profile is open,
    $HCQ_PROFILE or $HCQ_DEBUG is set, or the runtime's logger logs DEBUG."""
    global _env_profile
    level = debug_level()
    _setup_debug(level)
    log.debug("opened %s (%s)", dev.name, dev.arch)
    path = os.environ.get(PROFILE_ENV)
    with _lock:
        _devices.add(dev)
        if path and _env_profile is None:
            _env_profile = Profile()
            atexit.register(_save_env_profile, _env_profile, path)
            start_env = True
        else:
            start_env = False
        active = list(_active)
    if start_env and _env_profile is not None:
        _env_profile.start()
        active = [_env_profile]  # start() already joined every open device, this one too
        return
    if active or level or log.isEnabledFor(logging.DEBUG):
        tracer = _tracer_of(dev)
        tracer.debug = max(tracer.debug, 1 if log.isEnabledFor(logging.DEBUG) else 0)
        for p in active:
            p._join(tracer)


def detach(dev: "Device") -> None:
    """Called by `Device.close` before the hardware goes: reads what is still pending."""
    t = dev.tracer
    if t is None:
        return
    if t.debug:
        log.debug("closing %s", dev.name)
    try:
        t.collect(closing=True)
    except Exception as e:
        log.warning("profile: %s: %s", dev.name, e)
    _devices.discard(dev)


def _save_env_profile(p: Profile, path: str) -> None:
    p.stop()
    p.save(path)
    log.info("profile of the run written to %s (%d events)", path, len(p._events))

