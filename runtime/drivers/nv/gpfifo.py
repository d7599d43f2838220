"""A GPFIFO channel as the CPU drives it: GPFIFO ring, pushbuffer ring, USERD and doorbell.

Submitting a command stream: copy its dwords into the channel's pushbuffer ring (memory the GPU
reads), write one GPFIFO entry per segment (address + length, `methods.gp_entry`), publish the new
put index in USERD's GP_PUT (0x8C in the channel's USERD page, clc56f.h `AmpereAControlGPFifo`),
make those stores globally visible (they go to write-combined BAR memory), then write the channel's
work-submit token to the usermode doorbell at +0x90 (guide section 4; clc661.h/clc361.h).

Ring space is reclaimed exactly: every submission ends with a host semaphore release (no wait for
idle) of the submission's sequence number into the channel's progress word, which the host writes
once it has read everything before it. A segment of the pushbuffer and the GPFIFO entries of
submission `s` are free once progress >= s.
"""
from __future__ import annotations

import collections
import ctypes
import mmap as _mmap
import platform
import struct
import threading
import time
from array import array
from typing import TYPE_CHECKING, Callable, NamedTuple, Sequence

from hcq_bindings.nv import classes as cl
from hcq_bindings.nv import rm_580 as rm

from runtime.drivers.nv.methods import (GP_LENGTH_SHIFT, SUBC_HOST, decode_gp_entry,
                                        describe_methods, fval, gp_entry, nvm)
from runtime.hcq.errors import QueueError
from runtime.hcq.memory import Buffer
from runtime.hcq.seam import Doorbell

if TYPE_CHECKING:
    from runtime.drivers.nv.device import NVDevice
    from runtime.hcq.signal import Signal

USERD_GP_GET_B = rm.AmpereAControlGPFifo.GPGet.offset  # clc56f.h USERD layout: 0x88
USERD_GP_PUT_B = rm.AmpereAControlGPFifo.GPPut.offset  # 0x8C
_GP_PUT_DW = USERD_GP_PUT_B // 4
# The usermode doorbell: the work-submit token is written at NOTIFY_CHANNEL_PENDING (0x90).
DOORBELL_OFFSET_B = rm.NVC361_NOTIFY_CHANNEL_PENDING
USERD_B = 0x200         # USERD per channel (AmpereAControlGPFifo is 0x100 B; 512-B aligned)

# Host semaphore releases and acquires (clc56f.h SEM_EXECUTE), precomputed.
SEM_RELEASE_64 = fval(cl.NVC56F_SEM_EXECUTE_OPERATION, cl.NVC56F_SEM_EXECUTE_OPERATION_RELEASE) \
    | fval(cl.NVC56F_SEM_EXECUTE_PAYLOAD_SIZE, cl.NVC56F_SEM_EXECUTE_PAYLOAD_SIZE_64BIT)
SEM_RELEASE_WFI_TS = SEM_RELEASE_64 \
    | fval(cl.NVC56F_SEM_EXECUTE_RELEASE_WFI, cl.NVC56F_SEM_EXECUTE_RELEASE_WFI_EN) \
    | fval(cl.NVC56F_SEM_EXECUTE_RELEASE_TIMESTAMP, cl.NVC56F_SEM_EXECUTE_RELEASE_TIMESTAMP_EN)
SEM_ACQUIRE_GEQ_64 = fval(cl.NVC56F_SEM_EXECUTE_OPERATION,
                          cl.NVC56F_SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ) \
    | fval(cl.NVC56F_SEM_EXECUTE_PAYLOAD_SIZE, cl.NVC56F_SEM_EXECUTE_PAYLOAD_SIZE_64BIT)


_SEM_HEADER = nvm(SUBC_HOST, cl.NVC56F_SEM_ADDR_LO, 0, 0, 0, 0, 0)[0]
SEM_PAYLOAD_LO_DW = 3  # position of the payload's low dword in `host_semaphore`'s list


def host_semaphore(va: int, payload: int, execute: int) -> list[int]:
    """SEM_ADDR_LO/HI, SEM_PAYLOAD_LO/HI, SEM_EXECUTE as one incrementing method (5 data dwords)."""
    return [_SEM_HEADER, va & 0xFFFFFFFF, va >> 32, payload & 0xFFFFFFFF,
            (payload >> 32) & 0xFFFFFFFF, execute]


# ------------------------------------------------------------------ store fence
class _Fence:
    """Makes earlier stores (including write-combined ones to BAR memory) globally visible before
    the doorbell store. x86-64: an `mfence` (what tinygrad's atomic_thread_fence compiles to), run
    from a 4-byte stub; elsewhere, or where executable memory is refused, a lock round trip (a
    locked instruction, which also drains write-combining buffers on x86)."""

    def __init__(self) -> None:
        self._call: Callable[[], None] | None = None
        self._lock = threading.Lock()
        if platform.machine() in ("x86_64", "AMD64"):
            try:
                self._page = _mmap.mmap(-1, _mmap.PAGESIZE,
                                        prot=_mmap.PROT_READ | _mmap.PROT_WRITE | _mmap.PROT_EXEC)
                self._page.write(b"\x0f\xae\xf0\xc3")  # mfence; ret
                addr = ctypes.addressof(ctypes.c_char.from_buffer(self._page))
                self._call = ctypes.CFUNCTYPE(None)(addr)
            except (OSError, ValueError, TypeError):
                self._call = None

    def __call__(self) -> None:
        if self._call is not None:
            self._call()
        else:
            with self._lock:
                pass


cpu_fence = _Fence()
# The fence as the hot path calls it: the stub itself when there is one.
_fence_call: Callable[[], None] = cpu_fence._call or cpu_fence


class _Submission(NamedTuple):
    """A submission in flight: its sequence number, pushbuffer end and GPFIFO put after it."""

    seq: int
    pb_end_dw: int      # monotonic pushbuffer position after this submission
    gp_put: int         # monotonic GPFIFO index after this submission


class Channel:
    """One GPFIFO channel of the device: rings, USERD, doorbell, progress tracking."""

    def __init__(self, device: "NVDevice", name: str, handle: int, engine_class: int, subc: int,
                 ring_view: memoryview, entries: int, userd_view: memoryview, token: int,
                 doorbell: Doorbell, pushbuf: Buffer, progress: "Signal") -> None:
        self.device, self.name, self.handle = device, name, handle
        self.engine_class, self.subc = engine_class, subc
        if entries & (entries - 1):
            raise QueueError(f"GPFIFO of {entries} entries is not a power of two")
        self.ring = ring_view.cast("Q")
        self.entries = entries
        self.userd = userd_view.cast("I")
        self.token = token
        self.doorbell = doorbell
        self.pushbuf = pushbuf
        self.pb = pushbuf.cpu_view().cast("I")
        self.pb_dw = len(self.pb)
        self.progress = progress
        self.seq = 0
        self.gp_put = 0          # monotonic count of GPFIFO entries written
        self.pb_put = 0          # monotonic pushbuffer position (dwords)
        self._inflight: collections.deque[tuple[int, int, int]] = collections.deque()
        self._gp_free_until = entries - 1   # gp_put may grow to this before rechecking progress
        self._pb_free_until = self.pb_dw    # pb_put may grow to this
        self.notifier: Buffer | None = None          # RM's error notifier for this channel
        self.error_notifier: memoryview | None = None  # its first NvNotification, when mapped
        self.subc_class = {subc: engine_class}
        # gp_entry(va, n) == _pb_entry_base + offset | n << GP_LENGTH_SHIFT for the pushbuffer
        self._pb_entry_base = gp_entry(pushbuf.va, 1) & ~(0x1FFFFF << GP_LENGTH_SHIFT)
        self._trailer = array("I", host_semaphore(progress.va, 0, SEM_RELEASE_64))

    # ------------------------------------------------------------------ space
    def _reclaim(self) -> None:
        done = self.progress.value
        pb_tail, gp_tail = None, None
        # In-flight entries are plain (seq, pb_end_dw, gp_put) tuples (the launch hot path appends
        # them without building a _Submission); read them by index.
        while self._inflight and self._inflight[0][0] <= done:
            s = self._inflight.popleft()
            pb_tail, gp_tail = s[1], s[2]
        if not self._inflight:
            pb_tail, gp_tail = self.pb_put, self.gp_put
        if pb_tail is not None:
            self._pb_free_until = pb_tail + self.pb_dw
        if gp_tail is not None:
            self._gp_free_until = gp_tail + self.entries - 1

    def _wait_space(self, pb_need_end: int, gp_need: int) -> None:
        dev = self.device
        deadline = None
        while pb_need_end > self._pb_free_until or self.gp_put + gp_need > self._gp_free_until:
            self._reclaim()
            if pb_need_end <= self._pb_free_until and self.gp_put + gp_need <= self._gp_free_until:
                return
            dev.check_fault()
            now = time.perf_counter()
            if deadline is None:
                deadline = now + dev.default_timeout_ms / 1000.0
            elif now > deadline:
                raise QueueError(f"{self.name} channel is full: the GPU consumed nothing for "
                                 f"{dev.default_timeout_ms:.0f} ms\n{dev.describe_state()}")
            dev._sleep_for_signal(self.progress, self.seq, 1.0)

    def _pb_reserve(self, n: int) -> int:
        """Monotonic start position of `n` contiguous pushbuffer dwords (skipping the ring's tail
        when the block would wrap)."""
        if n > self.pb_dw // 2:
            raise QueueError(f"{n} dwords do not fit the {self.name} pushbuffer "
                             f"({self.pb_dw} dwords); bind() the queue instead")
        start = self.pb_put
        off = start % self.pb_dw
        if off + n > self.pb_dw:
            start += self.pb_dw - off
        return start

    # ------------------------------------------------------------------ submission
    def submit(self, parts: Sequence[array | tuple[int, int]]) -> int:
        """Submits a command stream given as parts: arrays of dwords to copy into the pushbuffer,
        or (va, dwords) of streams already in GPU memory. Appends the progress release; returns the
        submission's sequence number. Nothing (sequence number, ring space) is taken before the
        stream is known to fit."""
        seq = self.seq + 1
        trailer = self._trailer
        trailer[SEM_PAYLOAD_LO_DW] = seq & 0xFFFFFFFF
        trailer[SEM_PAYLOAD_LO_DW + 1] = seq >> 32
        # The trailer rides in the last inline part, so that a simple queue is one GPFIFO entry.
        if not parts or not isinstance(parts[-1], array):
            parts = [*parts, array("I")]
        last = len(parts) - 1
        inline_dw = sum(len(p) for p in parts if isinstance(p, array)) + len(trailer)
        for i, p in enumerate(parts):
            if isinstance(p, array) and len(p) + (len(trailer) if i == last else 0) \
                    > self.pb_dw // 2:
                self._pb_reserve(len(p) + len(trailer))  # raises, naming the sizes
        # Worst case each inline part skips up to its own size at the ring's end.
        if self.pb_put + 2 * inline_dw > self._pb_free_until or \
                self.gp_put + len(parts) > self._gp_free_until:
            self._wait_space(self.pb_put + 2 * inline_dw, len(parts))
        self.seq = seq
        entries = []
        pb, pb_dw, base = self.pb, self.pb_dw, self.pushbuf.va
        for i, p in enumerate(parts):
            if isinstance(p, array):
                n = len(p) + (len(trailer) if i == last else 0)
                start = self._pb_reserve(n)
                off = start % pb_dw
                k = len(p)
                pb[off:off + k] = p
                if i == last:
                    pb[off + k:off + n] = trailer
                self.pb_put = start + n
                entries.append(gp_entry(base + off * 4, n))
            else:
                entries.append(gp_entry(p[0], p[1]))
        ring, mask = self.ring, self.entries - 1
        put = self.gp_put
        for e in entries:
            ring[put & mask] = e
            put += 1
        self.gp_put = put
        self._inflight.append((seq, self.pb_put, put))
        self.userd[USERD_GP_PUT_B // 4] = put & mask
        cpu_fence()
        self.doorbell.ring(self.token)
        return seq

    def submit_one(self, words: array) -> int:
        """`submit([words])` for one inline stream, the launch hot path: the same ring writes with
        fewer steps (the trailer is copied after `words`, one GPFIFO entry)."""
        seq = self.seq + 1
        trailer = self._trailer
        trailer[SEM_PAYLOAD_LO_DW] = seq & 0xFFFFFFFF
        trailer[SEM_PAYLOAD_LO_DW + 1] = seq >> 32
        k = len(words)
        n = k + len(trailer)
        pb_dw = self.pb_dw
        start = self.pb_put
        off = start % pb_dw
        if off + n > pb_dw:
            start += pb_dw - off
            off = 0
        if start + n > self._pb_free_until or self.gp_put + 1 > self._gp_free_until:
            if n > pb_dw // 2:
                raise QueueError(f"{n} dwords do not fit the {self.name} pushbuffer")
            self._wait_space(start + n, 1)
        self.seq = seq
        pb = self.pb
        pb[off:off + k] = words
        pb[off + k:off + n] = trailer
        self.pb_put = start + n
        put = self.gp_put
        mask = self.entries - 1
        self.ring[put & mask] = self._pb_entry_base + off * 4 | n << GP_LENGTH_SHIFT
        put += 1
        self.gp_put = put
        self._inflight.append((seq, start + n, put))
        self.userd[_GP_PUT_DW] = put & mask
        _fence_call()
        self.doorbell.ring(self.token)
        return seq

    # ------------------------------------------------------------------ state
    def gp_get(self) -> int:
        """GP_GET as USERD reports it (an index into the GPFIFO ring)."""
        return self.userd[USERD_GP_GET_B // 4]

    def error(self) -> tuple[int, int, int] | None:
        """(info32, info16, status) of the channel's error notifier when RM wrote one, else None."""
        n = self.error_notifier
        if n is None:
            return None
        _, info32, info16, status = struct.unpack_from("<QIHH", n, 0)
        if info32 or status:
            return info32, info16, status
        return None

    def describe(self) -> str:
        """One line: submitted and completed submissions, ring pointers, where the GPU stopped."""
        done = self.progress.value
        put = self.gp_put & (self.entries - 1)
        try:
            get = self.gp_get()
        except (ValueError, IndexError):
            get = -1
        line = (f"{self.name} channel (token {self.token:#x}): submission {done} of {self.seq} "
                f"consumed, GP_GET {get} GP_PUT {put}")
        err = self.error()
        if err is not None:
            line += f", RM error notifier info32={err[0]} info16={err[1]:#x} status={err[2]:#x}"
        if done < self.seq:
            line += "; pending: " + self.describe_pending(done)
        return line

    def describe_pending(self, done: int) -> str:
        """The decoded commands of the first submission the GPU has not finished reading."""
        pend = next((_Submission(*s) for s in self._inflight if s[0] > done), None)
        if pend is None:
            return "?"
        idx = max(0, pend.gp_put - 1)
        va, n = decode_gp_entry(self.ring[idx & (self.entries - 1)])
        base = self.pushbuf.va
        if base <= va < base + self.pb_dw * 4:
            off = (va - base) // 4
            stream = self.pb[off:off + min(n, 48)].tolist()
            return describe_methods(stream, self.subc_class)
        return f"bound command buffer at {va:#x} ({n} dwords)"
