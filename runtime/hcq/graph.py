"""Graphs: launches, copies and signal waits recorded once and replayed cheaply.

Nodes name their dependencies (`after`: node indices or names; by default the node before, so a
plain list is a chain, as a CUDA stream would run it; `after=()` makes a node independent). A
node starts after every node it depends on has finished; no other order is promised (nodes of
different segments, or behind a wait, may still run one after another).

Recording writes every launch's kernel arguments into one persistent block, puts the nodes in a
dependency order (by depth, then by position) and cuts them into segments: a run of launches and
waits becomes one compute command body bound to GPU memory (`HWQueue.bind`); a run of copies
becomes one copy-engine submission. Inside a body, dependencies are enforced along the edges
only: a launch that depends on nothing launched since the body's last barrier is sent unordered
(it may overlap the others); a launch with one predecessor uses the driver's cheapest
predecessor-to-successor link (`HWQueue.exec_after`; NVIDIA: the predecessor's QMD schedules it,
and with `Launch.early_start` may do so before it completes; AMD: a barrier); anything else gets a
`barrier` first (AMD: CS_PARTIAL_FLUSH and a cache
invalidation; NVIDIA: WAIT_FOR_IDLE). Segments run one after the other on the device timeline, so
an edge between engines is always honoured (and nodes of different segments never overlap).

A replay submits each segment in order on the device timeline (wait for the previous value,
`call` the body, AMD: one INDIRECT_BUFFER packet, or the copies; signal the next value), so a
graph of launches only is one tiny submission. Those submissions are built on the first replay
around a variable for the timeline value and then only patched and handed over
(`HWQueue.resubmitter`; NVIDIA: GPFIFO entries laid out once), so a replay's cost before the
doorbell does not grow with the graph. Where the driver has one, each segment's submission is
one native call (`HWQueue.native_resubmitter`: NVIDIA's launch helper), which declines, writing
nothing, whenever the Python route has something to raise or wait for; a graph of several
segments, or with waits, makes its calls under one holding of the submission lock, so that its
replay stays one unit among other threads' submissions. An NVIDIA submission leaves out its wait
for the previous timeline value when the timeline has reached it already. The submissions are
built afresh while a profiler is attached (its own timestamps and hooks) and where timeline
values pass 32 bits. Updating arguments (and the values waits wait for) rewrites them in place,
after the previous replay has finished reading them; an update that is refused changes nothing.

Lifetimes: a replay refuses to run once a buffer one of its nodes uses was freed (the error names
the node and the argument): its memory may already belong to another allocation.
"""
from __future__ import annotations

import time
from array import array
from dataclasses import dataclass
from typing import (TYPE_CHECKING, Callable, Literal, Mapping, Optional, Sequence, Union,
                    overload)

from runtime.hcq.errors import HCQError, ProgramError
from runtime.hcq.memory import Buffer, round_up
from runtime.hcq.program import ArgValue, KernArgs, Program, write_arg
from runtime.hcq.queue import HWQueue, NativeReplay, Var, as_tuple3
from runtime.hcq.signal import Signal

if TYPE_CHECKING:
    from runtime.hcq.device import Device

_M32 = 0xFFFFFFFF


#: A reference to a graph node: its index in the node list, or its `name`.
NodeRef = Union[int, str]
#: What a node depends on: None for the node before it (none for the first), else the nodes.
After = Optional[Sequence[NodeRef]]


def _freeze_after(node: object) -> None:
    after = getattr(node, "after")
    if after is not None and not isinstance(after, tuple):
        if isinstance(after, (str, int)):
            after = (after,)
        object.__setattr__(node, "after", tuple(after))


@dataclass(frozen=True)
class Launch:
    """One kernel launch of a graph: arguments in the kernel's order, grid in workgroups.
    `after`: the nodes it depends on (indices or names; None: the node before it; () none);
    `name`: what other nodes' `after` may call it.

    `early_start`: a promise that the kernel calls `griddepcontrol.wait`
    (cudaGridDependencySynchronize) before it reads anything its predecessor wrote, so it may
    start while its predecessor still runs (programmatic dependent launch). Honoured only on an
    edge the graph links directly (`HWQueue.exec_after`: this launch has one predecessor, a
    launch in the same body) whose predecessor has no other successor, on a GPU that can express
    it (NVIDIA Hopper); everywhere else it is an ordinary edge: correct, just not faster. A
    kernel whose PTX is known and has no `griddepcontrol.wait` is refused; for a cubin the
    promise is not checked, and a kernel that breaks it may read stale data."""

    prg: Program
    args: tuple[ArgValue, ...]
    global_size: tuple[int, int, int] = (1, 1, 1)
    local_size: tuple[int, int, int] = (1, 1, 1)
    after: After = None
    name: Optional[str] = None
    early_start: bool = False

    def __post_init__(self) -> None:
        _freeze_after(self)


@dataclass(frozen=True)
class GraphCopy:
    """A copy between two buffers of the device, on the copy engine. `after` and `name` as for
    `Launch`."""

    dst: Buffer
    src: Buffer
    size: int
    dst_offset: int = 0
    src_offset: int = 0
    after: After = None
    name: Optional[str] = None

    def __post_init__(self) -> None:
        _freeze_after(self)


@dataclass(frozen=True)
class GraphWait:
    """The nodes that depend on this one wait until `signal` >= `value` (e.g. another stream's
    event); `replay(wait_values=...)` changes the value per replay. `after` and `name` as for
    `Launch`."""

    signal: "Signal"
    value: int
    after: After = None
    name: Optional[str] = None

    def __post_init__(self) -> None:
        _freeze_after(self)


Node = Union[Launch, GraphCopy, GraphWait]


class Graph:
    """Nodes recorded once, replayed with optional argument and wait-value updates."""

    def __init__(self, device: "Device", nodes: Sequence[Node]) -> None:
        if not nodes:
            raise ProgramError("a graph needs at least one node")
        self.device = device
        self.nodes = list(nodes)
        self._check_nodes()
        #: the nodes each node depends on (indices), and the order the nodes are recorded in
        self.deps = _resolve_deps(self.nodes)
        self.order = _dependency_order(self.nodes, self.deps)
        self.launches = [n for n in self.nodes if isinstance(n, Launch)]
        sizes = [round_up(ln.prg.kernargs_size(), 64) for ln in self.launches]
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
        # the replay's submissions, built on first use, without and with timestamps
        self._plans: dict[bool, list[Callable[[int], None]]] = {}
        # each segment's resubmission in one native call, where the driver has them all
        # (`HWQueue.native_resubmitter`), built with the plan
        self._native: dict[bool, tuple[NativeReplay, ...] | None] = {}
        # one native call replays the graph, with no lock taken (one segment, no gates to name)
        self._one_call = len(self._segments) == 1 and not self._wait_nodes
        # [timeline value of the latest replay]: a word, so the native replay notes it as part
        # of the submission (no Python step between them for a Ctrl-C to fall in)
        self._books = array("Q", [0])
        # (what to call it in an error, buffer) for every buffer the nodes use
        self._buffers: dict[tuple[int, int], tuple[str, Buffer]] = {}
        self._distinct: list[tuple[str, Buffer]] | None = None  # one entry per buffer, cached
        self._live: tuple[Buffer, ...] = ()  # their buffers, for the native replay's check
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

    @property
    def _last(self) -> int:
        """The timeline value of the latest replay (0: none yet)."""
        return self._books[0]

    @_last.setter
    def _last(self, value: int) -> None:
        self._books[0] = value

    # -------------------------------------------------------------- recording
    def _check_nodes(self) -> None:
        dev = self.device
        for i, n in enumerate(self.nodes):  # shapes first: nothing is allocated for a bad one
            if isinstance(n, Launch):
                if n.prg.device is not dev:
                    raise ProgramError(f"graph node {i}: {n.prg!r} is not a program of {dev.name}")
                n.prg.check_launch(as_tuple3(n.global_size, f"node {i} global_size"),
                                   as_tuple3(n.local_size, f"node {i} local_size"))
                if n.early_start:
                    n.prg.check_early_start(f"graph node {i}")
            elif isinstance(n, GraphCopy):
                dev.check_range(n.dst, n.dst_offset, n.size, f"graph node {i} copy", "dst")
                dev.check_range(n.src, n.src_offset, n.size, f"graph node {i} copy", "src")
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
        fresh = False  # caches must be invalidated before the body's next unordered launch
        # launches of the current body that no barrier has ordered yet: they may still run
        pending: set[int] = set()
        in_body: dict[int, KernArgs] = {}  # launch node -> its block, for the current body
        copies: list[GraphCopy] = []
        launch_index = {i: li for li, i in enumerate(
            i for i, n in enumerate(self.nodes) if isinstance(n, Launch))}
        wait_index = {i: wi for wi, (i, _) in enumerate(self._wait_nodes)}
        wait_vars: dict[int, tuple[HWQueue, Var]] = {}
        successors = [0] * len(self.nodes)
        for preds in self.deps:
            for p in preds:
                successors[p] += 1
        for i in self.order:
            n = self.nodes[i]
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
                body, fresh, pending, in_body = dev.compute_queue(), True, set(), {}
            preds = self.deps[i]
            if isinstance(n, GraphWait):
                if pending.intersection(preds):
                    body.barrier()
                    pending.clear()
                wi = wait_index[i]
                var = Var(f"wait value {wi}")
                body.wait(n.signal, var).update({var: n.value})
                wait_vars[wi] = (body, var)
                fresh = True  # what the wait releases may have been written meanwhile
                continue
            ka = self.kernargs[launch_index[i]]
            gsz = as_tuple3(n.global_size, "global_size")
            lsz = as_tuple3(n.local_size, "local_size")
            if not pending.intersection(preds):
                if fresh:
                    body.memory_barrier()
                    fresh = False
                body.exec(n.prg, ka, gsz, lsz, ordered=False)
            elif len(preds) == 1 and preds[0] in in_body:
                body.exec_after(in_body[preds[0]], n.prg, ka, gsz, lsz,
                                early_start=n.early_start and successors[preds[0]] == 1)
            else:
                body.barrier()
                pending.clear()
                fresh = False
                body.exec(n.prg, ka, gsz, lsz, ordered=False)
            pending.add(i)
            in_body[i] = ka
        if body is not None:
            self._segments.append(body.bind())
        if copies:
            self._segments.append(copies)
        self._wait_vars.extend(wait_vars[wi] for wi in range(len(self._wait_nodes)))

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
        if not updates and not wait_values and dev.tracer is None:
            fast = self._native.get(wait)
            if fast is not None and self._distinct is not None:  # (its buffers are known)
                v = fast[0](self._live) if self._one_call else self._replay_native(fast, wait)
                if v:
                    if not wait:
                        return None
                    dev.timeline_signal.wait(v, timeout_ms)
                    return (self._t1.timestamp - self._t0.timestamp) / dev.clock_hz
        dev.check_usable()
        if updates or wait_values:
            self._check_updates(updates or {}, wait_values or {})
        with dev.submit_lock:
            if updates or wait_values:
                if self._last:  # the previous replay may still be reading these arguments
                    last = self._last  # (nothing is applied yet: a Ctrl-C may end the wait)
                    dev.submit_lock.interruptible(lambda: dev.timeline_signal.wait(last, timeout_ms))
                self._apply_updates(updates or {}, wait_values or {})
            self._check_live()
            v, stamps = self._submit_segments(wait)
            self._watch_gates(v)
        if not wait:
            return None
        dev.timeline_signal.wait(v, timeout_ms)
        assert stamps is not None
        return (stamps[1].timestamp - stamps[0].timestamp) / dev.clock_hz

    def _replay_native(self, fast: tuple[NativeReplay, ...], wait: bool) -> int:
        """The segments' native calls under one holding of the submission lock, then the gates
        the graph's waits name; the replay's last timeline value, or 0 when the first call
        declined (nothing was submitted: the caller takes the Python route). A later segment
        declines only for room on its ring (the first call's checks hold for all of them under
        the lock, its value limit included): the Python route submits the rest, waiting for
        room."""
        dev = self.device
        live = self._live
        with dev.submit_lock:
            v = fast[0](live, True)
            if not v:
                return 0
            for k in range(1, len(fast)):
                w = fast[k](live, True)
                if not w:
                    for resubmit in self._plans[wait][k:]:
                        v = dev.resubmit_timeline(resubmit)
                        self._last = v
                    break
                v = w
            self._watch_gates(v)
        return v

    def _watch_gates(self, v: int) -> None:
        """Names each GraphWait of the replay ending at timeline value `v` for timeout reports."""
        dev = self.device
        for wi, (body, var) in enumerate(self._wait_vars):
            node, sig = self._wait_nodes[wi]
            dev.watch_gate((id(self), wi), f"graph node {node} (GraphWait {wi}, replay "
                           f"ending at timeline value {v})", sig, body.value(var))

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
                undo.append((body, var, body.value(var)))
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
                self._distinct = None
                self._live = ()

    def _check_live(self) -> None:
        distinct = self._distinct
        if distinct is None:  # each allocation once (slices live and die with their base)
            seen: dict[int, tuple[str, Buffer]] = {}
            for name, buf in self._buffers.values():
                seen.setdefault(id(buf.base or buf), (name, buf))
            distinct = self._distinct = list(seen.values())
            self._live = tuple(buf for _, buf in distinct)
        for name, buf in distinct:
            if buf.freed or (buf.base is not None and buf.base.freed):
                raise ProgramError(f"{name}: {buf!r} was freed; the graph cannot run (its memory "
                                   "may belong to another allocation now). Pass a live buffer "
                                   "in replay's updates, or build a new graph")

    def _submit_segments(self, wait: bool) -> "tuple[int, tuple[Signal, Signal] | None]":
        dev = self.device
        if dev.tracer is not None or dev.timeline_value + len(self._segments) > _M32:
            return self._submit_built(wait)
        plan = self._plans.get(wait)
        if plan is None:
            plan = self._plans[wait] = self._make_plan(wait)
        v = self._last
        for resubmit in plan:
            v = dev.resubmit_timeline(resubmit)
            self._last = v  # per segment, as in _submit_built
        return v, ((self._t0, self._t1) if wait else None)

    def _make_plan(self, wait: bool) -> "list[Callable[[int], None]]":
        """Each segment's submission built once around a variable for its timeline value (wait
        for it - 1, call the body or run the copies, signal it; with `wait`, timestamps into the
        graph's own signals), as resubmission functions (`HWQueue.resubmitter`): a replay
        rewrites the timeline values and hands the words over, with no per-node work."""
        dev = self.device
        tl = dev.timeline_signal
        last = len(self._segments) - 1
        plan = []
        natives: list[NativeReplay] = []
        for i, seg in enumerate(self._segments):
            var = Var(f"graph segment {i} timeline value")
            q = dev.copy_queue() if isinstance(seg, list) else dev.compute_queue()
            q.update({var: 1}).wait(tl, var - 1)  # bound before use: a wait may compare 32 bits
            if wait and i == 0:
                q.timestamp(self._t0)
            _segment_commands(q, seg)
            if wait and i == last:
                q.timestamp(self._t1)
            plan.append(q.signal(tl, var).resubmitter(var))
            # each value leaves room for the segments after it: when the first fits, all do
            fast = q.native_resubmitter(var, self._books, _M32 - (last - i))
            if fast is not None:
                natives.append(fast)
        self._native[wait] = tuple(natives) if len(natives) == len(plan) else None
        return plan

    def _submit_built(self, wait: bool) -> "tuple[int, tuple[Signal, Signal] | None]":
        """The replay's submissions built afresh: while a tracer is attached (its timestamp
        signals, its hooks) or where a timeline value may outgrow the 32 bits some engines'
        semaphores compare."""
        dev = self.device
        tl = dev.timeline_signal
        last = len(self._segments) - 1
        v = self._last
        trace = dev.tracer
        stamps = (self._t0, self._t1) if wait else None
        if trace is not None:
            h0, first = time.perf_counter(), dev.timeline_value + 1
            stamps = trace.graph_signals() or stamps
        for i, seg in enumerate(self._segments):
            v = dev.timeline_value + 1  # taken once the submission is built (submit_timeline)
            q = (dev.copy_queue() if isinstance(seg, list) else dev.compute_queue()).wait(tl, v - 1)
            if stamps is not None and i == 0:
                q.timestamp(stamps[0])
            _segment_commands(q, seg)
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
        self._plans.clear()  # they call the bodies: a later replay is refused building them
        self._native.clear()
        for seg in self._segments:
            if isinstance(seg, HWQueue):
                seg.unbind()
        self.device.free(self._args_buf)
        for s in (self._t0, self._t1):
            s.release()


def _segment_commands(q: HWQueue, seg: "HWQueue | list[GraphCopy]") -> None:
    """A replay segment's commands on `q`: its copies, or a call of its bound body."""
    if isinstance(seg, list):
        for c in seg:
            if c.size:
                q.copy(c.dst.va + c.dst_offset, c.src.va + c.src_offset, c.size)
    else:
        q.call(seg)


def _describe(nodes: Sequence[Node], i: int) -> str:
    name = nodes[i].name
    return f"node {i}" + (f" ({name!r})" if name is not None else "")


def _resolve_deps(nodes: Sequence[Node]) -> list[tuple[int, ...]]:
    """Each node's dependencies as sorted node indices; raises ProgramError naming the node for
    a bad name, an unknown node, a node that depends on itself, or a cycle."""
    names: dict[str, int] = {}
    for i, n in enumerate(nodes):
        if n.name is None:
            continue
        if not isinstance(n.name, str) or not n.name:
            raise ProgramError(f"graph node {i}: name must be a non-empty string, got {n.name!r}")
        if n.name in names:
            raise ProgramError(f"graph nodes {names[n.name]} and {i} are both named {n.name!r}; "
                               "names must be unique")
        names[n.name] = i
    deps: list[tuple[int, ...]] = []
    for i, n in enumerate(nodes):
        if n.after is None:
            deps.append((i - 1,) if i else ())
            continue
        out = set()
        for ref in n.after:
            if type(ref) is int:
                if not 0 <= ref < len(nodes):
                    raise ProgramError(f"graph {_describe(nodes, i)} depends on node {ref}, but "
                                       f"the graph has nodes 0 to {len(nodes) - 1}")
                j = ref
            elif isinstance(ref, str):
                if ref not in names:
                    raise ProgramError(f"graph {_describe(nodes, i)} depends on {ref!r}, but no "
                                       f"node has that name (names: {sorted(names)})")
                j = names[ref]
            else:
                raise ProgramError(f"graph {_describe(nodes, i)}: after= takes node indices or "
                                   f"names, got {ref!r}")
            if j == i:
                raise ProgramError(f"graph {_describe(nodes, i)} depends on itself")
            out.add(j)
        deps.append(tuple(sorted(out)))
    return deps


def _dependency_order(nodes: Sequence[Node], deps: list[tuple[int, ...]]) -> list[int]:
    """The nodes by depth (longest path from a node with no dependencies), then by index: a
    dependency order that groups independent nodes. Raises ProgramError naming a cycle."""
    n = len(deps)
    depth: list[int | None] = [None] * n
    state = [0] * n  # 0 new, 1 on the current path, 2 done
    for root in range(n):
        if state[root]:
            continue
        stack: list[tuple[int, int]] = [(root, 0)]
        path: list[int] = []
        while stack:
            i, k = stack.pop()
            if k == 0:
                state[i] = 1
                path.append(i)
            if k < len(deps[i]):
                stack.append((i, k + 1))
                j = deps[i][k]
                if state[j] == 1:
                    cyc = path[path.index(j):] + [j]
                    raise ProgramError("graph nodes form a cycle: " + " depends on ".join(
                        _describe(nodes, c) for c in cyc))
                if state[j] == 0:
                    stack.append((j, 0))
                continue
            depth[i] = 1 + max((depth[j] or 0 for j in deps[i]), default=-1)
            state[i] = 2
            path.pop()
    return sorted(range(n), key=lambda i: (depth[i], i))
