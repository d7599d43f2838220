"""PM4 and SDMA packets as data: one description per packet this runtime builds, decodes or
executes, from the generated bindings of the architecture (`arch.GFX11`).

A PM4 description gives the opcode, the payload size (fixed, or a minimum for the packets whose
size the header carries) and the function that names its payload fields; its header is computed
(`header`, the count is never typed by hand). An SDMA description is the synthesised packet struct
of `hcq_bindings.amd.sdma_v6` (sdma_v6_0_0_pkt_open.h's field macros, laid out by bindgen): its
size, its fields by name, `encode` to build dwords and `decode` to read them back.

The builders (pm4.py, sdma.py), the decoder (decode.py) and the mock's packet processors
(mock/amd_pm4.py, mock/amd_sdma.py) all take packets from here; a packet the mock has no handler
for is an error that names it.
"""
from __future__ import annotations

import ctypes
from array import array
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from runtime.drivers.amd.arch import GFX11

p, gc, s = GFX11.pm4, GFX11.gc, GFX11.sdma
_M32 = 0xFFFFFFFF


# ----------------------------------------------------------------------------- PM4
def _shift(setter: Callable[[int], int]) -> int:
    return setter(1).bit_length() - 1


def _span(setter: Callable[[int], int], next_setter: Callable[[int], int] | None) -> tuple[int, int]:
    """(shift, mask) of the field `setter` writes, which runs up to where `next_setter`'s begins
    (or bit 32): the headers give only setter macros such as WAIT_REG_MEM_FUNCTION(x)."""
    lo = _shift(setter)
    hi = _shift(next_setter) if next_setter is not None else 32
    return lo, (1 << (hi - lo)) - 1


def _bit(flag: int) -> Callable[[int], int]:
    return lambda x: flag * x


def _get(dw: int, span: tuple[int, int]) -> int:
    return (dw >> span[0]) & span[1]


_RM_EVENT_TYPE = _span(p.PACKET3_RELEASE_MEM_EVENT_TYPE, p.PACKET3_RELEASE_MEM_EVENT_INDEX)
_RM_EVENT_INDEX = _span(p.PACKET3_RELEASE_MEM_EVENT_INDEX, _bit(p.PACKET3_RELEASE_MEM_GCR_GLM_WB))
_RM_DST_SEL = _span(p.PACKET3_RELEASE_MEM_DST_SEL, p.PACKET3_RELEASE_MEM_INT_SEL)
_RM_INT_SEL = _span(p.PACKET3_RELEASE_MEM_INT_SEL, p.PACKET3_RELEASE_MEM_DATA_SEL)
_RM_DATA_SEL = _span(p.PACKET3_RELEASE_MEM_DATA_SEL, None)
_WRM_FUNCTION = _span(p.WAIT_REG_MEM_FUNCTION, p.WAIT_REG_MEM_MEM_SPACE)
_WRM_MEM_SPACE = _span(p.WAIT_REG_MEM_MEM_SPACE, p.WAIT_REG_MEM_OPERATION)
_WRM_OPERATION = _span(p.WAIT_REG_MEM_OPERATION, p.WAIT_REG_MEM_ENGINE)
_WD_DST_SEL = _span(p.WRITE_DATA_DST_SEL, _bit(p.WR_ONE_ADDR))
_EW_EVENT_TYPE = _span(p.EVENT_TYPE, p.EVENT_INDEX)
_EW_EVENT_INDEX = _span(p.EVENT_INDEX, None)
IB_SIZE_MASK = (1 << 20) - 1  # IB_SIZE is bits [19:0]; PRE_ENB (nvd.h) is the next field at 21


def _sh_reg_names() -> dict[int, str]:
    """Register offset -> name for the COMPUTE_* registers of GC segment 0."""
    out = {}
    for name in dir(gc):  # dir(), not vars(): the generated register module defines names lazily
        if name.startswith("regCOMPUTE_") and not name.endswith("_BASE_IDX"):
            val = getattr(gc, name)
            if isinstance(val, int):
                out[val] = name[3:]
    return out


_SH_NAMES = _sh_reg_names()


def sh_reg_name(index: int, gc_base: int) -> str:
    """Name of the SH register at SET_SH_REG `index` given GC segment 0's base."""
    return _SH_NAMES.get(index + p.PACKET3_SET_SH_REG_START - gc_base, f"sh[{index:#x}]")


def _f_set_sh_reg(b: Sequence[int], gc_base: int) -> dict[str, int]:
    return {sh_reg_name(b[0] + i, gc_base): v for i, v in enumerate(b[1:])}


def _f_dispatch_direct(b: Sequence[int], gc_base: int) -> dict[str, int]:
    return {"dim_x": b[0], "dim_y": b[1], "dim_z": b[2], "initiator": b[3]}


def _f_release_mem(b: Sequence[int], gc_base: int) -> dict[str, int]:
    return {"event_type": _get(b[0], _RM_EVENT_TYPE), "event_index": _get(b[0], _RM_EVENT_INDEX),
            "dst_sel": _get(b[1], _RM_DST_SEL), "int_sel": _get(b[1], _RM_INT_SEL),
            "data_sel": _get(b[1], _RM_DATA_SEL), "addr": b[2] | b[3] << 32,
            "data": b[4] | b[5] << 32, "int_ctxid": b[6]}


def _f_wait_reg_mem(b: Sequence[int], gc_base: int) -> dict[str, int]:
    return {"function": _get(b[0], _WRM_FUNCTION), "mem_space": _get(b[0], _WRM_MEM_SPACE),
            "operation": _get(b[0], _WRM_OPERATION), "addr": b[1] | b[2] << 32,
            "reference": b[3], "mask": b[4], "poll_interval": b[5]}


def _f_acquire_mem(b: Sequence[int], gc_base: int) -> dict[str, int]:
    return {"coher_cntl": b[0], "coher_size": b[1] | (b[2] & 0xFF) << 32,
            "coher_base": b[3] | b[4] << 32, "poll_interval": b[5], "gcr_cntl": b[6]}


def _f_indirect_buffer(b: Sequence[int], gc_base: int) -> dict[str, int]:
    return {"ib_base": b[0] | b[1] << 32, "ib_size": b[2] & IB_SIZE_MASK,
            "valid": int(bool(b[2] & p.INDIRECT_BUFFER_VALID))}


def _f_write_data(b: Sequence[int], gc_base: int) -> dict[str, int]:
    return {"dst_sel": _get(b[0], _WD_DST_SEL), "addr": b[1] | b[2] << 32, "count": len(b) - 3}


def _f_event_write(b: Sequence[int], gc_base: int) -> dict[str, int]:
    return {"event_type": _get(b[0], _EW_EVENT_TYPE), "event_index": _get(b[0], _EW_EVENT_INDEX)}


def _f_none(b: Sequence[int], gc_base: int) -> dict[str, int]:
    return {}


@dataclass(frozen=True)
class PM4Packet:
    """One type-3 packet: opcode, payload size and its fields."""

    name: str                   # the binding's name without PACKET3_ ("WAIT_REG_MEM")
    opcode: int
    payload_dw: int             # payload dwords (the minimum when `variable`)
    fields: Callable[[Sequence[int], int], dict[str, int]]  # (payload, GC base) -> named fields
    variable: bool = False      # the header's count says how long it is (SET_SH_REG, NOP, ...)

    @property
    def header(self) -> int:
        """The header of the fixed-size packet (PACKET3's count is payload - 1)."""
        assert not self.variable, f"{self.name} has a variable size: use header_for(n)"
        return packet3(self.opcode, self.payload_dw)

    def header_for(self, payload_dw: int) -> int:
        """The header of this packet with `payload_dw` payload dwords."""
        if payload_dw < self.payload_dw or (payload_dw != self.payload_dw and not self.variable):
            raise ValueError(f"PACKET3_{self.name} takes {self.payload_dw} payload dwords"
                             f"{' or more' if self.variable else ''}, not {payload_dw}")
        return packet3(self.opcode, payload_dw)

    def check(self, payload_dw: int) -> str | None:
        """Why a packet with `payload_dw` payload dwords is malformed, or None."""
        if payload_dw == self.payload_dw or (self.variable and payload_dw >= self.payload_dw):
            return None
        more = " or more" if self.variable else ""
        return f"PACKET3_{self.name} has {payload_dw} payload dwords, expected " \
               f"{self.payload_dw}{more}"


# header -> (type, dwords including the header, opcode), filled on first sight of each header.
# The three macro calls cost ~0.26 us against ~0.05 us for the lookup, and the mock's command
# processor and the decoder split every packet (18 per kernel launch) while a queue repeats a
# handful of headers. Bounded, since headers are whatever a queue holds.
_HEADERS: dict[int, tuple[int, int, int]] = {}
_HEADERS_MAX = 4096


def split_pm4_header(h: int) -> tuple[int, int, int]:
    """A PM4 header's packet type, size in dwords (header included) and type-3 opcode, read with
    the bindings' CP_PACKET_GET_TYPE/COUNT and CP_PACKET3_GET_OPCODE (cached per header value)."""
    hit = _HEADERS.get(h)
    if hit is None:
        if len(_HEADERS) >= _HEADERS_MAX:
            _HEADERS.clear()
        hit = _HEADERS[h] = (int(p.CP_PACKET_GET_TYPE(h)), int(p.CP_PACKET_GET_COUNT(h)) + 2,
                             int(p.CP_PACKET3_GET_OPCODE(h)))
    return hit


def packet3(op: int, payload_dw: int) -> int:
    """Type-3 header for `payload_dw` payload dwords. The macro's `PACKET_TYPE3 << 30` is a signed
    int in C, so the binding returns a negative number: keep the 32 bits the hardware sees."""
    return p.PACKET3(op, payload_dw - 1) & _M32


#: every PM4 packet this runtime emits or the mock executes, by name
PM4: Mapping[str, PM4Packet] = {pk.name: pk for pk in (
    PM4Packet("NOP", p.PACKET3_NOP, 0, _f_none, variable=True),
    PM4Packet("SET_SH_REG", p.PACKET3_SET_SH_REG, 2, _f_set_sh_reg, variable=True),
    PM4Packet("DISPATCH_DIRECT", p.PACKET3_DISPATCH_DIRECT, 4, _f_dispatch_direct),
    PM4Packet("RELEASE_MEM", p.PACKET3_RELEASE_MEM, 7, _f_release_mem),
    PM4Packet("ACQUIRE_MEM", p.PACKET3_ACQUIRE_MEM, 7, _f_acquire_mem),
    PM4Packet("WAIT_REG_MEM", p.PACKET3_WAIT_REG_MEM, 6, _f_wait_reg_mem),
    PM4Packet("WRITE_DATA", p.PACKET3_WRITE_DATA, 4, _f_write_data, variable=True),
    PM4Packet("INDIRECT_BUFFER", p.PACKET3_INDIRECT_BUFFER, 3, _f_indirect_buffer),
    PM4Packet("EVENT_WRITE", p.PACKET3_EVENT_WRITE, 1, _f_event_write),
)}
PM4_BY_OPCODE: Mapping[int, PM4Packet] = {pk.opcode: pk for pk in PM4.values()}
assert set(PM4) == GFX11.pm4_packets, "the architecture record names the packets described here"


def _pm4_opcode_names() -> dict[int, str]:
    """Opcode -> name for every PACKET3_* opcode constant of the bindings (for error messages
    about packets this runtime does not describe; several names may share a value)."""
    out: dict[int, list[str]] = {}
    for name in dir(p):
        if name.startswith("PACKET3_"):
            val = getattr(p, name)
            if isinstance(val, int) and 0 <= val <= 0xFF:
                out.setdefault(val, []).append(name)
    return {k: "/".join(sorted(v)) for k, v in out.items()}


PM4_OPCODE_NAMES = _pm4_opcode_names()


def pm4_name(op: int) -> str:
    """"PACKET3_WAIT_REG_MEM" for a described opcode, the bindings' name(s) for another, else the
    number."""
    pk = PM4_BY_OPCODE.get(op)
    if pk is not None:
        return f"PACKET3_{pk.name}"
    return PM4_OPCODE_NAMES.get(op, f"PACKET3 op {op:#x}")


# ----------------------------------------------------------------------------- SDMA
@dataclass(frozen=True)
class SDMAPacket:
    """One SDMA packet: its op and sub-op, and its synthesised struct (size and fields)."""

    name: str
    op: int
    sub_op: int | None          # None: any sub-op (the packet has one form)
    struct: Any                 # the hcq_bindings.amd.sdma_v6 struct type
    variable: bool = False      # NOP: the header's count says how many dwords follow

    @property
    def dwords(self) -> int:
        """Size in dwords (the minimum when `variable`)."""
        return 1 if self.variable else ctypes.sizeof(self.struct) // 4

    @property
    def field_names(self) -> tuple[str, ...]:
        """The struct's fields, in order (op and sub_op first)."""
        return tuple(f for f in vars(self.struct) if not f.startswith("_"))

    def encode(self, **fields: int) -> array:
        """The packet's dwords with `fields` set by name (op and sub_op are the packet's)."""
        unknown = set(fields) - set(self.field_names)
        if unknown:
            raise ValueError(f"SDMA {self.name} has no field {', '.join(sorted(unknown))} "
                             f"(fields: {', '.join(self.field_names)})")
        pkt = self.struct(op=self.op, sub_op=self.sub_op or 0, **fields)
        return array("I", bytes(pkt)[:4 * self.dwords])

    def decode(self, pkt: Sequence[int]) -> dict[str, int]:
        """The packet's fields by name (not op and sub_op); address halves X_31_0 and X_63_32
        (or X_31_3, in 8-byte units) are joined into X."""
        raw = array("I", pkt[:ctypes.sizeof(self.struct) // 4]).tobytes()
        raw += bytes(ctypes.sizeof(self.struct) - len(raw))
        st = self.struct.from_buffer_copy(raw)
        out: dict[str, int] = {}
        for f in self.field_names[2:]:
            v = getattr(st, f)
            if f.endswith("_63_32"):
                out[f[:-6]] = out.get(f[:-6], 0) | v << 32
            elif f.endswith("_31_0"):
                out[f[:-5]] = out.get(f[:-5], 0) | v
            elif f.endswith("_31_3"):
                out[f[:-5]] = out.get(f[:-5], 0) | v << 3
            else:
                out[f] = v
        if self.variable:
            out = {"count": out.get("count", 0)}
        return out

    def size_of(self, header: int) -> int:
        """Size in dwords of the packet that starts with `header`."""
        if self.variable:  # NOP: header plus COUNT trailing dwords
            return 1 + ((header >> s.SDMA_PKT_NOP_HEADER_count_shift)
                        & s.SDMA_PKT_NOP_HEADER_count_mask)
        return self.dwords


#: every SDMA packet this runtime emits or the mock executes, by name
SDMA: Mapping[str, SDMAPacket] = {pk.name: pk for pk in (
    SDMAPacket("NOP", s.SDMA_OP_NOP, None, s.SDMA_PKT_NOP, variable=True),
    SDMAPacket("COPY_LINEAR", s.SDMA_OP_COPY, s.SDMA_SUBOP_COPY_LINEAR, s.SDMA_PKT_COPY_LINEAR),
    SDMAPacket("CONSTANT_FILL", s.SDMA_OP_CONST_FILL, None, s.SDMA_PKT_CONSTANT_FILL),
    SDMAPacket("FENCE", s.SDMA_OP_FENCE, None, s.SDMA_PKT_FENCE),
    SDMAPacket("TRAP", s.SDMA_OP_TRAP, None, s.SDMA_PKT_TRAP),
    SDMAPacket("POLL_REGMEM", s.SDMA_OP_POLL_REGMEM, None, s.SDMA_PKT_POLL_REGMEM),
    SDMAPacket("TIMESTAMP_GET", s.SDMA_OP_TIMESTAMP, s.SDMA_SUBOP_TIMESTAMP_GET,
               s.SDMA_PKT_TIMESTAMP_GET),
    SDMAPacket("TIMESTAMP_GET_GLOBAL", s.SDMA_OP_TIMESTAMP, s.SDMA_SUBOP_TIMESTAMP_GET_GLOBAL,
               s.SDMA_PKT_TIMESTAMP_GET_GLOBAL),
)}
_SDMA_BY_OP: dict[tuple[int, int | None], SDMAPacket] = {(pk.op, pk.sub_op): pk
                                                          for pk in SDMA.values()}
assert set(SDMA) == GFX11.sdma_packets, "the architecture record names the packets described here"


def _sdma_op_names() -> dict[int, str]:
    names = (k for k in dir(s) if k.startswith("SDMA_OP_")
             and k not in ("SDMA_OP_AQL_COPY", "SDMA_OP_AQL_BARRIER_OR"))
    return {getattr(s, k): k for k in names if isinstance(getattr(s, k), int)}


SDMA_OP_NAMES = _sdma_op_names()
_OP = (s.SDMA_PKT_COPY_LINEAR_HEADER_op_shift, s.SDMA_PKT_COPY_LINEAR_HEADER_op_mask)
_SUB_OP = (s.SDMA_PKT_COPY_LINEAR_HEADER_sub_op_shift, s.SDMA_PKT_COPY_LINEAR_HEADER_sub_op_mask)


def sdma_op(h: int) -> tuple[int, int]:
    """(op, sub_op) of an SDMA header (the same bits in every packet's header)."""
    return _get(h, _OP), _get(h, _SUB_OP)


def sdma_packet(h: int) -> SDMAPacket | None:
    """The description of the packet that header `h` starts, None when none describes it."""
    op, sub = sdma_op(h)
    return _SDMA_BY_OP.get((op, sub)) or _SDMA_BY_OP.get((op, None))


def sdma_unknown(h: int) -> str:
    """Text naming an SDMA header no description covers."""
    op, sub = sdma_op(h)
    return f"unsupported SDMA op {SDMA_OP_NAMES.get(op, op)} sub_op {sub} (header {h:#010x})"
