"""Decoders for PM4 and SDMA streams: dwords back to named packets and fields.

Used by tests (compare what a builder emitted with what was meant), by the driver's state reports
(the packet a hung queue is stuck at) and by the mock GPU's error messages. Field positions come
from the generated bindings; where a header gives only a setter macro such as
``WAIT_REG_MEM_FUNCTION(x) ((x) << 0)``, the field runs up to the next field's setter (`_field`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from hcq_bindings.amd import gc_11_0_0 as gc
from hcq_bindings.amd import pm4_gfx11 as p
from hcq_bindings.amd import sdma_v6 as s


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


def _shift(setter: Callable[[int], int]) -> int:
    return setter(1).bit_length() - 1


_FIELDS: dict[tuple[Callable[[int], int], Callable[[int], int] | None], tuple[int, int]] = {}


def _field(dw: int, setter: Callable[[int], int], next_setter: Callable[[int], int] | None) -> int:
    """The field `setter` writes, assumed to end where `next_setter`'s field begins (or at bit
    32)."""
    pos = _FIELDS.get((setter, next_setter))
    if pos is None:  # decoding is on the mock GPU's hot path: derive each field's position once
        lo = _shift(setter)
        hi = _shift(next_setter) if next_setter is not None else 32
        pos = _FIELDS[(setter, next_setter)] = (lo, (1 << (hi - lo)) - 1)
    return (dw >> pos[0]) & pos[1]


_BITS: dict[int, Callable[[int], int]] = {}


def _bit(flag: int) -> Callable[[int], int]:
    """A setter for a one-bit flag (cached, so `_field` can key on it)."""
    fn = _BITS.get(flag)
    if fn is None:
        fn = _BITS[flag] = lambda x: flag * x
    return fn


# ----------------------------------------------------------------------------- PM4
def _pm4_names() -> dict[int, str]:
    """Opcode -> name for every PACKET3_* opcode constant (several names may share a value)."""
    out: dict[int, list[str]] = {}
    for name in dir(p):
        if not name.startswith("PACKET3_"):
            continue
        val = getattr(p, name)
        if isinstance(val, int) and 0 <= val <= 0xFF:
            out.setdefault(val, []).append(name)
    return {k: "/".join(sorted(v)) for k, v in out.items()}


PM4_NAMES = _pm4_names()
# Names of the opcodes the compute path uses, as the decoder prints them.
PM4_NAME = {
    p.PACKET3_NOP: "PACKET3_NOP", p.PACKET3_SET_SH_REG: "PACKET3_SET_SH_REG",
    p.PACKET3_DISPATCH_DIRECT: "PACKET3_DISPATCH_DIRECT",
    p.PACKET3_RELEASE_MEM: "PACKET3_RELEASE_MEM",
    p.PACKET3_ACQUIRE_MEM: "PACKET3_ACQUIRE_MEM", p.PACKET3_WAIT_REG_MEM: "PACKET3_WAIT_REG_MEM",
    p.PACKET3_WRITE_DATA: "PACKET3_WRITE_DATA",
    p.PACKET3_INDIRECT_BUFFER: "PACKET3_INDIRECT_BUFFER",
    p.PACKET3_EVENT_WRITE: "PACKET3_EVENT_WRITE",
}


def _sh_reg_names() -> dict[int, str]:
    """SET_SH_REG index -> register name for the COMPUTE_* registers of GC segment 0."""
    out = {}
    # dir(), not vars(): the generated register module defines its names lazily.
    for name in dir(gc):
        if name.startswith("regCOMPUTE_") and not name.endswith("_BASE_IDX"):
            val = getattr(gc, name)
            if isinstance(val, int):
                out[val] = name[3:]
    return out


_SH_NAMES = _sh_reg_names()


def sh_reg_name(index: int, gc_base: int) -> str:
    """Name of the SH register at SET_SH_REG `index` given GC segment 0's base."""
    return _SH_NAMES.get(index + p.PACKET3_SET_SH_REG_START - gc_base, f"sh[{index:#x}]")


def pm4_fields(op: int, body: Sequence[int], gc_base: int = 0) -> dict[str, int]:
    """Named fields of a type-3 packet's payload (`body` excludes the header)."""
    f: dict[str, int] = {}
    try:
        if op == p.PACKET3_SET_SH_REG:
            for i, v in enumerate(body[1:]):
                f[sh_reg_name(body[0] + i, gc_base)] = v
        elif op == p.PACKET3_DISPATCH_DIRECT:
            f.update(dim_x=body[0], dim_y=body[1], dim_z=body[2], initiator=body[3])
        elif op == p.PACKET3_RELEASE_MEM:
            d1, d2 = body[0], body[1]
            f["event_type"] = _field(d1, p.PACKET3_RELEASE_MEM_EVENT_TYPE,
                                     p.PACKET3_RELEASE_MEM_EVENT_INDEX)
            f["event_index"] = _field(d1, p.PACKET3_RELEASE_MEM_EVENT_INDEX,
                                      _bit(p.PACKET3_RELEASE_MEM_GCR_GLM_WB))
            f["dst_sel"] = _field(d2, p.PACKET3_RELEASE_MEM_DST_SEL, p.PACKET3_RELEASE_MEM_INT_SEL)
            f["int_sel"] = _field(d2, p.PACKET3_RELEASE_MEM_INT_SEL, p.PACKET3_RELEASE_MEM_DATA_SEL)
            f["data_sel"] = _field(d2, p.PACKET3_RELEASE_MEM_DATA_SEL, None)
            f["addr"] = body[2] | body[3] << 32
            f["data"] = body[4] | body[5] << 32
            f["int_ctxid"] = body[6]
        elif op == p.PACKET3_WAIT_REG_MEM:
            d1 = body[0]
            f["function"] = _field(d1, p.WAIT_REG_MEM_FUNCTION, p.WAIT_REG_MEM_MEM_SPACE)
            f["mem_space"] = _field(d1, p.WAIT_REG_MEM_MEM_SPACE, p.WAIT_REG_MEM_OPERATION)
            f["operation"] = _field(d1, p.WAIT_REG_MEM_OPERATION, p.WAIT_REG_MEM_ENGINE)
            f["addr"] = body[1] | body[2] << 32
            f.update(reference=body[3], mask=body[4], poll_interval=body[5])
        elif op == p.PACKET3_ACQUIRE_MEM:
            f.update(coher_cntl=body[0], coher_size=body[1] | (body[2] & 0xFF) << 32,
                     coher_base=body[3] | body[4] << 32, poll_interval=body[5], gcr_cntl=body[6])
        elif op == p.PACKET3_INDIRECT_BUFFER:
            f["ib_base"] = body[0] | body[1] << 32
            f["ib_size"] = body[2] & ((1 << 20) - 1)
            f["valid"] = int(bool(body[2] & p.INDIRECT_BUFFER_VALID))
        elif op == p.PACKET3_WRITE_DATA:
            f["dst_sel"] = _field(body[0], p.WRITE_DATA_DST_SEL, _bit(p.WR_ONE_ADDR))
            f["addr"] = body[1] | body[2] << 32
            f["count"] = len(body) - 3
        elif op == p.PACKET3_EVENT_WRITE:
            f["event_type"] = _field(body[0], p.EVENT_TYPE, p.EVENT_INDEX)
            f["event_index"] = _field(body[0], p.EVENT_INDEX, None)
    except IndexError:
        f["truncated"] = 1
    return f


def decode_pm4(dwords: Sequence[int], gc_base: int = 0) -> list[Packet]:
    """Splits a PM4 stream into packets; raises DecodeError on a type-0/1 header or a truncation."""
    out = []
    i, n = 0, len(dwords)
    while i < n:
        h = dwords[i]
        typ = p.CP_PACKET_GET_TYPE(h)
        if h == p.CP_PACKET2:  # type-2 filler
            out.append(Packet(i, "PACKET2", (h,)))
            i += 1
            continue
        if typ != p.PACKET_TYPE3:
            raise DecodeError(f"dword {i}: header {h:#010x} is a type-{typ} packet, not type 3")
        op = p.CP_PACKET3_GET_OPCODE(h)
        size = p.CP_PACKET_GET_COUNT(h) + 2
        if i + size > n:
            raise DecodeError(f"dword {i}: {PM4_NAMES.get(op, hex(op))} needs {size} dwords, "
                              f"only {n - i} left")
        body = tuple(dwords[i + 1:i + size])
        name = PM4_NAME.get(op) or PM4_NAMES.get(op, f"PACKET3 op {op:#x}")
        out.append(Packet(i, name, (h, *body), pm4_fields(op, body, gc_base)))
        i += size
    return out


def describe_pm4(dwords: Sequence[int], gc_base: int = 0) -> str:
    """The first packet of `dwords` as text (tolerates truncation)."""
    if not dwords:
        return "(nothing)"
    h = dwords[0]
    if p.CP_PACKET_GET_TYPE(h) != p.PACKET_TYPE3:
        return f"non-type-3 header {h:#010x}"
    op = p.CP_PACKET3_GET_OPCODE(h)
    size = p.CP_PACKET_GET_COUNT(h) + 2
    body = tuple(dwords[1:size])
    name = PM4_NAME.get(op) or PM4_NAMES.get(op, f"PACKET3 op {op:#x}")
    return str(Packet(0, name, (h, *body), pm4_fields(op, body, gc_base)))


# ----------------------------------------------------------------------------- SDMA
def _g(dw: int, mask: int, shift: int) -> int:
    return (dw >> shift) & mask


def sdma_op(h: int) -> tuple[int, int]:
    """(op, sub_op) of an SDMA header."""
    return (_g(h, s.SDMA_PKT_COPY_LINEAR_HEADER_op_mask, s.SDMA_PKT_COPY_LINEAR_HEADER_op_shift),
            _g(h, s.SDMA_PKT_COPY_LINEAR_HEADER_sub_op_mask,
               s.SDMA_PKT_COPY_LINEAR_HEADER_sub_op_shift))


# (op, sub_op or None for any) -> (name, size in dwords or None when the header gives it)
SDMA_PACKETS: dict[tuple[int, int | None], tuple[str, int | None]] = {
    (s.SDMA_OP_COPY, s.SDMA_SUBOP_COPY_LINEAR):
        ("COPY_LINEAR", s.SDMA_PKT_COPY_LINEAR_DST_ADDR_HI_dst_addr_63_32_offset + 1),
    (s.SDMA_OP_FENCE, None): ("FENCE", s.SDMA_PKT_FENCE_DATA_data_offset + 1),
    (s.SDMA_OP_TRAP, None): ("TRAP", s.SDMA_PKT_TRAP_INT_CONTEXT_int_context_offset + 1),
    (s.SDMA_OP_POLL_REGMEM, None):
        ("POLL_REGMEM", s.SDMA_PKT_POLL_REGMEM_DW5_interval_offset + 1),
    (s.SDMA_OP_TIMESTAMP, s.SDMA_SUBOP_TIMESTAMP_GET):
        ("TIMESTAMP_GET", s.SDMA_PKT_TIMESTAMP_GET_WRITE_ADDR_HI_write_addr_63_32_offset + 1),
    (s.SDMA_OP_TIMESTAMP, s.SDMA_SUBOP_TIMESTAMP_GET_GLOBAL):
        ("TIMESTAMP_GET_GLOBAL",
         s.SDMA_PKT_TIMESTAMP_GET_GLOBAL_WRITE_ADDR_HI_write_addr_63_32_offset + 1),
    (s.SDMA_OP_NOP, None): ("NOP", None),
}


def _sdma_ops() -> dict[int, str]:
    names = (k for k in dir(s) if k.startswith("SDMA_OP_")
             and k not in ("SDMA_OP_AQL_COPY", "SDMA_OP_AQL_BARRIER_OR"))
    return {getattr(s, k): k for k in names if isinstance(getattr(s, k), int)}


SDMA_OP_NAMES = _sdma_ops()


def sdma_packet_kind(h: int) -> tuple[str, int | None] | None:
    """(name, size) of the packet a header starts, or None if unsupported here."""
    op, sub = sdma_op(h)
    return SDMA_PACKETS.get((op, sub)) or SDMA_PACKETS.get((op, None))


def sdma_fields(name: str, pkt: Sequence[int]) -> dict[str, int]:
    """Named fields of one SDMA packet (`pkt` includes the header)."""
    f: dict[str, int] = {}
    if name == "COPY_LINEAR":
        f["count"] = _g(pkt[s.SDMA_PKT_COPY_LINEAR_COUNT_count_offset],
                        s.SDMA_PKT_COPY_LINEAR_COUNT_count_mask,
                        s.SDMA_PKT_COPY_LINEAR_COUNT_count_shift)
        f["src"] = pkt[s.SDMA_PKT_COPY_LINEAR_SRC_ADDR_LO_src_addr_31_0_offset] \
            | pkt[s.SDMA_PKT_COPY_LINEAR_SRC_ADDR_HI_src_addr_63_32_offset] << 32
        f["dst"] = pkt[s.SDMA_PKT_COPY_LINEAR_DST_ADDR_LO_dst_addr_31_0_offset] \
            | pkt[s.SDMA_PKT_COPY_LINEAR_DST_ADDR_HI_dst_addr_63_32_offset] << 32
    elif name == "FENCE":
        f["mtype"] = _g(pkt[0], s.SDMA_PKT_FENCE_HEADER_mtype_mask,
                        s.SDMA_PKT_FENCE_HEADER_mtype_shift)
        f["addr"] = pkt[s.SDMA_PKT_FENCE_ADDR_LO_addr_31_0_offset] \
            | pkt[s.SDMA_PKT_FENCE_ADDR_HI_addr_63_32_offset] << 32
        f["data"] = pkt[s.SDMA_PKT_FENCE_DATA_data_offset]
    elif name == "TRAP":
        f["int_context"] = _g(pkt[s.SDMA_PKT_TRAP_INT_CONTEXT_int_context_offset],
                              s.SDMA_PKT_TRAP_INT_CONTEXT_int_context_mask,
                              s.SDMA_PKT_TRAP_INT_CONTEXT_int_context_shift)
    elif name == "POLL_REGMEM":
        f["func"] = _g(pkt[0], s.SDMA_PKT_POLL_REGMEM_HEADER_func_mask,
                       s.SDMA_PKT_POLL_REGMEM_HEADER_func_shift)
        f["mem_poll"] = _g(pkt[0], s.SDMA_PKT_POLL_REGMEM_HEADER_mem_poll_mask,
                           s.SDMA_PKT_POLL_REGMEM_HEADER_mem_poll_shift)
        f["addr"] = pkt[s.SDMA_PKT_POLL_REGMEM_ADDR_LO_addr_31_0_offset] \
            | pkt[s.SDMA_PKT_POLL_REGMEM_ADDR_HI_addr_63_32_offset] << 32
        f["value"] = pkt[s.SDMA_PKT_POLL_REGMEM_VALUE_value_offset]
        f["mask"] = pkt[s.SDMA_PKT_POLL_REGMEM_MASK_mask_offset]
        dw5 = pkt[s.SDMA_PKT_POLL_REGMEM_DW5_interval_offset]
        f["interval"] = _g(dw5, s.SDMA_PKT_POLL_REGMEM_DW5_interval_mask,
                           s.SDMA_PKT_POLL_REGMEM_DW5_interval_shift)
        f["retry_count"] = _g(dw5, s.SDMA_PKT_POLL_REGMEM_DW5_retry_count_mask,
                              s.SDMA_PKT_POLL_REGMEM_DW5_retry_count_shift)
    elif name in ("TIMESTAMP_GET", "TIMESTAMP_GET_GLOBAL"):
        lo = pkt[s.SDMA_PKT_TIMESTAMP_GET_GLOBAL_WRITE_ADDR_LO_write_addr_31_3_offset]
        f["addr"] = (_g(lo, s.SDMA_PKT_TIMESTAMP_GET_GLOBAL_WRITE_ADDR_LO_write_addr_31_3_mask,
                        s.SDMA_PKT_TIMESTAMP_GET_GLOBAL_WRITE_ADDR_LO_write_addr_31_3_shift) << 3) \
            | pkt[s.SDMA_PKT_TIMESTAMP_GET_GLOBAL_WRITE_ADDR_HI_write_addr_63_32_offset] << 32
        f["addr_lo_low_bits"] = lo & 7
    elif name == "NOP":
        f["count"] = _g(pkt[0], s.SDMA_PKT_NOP_HEADER_count_mask, s.SDMA_PKT_NOP_HEADER_count_shift)
    return f


def sdma_size(h: int) -> int | None:
    """Size in dwords of the packet starting with header `h`, or None when unsupported."""
    kind = sdma_packet_kind(h)
    if kind is None:
        return None
    name, size = kind
    if size is None:  # NOP: header plus COUNT trailing dwords
        return 1 + _g(h, s.SDMA_PKT_NOP_HEADER_count_mask, s.SDMA_PKT_NOP_HEADER_count_shift)
    return size


def decode_sdma(dwords: Sequence[int]) -> list[Packet]:
    """Splits an SDMA stream into packets; raises DecodeError on an unsupported op or truncation."""
    out = []
    i, n = 0, len(dwords)
    while i < n:
        h = dwords[i]
        kind = sdma_packet_kind(h)
        if kind is None:
            op, sub = sdma_op(h)
            raise DecodeError(f"dword {i}: unsupported SDMA op {SDMA_OP_NAMES.get(op, op)} "
                              f"sub_op {sub} (header {h:#010x})")
        size = sdma_size(h) or 1
        if i + size > n:
            raise DecodeError(f"dword {i}: {kind[0]} needs {size} dwords, only {n - i} left")
        pkt = tuple(dwords[i:i + size])
        out.append(Packet(i, kind[0], pkt, sdma_fields(kind[0], pkt)))
        i += size
    return out


def describe_sdma(dwords: Sequence[int]) -> str:
    """The first packet of `dwords` as text (tolerates truncation)."""
    if not dwords:
        return "(nothing)"
    kind = sdma_packet_kind(dwords[0])
    if kind is None:
        op, sub = sdma_op(dwords[0])
        return f"unsupported SDMA op {op} sub_op {sub} (header {dwords[0]:#010x})"
    size = sdma_size(dwords[0]) or 1
    pkt = tuple(dwords[:size]) + (0,) * max(0, size - len(dwords))
    return str(Packet(0, kind[0], pkt, sdma_fields(kind[0], pkt)))
