"""The device: timeline, memory, queues, copies, synchronization and teardown.

A driver subclasses `Device`, opens the hardware in its constructor and then calls `_init_core()`,
which creates the pieces every vendor shares: the signal pool, the timeline signal, the
kernel-argument arena and (lazily) the pinned staging buffers for copies.

Ordering: every submission the device makes itself (copies, launches, graph replays) waits for
timeline value v-1 and signals v, so work is executed in submission order across the compute and
copy engines. User-built queues are free to do otherwise.
"""
from __future__ import annotations

import collections
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from runtime.hcq.errors import DeviceClosed, DeviceFault, DeviceNotFound, HCQError
from runtime.hcq.memory import (PAGE_B, Allocator, Buffer, BufferSpec, MemKind, RingArena,
                                SlotPool)
from runtime.hcq.signal import SIGNAL_B, Signal

if TYPE_CHECKING:
    from runtime.hcq.graph import Graph, Launch
    from runtime.hcq.program import Program
    from runtime.hcq.queue import HWQueue
    from runtime.hcq.seam import OSSeam

_SIGNAL_POOL_B = 64 * 1024  # 4096 signals per page group
_PIPELINE_MIN_B = 256 * 1024  # smallest piece of a staged copy split for pipelining
_PIPELINE_MAX_B = 4 << 20     # largest copy split so


_DEVICE_NAME = re.compile(r"^(mock-)?(amd|nv)(?::(\d+))?$")
_VENDOR_NAMES = {"amd": "AMD", "nv": "NVIDIA"}


@dataclass(frozen=True)
class DeviceName:
    """A parsed device name: "nv:1" is DeviceName("nv", False, 1), "mock-amd" DeviceName("amd",
    True, 0)."""

    vendor: str    # "amd" or "nv"
    mock: bool     # the mock GPU of that vendor
    index: int


def parse_device_name(name: str, vendor: str | None = None) -> DeviceName:
    """Parses "amd:N", "nv:N", "mock-amd:N" or "mock-nv:N" (":N" defaults to 0); with `vendor`,
    only that vendor's names. Raises `DeviceNotFound` naming the accepted forms."""
    m = _DEVICE_NAME.match(name)
    if m is None or (vendor is not None and m.group(2) != vendor):
        if vendor is None:
            raise DeviceNotFound(f"unknown device name {name!r} (expected amd:N, nv:N, mock-amd:N "
                                 "or mock-nv:N)")
        raise DeviceNotFound(f"{name!r} is not an {_VENDOR_NAMES[vendor]} device name "
                             f"({vendor}:N or mock-{vendor}:N)")
    return DeviceName(m.group(2), m.group(1) is not None, int(m.group(3) or 0))


class Device:
    """Base class of GPU devices. See the module docstring for what drivers provide."""

    #: seconds before a wait gives up when the caller names no timeout
    default_timeout_ms: float = 30_000.0
    #: the operating-system seam the driver talks through (set by each driver's constructor)
    os: OSSeam

    def __init__(self, name: str, *, staging_B: int = 8 << 20,
                 kernarg_arena_B: int = 1 << 20) -> None:
        self.name = name
        self.arch = "unknown"
        self.clock_hz = 100_000_000.0
        self.closed = False
        self.staging_B, self.kernarg_arena_B = staging_B, kernarg_arena_B
        self.timeline_value = 0  # last value handed out by next_timeline()
        self._fault: DeviceFault | None = None
        self._signal_pools: list[SlotPool] = []
        self._staging: list[list[Any]] = []  # [buffer, timeline value that frees it]
        self._arena: RingArena | None = None
        self._compiler: Any = None
        self.allocator: Allocator
        self.timeline_signal: Signal

    def _init_core(self, allocator: Allocator) -> None:
        """Called by the driver once its hardware is open."""
        self.allocator = allocator
        self.timeline_signal = self.new_signal(0)
        self.timeline_value = 0

    # ------------------------------------------------------------------ memory
    def alloc(self, size: int, *, kind: MemKind = MemKind.VRAM, cpu_access: bool = False,
              uncached: bool = False, executable: bool = False) -> Buffer:
        """Allocates `size` bytes of device memory (VRAM by default) mapped at a GPU address."""
        self.check_usable()
        return self.allocator.alloc(size, BufferSpec(kind, cpu_access, uncached, executable))

    def free(self, buf: Buffer) -> None:
        """Frees a buffer from `alloc`. The caller makes sure the GPU no longer uses it."""
        if self.closed:
            raise DeviceClosed(f"{self.name} is closed")
        self.allocator.free(buf)

    def new_signal(self, value: int = 0) -> Signal:
        """A fresh 16-B signal in uncached memory, set to `value`."""
        for pool in self._signal_pools:
            if pool.free_count:
                break
        else:
            buf = self.alloc(_SIGNAL_POOL_B, kind=MemKind.GTT, cpu_access=True, uncached=True)
            pool = SlotPool(buf, SIGNAL_B)
            self._signal_pools.append(pool)
        off = pool.take()
        sig = Signal(self, pool.buf.slice(off, SIGNAL_B), off)
        sig.value, sig.timestamp = value, 0
        return sig

    def _release_signal(self, sig: Signal) -> None:
        for pool in self._signal_pools:
            if sig.buf.base is pool.buf:
                pool.give(sig._pool_offset or 0)
                return

    def alloc_kernargs(self, size: int) -> Buffer:
        """Memory for launch blocks (kernel arguments, and on NVIDIA the QMDs): written by the
        CPU, read by the GPU at every launch. Here uncached host memory; a driver whose GPU reads
        system memory slowly returns CPU-visible VRAM instead."""
        return self.alloc(size, kind=MemKind.GTT, cpu_access=True, uncached=True)

    def _kernarg_arena(self) -> RingArena:
        if self._arena is None:
            self._arena = RingArena(self.alloc_kernargs(self.kernarg_arena_B))
        return self._arena

    # ------------------------------------------------------------------ queues and programs
    def compute_queue(self) -> "HWQueue":
        """A new command builder for the compute engine."""
        raise NotImplementedError(f"{type(self).__name__} must implement compute_queue")

    def copy_queue(self) -> "HWQueue":
        """A new command builder for the copy engine."""
        raise NotImplementedError(f"{type(self).__name__} must implement copy_queue")

    def program(self, lib: bytes, name: str) -> "Program":
        """Loads kernel `name` from the code object `lib`."""
        raise NotImplementedError(f"{type(self).__name__} must implement program")

    @property
    def executes_kernels(self) -> bool:
        """Whether launched kernels really run: False on a mock GPU that models launches (arguments,
        queues, completion) without executing the kernel's code, as the NVIDIA mock does."""
        return self.os.executes_kernels

    @property
    def compiler(self) -> Any:
        """The vendor compiler (clang for AMD, NVRTC for NVIDIA), created on first use."""
        if self._compiler is None:
            self._compiler = self._make_compiler()
        return self._compiler

    def _make_compiler(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no compiler")

    def graph(self, launches: Sequence["Launch"]) -> "Graph":
        """Records `launches` for cheap replay."""
        from runtime.hcq.graph import Graph
        return Graph(self, launches)

    # ------------------------------------------------------------------ timeline
    def next_timeline(self) -> int:
        """Reserves the next timeline value (a submission waits for it minus one and signals it)."""
        self.timeline_value += 1
        return self.timeline_value

    def synchronize(self, timeout_ms: float | None = None) -> None:
        """Waits until everything the device submitted has completed, then asks the driver whether
        the GPU reported a fault (work submitted outside the timeline may have faulted)."""
        self.check_usable()
        self.timeline_signal.wait(self.timeline_value, timeout_ms)
        self.check_fault()

    # ------------------------------------------------------------------ copies
    def _staging_bufs(self) -> list[list[Any]]:
        if not self._staging:
            # Two buffers: the CPU fills one while the copy engine drains the other.
            for _ in range(2):
                buf = self.alloc(self.staging_B, kind=MemKind.GTT, cpu_access=True)
                self._staging.append([buf, 0])
        return self._staging

    def copyin(self, dst: Buffer, src: Any, dst_offset: int = 0) -> None:
        """Copies host bytes (any buffer-protocol object) into `dst` at `dst_offset` through pinned
        staging buffers and the copy engine. Returns once `src` may be reused; the copy is ordered
        before any later submission of this device."""
        mv = memoryview(src).cast("B")
        n = len(mv)
        self._check_range(dst, dst_offset, n)
        if n == 0:
            return
        tl = self.timeline_signal
        off = 0
        step = self._copy_chunk(n)
        for st in self._cycle(n, step):
            chunk = min(step, n - off)
            buf, busy = st
            if busy:
                tl.wait(busy)
            self._host_copy(buf.cpu_view()[:chunk], mv[off:off + chunk])
            st[1] = self._submit_copy(dst.va + dst_offset + off, buf.va, chunk)
            off += chunk

    def copyout(self, dst: Any, src: Buffer, src_offset: int = 0) -> None:
        """Copies `len(dst)` bytes from `src` at `src_offset` into a writable host buffer, through
        the copy engine and pinned staging buffers (two chunks in flight). Returns when `dst` is
        filled."""
        mv = memoryview(dst).cast("B")
        n = len(mv)
        self._check_range(src, src_offset, n)
        if n == 0:
            return
        tl = self.timeline_signal
        pending: collections.deque[tuple[list[Any], int, int, int]] = collections.deque()
        off = 0
        stages = self._staging_bufs()
        step = self._copy_chunk(n)
        i = 0
        while off < n or pending:
            if off < n and len(pending) < len(stages):
                st = stages[i % len(stages)]
                i += 1
                chunk = min(step, n - off)
                if st[1]:
                    tl.wait(st[1])
                v = st[1] = self._submit_copy(st[0].va, src.va + src_offset + off, chunk)
                pending.append((st, off, chunk, v))
                off += chunk
                continue
            st, doff, chunk, v = pending.popleft()
            tl.wait(v)
            self._host_copy(mv[doff:doff + chunk], st[0].cpu_view()[:chunk])

    def _host_copy(self, dst: memoryview, src: memoryview) -> None:
        """Copies bytes between user memory and a staging buffer (same length). A driver may
        override it, e.g. to split large copies across threads."""
        dst[:] = src

    def transfer(self, dst: Buffer, src: Buffer, size: int, dst_offset: int = 0,
                 src_offset: int = 0) -> None:
        """Copies `size` bytes between two device buffers on the copy engine (ordered, not
        waited)."""
        self._check_range(dst, dst_offset, size)
        self._check_range(src, src_offset, size)
        if size == 0:
            return
        self._submit_copy(dst.va + dst_offset, src.va + src_offset, size)

    def _submit_copy(self, dst_va: int, src_va: int, size: int) -> int:
        """Submits one timeline copy (wait for the previous value, copy, signal the next) on the
        copy queue; returns the value it signals. Drivers may replace it with a template."""
        v = self.next_timeline()
        tl = self.timeline_signal
        self.copy_queue().wait(tl, v - 1).copy(dst_va, src_va, size).signal(tl, v).submit()
        return v

    def _cycle(self, n: int, step: int) -> list[list[Any]]:
        stages = self._staging_bufs()
        count = -(-n // step)
        return [stages[i % len(stages)] for i in range(count)]

    def _copy_chunk(self, n: int) -> int:
        """Bytes per staged chunk of an `n`-byte copy: the staging size, but a copy of 512 KiB to
        4 MiB goes in up to four pieces of at least 256 KiB, so that the host's memcpy of each
        piece overlaps the copy engine's transfer of the one before. (Larger copies are already
        pipelined across staging buffers, and drivers may split their memcpy across threads.)"""
        if n > _PIPELINE_MAX_B:
            return self.staging_B
        return min(self.staging_B, max(_PIPELINE_MIN_B, -(-n // 4 // PAGE_B) * PAGE_B))

    def _check_range(self, buf: Buffer, offset: int, size: int) -> None:
        self.check_usable()
        buf._check_live()
        if offset < 0 or offset + size > buf.size:
            raise HCQError(f"range [{offset:#x}, +{size:#x}) is outside {buf!r}")

    # ------------------------------------------------------------------ faults and state
    def check_usable(self) -> None:
        """Raises if the device was closed or has faulted (the same fault error every time)."""
        if self._fault is not None:
            raise self._fault
        if self.closed:
            raise DeviceClosed(f"{self.name} is closed")

    def check_fault(self) -> None:
        """Asks the driver whether the GPU reported a fault; raises (and remembers) it if so."""
        if self._fault is None and not self.closed:
            fault = self._poll_fault()
            if fault is not None:
                self._fault = fault
        self.check_usable()

    def _note_exception(self, e: BaseException) -> None:
        if isinstance(e, DeviceFault) and self._fault is None:
            self._fault = e

    def describe_state(self) -> str:
        """Human-readable state for timeout and fault reports."""
        try:
            done = self.timeline_signal.value
        except ValueError:
            done = -1
        lines = [f"{self.name}: timeline completed {done} of {self.timeline_value} submitted"]
        lines += ["  " + ln for ln in self._describe_queues()]
        return "\n".join(lines)

    # ------------------------------------------------------------------ driver hooks
    def _poll_fault(self) -> DeviceFault | None:
        """Driver hook: a fault the hardware reported since the last call, or None."""
        return None

    def _describe_queues(self) -> list[str]:
        """Driver hook: one line per hardware queue (pointers, what it is blocked on)."""
        return []

    def _sleep_for_signal(self, sig: Signal, value: int, timeout_ms: float) -> None:
        """Driver hook: sleep until the GPU may have updated `sig` (an interrupt) or
        `timeout_ms`."""
        raise NotImplementedError(f"{type(self).__name__} must implement _sleep_for_signal")

    def _release_hw(self) -> None:
        """Driver hook: destroy queues and events, free all memory, close descriptors, in that
        order."""
        raise NotImplementedError(f"{type(self).__name__} must implement _release_hw")

    # ------------------------------------------------------------------ teardown
    def close(self) -> None:
        """Waits for outstanding work (unless the device faulted) and releases every kernel object
        the device made: queues, events, memory mappings and allocations, file descriptors."""
        if self.closed:
            return
        try:
            if self._fault is None:
                try:
                    self.synchronize(timeout_ms=min(self.default_timeout_ms, 10_000.0))
                except HCQError:
                    pass  # a hung or faulted device is still torn down; its error was reported
        finally:
            self._staging.clear()
            self._arena = None
            self._signal_pools.clear()
            try:
                self._release_hw()
            finally:
                self.closed = True

    def __enter__(self) -> "Device":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.arch})"
