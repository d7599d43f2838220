"""Graphs: a batch of launches recorded once and replayed cheaply.

Recording writes every launch's kernel arguments into one persistent block and builds one command
body (barrier + all dispatches) that is bound to GPU memory (`HWQueue.bind`). A replay submits a
tiny queue: wait for the previous timeline value, `call` the body (AMD: one INDIRECT_BUFFER packet),
signal the next value. Updating arguments rewrites them in place, after the previous replay has
finished reading them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

from runtime.hcq.errors import ProgramError
from runtime.hcq.memory import round_up
from runtime.hcq.program import ArgValue, KernArgs, Program
from runtime.hcq.queue import as_tuple3

if TYPE_CHECKING:
    from runtime.hcq.device import Device


@dataclass(frozen=True)
class Launch:
    """One kernel launch of a graph: arguments in the kernel's order, grid in workgroups."""

    prg: Program
    args: tuple[ArgValue, ...]
    global_size: tuple[int, int, int] = (1, 1, 1)
    local_size: tuple[int, int, int] = (1, 1, 1)


class Graph:
    """Launches recorded once, replayed with optional argument updates."""

    def __init__(self, device: "Device", launches: Sequence[Launch]) -> None:
        if not launches:
            raise ProgramError("a graph needs at least one launch")
        self.device = device
        self.launches = list(launches)
        for i, ln in enumerate(self.launches):  # shapes first: nothing is allocated for a bad one
            if not isinstance(ln, Launch) or ln.prg.device is not device:
                raise ProgramError(f"graph launch {i}: expected a Launch of a program of "
                                   f"{device.name}, got {ln!r}")
            ln.prg.check_launch(as_tuple3(ln.global_size, f"launch {i} global_size"),
                                as_tuple3(ln.local_size, f"launch {i} local_size"))
        sizes = [round_up(ln.prg._kernargs_size(), 64) for ln in self.launches]
        # Memory the CPU rewrites between replays without a cache flush (uncached host memory, or
        # VRAM through the BAR where the GPU reads system memory slowly: NVIDIA).
        self._args_buf = device.alloc_kernargs(sum(sizes))
        try:
            view = self._args_buf.cpu_view()
            self.kernargs: list[KernArgs] = []
            off = 0
            for ln, size in zip(self.launches, sizes):
                block = (self._args_buf.va + off, view[off:off + size])
                ka = ln.prg.fill_kernargs(ln.args, ln.global_size, ln.local_size, block)
                self.kernargs.append(ka)
                off += size
            body = device.compute_queue().memory_barrier()
            for ln, ka in zip(self.launches, self.kernargs):
                body.exec(ln.prg, ka, as_tuple3(ln.global_size, "global_size"),
                          as_tuple3(ln.local_size, "local_size"))
            self.body = body.bind()
        except BaseException:
            device.free(self._args_buf)  # a refused graph leaves nothing behind
            raise
        self._t0, self._t1 = device.new_signal(), device.new_signal()
        self._last = 0  # timeline value of the latest replay

    def replay(self, updates: Mapping[int, Mapping[int, ArgValue]] | None = None,
               wait: bool = False, timeout_ms: float | None = None) -> float | None:
        """Runs the graph again. `updates` maps a launch index to {argument index: new value}. With
        `wait`, blocks until done and returns the GPU time of the whole graph in seconds."""
        dev = self.device
        dev.check_usable()
        if updates:
            if self._last:  # the previous replay may still be reading these arguments
                dev.timeline_signal.wait(self._last, timeout_ms)
            for li, changes in updates.items():
                if not 0 <= li < len(self.kernargs):
                    raise ProgramError(f"graph has {len(self.kernargs)} launches, no launch {li}")
                for ai, value in changes.items():
                    self.kernargs[li].set(ai, value)
        v = dev.timeline_value + 1  # taken once the submission is built (submit_timeline)
        q = dev.compute_queue().wait(dev.timeline_signal, v - 1)
        if wait:
            q.timestamp(self._t0)
        q.call(self.body)
        if wait:
            q.timestamp(self._t1)
        dev.submit_timeline(q.signal(dev.timeline_signal, v), v)
        self._last = v
        if not wait:
            return None
        dev.timeline_signal.wait(v, timeout_ms)
        return (self._t1.timestamp - self._t0.timestamp) / dev.clock_hz

    def free(self) -> None:
        """Releases the graph's memory (after waiting for its last replay)."""
        if self._last:
            self.device.timeline_signal.wait(self._last)
        self.body.unbind()
        self.device.free(self._args_buf)
        for s in (self._t0, self._t1):
            s.release()

