"""Signals: a 64-bit value plus a 64-bit timestamp (16 B) in memory that both the GPU and the CPU
see.

The GPU writes a signal at the end of a command (AMD RELEASE_MEM or SDMA FENCE, NVIDIA semaphore
release) and waits on one (WAIT_REG_MEM / POLL_REGMEM, semaphore acquire); the CPU polls it. Values
only grow, so "done" means value >= wanted. GPU-side compares are 32-bit on AMD (WAIT_REG_MEM),
64-bit on NVIDIA; the queue builders enforce their own limits.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

from runtime.hcq.errors import ArgumentError, DeviceClosed, SignalTimeout
from runtime.hcq.memory import Buffer

if TYPE_CHECKING:
    from runtime.hcq.device import Device

SIGNAL_B = 16
#: offset of the timestamp inside a signal
TIMESTAMP_OFFSET_B = 8
# How long a waiter polls before it asks the kernel to sleep: a launch of a small kernel completes
# in tens of microseconds on real hardware, and a syscall round trip costs about as much. A device
# whose GPU runs on a thread of this process (a mock) does not spin (`Device.wait_spin_s`).
SPIN_S = 50e-6
_POLLS = range(32)
# Longest single kernel sleep, so that device faults and Ctrl-C are noticed promptly.
_SLEEP_SLICE_MS = 200


class Signal:
    """A 16-byte signal: u64 value at +0, u64 timestamp (GPU clock ticks) at +8."""

    __slots__ = ("device", "buf", "_u64", "_pool_offset", "__weakref__")

    def __init__(self, device: "Device", buf: Buffer, pool_offset: int | None = None) -> None:
        if buf.size < SIGNAL_B or buf.va % 8:
            raise ArgumentError(f"a signal needs 16 B at an 8-byte aligned address, got {buf!r}")
        self.device, self.buf = device, buf
        self._u64 = buf.cpu_view()[:SIGNAL_B].cast("Q")
        self._pool_offset = pool_offset

    @property
    def va(self) -> int:
        """GPU address of the 64-bit value."""
        return self.buf.va

    @property
    def value_view(self) -> memoryview:
        """The signal's memory as two unsigned 64-bit words (value, timestamp), read and written
        in place: for launch paths that compare the value without a call (and native helpers,
        which keep a pointer to it)."""
        return self._u64

    @property
    def timestamp_va(self) -> int:
        """GPU address of the 64-bit timestamp."""
        return self.buf.va + TIMESTAMP_OFFSET_B

    @property
    def value(self) -> int:
        """The current value (read from memory each time). Raises DeviceClosed once the device is
        closed (its memory is gone)."""
        if self.device.closed:
            raise DeviceClosed(f"{self!r}: {self.device.name} is closed")
        return self._u64[0]

    @value.setter
    def value(self, v: int) -> None:
        self._u64[0] = v

    @property
    def timestamp(self) -> int:
        """The last timestamp the GPU wrote, in GPU clock ticks."""
        return self._u64[1]

    @timestamp.setter
    def timestamp(self, v: int) -> None:
        self._u64[1] = v

    @property
    def timestamp_s(self) -> float:
        """The timestamp in seconds of the device clock."""
        return self._u64[1] / self.device.clock_hz

    def wait(self, value: int, timeout_ms: float | None = None) -> None:
        """Blocks until the value is >= `value`.

        Polls for a few tens of microseconds, then sleeps in the kernel (through the device's
        driver) in short slices, checking for device faults in between. On timeout it raises
        `SignalTimeout` carrying the device's state (last completed timeline value, queue pointers).
        """
        u64 = self._u64
        if u64[0] >= value:
            return
        dev = self.device
        if dev.tracer is not None:
            t0 = time.perf_counter()
            try:
                self._block(value, timeout_ms)
            finally:
                dev.tracer.waited(self, value, t0)
            return
        self._block(value, timeout_ms)

    def _block(self, value: int, timeout_ms: float | None) -> None:
        u64 = self._u64
        dev = self.device
        if timeout_ms is None:
            timeout_ms = dev.default_timeout_ms
        start = time.perf_counter()
        deadline = start + timeout_ms / 1000.0
        spin_end = start + dev.wait_spin_s
        # Poll between clock reads: a read of the value costs a few tens of ns, the clock more,
        # and a completion is then seen within one read of happening. (A device that does not
        # spin goes on at once: its GPU's work runs here, `run_gpus_here`, or wakes it.)
        while spin_end > start:
            for _ in _POLLS:
                if u64[0] >= value:
                    return
            if time.perf_counter() >= spin_end:
                break
        if dev.os.gpus_in_process and dev.os.run_gpus_here() and u64[0] >= value:
            # The GPU's work ran on this thread (a mock): done without a sleep and its wake-up,
            # as when it had finished before the wait began (the check at the top).
            return
        while True:
            dev.check_fault()
            if u64[0] >= value:
                return
            remaining_ms = (deadline - time.perf_counter()) * 1000.0
            if remaining_ms <= 0:
                got = u64[0]
                state = dev.describe_state()
                raise SignalTimeout(self, value, got, state + dev.after_wait_timeout(),
                                    timeout_ms)
            dev.sleep_for_signal(self, value, min(remaining_ms, _SLEEP_SLICE_MS))
            if u64[0] >= value:
                dev.check_fault()
                return

    def release(self) -> None:
        """Returns the signal's memory to the device's signal pool."""
        if self._pool_offset is not None:
            self.device.release_signal(self)
            self._pool_offset = None

    def __repr__(self) -> str:
        try:
            val = str(self._u64[0])
        except ValueError:  # view released with the device
            val = "?"
        return f"Signal(va={self.va:#x}, value={val})"
