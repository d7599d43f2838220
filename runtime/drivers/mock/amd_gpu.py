"""The mock AMD GPU: its memory, doorbells, clock, interrupts, fault reporting, and the queue
processors (PM4 in `amd_pm4`, SDMA in `amd_sdma`) that consume the rings the driver writes.

Queues run on the GPU's own thread (`runtime.drivers.mock.engine`): a doorbell records the new
write pointer and wakes it, and returns. Each pass runs every queue until its ring is empty, it
blocks on a wait, or a dispatch has used its time slice; blocked queues are polled, so a signal
written by one engine (or by the host) releases a wait on the other. In the deterministic mode
(HCQ_MOCK_SYNC=1) the queues run inside the doorbell write and whenever the mock kernel lets the
GPU make progress (every WAIT_EVENTS) instead.

A packet real hardware would not accept (unknown opcode, misaligned or unmapped address, a wait that
can never be satisfied, a malformed dispatch) stops its queue: the report, which names the queue,
the ring position and the decoded packet, goes to the mock kernel log, and the KFD
hardware-exception (or, for page faults, memory) event fires with its exception data, as amdkfd does
on a real fault.
"""
from __future__ import annotations

import collections
import struct
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from runtime.drivers.mock.engine import EngineThread, sync_from_env
from runtime.drivers.mock.memory import MockMemory, PageFault

if TYPE_CHECKING:
    from runtime.drivers.amd.arch import AMDArch
    from runtime.drivers.mock.amd_kfd import MockKfdDriver, MockPart

DOORBELL_SLICE_B = 0x2000


class MockGPUError(Exception):
    """A packet the hardware would reject; the message points at the packet. `va` is the faulting
    address when the cause is a page fault."""

    def __init__(self, msg: str, va: int | None = None) -> None:
        super().__init__(msg)
        self.va = va


@dataclass
class DispatchLogEntry:
    """One executed dispatch: the record handed to the kernel executor and what it reported."""

    record: Any
    stats: Any


@dataclass
class KernelLaunch:
    """One dispatch of a kernel the mock does not execute, as a kernel model receives it
    (`MockAMDGPU.register_kernel`): the COMPUTE_* registers it was dispatched with, and helpers
    to read its arguments and reach GPU memory."""

    gpu: "MockAMDGPU"
    pgm_addr: int
    grid: tuple[int, int, int]               # workgroups
    block: tuple[int, int, int]              # work-items per workgroup
    user_data: tuple[int, ...]               # COMPUTE_USER_DATA_* (the user SGPRs)
    kernarg_sgpr: int                        # the first user SGPR of the kernarg pointer
    #: the byte ranges the model reached through `array` (host_races reports only those)
    touched: list[tuple[int, int]] = field(default_factory=list)

    @property
    def kernarg_va(self) -> int:
        """The kernel-argument segment's address, from the user SGPR pair named at
        registration."""
        i = self.kernarg_sgpr
        return self.user_data[i] | self.user_data[i + 1] << 32

    def param(self, offset: int, fmt: str) -> Any:
        """An argument at `offset` of the kernel-argument segment (`struct` format `fmt`)."""
        size = struct.calcsize("<" + fmt)
        raw = bytes(self.gpu.mem.view(self.kernarg_va + offset, size, "kernarg read"))
        return struct.unpack("<" + fmt, raw)[0]

    def array(self, va: int, dtype: Any, count: int) -> np.ndarray:
        """`count` elements at GPU address `va` as a writable numpy view of GPU memory (an
        unmapped address raises the page fault the queue reports)."""
        dt = np.dtype(dtype)
        self.touched.append((va, va + count * dt.itemsize))
        return self.gpu.mem.view(va, count * dt.itemsize, "kernel access").view(dt)


@dataclass
class MockAMDGPU:
    """One GPU of the mock machine, of the processor `part` names (amd_kfd.PARTS)."""

    driver: "MockKfdDriver"
    node_id: int
    gpu_id: int
    render_minor: int
    vram_B: int
    max_copy_B: int
    gc_bases: tuple[int, ...]
    arch: "AMDArch | None" = None   # the architecture record it runs by (amd_kfd.py)
    part: "MockPart | None" = None  # what its topology node presents
    gfx_target_version: int = 0
    mem: MockMemory = field(default_factory=MockMemory)
    doorbells: np.ndarray = field(default_factory=lambda: np.zeros(DOORBELL_SLICE_B, np.uint8))
    queues: dict[int, Any] = field(default_factory=dict)   # doorbell byte offset -> processor
    vram_used: int = 0
    #: the latest executed dispatches (at most `keep_dispatches`; `dispatch_count` counts all)
    dispatches: list[DispatchLogEntry] = field(default_factory=list)
    keep_dispatch_log: bool = True
    # kernel models of a part whose kernels the mock does not execute: entry address ->
    # (model, first user SGPR of the kernarg pointer)
    kernels: dict[int, tuple[Callable[[KernelLaunch], None], int]] = \
        field(default_factory=dict)
    keep_dispatches: int = 256
    dispatch_count: int = 0
    #: deterministic mode: queues run inside the doorbell write (runtime.drivers.mock.engine)
    sync: bool = field(default_factory=sync_from_env)

    @property
    def executes_kernels(self) -> bool:
        """Whether dispatches run the kernel's code (the RDNA3 interpreter) rather than a
        registered kernel model."""
        return self.part is None or self.part.executes_kernels

    def register_kernel(self, pgm_addr: int, model: Callable[[KernelLaunch], None],
                        kernarg_sgpr: int) -> None:
        """Runs `model` for every dispatch of the kernel whose code starts at `pgm_addr`, on a
        part whose kernels the mock does not execute; `kernarg_sgpr` is the first user SGPR of
        the kernarg pointer (the descriptor's user SGPR layout)."""
        self.kernels[pgm_addr] = (model, kernarg_sgpr)

    def __post_init__(self) -> None:
        self._rung: collections.deque[tuple[int, int]] = collections.deque()
        self.mem.races = getattr(self.driver.os, "host_races", None)
        self.engine = EngineThread(f"mock-amdgpu-{self.gpu_id:#x}", self.driver.os.lock,
                                   self._engine_step,
                                   self.driver.os.wake_waiters, self.driver.os.host_entries)

    @property
    def async_doorbell(self) -> bool:
        """Whether a doorbell store returns before the GPU runs (no mock-kernel lock needed)."""
        return not self.sync

    # ------------------------------------------------------------------ clocks and interrupts
    @staticmethod
    def clock() -> int:
        """The 100 MHz GPU clock counter (RELEASE_MEM DATA_SEL=3, SDMA TIMESTAMP)."""
        return time.perf_counter_ns() // 10

    def interrupt(self, ctxid: int) -> None:
        """An end-of-pipe or TRAP interrupt carrying `ctxid` (amdkfd: signal event by partial
        id)."""
        self.driver.signal_event_interrupt(ctxid)

    def fault(self, report: str, va: int | None = None) -> None:
        """Logs a fault report and fires the process's exception events."""
        self.driver.os.log_kernel(f"mock amdgpu {self.gpu_id:#x}: {report}")
        self.driver.raise_exception(self, va)

    # ------------------------------------------------------------------ queues
    def doorbell_rung(self, offset: int, value: int) -> None:
        """A CPU store to a doorbell: update that queue's write pointer and run the GPU (at once in
        the deterministic mode, else on the GPU's thread)."""
        if not self.sync:
            self._rung.append((offset, value))
            self.engine.kick()
            return
        self._apply_doorbell(offset, value)
        self.run()

    def _apply_doorbell(self, offset: int, value: int) -> None:
        q = self.queues.get(offset % DOORBELL_SLICE_B)
        if q is None:
            self.driver.os.log_kernel(f"mock amdgpu {self.gpu_id:#x}: doorbell {offset:#x} "
                                      f"rung with {value:#x} but no queue uses it (ignored)")
            return
        try:
            q.set_wptr(value)
        except MockGPUError as e:  # the queue faults, as hardware would; the store returns
            q._fault(str(e), e.va)

    def _engine_step(self) -> tuple[bool, bool, bool]:
        """One pass of the GPU's thread (under the mock kernel's lock): the doorbells rung since
        the last, then every queue once."""
        progress = False
        while self._rung:
            self._apply_doorbell(*self._rung.popleft())
            progress = True
        for q in list(self.queues.values()):
            if q.step():
                progress = True
        blocked = running = False
        for q in self.queues.values():
            if q.faulted is None:
                if getattr(q, "_running", None) is not None:
                    running = True
                elif q.blocked is not None or q.wptr_dw != q.rptr_dw:
                    blocked = True
        return progress or running, blocked or running, bool(self.queues)

    def idle(self) -> bool:
        """Nothing left that can run now: every queue is empty, faulted or waiting on memory
        (call with the mock kernel's lock held)."""
        if self._rung:
            return False
        return all(q.faulted is not None or q.wptr_dw == q.rptr_dw
                   or (q.blocked is not None and getattr(q, "_running", None) is None)
                   for q in self.queues.values())

    def run(self) -> None:
        """Runs every queue until none can make progress."""
        progress = True
        while progress:
            progress = False
            for q in list(self.queues.values()):
                if q.step():
                    progress = True

    def record_dispatch(self, record: Any, stats: Any) -> None:
        self.dispatch_count += 1
        if self.keep_dispatch_log:
            self.dispatches.append(DispatchLogEntry(record, stats))
            if len(self.dispatches) > 2 * self.keep_dispatches:  # bounded, trimmed in batches
                del self.dispatches[:-self.keep_dispatches]


class QueueProcessor:
    """What PM4 and SDMA processors share: ring access, pointers, blocking and faults."""

    kind = "queue"

    def __init__(self, gpu: MockAMDGPU, queue_id: int, ring_va: int, ring_B: int, rptr_va: int,
                 wptr_va: int) -> None:
        self.gpu, self.queue_id = gpu, queue_id
        self.ring_va, self.ring_B = ring_va, ring_B
        self.rptr_va, self.wptr_va = rptr_va, wptr_va
        # Resolved once: the driver keeps the ring mapped while the queue exists.
        self.ring = gpu.mem.view(ring_va, ring_B, "read").view(np.uint32)
        self.size_dw = ring_B // 4
        self.rptr_dw = 0   # monotonic, in dwords
        self.wptr_dw = 0
        self.blocked: str | None = None
        self.faulted: str | None = None

    def set_wptr(self, value: int) -> None:
        raise NotImplementedError

    def step(self) -> bool:
        """Executes what it can; True if anything was consumed."""
        if self.faulted is not None:
            return False
        try:
            return self._run()
        except PageFault as e:
            self._fault(str(e), e.va)
        except MockGPUError as e:
            self._fault(str(e), e.va)
        return False

    def _run(self) -> bool:
        raise NotImplementedError

    def _fault(self, msg: str, va: int | None) -> None:
        self.faulted = f"{self.kind} queue {self.queue_id} at ring dword {self.rptr_dw}: {msg}"
        self.gpu.fault(self.faulted, va)

    def ring_dwords(self, pos: int, n: int) -> list[int]:
        """`n` dwords from monotonic position `pos`, wrapping around the ring."""
        start = pos % self.size_dw
        if start + n <= self.size_dw:
            return self.ring[start:start + n].tolist()
        first = self.size_dw - start
        return self.ring[start:].tolist() + self.ring[:n - first].tolist()

    def describe(self) -> str:
        state = self.faulted or (f"blocked: {self.blocked}" if self.blocked else "idle")
        return f"{self.kind} queue {self.queue_id}: rptr {self.rptr_dw} wptr {self.wptr_dw}, " \
            f"{state}"


def check_wait_possible(func: int, ref: int, mask: int, where: str) -> None:
    """Rejects compares that no memory value can satisfy, since the queue would hang forever.
    Functions as in nvd.h's WAIT_REG_MEM_FUNCTION comment: 0 always, 1 <, 2 <=, 3 ==, 4 !=, 5 >=, 6
    >."""
    masked_max = mask
    if func > 6:
        raise MockGPUError(f"{where}: compare function {func} does not exist (0..6)")
    if func == 1:
        impossible = ref == 0                       # (v & mask) < 0
    elif func == 3:
        impossible = bool(ref & ~mask & 0xFFFFFFFF)  # bits outside the mask can never match
    elif func == 4:
        impossible = mask == 0 and ref == 0         # 0 != 0
    elif func == 5:
        impossible = ref > masked_max               # (v & mask) >= ref > mask
    elif func == 6:
        impossible = ref >= masked_max              # (v & mask) > ref >= mask
    else:
        impossible = False
    if impossible:
        raise MockGPUError(f"{where}: the wait can never complete: (value & {mask:#x}) "
                           f"{['always', '<', '<=', '==', '!=', '>=', '>'][func]} {ref:#x}")


def compare(func: int, value: int, ref: int) -> bool:
    """WAIT_REG_MEM / POLL_REGMEM compare of a masked value with the reference."""
    if func == 0:
        return True
    if func == 1:
        return value < ref
    if func == 2:
        return value <= ref
    if func == 3:
        return value == ref
    if func == 4:
        return value != ref
    if func == 5:
        return value >= ref
    return value > ref
