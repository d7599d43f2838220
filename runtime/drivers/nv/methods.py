"""Pushbuffer methods: encoding, GPFIFO entries, and a decoder that names methods and fields.

A pushbuffer is a stream of dwords: a method header (clc56f.h `NVC56F_DMA_*`: opcode 31:29, count
28:16, subchannel 15:13, method address in dwords 11:0) followed by `count` data dwords. This driver
only emits incrementing headers (`SEC_OP_INC_METHOD`): data dword i goes to method `mthd + 4*i`.
Methods below 0x100 go to the host (class *6F) whatever the subchannel; others go to the class bound
to the subchannel with SET_OBJECT. Subchannels follow the engines' convention (tinygrad, NVK):
compute on 1, copy on 4, host methods issued on 0.

Method offsets and field positions come from `hcq_bindings.nv.classes` (open-gpu-doc headers) and, for
the host class, `NVC56F_*` (clc56f.h; Hopper's C86F keeps every method and field this driver uses).
The decoder is generated from the same tables: every integer constant of a class that has bit-range
fields is a method, its tuple-valued children are fields, and their integer children name values.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Sequence

from hcq_bindings.nv import classes as cl

SUBC_HOST = 0
SUBC_COMPUTE = 1
SUBC_COPY = 4
HOST_METHOD_LIMIT = 0x100  # methods below this offset are executed by the host (PBDMA)

_M32 = 0xFFFFFFFF


def _lo(field: tuple[int, int]) -> int:
    return field[1]


def _width_mask(field: tuple[int, int]) -> int:
    return (1 << (field[0] - field[1] + 1)) - 1


def fval(field: tuple[int, int], value: int) -> int:
    """`value` placed in bit range `field` = (hi, lo) of a dword; raises if it does not fit."""
    if value < 0 or value > _width_mask(field):
        raise ValueError(f"{value:#x} does not fit bits {field[0]}:{field[1]}")
    return value << field[1]


def fget(field: tuple[int, int], word: int) -> int:
    """The bit range `field` of `word`."""
    return (word >> field[1]) & _width_mask(field)


INCR_HEADER = fval(cl.NVC56F_DMA_INCR_OPCODE, cl.NVC56F_DMA_INCR_OPCODE_VALUE)


@lru_cache(maxsize=4096)
def method_header(subc: int, mthd: int, count: int) -> int:
    """An incrementing method header for `count` data dwords starting at method offset `mthd`
    (cached: a launch emits the same few headers over and over)."""
    if mthd & 3 or mthd >> 14:
        raise ValueError(f"method offset {mthd:#x} is not a dword offset below 0x4000")
    if not 0 < count <= _width_mask(cl.NVC56F_DMA_INCR_COUNT):
        raise ValueError(f"{count} data dwords do not fit one method header")
    return INCR_HEADER | fval(cl.NVC56F_DMA_INCR_COUNT, count) \
        | fval(cl.NVC56F_DMA_INCR_SUBCHANNEL, subc) | fval(cl.NVC56F_DMA_INCR_ADDRESS, mthd >> 2)


def nvm(subc: int, mthd: int, *data: int) -> list[int]:
    """A complete method: header plus data dwords (tinygrad's and NVK's `P_MTHD` shape)."""
    return [method_header(subc, mthd, len(data)), *[d & _M32 for d in data]]


def hi32(v: int) -> int:
    """Bits 63:32."""
    return (v >> 32) & _M32


def lo32(v: int) -> int:
    """Bits 31:0."""
    return v & _M32


# ------------------------------------------------------------------ GPFIFO entries
GP_ENTRY_B = cl.NVC56F_GP_ENTRY__SIZE
PB_VA_LIMIT = 1 << 40  # GP_ENTRY0_GET + GP_ENTRY1_GET_HI: the PBDMA fetches 40-bit addresses


GP_LENGTH_SHIFT = 32 + cl.NVC56F_GP_ENTRY1_LENGTH[1]  # the segment length's bit in the entry
_GP_LEN_MAX = (1 << (cl.NVC56F_GP_ENTRY1_LENGTH[0] - cl.NVC56F_GP_ENTRY1_LENGTH[1] + 1)) - 1
_GP_LEVEL = fval(cl.NVC56F_GP_ENTRY1_LEVEL, cl.NVC56F_GP_ENTRY1_LEVEL_SUBROUTINE) << 32
assert cl.NVC56F_GP_ENTRY0_GET == (31, 2) and cl.NVC56F_GP_ENTRY1_GET_HI == (7, 0)


def gp_entry(va: int, dwords: int) -> int:
    """A GPFIFO entry (two dwords as one little-endian u64) for a pushbuffer segment at `va` of
    `dwords` dwords; LEVEL is SUBROUTINE as tinygrad sets it (no effect on a flat pushbuffer).
    GET (31:2) and GET_HI (entry1 7:0) together are the address's bits 39:2, in place."""
    if va & 3 or va >= PB_VA_LIMIT:
        raise ValueError(f"pushbuffer VA {va:#x} must be dword aligned and below 2^40")
    if not 0 < dwords <= _GP_LEN_MAX:
        raise ValueError(f"a pushbuffer segment of {dwords} dwords does not fit a GPFIFO entry")
    return va | dwords << GP_LENGTH_SHIFT | _GP_LEVEL


def decode_gp_entry(entry: int) -> tuple[int, int]:
    """(pushbuffer VA, length in dwords) of a GPFIFO entry."""
    e0, e1 = entry & _M32, entry >> 32
    va = fget(cl.NVC56F_GP_ENTRY0_GET, e0) << 2 | fget(cl.NVC56F_GP_ENTRY1_GET_HI, e1) << 32
    return va, fget(cl.NVC56F_GP_ENTRY1_LENGTH, e1)


# ------------------------------------------------------------------ the classes' method tables
# A compute or copy class's method namespace comes from the generation records
# (runtime/drivers/nv/generation.py `method_prefix`); the host class's is clc56f.h's (Hopper's
# C86F and Blackwell's C96F keep every method and field this driver uses).
HOST_PREFIX = "NVC56F"


@dataclass(frozen=True)
class MethodInfo:
    """A method of a class: its name, and its fields (name -> (hi, lo)) with their named values."""

    name: str
    fields: tuple[tuple[str, tuple[int, int]], ...]
    values: dict[str, dict[int, str]]

    def describe(self, data: int) -> str:
        """`data` split into the method's named fields ("OPERATION=RELEASE PAYLOAD_SIZE=64BIT")."""
        if not self.fields:
            return f"{data:#x}"
        parts = []
        covered = 0
        for fname, rng in self.fields:
            mask = _width_mask(rng) << rng[1]
            if covered & mask:
                continue  # an alias of a field already shown (e.g. SEM_ADDR_HI_OFFSET vs ..._UPPER)
            covered |= mask
            v = fget(rng, data)
            if v == 0 and len(self.fields) > 2:
                continue
            named = self.values.get(fname, {}).get(v)
            parts.append(f"{fname}={named}" if named else f"{fname}={v:#x}")
        return " ".join(parts) or "0"


@lru_cache(maxsize=None)
def method_table(prefix: str) -> dict[int, MethodInfo]:
    """Method offset -> MethodInfo for one generated class prefix ("NVCBC0")."""
    pre = prefix + "_"
    names = [n for n in dir(cl) if n.startswith(pre) and "_QMDV" not in n]
    values = {n: getattr(cl, n) for n in names}
    tuples = {n: v for n, v in values.items() if isinstance(v, tuple)}
    out: dict[int, MethodInfo] = {}
    for n, v in values.items():
        if not isinstance(v, int) or isinstance(v, bool) or v & 3 or v >= 0x4000:
            continue
        fields = sorted(((f[len(n) + 1:], r) for f, r in tuples.items() if f.startswith(n + "_")),
                        key=lambda t: (-t[1][0], t[0]))
        if not fields:
            continue
        # A field's value names are its integer children that are not themselves fields' prefixes.
        vals: dict[str, dict[int, str]] = {}
        for fname, _ in fields:
            full = f"{n}_{fname}_"
            for cand, cv in values.items():
                if cand.startswith(full) and isinstance(cv, int) and cand not in tuples:
                    rest = cand[len(full):]
                    if not any(f"{fname}_{rest}".startswith(f2 + "_") or f"{fname}_{rest}" == f2
                               for f2, _ in fields if f2 != fname):
                        vals.setdefault(fname, {}).setdefault(cv, rest)
        prev = out.get(v)
        if prev is None or len(n) < len(pre + prev.name):
            out[v] = MethodInfo(n[len(pre):], tuple(fields), vals)
    return out


def decode_pushbuffer(dwords: Sequence[int], subc_class: dict[int, int] | None = None,
                      limit: int = 64) -> list[str]:
    """One line per method of a pushbuffer: "sc1 NVCBC0 SEND_PCAS_A = 0x123456 (...)". `subc_class`
    maps subchannels to class ids (SET_OBJECT in the stream updates it); unknown methods show their
    offset. At most `limit` lines."""
    subc_class = dict(subc_class or {})
    out: list[str] = []
    i, n = 0, len(dwords)
    while i < n and len(out) < limit:
        hdr = dwords[i]
        op = fget(cl.NVC56F_DMA_SEC_OP, hdr)
        if hdr == cl.NVC56F_DMA_NOP:
            out.append(f"[{i}] NOP")
            i += 1
            continue
        if op not in (cl.NVC56F_DMA_SEC_OP_INC_METHOD, cl.NVC56F_DMA_SEC_OP_NON_INC_METHOD,
                      cl.NVC56F_DMA_SEC_OP_ONE_INC, cl.NVC56F_DMA_SEC_OP_IMMD_DATA_METHOD):
            out.append(f"[{i}] unknown header {hdr:#010x} (opcode {op})")
            break
        subc = fget(cl.NVC56F_DMA_INCR_SUBCHANNEL, hdr)
        mthd = fget(cl.NVC56F_DMA_INCR_ADDRESS, hdr) << 2
        if op == cl.NVC56F_DMA_SEC_OP_IMMD_DATA_METHOD:
            data = [fget(cl.NVC56F_DMA_IMMD_DATA, hdr)]
            i += 1
        else:
            count = fget(cl.NVC56F_DMA_INCR_COUNT, hdr)
            data = list(dwords[i + 1:i + 1 + count])
            if len(data) < count:
                out.append(f"[{i}] method {mthd:#x}: header promises {count} dwords, "
                           f"{len(data)} remain")
                break
            i += 1 + count
        for k, d in enumerate(data):
            m = mthd + (4 * k if op == cl.NVC56F_DMA_SEC_OP_INC_METHOD else
                        4 * min(k, 1) if op == cl.NVC56F_DMA_SEC_OP_ONE_INC else 0)
            out.append(f"sc{subc} {describe_method(subc_class.get(subc), m, d)}")
            if m == 0 and mthd == 0:
                subc_class[subc] = d & 0xFFFF
    return out


def describe_method(hclass: int | None, mthd: int, data: int) -> str:
    """"NVCBC0 SEND_PCAS_A = 0x1234 (QMD_ADDRESS_SHIFTED8=0x1234)" for one method write."""
    from runtime.drivers.nv.generation import method_prefix  # generation imports this module
    prefix = HOST_PREFIX if mthd < HOST_METHOD_LIMIT else method_prefix(hclass or 0)
    info = method_table(prefix).get(mthd) if prefix else None
    if info is None:
        return f"{prefix or 'class ?'} method {mthd:#x} = {data:#x}"
    return f"{prefix} {info.name} = {data:#x} ({info.describe(data)})"


def describe_methods(stream: Iterable[int], subc_class: dict[int, int]) -> str:
    """The decoded pushbuffer as one string (for error messages)."""
    return "; ".join(decode_pushbuffer(list(stream), subc_class))
