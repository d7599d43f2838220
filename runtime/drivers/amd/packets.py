"""PM4 and SDMA packets as data: one description per packet this runtime builds, decodes or
executes, from the generated bindings of one architecture (`packets_for(arch)`, built once per
architecture record and shared by every device of that architecture).

A PM4 description gives the opcode, the payload size (fixed, or a minimum for the packets whose
size the header carries) and the function that names its payload fields; its header is computed
(`header`, the count is never typed by hand). Where the PM4 families differ (gfx9's soc15d.h and
gfx10/11's nvd.h), `PM4Forms` says how. An SDMA description is the synthesised packet struct of the
architecture's SDMA bindings (sdma_v6_0_0_pkt_open.h's or vega10_sdma_pkt_open.h's field macros,
laid out by bindgen): its size, its fields by name, `encode` to build dwords and `decode` to read
them back.

The builders (pm4.py, sdma.py), the decoder (decode.py) and the mock's packet processors
(mock/amd_pm4.py, mock/amd_sdma.py) all take packets from here; a packet the mock has no handler
for is an error that names it.
"""
from __future__ import annotations

import ctypes
from array import array
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, Mapping, Sequence

from runtime.drivers.amd.arch import PM4_FAMILIES, AMDArch

_M32 = 0xFFFFFFFF
IB_SIZE_MASK = (1 << 20) - 1  # IB_SIZE is bits [19:0]; PRE_ENB (nvd.h, soc15d.h) is next at 21


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


@dataclass(frozen=True)
class PM4Forms:
    """Where a PM4 family's packets differ: the RELEASE_MEM field setters (named
    PACKET3_RELEASE_MEM_* in nvd.h, bare EVENT_TYPE/DATA_SEL/... in soc15d.h, with the cache bits
    in between), and ACQUIRE_MEM's layout (nvd.h: CP_COHER_CNTL, size, base, poll interval and a
    trailing GCR_CNTL; soc15d.h: the cache actions are CP_COHER_CNTL itself and nothing follows
    the poll interval)."""

    rm_event_type: Callable[[int], int]
    rm_event_index: Callable[[int], int]
    rm_first_cache_bit: int          # the field after EVENT_INDEX: its end
    rm_dst_sel: Callable[[int], int]
    rm_int_sel: Callable[[int], int]
    rm_data_sel: Callable[[int], int]
    acquire_mem_payload_dw: int
    acquire_mem_cache_dw: int        # the payload dword holding the cache-control bits
    acquire_mem_size_hi: int         # COHER_SIZE_HI covering the whole address space

    def acquire_mem(self, cache: int, poll_interval: int) -> tuple[int, ...]:
        """ACQUIRE_MEM's payload over the whole address range with cache-control bits `cache`."""
        body = [0, _M32, self.acquire_mem_size_hi, 0, 0, poll_interval]
        if self.acquire_mem_cache_dw == len(body):
            body.append(cache)
        else:
            body[self.acquire_mem_cache_dw] = cache
        return tuple(body)


def _nv_forms(p: ModuleType) -> PM4Forms:
    return PM4Forms(p.PACKET3_RELEASE_MEM_EVENT_TYPE, p.PACKET3_RELEASE_MEM_EVENT_INDEX,
                    p.PACKET3_RELEASE_MEM_GCR_GLM_WB, p.PACKET3_RELEASE_MEM_DST_SEL,
                    p.PACKET3_RELEASE_MEM_INT_SEL, p.PACKET3_RELEASE_MEM_DATA_SEL,
                    acquire_mem_payload_dw=7, acquire_mem_cache_dw=6,
                    acquire_mem_size_hi=0xFF)  # nvd.h: COHER_SIZE_HI [7:0]


def _soc15_forms(p: ModuleType) -> PM4Forms:
    return PM4Forms(p.EVENT_TYPE, p.EVENT_INDEX, p.EOP_TCL1_VOL_ACTION_EN, p.DST_SEL, p.INT_SEL,
                    p.DATA_SEL, acquire_mem_payload_dw=6, acquire_mem_cache_dw=0,
                    acquire_mem_size_hi=0xFFFFFF)  # as gfx_v9_4_3.c emit_mem_sync writes it


#: the forms of each PM4 family (arch.PM4_FAMILIES)
FORMS: Mapping[str, Callable[[ModuleType], PM4Forms]] = {"nv": _nv_forms, "soc15": _soc15_forms}
assert set(FORMS) == set(PM4_FAMILIES), "every PM4 family has its forms here"


@dataclass(frozen=True)
class PM4Packet:
    """One type-3 packet of one architecture: opcode, payload size and its fields."""

    name: str                   # the binding's name without PACKET3_ ("WAIT_REG_MEM")
    opcode: int
    payload_dw: int             # payload dwords (the minimum when `variable`)
    fields: Callable[[Sequence[int], int], dict[str, int]]  # (payload, GC base) -> named fields
    pm4: ModuleType             # the architecture's PM4 bindings (the header macro)
    variable: bool = False      # the header's count says how long it is (SET_SH_REG, NOP, ...)

    @property
    def header(self) -> int:
        """The header of the fixed-size packet (PACKET3's count is payload - 1)."""
        assert not self.variable, f"{self.name} has a variable size: use header_for(n)"
        return packet3(self.pm4, self.opcode, self.payload_dw)

    def header_for(self, payload_dw: int) -> int:
        """The header of this packet with `payload_dw` payload dwords."""
        if payload_dw < self.payload_dw or (payload_dw != self.payload_dw and not self.variable):
            raise ValueError(f"PACKET3_{self.name} takes {self.payload_dw} payload dwords"
                             f"{' or more' if self.variable else ''}, not {payload_dw}")
        return packet3(self.pm4, self.opcode, payload_dw)

    def check(self, payload_dw: int) -> str | None:
        """Why a packet with `payload_dw` payload dwords is malformed, or None."""
        if payload_dw == self.payload_dw or (self.variable and payload_dw >= self.payload_dw):
            return None
        more = " or more" if self.variable else ""
        return f"PACKET3_{self.name} has {payload_dw} payload dwords, expected " \
               f"{self.payload_dw}{more}"


def packet3(pm4: ModuleType, op: int, payload_dw: int) -> int:
    """Type-3 header for `payload_dw` payload dwords, from the bindings `pm4`. The macro's
    `PACKET_TYPE3 << 30` is a signed int in C, so the binding returns a negative number: keep the
    32 bits the hardware sees."""
    return pm4.PACKET3(op, payload_dw - 1) & _M32


# ----------------------------------------------------------------------------- SDMA
@dataclass(frozen=True)
class SDMAPacket:
    """One SDMA packet: its op and sub-op, and its synthesised struct (size and fields)."""

    name: str
    op: int
    sub_op: int | None          # None: any sub-op (the packet has one form)
    struct: Any                 # the struct type of the architecture's SDMA bindings
    variable: bool = False      # NOP: the header's count says how many dwords follow
    count_span: tuple[int, int] = (0, 0)  # NOP: where its header keeps the count

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
            return 1 + _get(header, self.count_span)
        return self.dwords


# ----------------------------------------------------------------------------- one architecture
class PacketSet:
    """Every PM4 and SDMA packet one architecture's driver emits or its mock executes, described
    from the architecture's bindings (`packets_for(arch)` builds it once per record)."""

    # header -> (type, dwords including the header, opcode), filled on first sight of each
    # header: the three macro calls cost several times the lookup, and the mock's command
    # processor and the decoder split every packet while a queue repeats a handful of headers.
    # Bounded, since headers are whatever a queue holds.
    _HEADERS_MAX = 4096

    def __init__(self, arch: AMDArch) -> None:
        self.arch = arch
        p, gc, s = arch.pm4, arch.gc, arch.sdma
        self.p, self.gc, self.s = p, gc, s
        self.forms = forms = FORMS[arch.pm4_family](p)
        self._headers: dict[int, tuple[int, int, int]] = {}
        rm_type = _span(forms.rm_event_type, forms.rm_event_index)
        rm_index = _span(forms.rm_event_index, _bit(forms.rm_first_cache_bit))
        rm_dst = _span(forms.rm_dst_sel, forms.rm_int_sel)
        rm_int = _span(forms.rm_int_sel, forms.rm_data_sel)
        rm_data = _span(forms.rm_data_sel, None)
        wrm_function = _span(p.WAIT_REG_MEM_FUNCTION, p.WAIT_REG_MEM_MEM_SPACE)
        wrm_mem_space = _span(p.WAIT_REG_MEM_MEM_SPACE, p.WAIT_REG_MEM_OPERATION)
        wrm_operation = _span(p.WAIT_REG_MEM_OPERATION, p.WAIT_REG_MEM_ENGINE)
        wd_dst_sel = _span(p.WRITE_DATA_DST_SEL, _bit(p.WR_ONE_ADDR))
        ew_type = _span(p.EVENT_TYPE, p.EVENT_INDEX)
        ew_index = _span(p.EVENT_INDEX, None)
        ib_valid = p.INDIRECT_BUFFER_VALID
        cache_dw = forms.acquire_mem_cache_dw
        self._sh_names = self._sh_reg_names()

        def f_set_sh_reg(b: Sequence[int], gc_base: int) -> dict[str, int]:
            return {self.sh_reg_name(b[0] + i, gc_base): v for i, v in enumerate(b[1:])}

        def f_dispatch_direct(b: Sequence[int], gc_base: int) -> dict[str, int]:
            return {"dim_x": b[0], "dim_y": b[1], "dim_z": b[2], "initiator": b[3]}

        def f_release_mem(b: Sequence[int], gc_base: int) -> dict[str, int]:
            return {"event_type": _get(b[0], rm_type), "event_index": _get(b[0], rm_index),
                    "dst_sel": _get(b[1], rm_dst), "int_sel": _get(b[1], rm_int),
                    "data_sel": _get(b[1], rm_data), "addr": b[2] | b[3] << 32,
                    "data": b[4] | b[5] << 32, "int_ctxid": b[6]}

        def f_wait_reg_mem(b: Sequence[int], gc_base: int) -> dict[str, int]:
            return {"function": _get(b[0], wrm_function),
                    "mem_space": _get(b[0], wrm_mem_space),
                    "operation": _get(b[0], wrm_operation), "addr": b[1] | b[2] << 32,
                    "reference": b[3], "mask": b[4], "poll_interval": b[5]}

        size_hi = forms.acquire_mem_size_hi

        def f_acquire_mem(b: Sequence[int], gc_base: int) -> dict[str, int]:
            out = {"coher_cntl": b[0], "coher_size": b[1] | (b[2] & size_hi) << 32,
                   "coher_base": b[3] | b[4] << 32, "poll_interval": b[5]}
            if cache_dw:  # nvd.h's trailing GCR_CNTL
                out["gcr_cntl"] = b[cache_dw]
            return out

        def f_indirect_buffer(b: Sequence[int], gc_base: int) -> dict[str, int]:
            return {"ib_base": b[0] | b[1] << 32, "ib_size": b[2] & IB_SIZE_MASK,
                    "valid": int(bool(b[2] & ib_valid))}

        def f_write_data(b: Sequence[int], gc_base: int) -> dict[str, int]:
            return {"dst_sel": _get(b[0], wd_dst_sel), "addr": b[1] | b[2] << 32,
                    "count": len(b) - 3}

        def f_event_write(b: Sequence[int], gc_base: int) -> dict[str, int]:
            return {"event_type": _get(b[0], ew_type), "event_index": _get(b[0], ew_index)}

        def f_none(b: Sequence[int], gc_base: int) -> dict[str, int]:
            return {}

        def pm4(name: str, payload_dw: int, fields: Callable[[Sequence[int], int], dict[str, int]],
                variable: bool = False) -> PM4Packet:
            return PM4Packet(name, getattr(p, f"PACKET3_{name}"), payload_dw, fields, p, variable)

        #: every PM4 packet this runtime emits or the mock executes, by name
        self.pm4: Mapping[str, PM4Packet] = {pk.name: pk for pk in (
            pm4("NOP", 0, f_none, variable=True),
            pm4("SET_SH_REG", 2, f_set_sh_reg, variable=True),
            pm4("DISPATCH_DIRECT", 4, f_dispatch_direct),
            pm4("RELEASE_MEM", 7, f_release_mem),
            pm4("ACQUIRE_MEM", forms.acquire_mem_payload_dw, f_acquire_mem),
            pm4("WAIT_REG_MEM", 6, f_wait_reg_mem),
            pm4("WRITE_DATA", 4, f_write_data, variable=True),
            pm4("INDIRECT_BUFFER", 3, f_indirect_buffer),
            pm4("EVENT_WRITE", 1, f_event_write),
        )}
        self.pm4_by_opcode: Mapping[int, PM4Packet] = {pk.opcode: pk for pk in self.pm4.values()}
        if set(self.pm4) != arch.pm4_packets:
            raise AssertionError(f"{arch.name}: the record's PM4 packets "
                                 f"{sorted(arch.pm4_packets)} are not the described ones")
        self.pm4_opcode_names = self._pm4_opcode_names()

        nop_count = (s.SDMA_PKT_NOP_HEADER_count_shift, s.SDMA_PKT_NOP_HEADER_count_mask)
        #: every SDMA packet this runtime emits or the mock executes, by name
        self.sdma: Mapping[str, SDMAPacket] = {pk.name: pk for pk in (
            SDMAPacket("NOP", s.SDMA_OP_NOP, None, s.SDMA_PKT_NOP, variable=True,
                       count_span=nop_count),
            SDMAPacket("COPY_LINEAR", s.SDMA_OP_COPY, s.SDMA_SUBOP_COPY_LINEAR,
                       s.SDMA_PKT_COPY_LINEAR),
            SDMAPacket("CONSTANT_FILL", s.SDMA_OP_CONST_FILL, None, s.SDMA_PKT_CONSTANT_FILL),
            SDMAPacket("FENCE", s.SDMA_OP_FENCE, None, s.SDMA_PKT_FENCE),
            SDMAPacket("TRAP", s.SDMA_OP_TRAP, None, s.SDMA_PKT_TRAP),
            SDMAPacket("POLL_REGMEM", s.SDMA_OP_POLL_REGMEM, None, s.SDMA_PKT_POLL_REGMEM),
            SDMAPacket("TIMESTAMP_GET", s.SDMA_OP_TIMESTAMP, s.SDMA_SUBOP_TIMESTAMP_GET,
                       s.SDMA_PKT_TIMESTAMP_GET),
            SDMAPacket("TIMESTAMP_GET_GLOBAL", s.SDMA_OP_TIMESTAMP,
                       s.SDMA_SUBOP_TIMESTAMP_GET_GLOBAL, s.SDMA_PKT_TIMESTAMP_GET_GLOBAL),
        )}
        self._sdma_by_op: dict[tuple[int, int | None], SDMAPacket] = {
            (pk.op, pk.sub_op): pk for pk in self.sdma.values()}
        if set(self.sdma) != arch.sdma_packets:
            raise AssertionError(f"{arch.name}: the record's SDMA packets "
                                 f"{sorted(arch.sdma_packets)} are not the described ones")
        names = (k for k in dir(s) if k.startswith("SDMA_OP_")
                 and k not in ("SDMA_OP_AQL_COPY", "SDMA_OP_AQL_BARRIER_OR"))
        self.sdma_op_names = {getattr(s, k): k for k in names if isinstance(getattr(s, k), int)}
        self._op = (s.SDMA_PKT_COPY_LINEAR_HEADER_op_shift, s.SDMA_PKT_COPY_LINEAR_HEADER_op_mask)
        self._sub_op = (s.SDMA_PKT_COPY_LINEAR_HEADER_sub_op_shift,
                        s.SDMA_PKT_COPY_LINEAR_HEADER_sub_op_mask)

    # ------------------------------------------------------------------ PM4
    def _sh_reg_names(self) -> dict[int, str]:
        """Register offset -> name for the COMPUTE_* registers of GC segment 0."""
        gc = self.gc
        out = {}
        for name in dir(gc):  # dir(), not vars(): the generated register module is lazy
            if name.startswith("regCOMPUTE_") and not name.endswith("_BASE_IDX"):
                val = getattr(gc, name)
                if isinstance(val, int):
                    out[val] = name[3:]
        return out

    def sh_reg_name(self, index: int, gc_base: int) -> str:
        """Name of the SH register at SET_SH_REG `index` given GC segment 0's base."""
        return self._sh_names.get(index + self.p.PACKET3_SET_SH_REG_START - gc_base,
                                  f"sh[{index:#x}]")

    def _pm4_opcode_names(self) -> dict[int, str]:
        """Opcode -> name for every PACKET3_* opcode constant of the bindings (for error messages
        about packets this runtime does not describe; several names may share a value)."""
        out: dict[int, list[str]] = {}
        for name in dir(self.p):
            if name.startswith("PACKET3_"):
                val = getattr(self.p, name)
                if isinstance(val, int) and 0 <= val <= 0xFF:
                    out.setdefault(val, []).append(name)
        return {k: "/".join(sorted(v)) for k, v in out.items()}

    def split_pm4_header(self, h: int) -> tuple[int, int, int]:
        """A PM4 header's packet type, size in dwords (header included) and type-3 opcode, read
        with the bindings' CP_PACKET_GET_TYPE/COUNT and CP_PACKET3_GET_OPCODE (cached per header
        value)."""
        hit = self._headers.get(h)
        if hit is None:
            p = self.p
            if len(self._headers) >= self._HEADERS_MAX:
                self._headers.clear()
            hit = self._headers[h] = (int(p.CP_PACKET_GET_TYPE(h)),
                                      int(p.CP_PACKET_GET_COUNT(h)) + 2,
                                      int(p.CP_PACKET3_GET_OPCODE(h)))
        return hit

    def packet3(self, op: int, payload_dw: int) -> int:
        """Type-3 header for `payload_dw` payload dwords."""
        return packet3(self.p, op, payload_dw)

    def pm4_name(self, op: int) -> str:
        """"PACKET3_WAIT_REG_MEM" for a described opcode, the bindings' name(s) for another, else
        the number."""
        pk = self.pm4_by_opcode.get(op)
        if pk is not None:
            return f"PACKET3_{pk.name}"
        return self.pm4_opcode_names.get(op, f"PACKET3 op {op:#x}")

    # ------------------------------------------------------------------ SDMA
    def sdma_op(self, h: int) -> tuple[int, int]:
        """(op, sub_op) of an SDMA header (the same bits in every packet's header)."""
        return _get(h, self._op), _get(h, self._sub_op)

    def sdma_packet(self, h: int) -> SDMAPacket | None:
        """The description of the packet that header `h` starts, None when none describes it."""
        op, sub = self.sdma_op(h)
        return self._sdma_by_op.get((op, sub)) or self._sdma_by_op.get((op, None))

    def sdma_unknown(self, h: int) -> str:
        """Text naming an SDMA header no description covers."""
        op, sub = self.sdma_op(h)
        return f"unsupported SDMA op {self.sdma_op_names.get(op, op)} sub_op {sub} " \
               f"(header {h:#010x})"


_SETS: dict[str, PacketSet] = {}


def packets_for(arch: AMDArch) -> PacketSet:
    """The packet descriptions of `arch`, built on first use (a cache: dropping it only costs the
    rebuild)."""
    ps = _SETS.get(arch.name)
    if ps is None or ps.arch is not arch:
        ps = _SETS[arch.name] = PacketSet(arch)
    return ps
