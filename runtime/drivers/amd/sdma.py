"""SDMA command building (the copy engine), from the packet descriptions of
runtime/drivers/amd/packets.py (the structs bindgen synthesises from the architecture's SDMA packet
header: sdma_v6_0_0_pkt_open.h for gfx11, vega10_sdma_pkt_open.h for gfx942's SDMA 4.4).

Headers and constant words are encoded once per architecture from those structs
(`sdma_encoding(arch)`) and packet sizes are their sizes, so nothing here is a hand-typed layout.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from runtime.drivers.amd.arch import AMDArch
from runtime.drivers.amd.packets import packets_for
from runtime.drivers.amd.pm4 import WaitFunc
from runtime.hcq.errors import QueueError
from runtime.hcq.queue import HWQueue, Value, check_fill
from runtime.hcq.signal import TIMESTAMP_OFFSET_B

if TYPE_CHECKING:
    from typing import Self

    from runtime.drivers.amd.device import AMDDevice
    from runtime.hcq.signal import Signal

_M32 = 0xFFFFFFFF

# The packet's COUNT field holds bytes - 1 (30 bits on SDMA 5/6, 22 on SDMA 4), but amdgpu never
# issues more than 4 MiB per COPY_LINEAR (sdma_v6_0.c and sdma_v4_4_2.c: copy_max_bytes =
# 0x400000), so neither do we. The mock enforces the same limit.
MAX_COPY_B = 0x400000
POLL_INTERVAL = 4         # poll every 4 clocks (amdgpu and tinygrad)
# CONSTANT_FILL's fill size: 2 writes dwords (libdrm's amdgpu SDMA tests fill 0xdeadbeaf so), 0
# single bytes; COUNT is the byte count - 1 either way.
FILL_DWORD, FILL_BYTE = 2, 0


class SDMAEncoding:
    """The headers and constant words of one architecture's SDMA commands, computed once
    (`sdma_encoding(arch)`) from the packet descriptions; the builders only fill in addresses and
    values."""

    __slots__ = ("arch", "copy_linear_dw", "fence_dw", "trap_dw", "poll_regmem_dw",
                 "timestamp_dw", "h_copy_linear", "h_fence", "h_trap", "h_poll_ge", "poll_dw5",
                 "h_timestamp", "h_nop", "copy_count", "trap_int_context", "timestamp_addr_lo",
                 "h_fill_dword", "h_fill_byte", "fill_count", "max_fill_B")

    def __init__(self, arch: AMDArch) -> None:
        self.arch = arch
        sd, s = packets_for(arch).sdma, arch.sdma
        self.copy_linear_dw = sd["COPY_LINEAR"].dwords
        self.fence_dw = sd["FENCE"].dwords
        self.trap_dw = sd["TRAP"].dwords
        self.poll_regmem_dw = sd["POLL_REGMEM"].dwords
        self.timestamp_dw = sd["TIMESTAMP_GET_GLOBAL"].dwords
        self.h_copy_linear = sd["COPY_LINEAR"].encode()[0]
        fence = {} if arch.sdma_fence_mtype is None else {"mtype": arch.sdma_fence_mtype}
        self.h_fence = sd["FENCE"].encode(**fence)[0]
        self.h_trap = sd["TRAP"].encode()[0]
        # retry_count at its maximum (0xfff) retries without limit
        poll = sd["POLL_REGMEM"].encode(func=WaitFunc.GE, mem_poll=1, interval=POLL_INTERVAL,
                                        retry_count=s.SDMA_PKT_POLL_REGMEM_DW5_retry_count_mask)
        self.h_poll_ge, self.poll_dw5 = poll[0], poll[5]
        self.h_timestamp = sd["TIMESTAMP_GET_GLOBAL"].encode()[0]
        self.h_nop = sd["NOP"].encode()[0]
        self.copy_count = s.SDMA_PKT_COPY_LINEAR_COUNT_COUNT
        self.trap_int_context = s.SDMA_PKT_TRAP_INT_CONTEXT_INT_CONTEXT
        self.timestamp_addr_lo = s.SDMA_PKT_TIMESTAMP_GET_GLOBAL_WRITE_ADDR_LO_WRITE_ADDR_31_3
        self.h_fill_dword = sd["CONSTANT_FILL"].encode(fillsize=FILL_DWORD)[0]
        self.h_fill_byte = sd["CONSTANT_FILL"].encode(fillsize=FILL_BYTE)[0]
        self.fill_count = s.SDMA_PKT_CONSTANT_FILL_COUNT_COUNT
        self.max_fill_B = arch.sdma_fill_max_B


_ENCODINGS: dict[str, SDMAEncoding] = {}


def sdma_encoding(arch: AMDArch) -> SDMAEncoding:
    """The SDMA encoding of `arch`, built on first use (a cache: dropping it costs the rebuild)."""
    enc = _ENCODINGS.get(arch.name)
    if enc is None or enc.arch is not arch:
        enc = _ENCODINGS[arch.name] = SDMAEncoding(arch)
    return enc


class SDMAQueue(HWQueue):
    """Command builder for the SDMA ring."""

    engine = "copy"

    def __init__(self, device: "AMDDevice", max_copy_B: int = MAX_COPY_B) -> None:
        super().__init__(device)
        self.device: AMDDevice = device
        self.max_copy_B = max_copy_B
        self._k: SDMAEncoding = device.sdma_encoding

    def copy(self, dst: int, src: int, size: int) -> "Self":
        """COPY_LINEAR packets of at most `max_copy_B` bytes each (byte granular, any alignment)."""
        if size <= 0:
            raise QueueError(f"copy size must be positive, got {size}")
        d = self._d
        k = self._k
        h, count = k.h_copy_linear, k.copy_count
        step = self.max_copy_B
        off = 0
        while off < size:
            n = min(step, size - off)
            sa, da = src + off, dst + off
            d.extend((h, count(n - 1), 0, sa & _M32, sa >> 32, da & _M32, da >> 32))
            off += n
        return self

    def fill(self, dst: int, pattern: int, size: int) -> "Self":
        """CONSTANT_FILL packets: dword fills of the aligned middle, byte fills of an unaligned
        head or tail (`HWQueue.fill`)."""
        pattern = check_fill(dst, pattern, size)
        d = self._d
        k = self._k
        head = min(-dst % 4, size)
        body = (size - head) & ~3
        pieces = [(dst, head, k.h_fill_byte)] if head else []
        off = dst + head
        while off < dst + head + body:
            n = min(k.max_fill_B, dst + head + body - off)
            pieces.append((off, n, k.h_fill_dword))
            off += n
        if size - head - body:
            pieces.append((off, size - head - body, k.h_fill_byte))
        for addr, n, header in pieces:
            d.extend((header, addr & _M32, addr >> 32, pattern, k.fill_count(n - 1)))
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
        k = self._k
        n = len(d)
        hi_va = va + 4
        d.extend((k.h_fence, va & _M32, va >> 32, val & _M32,
                  k.h_fence, hi_va & _M32, hi_va >> 32, val >> 32))
        if var is not None:
            self._patch(var, add, n + 3, n + 7)
        ev = self.device.signal_event
        if ev is not None:
            mb = ev.mailbox_va
            d.extend((k.h_fence, mb & _M32, mb >> 32, ev.event_id,
                      k.h_trap, k.trap_int_context(ev.event_id)))
        return self

    def wait(self, sig: "Signal", value: Value) -> "Self":
        """POLL_REGMEM on memory: retry until the low 32 bits of `sig` >= `value`."""
        val, var, add = self._resolve(value, 32)
        va = self._sig_va(sig)
        d = self._d
        k = self._k
        n = len(d)
        d.extend((k.h_poll_ge, va & _M32, va >> 32, val, _M32, k.poll_dw5))
        if var is not None:
            self._patch(var, add, n + 3, -1, 32)
        return self

    def timestamp(self, sig: "Signal") -> "Self":
        """TIMESTAMP (get global) into the signal's 8-byte aligned timestamp field."""
        va = self._sig_va(sig) + TIMESTAMP_OFFSET_B
        k = self._k
        self._d.extend((k.h_timestamp, k.timestamp_addr_lo(va >> 3), va >> 32))
        return self

    def describe_commands(self) -> list[str]:
        """The SDMA packets, decoded (`runtime.drivers.amd.decode`)."""
        from runtime.drivers.amd.decode import DecodeError, decode_sdma
        try:
            return [str(pk) for pk in decode_sdma(self._d, arch=self._k.arch)]
        except DecodeError as e:
            return [f"undecodable SDMA stream: {e}"]

    def _submit(self) -> None:
        self.device.copy_ring.put(self._d)
