"""SDMA v6 command building (the copy engine), from the packet descriptions of
runtime/drivers/amd/packets.py (the structs bindgen synthesises from sdma_v6_0_0_pkt_open.h).

Headers and constant words are encoded once from those structs and packet sizes are their sizes,
so nothing here is a hand-typed layout.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from runtime.drivers.amd.packets import SDMA, s
from runtime.drivers.amd.pm4 import WaitFunc
from runtime.hcq.errors import QueueError
from runtime.hcq.queue import HWQueue, Value, check_fill
from runtime.hcq.signal import TIMESTAMP_OFFSET_B

if TYPE_CHECKING:
    from typing import Self

    from runtime.drivers.amd.device import AMDDevice
    from runtime.hcq.signal import Signal

_M32 = 0xFFFFFFFF

# The packet's COUNT field holds bytes - 1 in 30 bits, but amdgpu never issues more than 4 MiB per
# COPY_LINEAR on SDMA 5/6 (sdma_v6_0.c: sdma_v6_0_buffer_funcs.copy_max_bytes = 0x400000), so
# neither do we. The mock enforces the same limit.
MAX_COPY_B = 0x400000
# sdma_v6_0.c emit_fence: SDMA_PKT_FENCE_HEADER_MTYPE(0x3) /* Ucached(UC) */
FENCE_MTYPE_UC = 3
POLL_INTERVAL = 4         # poll every 4 clocks (amdgpu and tinygrad)
POLL_RETRY_FOREVER = s.SDMA_PKT_POLL_REGMEM_DW5_retry_count_mask  # 0xfff: retry without limit

# Headers, sizes and constant words come from the packet descriptions (packets.py: the synthesised
# sdma_v6 structs), encoded once; the builders below only fill in addresses and values.
COPY_LINEAR_DW = SDMA["COPY_LINEAR"].dwords
FENCE_DW = SDMA["FENCE"].dwords
TRAP_DW = SDMA["TRAP"].dwords
POLL_REGMEM_DW = SDMA["POLL_REGMEM"].dwords
TIMESTAMP_DW = SDMA["TIMESTAMP_GET_GLOBAL"].dwords

H_COPY_LINEAR = SDMA["COPY_LINEAR"].encode()[0]
# CONSTANT_FILL's fill size: 2 writes dwords (libdrm's amdgpu SDMA tests fill 0xdeadbeaf so), 0
# single bytes; COUNT is the byte count - 1 either way.
FILL_DWORD, FILL_BYTE = 2, 0
H_FILL_DWORD = SDMA["CONSTANT_FILL"].encode(fillsize=FILL_DWORD)[0]
H_FILL_BYTE = SDMA["CONSTANT_FILL"].encode(fillsize=FILL_BYTE)[0]
# sdma_v6_0.c: sdma_v6_0_buffer_funcs.fill_max_bytes (a multiple of 4, so chunks stay aligned)
MAX_FILL_B = 0x3FFFFFE0
H_FENCE = SDMA["FENCE"].encode(mtype=FENCE_MTYPE_UC)[0]
H_TRAP = SDMA["TRAP"].encode()[0]
_POLL = SDMA["POLL_REGMEM"].encode(func=WaitFunc.GE, mem_poll=1, interval=POLL_INTERVAL,
                                   retry_count=POLL_RETRY_FOREVER)
H_POLL_GE, POLL_DW5 = _POLL[0], _POLL[5]
H_TIMESTAMP = SDMA["TIMESTAMP_GET_GLOBAL"].encode()[0]
H_NOP = SDMA["NOP"].encode()[0]


class SDMAQueue(HWQueue):
    """Command builder for the SDMA ring."""

    engine = "copy"

    def __init__(self, device: "AMDDevice", max_copy_B: int = MAX_COPY_B) -> None:
        super().__init__(device)
        self.device: AMDDevice = device
        self.max_copy_B = max_copy_B

    def copy(self, dst: int, src: int, size: int) -> "Self":
        """COPY_LINEAR packets of at most `max_copy_B` bytes each (byte granular, any alignment)."""
        if size <= 0:
            raise QueueError(f"copy size must be positive, got {size}")
        d = self._d
        step = self.max_copy_B
        off = 0
        while off < size:
            n = min(step, size - off)
            sa, da = src + off, dst + off
            d.extend((H_COPY_LINEAR, s.SDMA_PKT_COPY_LINEAR_COUNT_COUNT(n - 1), 0,
                      sa & _M32, sa >> 32, da & _M32, da >> 32))
            off += n
        return self

    def fill(self, dst: int, pattern: int, size: int) -> "Self":
        """CONSTANT_FILL packets: dword fills of the aligned middle, byte fills of an unaligned
        head or tail (`HWQueue.fill`)."""
        pattern = check_fill(dst, pattern, size)
        d = self._d
        head = min(-dst % 4, size)
        body = (size - head) & ~3
        pieces = [(dst, head, H_FILL_BYTE)] if head else []
        off = dst + head
        while off < dst + head + body:
            n = min(MAX_FILL_B, dst + head + body - off)
            pieces.append((off, n, H_FILL_DWORD))
            off += n
        if size - head - body:
            pieces.append((off, size - head - body, H_FILL_BYTE))
        for addr, n, header in pieces:
            d.extend((header, addr & _M32, addr >> 32, pattern,
                      s.SDMA_PKT_CONSTANT_FILL_COUNT_COUNT(n - 1)))
        return self

    def signal(self, sig: "Signal", value: Value) -> "Self":
        """FENCE writes 32 bits, so a 64-bit value takes two: low half first, then high half (a
        reader may see the new low with the old high, which is never *ahead* of the final value).
        Then the event id goes to the event mailbox and a TRAP interrupts the CPU, as tinygrad
        does."""
        val, var, add = self._resolve(value)
        va = self._sig_va(sig)
        if va % 4:
            raise QueueError(f"FENCE address {va:#x} is not 4-byte aligned")
        d = self._d
        n = len(d)
        hi_va = va + 4
        d.extend((H_FENCE, va & _M32, va >> 32, val & _M32,
                  H_FENCE, hi_va & _M32, hi_va >> 32, val >> 32))
        if var is not None:
            self._patch(var, add, n + 3, n + 7)
        ev = self.device.signal_event
        if ev is not None:
            mb = ev.mailbox_va
            d.extend((H_FENCE, mb & _M32, mb >> 32, ev.event_id,
                      H_TRAP, s.SDMA_PKT_TRAP_INT_CONTEXT_INT_CONTEXT(ev.event_id)))
        return self

    def wait(self, sig: "Signal", value: Value) -> "Self":
        """POLL_REGMEM on memory: retry until the low 32 bits of `sig` >= `value`."""
        val, var, add = self._resolve(value, 32)
        va = self._sig_va(sig)
        d = self._d
        n = len(d)
        d.extend((H_POLL_GE, va & _M32, va >> 32, val, _M32, POLL_DW5))
        if var is not None:
            self._patch(var, add, n + 3, -1, 32)
        return self

    def timestamp(self, sig: "Signal") -> "Self":
        """TIMESTAMP (get global) into the signal's 8-byte aligned timestamp field."""
        va = self._sig_va(sig) + TIMESTAMP_OFFSET_B
        self._d.extend((H_TIMESTAMP,
                        s.SDMA_PKT_TIMESTAMP_GET_GLOBAL_WRITE_ADDR_LO_WRITE_ADDR_31_3(va >> 3),
                        va >> 32))
        return self

    def describe_commands(self) -> list[str]:
        """The SDMA packets, decoded (`runtime.drivers.amd.decode`)."""
        from runtime.drivers.amd.decode import DecodeError, decode_sdma
        try:
            return [str(pk) for pk in decode_sdma(self._d)]
        except DecodeError as e:
            return [f"undecodable SDMA stream: {e}"]

    def _submit(self) -> None:
        self.device.copy_ring.put(self._d)
