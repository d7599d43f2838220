# numpy's stubs type lane arithmetic on uint32 scalars and arrays as unions mypy cannot narrow:
# mypy: disable-error-code="index"
"""Operand access compiled once per instruction: readers and writers of typed values.

A reader is `fn(wave_set) -> array` giving the operand with the numpy dtype of its ISA type: VGPRs
as [n, 32], SGPRs as [n, 1] (so they broadcast against lanes), constants as 0-d arrays. Inline
constants follow RDNA3 ISA section 3.4.2: integers -16..64 as two's-complement bit patterns in
any op (so `1` in an f32 op is the denormal 0x00000001), the float constants (0.5, 1.0, 2.0, 4.0,
their negatives, 1/(2π)) encoded in the operand's own format, and a 32-bit literal that is the
high half of an f64 or, for 64-bit integers, zero-extended for unsigned and sign-extended for
signed operand types (what the hardware does, per LLVM's AMDGPU maintainers in llvm-project
PR 70274).
"""
from __future__ import annotations

import struct
from typing import Callable

import numpy as np

from . import dpp
from .decode import (DPP8, DPP8FI, DPP16, EXEC_LO, LITERAL, NULL, SRC_EXECZ, SRC_SCC, SRC_VCCZ,
                     VCC_LO, VGPR0, Inst)
from .errors import KernelFault
from .machine import WaveSet

Reader = Callable[[WaveSet], np.ndarray]

DTYPES = {"f32": np.float32, "i32": np.int32, "u32": np.uint32, "b32": np.uint32,
          "f64": np.float64, "i64": np.int64, "u64": np.uint64, "b64": np.uint64,
          "f16": np.float16, "i16": np.int16, "u16": np.uint16, "b16": np.uint16,
          "u8": np.uint32, "i8": np.int32, "u24": np.uint32, "i24": np.int32}
_FLOATS = {240: 0.5, 241: -0.5, 242: 1.0, 243: -1.0, 244: 2.0, 245: -2.0, 246: 4.0, 247: -4.0}
_INV_2PI_F32, _INV_2PI_F64, _INV_2PI_F16 = 0x3E22F983, 0x3FC45F306DC9C882, 0x3118


def width(t: str) -> int:
    return 64 if t.endswith("64") else 16 if t.endswith("16") else 32


def const_bits(code: int, t: str, literal: int | None) -> int | None:
    """Bit pattern of a constant source in type t, or None if `code` is not a constant."""
    w = width(t)
    mask = (1 << w) - 1
    if 128 <= code <= 192:
        return code - 128
    if 193 <= code <= 208:
        return (192 - code) & mask
    if code in _FLOATS:
        v = _FLOATS[code]
        if w == 64:
            return struct.unpack("<Q", struct.pack("<d", v))[0]
        if w == 16:
            return int(np.array(v, dtype=np.float16).view(np.uint16))
        return struct.unpack("<I", struct.pack("<f", v))[0]
    if code == 248:
        return {64: _INV_2PI_F64, 16: _INV_2PI_F16}.get(w, _INV_2PI_F32)
    if code == LITERAL:
        lit = literal or 0
        if t == "f64":
            return lit << 32
        if t == "i64" and lit >> 31:
            return lit | 0xFFFFFFFF00000000  # signed 64-bit operands sign-extend the literal
        return lit & mask
    return None


def _typed(bits: int, t: str) -> np.ndarray:
    udt = {64: np.uint64, 32: np.uint32, 16: np.uint16}[width(t)]
    return np.array(bits, dtype=udt).view(DTYPES[t])


def raw_reader(code: int, inst: Inst, w: int = 32) -> Reader:
    """Reader of the raw bits (uint32 or uint64) of a 9-bit source field."""
    t = "b64" if w == 64 else "b32"
    cb = const_bits(code, t, inst.literal)
    if cb is not None:
        c = np.array(cb, dtype=np.uint64 if w == 64 else np.uint32)
        return lambda g: c
    if code in (DPP16, DPP8, DPP8FI):
        if w != 32:
            raise KernelFault("unsupported instruction: DPP on a 64-bit source",
                              address=inst.addr, instruction=str(inst))
        return dpp.read_src0(inst)
    if code >= VGPR0:
        r = code - VGPR0
        if w == 64:
            def rd64(g: WaveSet) -> np.ndarray:
                # Interleave the two 32-bit planes into one uint64 array (two strided copies).
                pair = np.empty((g.n, 32, 2), dtype=np.uint32)
                pair[..., 0] = g.v(r)
                pair[..., 1] = g.v(r + 1)
                return pair.view(np.uint64)[..., 0]
            return rd64
        return lambda g: g.v(r)
    if code == NULL:
        z = np.array(0, dtype=np.uint64 if w == 64 else np.uint32)
        return lambda g: z
    if code == SRC_SCC:
        return lambda g: g.scc().astype(np.uint32)[:, None]
    if code == SRC_EXECZ:
        return lambda g: (~g.any_lanes(g.exec)).astype(np.uint32)[:, None]
    if code == SRC_VCCZ:
        return lambda g: (~g.any_lanes(g.lanes_of(VCC_LO))).astype(np.uint32)[:, None]
    if code < 128:
        if w == 64:
            def rds64(g: WaveSet) -> np.ndarray:
                lo, hi = g.s(code), g.s(code + 1)
                return (lo.astype(np.uint64) | (hi.astype(np.uint64) << np.uint64(32)))[:, None]
            return rds64
        return lambda g: g.s(code)[:, None]
    raise KernelFault(f"unsupported source operand {code}", address=inst.addr,
                      instruction=str(inst))


def reader(code: int, t: str, inst: Inst, *, abs_: bool = False, neg: bool = False,
           hi16: bool = False) -> Reader:
    """Reader of a source as numpy type t, with VOP3 |abs| / -neg (floats) and op_sel (16-bit)."""
    w = width(t)
    dt = DTYPES[t]
    cb = const_bits(code, t, inst.literal)
    if cb is not None:
        c = _typed(cb, t)
        if abs_:
            c = np.abs(c)
        if neg:
            c = -c
        return lambda g: c
    raw = raw_reader(code, inst, 64 if w == 64 else 32)
    if w == 16:
        shift = np.uint32(16 if hi16 else 0)

        def base(g: WaveSet) -> np.ndarray:
            return ((raw(g) >> shift) & np.uint32(0xFFFF)).astype(np.uint16).view(dt)
    else:
        def base(g: WaveSet) -> np.ndarray:
            return raw(g).view(dt)
    if abs_ and neg:
        return lambda g: -np.abs(base(g))
    if abs_:
        return lambda g: np.abs(base(g))
    if neg:
        return lambda g: -base(g)
    return base


def to_bits(val: np.ndarray, t: str) -> np.ndarray:
    """A typed result → uint32 (or uint64 for 64-bit types) bit pattern."""
    dt = DTYPES[t]
    val = np.asarray(val)
    if val.dtype != dt:
        val = val.astype(dt)
    w = width(t)
    if w == 16:
        return val.view(np.uint16).astype(np.uint32)
    return val.view(np.uint64 if w == 64 else np.uint32)


def vgpr_writer(r: int, t: str, hi16: bool = False) -> Callable[[WaveSet, np.ndarray], None]:
    """Writer of a typed VALU result to v[r] (v[r:r+1] for 64-bit types), EXEC lanes only."""
    w = width(t)
    if w == 64:
        def wr64(g: WaveSet, val: np.ndarray) -> None:
            bits = np.ascontiguousarray(to_bits(val, t))
            halves = bits.reshape(*bits.shape, 1).view(np.uint32)  # [..., 2]: lo, hi
            g.set_v(r, halves[..., 0])
            g.set_v(r + 1, halves[..., 1])
        return wr64
    if w == 16:
        # 16-bit results replace one half of the VGPR and keep the other (op_sel selects which).
        keep = np.uint32(0x0000FFFF if hi16 else 0xFFFF0000)
        shift = np.uint32(16 if hi16 else 0)

        def wr16(g: WaveSet, val: np.ndarray) -> None:
            g.set_v(r, (g.v(r) & keep) | (to_bits(val, t) << shift))
        return wr16

    def wr32(g: WaveSet, val: np.ndarray) -> None:
        g.set_v(r, to_bits(val, t))
    return wr32


def sgpr_lane_source(code: int, inst: Inst) -> Callable[[WaveSet], np.ndarray]:
    """Reader of a lane-mask source (VCC, an SGPR, a constant) as bool [n, 32]."""
    if code < 128 and code != NULL:
        return lambda g: g.lanes_of(code)
    cb = const_bits(code, "b32", inst.literal)
    if cb is None and code != NULL:
        raise KernelFault("unsupported lane-mask operand", address=inst.addr, instruction=str(inst))
    mask = ((np.uint32(cb or 0) >> np.arange(32, dtype=np.uint32)) & 1).astype(bool)[None, :]
    return lambda g: np.broadcast_to(mask, (g.n, 32))


def is_exec(code: int) -> bool:
    return code == EXEC_LO
