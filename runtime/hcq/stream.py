"""Streams: independent queues of work on one device, ordered among themselves by events.

A `Stream` owns a hardware compute queue of its own (AMD: another KFD compute queue; NVIDIA: another
GPFIFO channel in the device's channel group) and a timeline signal. Work on one stream runs in
submission order; different streams (and the device's own timeline: copies, `prg(...)`, graphs)
run concurrently unless an `Event` orders them, as CUDA's non-blocking streams do:

```python
s1, s2 = dev.stream(), dev.stream()
s1.wait(dev.record())                # after the copies the device made so far
s1.launch(prg_a, x, y, global_size=g, local_size=l)
s2.wait(s1.record())                 # s2's next work starts after s1's launch
s2.launch(prg_b, y, z, global_size=g, local_size=l)
dev.synchronize()                    # waits for the device timeline and every stream
```

An `Event` is a (signal, value) pair: `event.wait()` blocks the CPU, `stream.wait(event)` and
`device.wait(event)` make the GPU wait. `record(timing=True)` also stamps the GPU clock when the
work before it is done, so that `end.elapsed_time(start)` measures what ran in between:

```python
start = s1.record(timing=True)
s1.launch(prg_a, x, y, global_size=g, local_size=l)
end = s1.record(timing=True)
end.wait(); print(end.elapsed_time(start) * 1e6, "us")
```
"""
from __future__ import annotations

import time
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence

from runtime.hcq.errors import DeviceClosed, HCQError

if TYPE_CHECKING:
    from runtime.hcq.device import Device
    from runtime.hcq.graph import Launch
    from runtime.hcq.memory import Buffer
    from runtime.hcq.profiler import Tracer
    from runtime.hcq.program import ArgValue, Program
    from runtime.hcq.queue import HWQueue
    from runtime.hcq.signal import Signal


@dataclass(frozen=True)
class Event:
    """A point on a timeline: done once `signal` reaches `value`."""

    signal: "Signal"
    value: int
    #: where a timing event's GPU clock stamp lands (`record(timing=True)`), else None
    stamp: "Signal | None" = field(default=None, compare=False, repr=False)

    def elapsed_time(self, start: "Event") -> float:
        """Seconds of GPU clock from `start` to this event, both recorded with `timing=True` on
        one device and both complete (raises HCQError otherwise, naming which)."""
        if not isinstance(start, Event):
            raise HCQError(f"elapsed_time takes the start Event, got {type(start).__name__}")
        for what, ev in (("this event", self), ("the start event", start)):
            if ev.stamp is None:
                raise HCQError(f"elapsed_time: {what} {ev!r} has no timestamp: record it with "
                               "record(timing=True)")
            if not ev.query():
                raise HCQError(f"elapsed_time: {what} {ev!r} has not happened yet: wait() for "
                               "it first")
        assert self.stamp is not None and start.stamp is not None
        if self.stamp.device is not start.stamp.device:
            raise HCQError(f"elapsed_time: the events are of {self.stamp.device.name} and "
                           f"{start.stamp.device.name}, whose clocks differ")
        return (self.stamp.timestamp - start.stamp.timestamp) / self.stamp.device.clock_hz

    def wait(self, timeout_ms: float | None = None) -> None:
        """Blocks the CPU until the event has happened."""
        self.signal.wait(self.value, timeout_ms)

    def query(self) -> bool:
        """True once the event has happened (does not block)."""
        return self.signal.value >= self.value


class Stream:
    """An independent in-order queue of kernel launches and copies (see the module docstring).
    Made by `Device.stream()`; released by `close()` or with the device."""

    def __init__(self, device: "Device", make_queue: "Callable[[], HWQueue]",
                 release: Callable[[], None], label: str = "stream") -> None:
        self.device = device
        self._make_queue = make_queue
        self._release = release
        self.timeline = device.new_signal(0)
        self.value = 0          # last value handed out on this stream's timeline
        self._waits: list[Event] = []
        self.closed = False
        #: the stream's name in traces and logs
        self.label = label

    def _check(self) -> None:
        if self.closed:
            raise DeviceClosed(f"{self!r} is closed")
        self.device.check_usable()

    def _begin(self, q: "HWQueue") -> "tuple[HWQueue, int]":
        """Starts a submission: wait for this stream's previous work and the events it was told to
        wait for; returns the queue and the value the submission will signal."""
        v = self.value + 1
        q.wait(self.timeline, v - 1)
        for ev in self._waits:
            q.wait(ev.signal, ev.value)
        return q, v

    def _finish(self, q: "HWQueue", v: int) -> "Event":
        q.signal(self.timeline, v).submit()
        self.value = v   # taken only once the submission was accepted
        self._waits.clear()
        return Event(self.timeline, v)

    def _finish_traced(self, q: "HWQueue", v: int, trace: "Tracer",
                       note: Callable[[float], None]) -> "Event":
        """`_finish` as one traced operation of the stream: the tracer logs the submission as
        the stream's own (not as a user queue's), then `note(h0)` records it, `h0` being when
        it was handed to the queue."""
        h0 = time.perf_counter()
        trace.enter()
        try:
            ev = self._finish(q, v)
        finally:
            trace.leave()
        note(h0)
        return ev

    def launch(self, prg: "Program", *args: "ArgValue", global_size: Sequence[int] = (1, 1, 1),
               local_size: Sequence[int] = (1, 1, 1)) -> Event:
        """Launches `prg` on this stream; returns the event of its completion."""
        self._check()
        with self.device.submit_lock:
            kargs = prg.fill_kernargs(args, global_size, local_size)  # validated before submit
            q, v = self._begin(self._make_queue())
            trace = self.device.tracer
            if trace is None:
                q.memory_barrier().exec(prg, kargs, global_size, local_size)
                return self._finish(q, v)
            stamps = trace.stream_signals()
            q.memory_barrier()
            _bracketed(q, stamps, lambda: q.exec(prg, kargs, global_size, local_size))
            return self._finish_traced(q, v, trace, lambda h0: trace.stream_launch(
                self.label, prg, args, global_size, local_size, stamps, v, h0))

    def run(self, launch: "Launch") -> Event:
        """Launches a graph-style `Launch` (e.g. `TritonProgram.bind(...)`) on this stream."""
        return self.launch(launch.prg, *launch.args, global_size=launch.global_size,
                           local_size=launch.local_size)

    def copy(self, dst: "Buffer", src: "Buffer", size: int, dst_offset: int = 0,
             src_offset: int = 0) -> Event:
        """Copies between device buffers on the copy engine, in this stream's order."""
        self._check()
        dev = self.device
        dev.check_range(dst, dst_offset, size, "stream copy", "dst")
        dev.check_range(src, src_offset, size, "stream copy", "src")
        dst_va, src_va = dst.va + dst_offset, src.va + src_offset
        with dev.submit_lock:
            q, v = self._begin(dev.copy_queue())
            trace = dev.tracer
            if trace is None:
                if size:
                    q.copy(dst_va, src_va, size)
                return self._finish(q, v)
            stamps = trace.stream_signals() if size else None
            if size:
                _bracketed(q, stamps, lambda: q.copy(dst_va, src_va, size))
            return self._finish_traced(q, v, trace, lambda h0: trace.stream_copy(
                self.label, dst_va, src_va, size, stamps, v, h0))

    def record(self, timing: bool = False) -> Event:
        """The event of everything submitted to this stream so far; with `timing`, a submission
        that stamps the GPU clock once that work is done (see `Event.elapsed_time`)."""
        if not timing:
            return Event(self.timeline, self.value)
        self._check()
        stamp = _stamp_signal(self.device)
        with self.device.submit_lock:
            q, v = self._begin(self._make_queue())
            q.timestamp(stamp)
            return _timed(self._finish(q, v), stamp)

    def wait(self, event: Event) -> None:
        """Makes this stream's next submission wait for `event` (of any stream or the device)."""
        self._check()
        if not isinstance(event, Event):
            raise HCQError(f"{self!r}.wait takes an Event (stream.record(), device.record()), "
                           f"got {type(event).__name__}")
        if event.signal.device is not self.device:
            raise HCQError(f"{event!r} belongs to {event.signal.device.name}; map its signal "
                               f"with {self.device.name}.map_signal first")
        with self.device.submit_lock:
            self._waits.append(event)

    def synchronize(self, timeout_ms: float | None = None) -> None:
        """Blocks until this stream's work is done."""
        self._check()
        self.timeline.wait(self.value, timeout_ms)
        self.device.check_fault()

    def close(self) -> None:
        """Waits for the stream's work and releases its hardware queue."""
        if self.closed:
            return
        self.closed = True
        if not self.device.closed:
            try:
                if self.device.fault is None:
                    self.timeline.wait(self.value)
            finally:
                self.device.stream_closed(self, self._release)
                self.timeline.release()

    def __repr__(self) -> str:
        return f"Stream({self.device.name}, value={self.value})"


def _bracketed(q: "HWQueue", stamps: "tuple[Signal, Signal] | None",
               commands: Callable[[], object]) -> None:
    """Adds `commands` to `q`, between GPU clock stamps into `stamps` when profiling."""
    if stamps is not None:
        q.timestamp(stamps[0])
    commands()
    if stamps is not None:
        q.timestamp(stamps[1])


def _stamp_signal(device: "Device") -> "Signal":
    return device.new_signal(0)


def _timed(ev: Event, stamp: "Signal") -> Event:
    """`ev` carrying `stamp`; the stamp's slot goes back to its pool with the event."""
    timed = Event(ev.signal, ev.value, stamp)
    weakref.finalize(timed, stamp.release)
    return timed
