"""Graphs: launches, copies and signal waits recorded once and replayed cheaply.

Recording writes every launch's kernel arguments into one persistent block and cuts the nodes into
segments: a run of launches and waits becomes one compute command body (cache barrier, waits,
dispatches) bound to GPU memory (`HWQueue.bind`); a run of copies becomes one copy-engine
submission. A replay submits each segment in order on the device timeline (wait for the previous
value, `call` the body, AMD: one INDIRECT_BUFFER packet, or the copies; signal the next value), so
a graph of launches only is one tiny submission. Updating arguments (and the values waits wait
for) rewrites them in place, after the previous replay has finished reading them; an update that
is refused changes nothing.

Lifetimes: a replay refuses to run once a buffer one of its nodes uses was freed (the error names
the node and the argument): its memory may already belong to another allocation.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Mapping, Sequence, Union, overload

from runtime.hcq.errors import HCQError, ProgramError
from runtime.hcq.memory import Buffer, round_up
from runtime.hcq.program import ArgValue, KernArgs, Program, write_arg
from runtime.hcq.queue import HWQueue, Var, as_tuple3
from runtime.hcq.signal import Signal

if TYPE_CHECKING:
    from runtime.hcq.device import Device


@dataclass(frozen=True)
class Launch:
    """One kernel launch of a graph: arguments in the kernel's order, grid in workgroups."""

    prg: Program
    args: tuple[ArgValue, ...]
    global_size: tuple[int, int, int] = (1, 1, 1)
    local_size: tuple[int, int, int] = (1, 1, 1)


@dataclass(frozen=True)
class GraphCopy:
    """A copy between two buffers of the device, on the copy engine, in graph order."""

    dst: Buffer
    src: Buffer
    size: int
    dst_offset: int = 0
    src_offset: int = 0


@dataclass(frozen=True)
class GraphWait:
    """The graph's later nodes wait until `signal` >= `value` (e.g. another stream's event);
    `replay(wait_values=...)` changes the value per replay."""

    signal: "Signal"
    value: int


Node = Union[Launch, GraphCopy, GraphWait]


class Graph:
    """Nodes recorded once, replayed with optional argument and wait-value updates."""

    def __init__(self, device: "Device", nodes: Sequence[Node]) -> None:
        if not nodes:
            raise ProgramError("a graph needs at least one node")
        self.device = device
        self.nodes = list(nodes)
        self._check_nodes()
        self.launches = [n for n in self.nodes if isinstance(n, Launch)]
        sizes = [round_up(ln.prg._kernargs_size(), 64) for ln in self.launches]
        # Memory the CPU rewrites between replays without a cache flush (uncached host memory, or
        # VRAM through the BAR where the GPU reads system memory slowly: NVIDIA).
        self._args_buf = device.alloc_kernargs(max(sum(sizes), 64))
        self._segments: list[HWQueue | list[GraphCopy]] = []
        self._wait_vars: list[tuple[HWQueue, Var]] = []
        self._wait_nodes = [(i, n.signal) for i, n in enumerate(self.nodes)
                            if isinstance(n, GraphWait)]
        try:
            self.kernargs = self._fill_args(sizes)
            self._build_segments()
        except BaseException:
            for seg in self._segments:
                if isinstance(seg, HWQueue):
                    seg.unbind()
            device.free(self._args_buf)  # a refused graph leaves nothing behind
            raise
        bodies = [s for s in self._segments if isinstance(s, HWQueue)]
        self.body = bodies[0] if bodies else None  # the (first) bound compute body
        self._t0, self._t1 = device.new_signal(), device.new_signal()
        self._last = 0  # timeline value of the latest replay
        # (what to call it in an error, buffer) for every buffer the nodes use
        self._buffers: dict[tuple[int, int], tuple[str, Buffer]] = {}
        li = 0
        for i, n in enumerate(self.nodes):
            if isinstance(n, Launch):
                for ai, a in enumerate(n.args):
                    if isinstance(a, Buffer):
                        self._buffers[li, ai] = (f"graph node {i} (launch {li} of "
                                                 f"{n.prg.name}) argument {ai}", a)
                li += 1
            elif isinstance(n, GraphCopy):
                self._buffers[-1 - i, 0] = (f"graph node {i} (copy) dst", n.dst)
                self._buffers[-1 - i, 1] = (f"graph node {i} (copy) src", n.src)

    # -------------------------------------------------------------- recording
    def _check_nodes(self) -> None:
        dev = self.device
        for i, n in enumerate(self.nodes):  # shapes first: nothing is allocated for a bad one
            if isinstance(n, Launch):
                if n.prg.device is not dev:
                    raise ProgramError(f"graph node {i}: {n.prg!r} is not a program of {dev.name}")
                n.prg.check_launch(as_tuple3(n.global_size, f"node {i} global_size"),
                                   as_tuple3(n.local_size, f"node {i} local_size"))
            elif isinstance(n, GraphCopy):
                dev._check_range(n.dst, n.dst_offset, n.size, f"graph node {i} copy", "dst")
                dev._check_range(n.src, n.src_offset, n.size, f"graph node {i} copy", "src")
            elif isinstance(n, GraphWait):
                if not isinstance(n.signal, Signal) or not isinstance(n.value, int):
                    raise ProgramError(f"graph node {i}: GraphWait needs a Signal and an int, got "
                                       f"{n.signal!r}, {n.value!r}")
                if n.signal.device is not dev:
                    raise ProgramError(f"graph node {i}: the signal belongs to "
                                       f"{n.signal.device.name} (map it with map_signal)")
            else:
                raise ProgramError(f"graph node {i}: expected Launch, GraphCopy or GraphWait, "
                                   f"got {n!r}")

    def _fill_args(self, sizes: list[int]) -> list[KernArgs]:
        view = self._args_buf.cpu_view()
        out, off = [], 0
        for ln, size in zip(self.launches, sizes):
            block = (self._args_buf.va + off, view[off:off + size])
            out.append(ln.prg.fill_kernargs(ln.args, ln.global_size, ln.local_size, block))
            off += size
        return out

    def _build_segments(self) -> None:
        dev = self.device
        body: HWQueue | None = None
        barrier = False  # the body's cache barrier is in place
        copies: list[GraphCopy] = []
        args = iter(self.kernargs)
        for n in self.nodes:
            if isinstance(n, GraphCopy):
                if body is not None:
                    self._segments.append(body.bind())
                    body = None
                copies.append(n)
                continue
            if copies:
                self._segments.append(copies)
                copies = []
            if body is None:
                body, barrier = dev.compute_queue(), False
            if isinstance(n, GraphWait):
                var = Var(f"wait value {len(self._wait_vars)}")
                body.wait(n.signal, var).update({var: n.value})
                self._wait_vars.append((body, var))
                barrier = False  # what the wait releases may have been written meanwhile
            else:
                if not barrier:
                    body.memory_barrier()
                    barrier = True
                body.exec(n.prg, next(args), as_tuple3(n.global_size, "global_size"),
                          as_tuple3(n.local_size, "local_size"))
        if body is not None:
            self._segments.append(body.bind())
        if copies:
            self._segments.append(copies)

    # -------------------------------------------------------------- replay
    @overload
    def replay(self, updates: Mapping[int, Mapping[int, ArgValue]] | None = ...,
               wait: Literal[False] = ..., timeout_ms: float | None = ...,
               wait_values: Mapping[int, int] | None = ...) -> None: ...

    @overload
    def replay(self, updates: Mapping[int, Mapping[int, ArgValue]] | None = ...,
               *, wait: Literal[True], timeout_ms: float | None = ...,
               wait_values: Mapping[int, int] | None = ...) -> float: ...

    @overload
    def replay(self, updates: Mapping[int, Mapping[int, ArgValue]] | None,
               wait: Literal[True], timeout_ms: float | None = ...,
               wait_values: Mapping[int, int] | None = ...) -> float: ...

    @overload
    def replay(self, updates: Mapping[int, Mapping[int, ArgValue]] | None = ...,
               wait: bool = ..., timeout_ms: float | None = ...,
               wait_values: Mapping[int, int] | None = ...) -> float | None: ...

    def replay(self, updates: Mapping[int, Mapping[int, ArgValue]] | None = None,
               wait: bool = False, timeout_ms: float | None = None,
               wait_values: Mapping[int, int] | None = None) -> float | None:
        """Runs the graph again. `updates` maps a launch index (among the graph's launches) to
        {argument index: new value}; `wait_values` maps a wait index (among its GraphWaits) to a
        new value. With `wait`, blocks until done and returns the GPU time of the whole graph in
        seconds."""
        dev = self.device
        dev.check_usable()
        if updates or wait_values:
            self._check_updates(updates or {}, wait_values or {})
        with dev._submit:
            if updates or wait_values:
                if self._last:  # the previous replay may still be reading these arguments
                    last = self._last  # (nothing is applied yet: a Ctrl-C may end the wait)
                    dev._submit.interruptible(lambda: dev.timeline_signal.wait(last, timeout_ms))
                self._apply_updates(updates or {}, wait_values or {})
            self._check_live()
            v, stamps = self._submit_segments(wait)
            for wi, (body, var) in enumerate(self._wait_vars):
                node, sig = self._wait_nodes[wi]
                dev._gates[id(self), wi] = (f"graph node {node} (GraphWait {wi}, replay ending "
                                            f"at timeline value {v})", sig, body._vals[var])
        if not wait:
            return None
        dev.timeline_signal.wait(v, timeout_ms)
        assert stamps is not None
        return (stamps[1].timestamp - stamps[0].timestamp) / dev.clock_hz

    def _check_updates(self, updates: Mapping[int, Mapping[int, ArgValue]],
                       wait_values: Mapping[int, int]) -> None:
        """Validates every update before any is applied: a refused one changes nothing."""
        for li, changes in updates.items():
            if type(li) is not int or not 0 <= li < len(self.kernargs):
                raise ProgramError(f"graph has {len(self.kernargs)} launches, no launch {li!r}")
            ka = self.kernargs[li]
            scratch = memoryview(bytearray(len(ka.view)))
            for ai, value in changes.items():
                if type(ai) is not int or not 0 <= ai < len(ka.slots):
                    raise ProgramError(f"graph launch {li}: argument {ai!r} out of range (the "
                                       f"kernel has {len(ka.slots)})")
                try:
                    write_arg(scratch, ka.slots[ai], value, self.device)
                except ProgramError as e:
                    raise ProgramError(f"graph launch {li}: {e}") from None
        for wi, value in wait_values.items():
            if type(wi) is not int or not 0 <= wi < len(self._wait_vars):
                raise ProgramError(f"graph has {len(self._wait_vars)} waits, no wait {wi!r}")
            if type(value) is not int or value < 0:
                raise ProgramError(f"graph wait {wi}: the value must be an integer >= 0, got "
                                   f"{value!r}")

    def _apply_updates(self, updates: Mapping[int, Mapping[int, ArgValue]],
                       wait_values: Mapping[int, int]) -> None:
        undo: list[tuple[HWQueue, Var, int]] = []
        try:
            for wi, wv in wait_values.items():
                body, var = self._wait_vars[wi]
                undo.append((body, var, body._vals[var]))
                body.update({var: wv})
        except HCQError:
            for body, var, old in reversed(undo[:-1]):
                body.update({var: old})
            raise
        for li, changes in updates.items():
            for ai, value in changes.items():
                self.kernargs[li].set(ai, value)
                if isinstance(value, Buffer):
                    name = self._buffers.get((li, ai), (f"graph launch {li} argument {ai}",
                                                        value))[0]
                    self._buffers[li, ai] = (name, value)
                else:
                    self._buffers.pop((li, ai), None)

    def _check_live(self) -> None:
        for name, buf in self._buffers.values():
            if buf.freed or (buf.base is not None and buf.base.freed):
                raise ProgramError(f"{name}: {buf!r} was freed; the graph cannot run (its memory "
                                   "may belong to another allocation now). Pass a live buffer "
                                   "in replay's updates, or build a new graph")

    def _submit_segments(self, wait: bool) -> "tuple[int, tuple[Signal, Signal] | None]":
        dev = self.device
        tl = dev.timeline_signal
        last = len(self._segments) - 1
        v = self._last
        trace = dev._trace
        stamps = (self._t0, self._t1) if wait else None
        if trace is not None:
            h0, first = time.perf_counter(), dev.timeline_value + 1
            stamps = trace.graph_signals() or stamps
        for i, seg in enumerate(self._segments):
            v = dev.timeline_value + 1  # taken once the submission is built (submit_timeline)
            q = (dev.copy_queue() if isinstance(seg, list) else dev.compute_queue()).wait(tl, v - 1)
            if stamps is not None and i == 0:
                q.timestamp(stamps[0])
            if isinstance(seg, list):
                for c in seg:
                    if c.size:
                        q.copy(c.dst.va + c.dst_offset, c.src.va + c.src_offset, c.size)
            else:
                q.call(seg)
            if stamps is not None and i == last:
                q.timestamp(stamps[1])
            dev.submit_timeline(q.signal(tl, v), v)
            # Noted per segment: a Ctrl-C during the next segment's wait for ring space ends the
            # replay there, and what was submitted is still waited for before arguments change.
            self._last = v
        if trace is not None:
            trace.graph(self, first, v, h0, stamps if trace.profiling else None)
        return v, stamps

    def free(self) -> None:
        """Releases the graph's memory (after waiting for its last replay)."""
        if self._last:
            self.device.timeline_signal.wait(self._last)
        for seg in self._segments:
            if isinstance(seg, HWQueue):
                seg.unbind()
        self.device.free(self._args_buf)
        for s in (self._t0, self._t1):
            s.release()
