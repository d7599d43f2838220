"""A GPFIFO channel as the CPU drives it: GPFIFO ring, pushbuffer ring, USERD and doorbell.

Submitting a command stream: copy its dwords into the channel's pushbuffer ring (memory the GPU
reads), write one GPFIFO entry per segment (address + length, `methods.gp_entry`), publish the new
put index in USERD's GP_PUT (0x8C in the channel's USERD page, clc56f.h `AmpereAControlGPFifo`),
make those stores globally visible (they go to write-combined BAR memory), then write the channel's
work-submit token to the usermode doorbell at +0x90 (clc661.h/clc361.h).

Ring space is reclaimed exactly: every submission ends with a host semaphore release (no wait for
idle) of the submission's sequence number into the channel's progress word, which the host writes
once it has read everything before it. A segment of the pushbuffer and the GPFIFO entries of
submission `s` are free once progress >= s.

The channel is the one owner of its submission state (sequence number, GP_PUT, free limits,
pushbuffer position, in-flight records, chaining value): words in buffers that every route and the
native launch helper (_nvlaunch.c) read and write, published by one step (`Channel.publish`).
"""
from __future__ import annotations

import ctypes
import mmap as _mmap
import platform
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
from runtime.hcq.seam import Doorbell, MappedDoorbell

if TYPE_CHECKING:
    from runtime.drivers.nv.device import NVDevice
    from runtime.hcq.signal import Signal



def field_offset(struct: type, name: str) -> int:
    """Byte offset of field `name` of a generated struct. (Type checkers see a field as the
    type of its value, not as the descriptor that carries the offset.)"""
    return int(getattr(struct, name).offset)


USERD_GP_GET_B = field_offset(rm.AmpereAControlGPFifo, "GPGet")  # clc56f.h USERD layout: 0x88
USERD_GP_PUT_B = field_offset(rm.AmpereAControlGPFifo, "GPPut")  # 0x8C
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
# A release that also writes the GPU's timer at +8 (no wait for idle: the time it is processed).
SEM_RELEASE_TS = SEM_RELEASE_64 \
    | fval(cl.NVC56F_SEM_EXECUTE_RELEASE_TIMESTAMP, cl.NVC56F_SEM_EXECUTE_RELEASE_TIMESTAMP_EN)
# An acquire that is not met yet switches the channel group off the engine's runlist instead of
# polling through its whole timeslice: without it, a channel waiting on a signal (an event of
# another stream, a gate the host opens later) holds every other process's work on the GPU back
# by about 1 ms per launch (scripts/probe_acquire_switch.py measures both).
SEM_ACQUIRE_GEQ_64 = fval(cl.NVC56F_SEM_EXECUTE_OPERATION,
                          cl.NVC56F_SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ) \
    | fval(cl.NVC56F_SEM_EXECUTE_PAYLOAD_SIZE, cl.NVC56F_SEM_EXECUTE_PAYLOAD_SIZE_64BIT) \
    | fval(cl.NVC56F_SEM_EXECUTE_ACQUIRE_SWITCH_TSG, cl.NVC56F_SEM_EXECUTE_ACQUIRE_SWITCH_TSG_EN)


_SEM_HEADER = nvm(SUBC_HOST, cl.NVC56F_SEM_ADDR_LO, 0, 0, 0, 0, 0)[0]
SEM_PAYLOAD_LO_DW = 3  # position of the payload's low dword in `host_semaphore`'s list


def host_semaphore(va: int, payload: int, execute: int) -> list[int]:
    """SEM_ADDR_LO/HI, SEM_PAYLOAD_LO/HI, SEM_EXECUTE as one incrementing method (5 data dwords)."""
    return [_SEM_HEADER, va & 0xFFFFFFFF, va >> 32, payload & 0xFFFFFFFF,
            (payload >> 32) & 0xFFFFFFFF, execute]


# ------------------------------------------------------------------ store fence
class _Fence:
    """The fencing rule of every submission route, Python's and _nvlaunch.c's alike: one store
    fence between the last store the GPU reads (pushbuffer, GPFIFO entry, USERD GP_PUT) and the
    doorbell store. Why a store fence: those stores go to write-combined BAR memory, which x86 may
    buffer past a later store to the (uncached) doorbell page; SFENCE drains the write-combining
    buffers and orders every earlier store before every later one, and nothing here depends on
    the order of loads, so MFENCE's extra load ordering buys nothing. x86-64: `sfence` run from a
    4-byte stub (the C side uses the same instruction); elsewhere, or where executable memory is
    refused, a lock round trip (a locked instruction, a full barrier on every architecture
    CPython supports).

    The stub is called as a Python-API function (PYFUNCTYPE), which keeps the GIL: a plain
    CFUNCTYPE call lets the GIL go and takes it straight back around a single instruction, and a
    thread that releases the GIL that often keeps every other Python thread from ever getting
    it (a waiting thread wakes, finds the GIL taken again and restarts its switch interval, so
    CPython's forced hand-over never triggers)."""

    def __init__(self) -> None:
        self._call: Callable[[], None] | None = None
        self._lock = threading.Lock()
        if platform.machine() in ("x86_64", "AMD64"):
            try:
                self._page = _mmap.mmap(-1, _mmap.PAGESIZE,
                                        prot=_mmap.PROT_READ | _mmap.PROT_WRITE | _mmap.PROT_EXEC)
                self._page.write(b"\x0f\xae\xf8\xc3")  # sfence; ret
                addr = ctypes.addressof(ctypes.c_char.from_buffer(self._page))
                self._call = ctypes.PYFUNCTYPE(None)(addr)
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


# ------------------------------------------------------------------ shared submission state
# The words a channel's submissions keep, in one array('Q') that Python and _nvlaunch.c both read
# and write (the C helper's `channel_state`, same order; the helper refuses to load with another).
#   seq            last submission's sequence number (the progress word reaches it when done)
#   gp_put         monotonic count of GPFIFO entries written
#   gp_free_until  gp_put may grow to this before progress is read again
#   pb_put         monotonic pushbuffer position (dwords)
#   pb_free_until  pb_put may grow to this
#   reclaimed      the newest completed submission whose space was taken back
#   chain_value    the timeline value the channel's last launch released (its QMD does, when the
#                  grid completes), NO_CHAIN when unknown: a launch of v = chain_value + 1 needs no
#                  acquire, the channel's WAIT_FOR_IDLE orders it
CHANNEL_WORDS = ("seq", "gp_put", "gp_free_until", "pb_put", "pb_free_until", "reclaimed",
                 "chain_value")
SEQ, GP_PUT, GP_FREE_UNTIL, PB_PUT, PB_FREE_UNTIL, RECLAIMED, CHAIN_VALUE = range(7)
# The device's words (NVDevice.words, the C helper's `device_state`): the last timeline value
# handed out, and non-zero while the device may not submit (faulted or closed).
DEVICE_WORDS = ("timeline_value", "blocked")
TIMELINE_VALUE, BLOCKED = range(2)
NO_CHAIN = (1 << 64) - 1
# In-flight records: submission s keeps (pushbuffer end, GPFIFO put) after it at words
# 2*(s % entries) and 2*(s % entries)+1. At most entries-1 submissions are in flight (each takes a
# GPFIFO entry), so a record is never overwritten before its submission is reclaimed.
REC_PB_END, REC_GP_PUT = 0, 1


class _Submission(NamedTuple):
    """A submission in flight: its sequence number, pushbuffer end and GPFIFO put after it."""

    seq: int
    pb_end_dw: int      # monotonic pushbuffer position after this submission
    gp_put: int         # monotonic GPFIFO index after this submission


class Channel:
    """One GPFIFO channel and its submission protocol: rings, USERD, doorbell, progress tracking.

    Every route that puts work on the channel (queue submissions, copies, short and hot launches,
    graph replays, and _nvlaunch.c) goes through this object's state words (`state`, the records
    in `records`) and publishes the same way: sequence number, pushbuffer and GPFIFO stores, the
    in-flight record, GP_PUT, the store fence, the doorbell."""

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
        self.state = array("Q", [0] * len(CHANNEL_WORDS))
        self.state[GP_FREE_UNTIL] = entries - 1
        self.state[PB_FREE_UNTIL] = self.pb_dw
        self.state[CHAIN_VALUE] = NO_CHAIN
        self.records = array("Q", bytes(16 * entries))
        self.notifier: Buffer | None = None          # RM's error notifier for this channel
        self._error_notifier: memoryview | None = None
        self._error_words: memoryview | None = None
        self.subc_class = {subc: engine_class}
        # gp_entry(va, n) == _pb_entry_base + offset | n << GP_LENGTH_SHIFT for the pushbuffer
        self._pb_entry_base = gp_entry(pushbuf.va, 1) & ~(0x1FFFFF << GP_LENGTH_SHIFT)
        self._trailer = array("I", host_semaphore(progress.va, 0, SEM_RELEASE_64))
        #: publish(seq, entry): publishes one GPFIFO entry as submission `seq` (== next_seq()),
        #: whose segment already ends with the progress release of `seq`: ring entry, in-flight
        #: record, state words, GP_PUT, fence, doorbell. The caller made sure the entry fits
        #: (`has_entry_space`). Every route's last step (_nvlaunch.c does the same stores).
        self.publish: Callable[[int, int], None] = self._make_publish()

    # ------------------------------------------------------------------ the state, read-only
    @property
    def seq(self) -> int:
        """The last submission's sequence number."""
        return self.state[SEQ]

    @property
    def gp_put(self) -> int:
        """Monotonic count of GPFIFO entries written."""
        return self.state[GP_PUT]

    @property
    def pb_put(self) -> int:
        """Monotonic pushbuffer position (dwords)."""
        return self.state[PB_PUT]

    @property
    def chain_value(self) -> int | None:
        """The timeline value the channel's last launch releases, None when unknown."""
        v = self.state[CHAIN_VALUE]
        return None if v == NO_CHAIN else v

    def set_chain(self, value: int | None) -> None:
        """Records that the last submission ends with a launch releasing timeline `value`."""
        self.state[CHAIN_VALUE] = NO_CHAIN if value is None else value

    def inflight(self) -> list[_Submission]:
        """The submissions not yet reclaimed, oldest first."""
        st, rec, mask = self.state, self.records, self.entries - 1
        return [_Submission(s, rec[2 * (s & mask)], rec[2 * (s & mask) + 1])
                for s in range(st[RECLAIMED] + 1, st[SEQ] + 1)]

    # ------------------------------------------------------------------ space
    def reclaim(self) -> None:
        """Takes back the ring space of every submission the progress word shows consumed."""
        st = self.state
        done = min(self.progress.value, st[SEQ])
        if done <= st[RECLAIMED]:
            return
        if done == st[SEQ]:
            pb_tail, gp_tail = st[PB_PUT], st[GP_PUT]
        else:
            r = 2 * (done & (self.entries - 1))
            pb_tail, gp_tail = self.records[r + REC_PB_END], self.records[r + REC_GP_PUT]
        st[PB_FREE_UNTIL] = pb_tail + self.pb_dw
        st[GP_FREE_UNTIL] = gp_tail + self.entries - 1
        st[RECLAIMED] = done

    def wait_space(self, pb_need_end: int, gp_need: int) -> None:
        """Waits until the pushbuffer may grow to `pb_need_end` and `gp_need` more GPFIFO entries
        fit; raises QueueError when the GPU consumes nothing for the device's timeout. A Ctrl-C
        during the wait is raised at once: the submission waiting for room has published nothing
        (pushbuffer words it stored past the last GPFIFO entry are never read, and are taken
        back with the next submission's space)."""
        self.device.submit_lock.interruptible(lambda: self._wait_space(pb_need_end, gp_need))

    def _wait_space(self, pb_need_end: int, gp_need: int) -> None:
        dev, st = self.device, self.state
        deadline = None
        while pb_need_end > st[PB_FREE_UNTIL] or st[GP_PUT] + gp_need > st[GP_FREE_UNTIL]:
            self.reclaim()
            if pb_need_end <= st[PB_FREE_UNTIL] and st[GP_PUT] + gp_need <= st[GP_FREE_UNTIL]:
                return
            dev.check_fault()
            now = time.perf_counter()
            if deadline is None:
                deadline = now + dev.default_timeout_ms / 1000.0
            elif now > deadline:
                raise QueueError(f"{self.name} channel is full: the GPU consumed nothing for "
                                 f"{dev.default_timeout_ms:.0f} ms\n{dev.describe_state()}")
            dev.sleep_for_signal(self.progress, st[SEQ], 1.0)

    def _pb_reserve(self, n: int) -> int:
        """Monotonic start position of `n` contiguous pushbuffer dwords (skipping the ring's tail
        when the block would wrap)."""
        if n > self.pb_dw // 2:
            raise QueueError(f"{n} dwords do not fit the {self.name} pushbuffer "
                             f"({self.pb_dw} dwords); bind() the queue instead")
        start = self.state[PB_PUT]
        off = start % self.pb_dw
        if off + n > self.pb_dw:
            start += self.pb_dw - off
        return start

    # ------------------------------------------------------------------ submission
    def next_seq(self) -> int:
        """The sequence number the next submission gets (for segments that carry it already)."""
        return self.state[SEQ] + 1

    def _make_publish(self) -> Callable[[int, int], None]:
        """The publish step (`publish`), with everything it touches bound once: it runs on every
        submission of every Python route."""
        st, ring, records, userd = self.state, self.ring, self.records, self.userd
        mask = self.entries - 1
        db, token = self.doorbell, self.token
        fence = _fence_call
        if type(db) is MappedDoorbell:  # a store into the usermode page (what its ring() does)
            view, index = db.store_target()
            value = token & ((1 << (8 * db.width)) - 1)

            def bell() -> None:
                view[index] = value
        else:  # the mock GPU's doorbell is a call

            def bell() -> None:
                db.ring(token)

        def publish(seq: int, entry: int) -> None:
            put = st[GP_PUT]
            ring[put & mask] = entry
            put += 1
            r = 2 * (seq & mask)
            records[r] = st[PB_PUT]
            records[r + 1] = put
            st[SEQ] = seq
            st[GP_PUT] = put
            userd[_GP_PUT_DW] = put & mask
            fence()
            bell()

        return publish

    def has_entry_space(self) -> bool:
        """Whether one more GPFIFO entry fits without waiting."""
        return self.state[GP_PUT] < self.state[GP_FREE_UNTIL]

    def submit(self, parts: Sequence[array | tuple[int, int]]) -> int:
        """Submits a command stream given as parts: arrays of dwords to copy into the pushbuffer,
        or (va, dwords) of streams already in GPU memory. Appends the progress release; returns the
        submission's sequence number."""
        st = self.state
        seq = st[SEQ] + 1
        trailer = self._trailer
        trailer[SEM_PAYLOAD_LO_DW] = seq & 0xFFFFFFFF
        trailer[SEM_PAYLOAD_LO_DW + 1] = seq >> 32
        # The trailer rides in the last inline part, so that a simple queue is one GPFIFO entry.
        if not parts or not isinstance(parts[-1], array):
            parts = [*parts, array("I")]
        last = len(parts) - 1
        inline_dw = sum(len(p) for p in parts if isinstance(p, array)) + len(trailer)
        # Worst case each inline part skips up to its own size at the ring's end.
        if st[PB_PUT] + 2 * inline_dw > st[PB_FREE_UNTIL] or \
                st[GP_PUT] + len(parts) > st[GP_FREE_UNTIL]:
            self.wait_space(st[PB_PUT] + 2 * inline_dw, len(parts))
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
                st[PB_PUT] = start + n
                entries.append(gp_entry(base + off * 4, n))
            else:
                entries.append(gp_entry(p[0], p[1]))
        ring, mask = self.ring, self.entries - 1
        for e in entries[:-1]:
            ring[st[GP_PUT] & mask] = e
            st[GP_PUT] += 1
        self.publish(seq, entries[-1])
        return seq

    def submit_spans(self, words: array, spans: Sequence[tuple[int, int, int]],
                     skip: int = 0) -> int:
        """`submit` for a stream laid out once (`NVQueue.resubmitter`): `words` are every inline
        dword of the stream, copied into the pushbuffer as one block with the progress release
        right after them; `spans` are its GPFIFO entries in order, each (0, first dword in
        `words`, count) for a run of `words` or (1, entry, 0) for commands already in GPU memory
        (`gp_entry` of their address and length). The last span is a run that ends at the end
        of `words` (the release rides in its entry). `skip`: the first `skip` words are left
        out (they lie in the first span; an entry left with nothing is not written). Returns the
        submission's sequence number."""
        st = self.state
        seq = st[SEQ] + 1
        trailer = self._trailer
        trailer[SEM_PAYLOAD_LO_DW] = seq & 0xFFFFFFFF
        trailer[SEM_PAYLOAD_LO_DW + 1] = seq >> 32
        k = len(words) - skip
        n = k + len(trailer)
        start = self._pb_reserve(n)
        off = start % self.pb_dw
        first = 1 if skip and len(spans) > 1 and spans[0][1] + spans[0][2] <= skip else 0
        gp_n = len(spans) - first
        if start + n > st[PB_FREE_UNTIL] or st[GP_PUT] + gp_n > st[GP_FREE_UNTIL]:
            self.wait_space(start + n, gp_n)
        pb = self.pb
        pb[off:off + k] = words[skip:] if skip else words
        pb[off + k:off + n] = trailer
        st[PB_PUT] = start + n
        base = self._pb_entry_base + off * 4 - skip * 4  # words[a] lands at base + 4 * a
        ring, mask = self.ring, self.entries - 1
        put = st[GP_PUT]
        for ext, a, cnt in spans[first:-1]:
            if a < skip and not ext:  # the first run, less the words left out
                a, cnt = skip, cnt - (skip - a)
            ring[put & mask] = a if ext else base + 4 * a | cnt << GP_LENGTH_SHIFT
            put += 1
        st[GP_PUT] = put
        _, a, cnt = spans[-1]
        if a < skip:
            a, cnt = skip, cnt - (skip - a)
        self.publish(seq, base + 4 * a | (cnt + len(trailer)) << GP_LENGTH_SHIFT)
        return seq

    def submit_one(self, words: array) -> int:
        """`submit([words])` for one inline stream, the short launch and copy path: the same
        protocol with fewer steps (the trailer is copied after `words`, one GPFIFO entry)."""
        st = self.state
        seq = st[SEQ] + 1
        trailer = self._trailer
        trailer[SEM_PAYLOAD_LO_DW] = seq & 0xFFFFFFFF
        trailer[SEM_PAYLOAD_LO_DW + 1] = seq >> 32
        k = len(words)
        n = k + len(trailer)
        start = self._pb_reserve(n)
        off = start % self.pb_dw
        if start + n > st[PB_FREE_UNTIL] or st[GP_PUT] + 1 > st[GP_FREE_UNTIL]:
            self.wait_space(start + n, 1)
        pb = self.pb
        pb[off:off + k] = words
        pb[off + k:off + n] = trailer
        st[PB_PUT] = start + n
        self.publish(seq, self._pb_entry_base + off * 4 | n << GP_LENGTH_SHIFT)
        return seq

    # ------------------------------------------------------------------ state
    def gp_get(self) -> int:
        """GP_GET as USERD reports it (an index into the GPFIFO ring)."""
        return self.userd[USERD_GP_GET_B // 4]

    @property
    def error_notifier(self) -> memoryview | None:
        """The channel's first NvNotification (16 bytes: time stamp, info32, info16, status),
        where RM reports the channel's errors, when it is mapped."""
        return self._error_notifier

    @error_notifier.setter
    def error_notifier(self, view: memoryview | None) -> None:
        self._error_notifier = view
        self._error_words = None if view is None else view[:16].cast("Q")

    def error(self) -> tuple[int, int, int] | None:
        """(info32, info16, status) of the channel's error notifier when RM wrote one, else None.
        Its second 64-bit word holds all three and is read with one load: the memory is
        uncached, where each load reaches DRAM (a decoder that reads byte by byte pays that 16
        times), and every synchronize asks."""
        w = self._error_words
        if w is None:
            return None
        word = w[1]
        info32, info16, status = word & 0xFFFFFFFF, (word >> 32) & 0xFFFF, word >> 48
        if info32 or status:
            return info32, info16, status
        return None

    def describe(self) -> str:
        """One line: submitted and completed submissions, ring pointers, where the GPU stopped."""
        done = self.progress.value
        put = self.state[GP_PUT] & (self.entries - 1)
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
        pend = next((s for s in self.inflight() if s.seq > done), None)
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
