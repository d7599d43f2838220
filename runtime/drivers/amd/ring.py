"""KFD user-mode queues: a ring buffer the CPU writes, read/write pointers, and a doorbell.

PM4 (compute): the write pointer is a monotonic count of dwords; the command processor reports its
read pointer as a dword offset in the ring. SDMA: both pointers are monotonic u64 *byte* offsets
(amdgpu sdma_v6_0.c shifts its dword pointer left by 2), and a packet must not wrap around the ring
end, so the tail is padded with NOPs (as tinygrad does). In both cases the CPU stores the new write
pointer to the write-pointer word first and then rings the doorbell with it.
"""
from __future__ import annotations

import time
from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from runtime.hcq.errors import QueueError
from runtime.hcq.memory import Buffer
from runtime.hcq.seam import Doorbell

if TYPE_CHECKING:
    from runtime.drivers.amd.device import AMDDevice

RPTR_OFFSET_B = 0   # in the queue's pointer page
WPTR_OFFSET_B = 64  # its own cache line, away from the GPU-written read pointer


@dataclass
class QueueMemory:
    """The buffers behind one hardware queue (kept to free them after the queue is destroyed)."""

    ring: Buffer
    pointers: Buffer
    eop: Buffer | None = None
    ctx_save: Buffer | None = None


class HwRing:
    """One KFD queue. `put` appends a command stream and rings the doorbell."""

    def __init__(self, device: "AMDDevice", kind: str, queue_id: int, mem: QueueMemory,
                 doorbell: Doorbell, nop: int, decode: Callable[[list[int]], str]) -> None:
        self.device, self.kind, self.queue_id, self.mem = device, kind, queue_id, mem
        self.doorbell = doorbell
        self.ring = mem.ring.cpu_view().cast("I")
        self.size_dw = len(self.ring)
        if self.size_dw & (self.size_dw - 1):
            raise QueueError(f"ring of {self.size_dw} dwords is not a power of two")
        ptrs = mem.pointers.cpu_view()
        self._rptr = ptrs[RPTR_OFFSET_B:RPTR_OFFSET_B + 8].cast("Q")
        self._wptr = ptrs[WPTR_OFFSET_B:WPTR_OFFSET_B + 8].cast("Q")
        self.wptr_dw = 0
        self._bytes = kind == "sdma"
        self._nop = nop
        self._decode = decode

    # -------------------------------------------------------------- pointers
    def rptr_dw(self) -> int:
        """The engine's read position as a dword offset in the ring."""
        r = self._rptr[0]
        return ((r >> 2) if self._bytes else r) % self.size_dw

    def pending_dw(self) -> int:
        """Dwords written but not yet consumed."""
        return (self.wptr_dw - self.rptr_dw()) % self.size_dw

    # -------------------------------------------------------------- submission
    def put(self, cmds: array) -> None:
        """Copies `cmds` into the ring (waiting for space), publishes the write pointer, rings."""
        n = len(cmds)
        size = self.size_dw
        if n >= size // 2:
            raise QueueError(f"{n} dwords do not fit the {self.kind} ring ({size} dwords); "
                             "bind() the queue to submit it as an indirect buffer")
        start = self.wptr_dw % size
        if self._bytes and start + n > size:
            pad = size - start  # SDMA packets must not straddle the ring end
            self._wait_space(pad + n)
            self.ring[start:size] = array("I", (self._nop,)) * pad
            self.wptr_dw += pad
            start = 0
        else:
            self._wait_space(n)
        ring = self.ring
        if start + n <= size:
            ring[start:start + n] = cmds
        else:  # PM4 may wrap: the command processor reads the ring circularly
            first = size - start
            ring[start:size] = cmds[:first]
            ring[0:n - first] = cmds[first:]
        self.wptr_dw += n
        wptr = self.wptr_dw * 4 if self._bytes else self.wptr_dw
        self._wptr[0] = wptr
        self.doorbell.ring(wptr)

    def _wait_space(self, n: int) -> None:
        if self.pending_dw() + n < self.size_dw:
            return
        # Nothing of the submission is in the ring yet: a Ctrl-C during the wait is raised at once.
        self.device.submit_lock.interruptible(lambda: self._wait_for_room(n))

    def _wait_for_room(self, n: int) -> None:
        dev = self.device
        deadline = time.perf_counter() + dev.default_timeout_ms / 1000.0
        while self.pending_dw() + n >= self.size_dw:
            dev.check_fault()
            if time.perf_counter() > deadline:
                raise QueueError(f"{self.kind} ring full: the engine consumed nothing for "
                                 f"{dev.default_timeout_ms:.0f} ms\n{dev.describe_state()}")
            dev._idle_wait(2.0)

    # -------------------------------------------------------------- state
    def describe(self) -> str:
        """One line: pointers and the packet the engine is at (when it has work pending)."""
        rptr, pending = self.rptr_dw(), self.pending_dw()
        unit = f"rptr {self._rptr[0]:#x} B, wptr {self._wptr[0]:#x} B" if self._bytes else \
            f"rptr {self._rptr[0]} dw, wptr {self._wptr[0]} dw"
        line = f"{self.kind} queue {self.queue_id}: {unit}, {pending} dwords pending"
        if pending:
            window = [self.ring[(rptr + i) % self.size_dw] for i in range(min(pending, 64))]
            line += f"; at rptr: {self._decode(window)}"
        return line
