"""The mock SDMA engine: COPY_LINEAR, CONSTANT_FILL, FENCE, TRAP, POLL_REGMEM, TIMESTAMP and NOP,
decoded with the packet descriptions of the GPU's architecture (runtime/drivers/amd/packets.py: the
structs synthesised from sdma_v6_0_0_pkt_open.h for gfx11, from vega10_sdma_pkt_open.h for gfx942's
SDMA 4.4).

Each described packet has a handler here; a packet the descriptions do not cover, or one with no
handler, stops the queue with an error naming it. Pointers are u64 byte offsets (amdgpu
sdma_v6_0.c); a packet must not straddle the ring end, which is why drivers pad the tail with NOPs.
COPY_LINEAR moves at most `max_copy_B` bytes (4 MiB, the amdgpu driver's copy_max_bytes for SDMA 4
and 6); larger counts are rejected like any malformed packet.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from runtime.drivers.amd.arch import ARCHS
from runtime.drivers.amd.decode import describe_sdma
from runtime.drivers.amd.packets import packets_for
from runtime.drivers.amd.sdma import FILL_BYTE, FILL_DWORD
from runtime.drivers.mock.amd_gpu import (MockAMDGPU, MockGPUError, QueueProcessor,
                                          check_wait_possible, compare)
from runtime.drivers.mock.memory import PageFault

_M32 = 0xFFFFFFFF
_TIMESTAMP_ADDR_LO_DW = 1   # WRITE_ADDR_LO: bits 2:0 are below write_addr_31_3 and must be 0


class SDMAProcessor(QueueProcessor):
    """One SDMA queue of the mock GPU."""

    kind = "sdma"

    def __init__(self, gpu: MockAMDGPU, queue_id: int, ring_va: int, ring_B: int, rptr_va: int,
                 wptr_va: int) -> None:
        super().__init__(gpu, queue_id, ring_va, ring_B, rptr_va, wptr_va)
        self.max_copy_B = gpu.max_copy_B
        assert gpu.arch is not None  # the driver opens no GPU of an undescribed architecture
        self.arch = gpu.arch
        self.packets = packets_for(gpu.arch)   # the architecture's packets, bound once

    def set_wptr(self, value: int) -> None:
        if value % 4:
            raise MockGPUError(f"sdma queue {self.queue_id}: write pointer {value:#x} is not a "
                               "multiple of 4 bytes")
        if value // 4 < self.wptr_dw:
            raise MockGPUError(f"sdma queue {self.queue_id}: write pointer went backwards")
        self.wptr_dw = value // 4

    def _run(self) -> bool:
        progress = False
        while self.wptr_dw > self.rptr_dw:
            pos = self.rptr_dw % self.size_dw
            h = int(self.ring[pos])
            where = f"ring byte {self.rptr_dw * 4:#x}"
            pk = self.packets.sdma_packet(h)
            if pk is None:
                raise MockGPUError(f"{where}: {self.packets.sdma_unknown(h)}")
            size = pk.size_of(h)
            if pos + size > self.size_dw:
                raise MockGPUError(f"{where}: {self._describe([h])} straddles the end of the "
                                   "ring")
            if self.rptr_dw + size > self.wptr_dw:
                return progress  # not fully published yet
            pkt = self.ring[pos:pos + size].tolist()
            if not self._execute(pkt, where):
                return progress
            self.rptr_dw += size
            self.gpu.mem.write_u64(self.rptr_va, self.rptr_dw * 4)
            self.blocked = None
            progress = True
        self.blocked = None
        return progress

    def _execute(self, pkt: list[int], where: str) -> bool:
        try:
            return self._execute_packet(pkt, where)
        except PageFault as e:
            raise MockGPUError(f"{where}: {e}\n  packet: {self._describe(pkt)}", e.va) from None
        except MockGPUError as e:
            raise MockGPUError(f"{e}\n  packet: {self._describe(pkt)}", e.va) from None

    def _describe(self, pkt: list[int]) -> str:
        return describe_sdma(pkt, arch=self.arch)

    def _execute_packet(self, pkt: list[int], where: str) -> bool:
        pk = self.packets.sdma_packet(pkt[0])
        assert pk is not None
        handler = self._handlers.get(pk.name)
        if handler is None:
            raise MockGPUError(f"{where}: SDMA {pk.name} is described but not modelled by the mock")
        return handler(self, pk.decode(pkt), pkt, where)

    def _copy_linear(self, f: dict[str, int], pkt: list[int], where: str) -> bool:
        n = f["count"] + 1
        if n > self.max_copy_B:
            raise MockGPUError(f"{where}: COPY_LINEAR of {n} B exceeds the {self.max_copy_B} B "
                               "an SDMA copy packet may move")
        mem = self.gpu.mem
        src = mem.view(f["src_addr"], n, "read")
        dst = mem.view(f["dst_addr"], n, "write")
        dst[:] = src.copy() if _overlap(f["src_addr"], f["dst_addr"], n) else src
        if mem.races is not None:
            mem.races.gpu_wrote()
        return True

    def _constant_fill(self, f: dict[str, int], pkt: list[int], where: str) -> bool:
        # fillsize 2: the 32-bit data repeated (dword-aligned address and count); 0: its low byte.
        n, addr, data, size = f["count"] + 1, f["dst_addr"], f["src_data"], f["fillsize"]
        if n > self.arch.sdma_fill_max_B:
            raise MockGPUError(f"{where}: CONSTANT_FILL of {n} B exceeds the "
                               f"{self.arch.sdma_fill_max_B} B an SDMA fill packet of "
                               f"{self.arch.name} may write")
        if size == FILL_DWORD:
            if addr % 4 or n % 4:
                raise MockGPUError(f"{where}: dword CONSTANT_FILL of {n} B at {addr:#x} is not "
                                   "dword aligned")
            pattern = np.frombuffer(data.to_bytes(4, "little"), np.uint8)
            self.gpu.mem.view(addr, n, "write")[:] = np.tile(pattern, n // 4)
        elif size == FILL_BYTE:
            self.gpu.mem.view(addr, n, "write")[:] = data & 0xFF
        else:
            raise MockGPUError(f"{where}: CONSTANT_FILL fill size {size} is not modelled (0: "
                               "bytes, 2: dwords)")
        if self.gpu.mem.races is not None:
            self.gpu.mem.races.gpu_wrote()
        return True

    def _fence(self, f: dict[str, int], pkt: list[int], where: str) -> bool:
        addr = f["addr"]
        if addr % 4:
            raise MockGPUError(f"{where}: FENCE address {addr:#x} is not 4-byte aligned")
        self.gpu.mem.write_u32(addr, f["data"])
        return True

    def _trap(self, f: dict[str, int], pkt: list[int], where: str) -> bool:
        self.gpu.interrupt(f["int_context"])
        return True

    def _poll_regmem(self, f: dict[str, int], pkt: list[int], where: str) -> bool:
        if not f["mem_poll"]:
            raise MockGPUError(f"{where}: POLL_REGMEM on a register is not modelled")
        addr, ref, mask, func = f["addr"], f["value"], f["mask"], f["func"]
        if addr % 4:
            raise MockGPUError(f"{where}: POLL_REGMEM address {addr:#x} is not 4-byte aligned")
        check_wait_possible(func, ref, mask, f"{where}: POLL_REGMEM")
        value = self.gpu.mem.read_u32(addr) & mask
        if not compare(func, value, ref):
            self.blocked = f"{where}: POLL_REGMEM mem[{addr:#x}] = {value:#x}, waiting for " \
                           f"{['always', '<', '<=', '==', '!=', '>=', '>'][func]} {ref:#x}"
            return False
        return True

    def _timestamp(self, f: dict[str, int], pkt: list[int], where: str) -> bool:
        low = pkt[_TIMESTAMP_ADDR_LO_DW] & 7
        if low:
            raise MockGPUError(f"{where}: TIMESTAMP address is not 8-byte aligned (low bits "
                               f"{low:#x} in WRITE_ADDR_LO)")
        self.gpu.mem.write_u64(f["write_addr"], self.gpu.clock())
        return True

    def _nop(self, f: dict[str, int], pkt: list[int], where: str) -> bool:
        return True

    _handlers: dict[str, Callable[["SDMAProcessor", dict[str, int], list[int], str], bool]] = {
        "COPY_LINEAR": _copy_linear, "CONSTANT_FILL": _constant_fill, "FENCE": _fence,
        "TRAP": _trap, "POLL_REGMEM": _poll_regmem, "TIMESTAMP_GET": _timestamp,
        "TIMESTAMP_GET_GLOBAL": _timestamp, "NOP": _nop,
    }

    def describe(self) -> str:
        line = super().describe()
        if self.faulted is None and self.wptr_dw > self.rptr_dw:
            pos = self.rptr_dw % self.size_dw
            line += f"; next: {self._describe(self.ring[pos:pos + 8].tolist())}"
        return line


# every described SDMA packet of every architecture has a handler
assert all(set(SDMAProcessor._handlers) >= a.sdma_packets for a in ARCHS), \
    "an SDMA packet without a handler"


def _overlap(a: int, b: int, n: int) -> bool:
    return a < b + n and b < a + n

