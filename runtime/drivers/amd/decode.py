"""Decoders for PM4 and SDMA streams: dwords back to named packets and fields.

Used by tests (compare what a builder emitted with what was meant), by the driver's state reports
(the packet a hung queue is stuck at) and by the mock GPU's error messages. What a packet is, how
long it is and what its fields are come from its description (runtime/drivers/amd/packets.py),
which the builders and the mock use too. Every function takes the architecture (`arch`): the
packet forms, register names and SDMA layouts are its own.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from runtime.drivers.amd.arch import AMDArch
from runtime.drivers.amd.packets import packets_for

__all__ = ["DecodeError", "Packet", "decode_pm4", "decode_sdma", "describe_pm4", "describe_sdma",
           "pm4_fields"]


@dataclass(frozen=True)
class Packet:
    """One decoded packet: where it starts (dword offset), its name, its dwords and named fields."""

    offset: int
    name: str
    dwords: tuple[int, ...]
    fields: dict[str, int] = field(default_factory=dict)

    def __str__(self) -> str:
        body = " ".join(f"{k}={v:#x}" for k, v in self.fields.items())
        return f"@{self.offset}: {self.name} {body}".rstrip()


class DecodeError(ValueError):
    """The stream holds something that is not a well-formed packet."""


# ----------------------------------------------------------------------------- PM4
def pm4_fields(op: int, body: Sequence[int], gc_base: int = 0, *, arch: AMDArch
               ) -> dict[str, int]:
    """Named fields of a type-3 packet's payload (`body` excludes the header); {"truncated": 1}
    when the payload is too short, {} for a packet no description covers."""
    pk = packets_for(arch).pm4_by_opcode.get(op)
    if pk is None:
        return {}
    try:
        return pk.fields(body, gc_base)
    except IndexError:
        return {"truncated": 1}


def decode_pm4(dwords: Sequence[int], gc_base: int = 0, *, arch: AMDArch) -> list[Packet]:
    """Splits a PM4 stream into packets; raises DecodeError on a type-0/1 header or a truncation."""
    ps = packets_for(arch)
    p = ps.p
    out = []
    i, n = 0, len(dwords)
    while i < n:
        h = dwords[i]
        typ, size, op = ps.split_pm4_header(h)
        if h == p.CP_PACKET2:  # type-2 filler
            out.append(Packet(i, "PACKET2", (h,)))
            i += 1
            continue
        if typ != p.PACKET_TYPE3:
            raise DecodeError(f"dword {i}: header {h:#010x} is a type-{typ} packet, not type 3")
        if i + size > n:
            raise DecodeError(f"dword {i}: {ps.pm4_name(op)} needs {size} dwords, only {n - i} "
                              "left")
        body = tuple(dwords[i + 1:i + size])
        out.append(Packet(i, ps.pm4_name(op), (h, *body), pm4_fields(op, body, gc_base,
                                                                    arch=arch)))
        i += size
    return out


def describe_pm4(dwords: Sequence[int], gc_base: int = 0, *, arch: AMDArch) -> str:
    """The first packet of `dwords` as text (tolerates truncation)."""
    if not dwords:
        return "(nothing)"
    ps = packets_for(arch)
    h = dwords[0]
    typ, size, op = ps.split_pm4_header(h)
    if typ != ps.p.PACKET_TYPE3:
        return f"non-type-3 header {h:#010x}"
    body = tuple(dwords[1:size])
    return str(Packet(0, ps.pm4_name(op), (h, *body), pm4_fields(op, body, gc_base, arch=arch)))


# ----------------------------------------------------------------------------- SDMA
def decode_sdma(dwords: Sequence[int], *, arch: AMDArch) -> list[Packet]:
    """Splits an SDMA stream into packets; raises DecodeError on an unsupported op or truncation."""
    ps = packets_for(arch)
    out = []
    i, n = 0, len(dwords)
    while i < n:
        h = dwords[i]
        pk = ps.sdma_packet(h)
        if pk is None:
            raise DecodeError(f"dword {i}: {ps.sdma_unknown(h)}")
        size = pk.size_of(h)
        if i + size > n:
            raise DecodeError(f"dword {i}: {pk.name} needs {size} dwords, only {n - i} left")
        pkt = tuple(dwords[i:i + size])
        out.append(Packet(i, pk.name, pkt, pk.decode(pkt)))
        i += size
    return out


def describe_sdma(dwords: Sequence[int], *, arch: AMDArch) -> str:
    """The first packet of `dwords` as text (tolerates truncation)."""
    if not dwords:
        return "(nothing)"
    ps = packets_for(arch)
    pk = ps.sdma_packet(dwords[0])
    if pk is None:
        return ps.sdma_unknown(dwords[0])
    size = pk.size_of(dwords[0])
    pkt = tuple(dwords[:size]) + (0,) * max(0, size - len(dwords))
    return str(Packet(0, pk.name, pkt, pk.decode(pkt)))
