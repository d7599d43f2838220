"""Lane-wise semantics of the VALU opcodes that map sources to one result.

Each entry takes numpy arrays already in the operand types `optypes.signature` gives (f32 as
float32, i32 as int32, u64 as uint64 ...) and returns the result in the destination type. Integer
arithmetic wraps as on the hardware (numpy's fixed-width arithmetic; the executor silences
numpy's overflow warnings). Shift amounts and bit-field offsets use only the bits the ISA reads.
Pseudo-code reference: "RDNA3 Instruction Set Architecture", chapter 16 (instruction details).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from . import fp

u32, i32, u64, i64 = np.uint32, np.int32, np.uint64, np.int64
M5, M6 = u32(31), u32(63)
_REV8 = np.array([int(f"{b:08b}"[::-1], 2) for b in range(256)], dtype=np.uint32)

Fn = Callable[..., np.ndarray]


def popcount(x: np.ndarray) -> np.ndarray:
    """Set bits per element of an unsigned array (np.bitwise_count needs numpy 2)."""
    x = np.asarray(x)
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(x)
    raw = np.ascontiguousarray(x).view(np.uint8).reshape(*x.shape, x.dtype.itemsize)
    return np.unpackbits(raw, axis=-1).sum(axis=-1, dtype=np.uint8)


def _u(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).view(u32) if np.asarray(x).dtype == i32 else np.asarray(x, dtype=u32)


def _sext24(x: np.ndarray) -> np.ndarray:
    return (_u(x) << u32(8)).view(i32) >> i32(8)


def _bfe_u(a: np.ndarray, off: np.ndarray, w: np.ndarray) -> np.ndarray:
    width = w & M5
    mask = ((u64(1) << width.astype(u64)) - u64(1)).astype(u32)
    return (a >> (off & M5)) & mask


def _bfe_i(a: np.ndarray, off: np.ndarray, w: np.ndarray) -> np.ndarray:
    width = (_u(w) & M5).astype(i32)
    field = _bfe_u(_u(a), _u(off), _u(w)).view(i32)
    sh = (i32(32) - width) & i32(31)
    return np.where(width == 0, i32(0), (field << sh) >> sh)


def _clz(x: np.ndarray) -> np.ndarray:
    """Leading zeros of uint32; 0 → 0xFFFFFFFF (v_clz_i32_u32, formerly ffbh_u32)."""
    _, e = np.frexp(np.asarray(x, dtype=np.float64))
    return np.where(x == 0, i32(-1), i32(32) - e.astype(i32))


def _ctz(x: np.ndarray) -> np.ndarray:
    x = _u(x)
    low = x & (~x + u32(1))
    _, e = np.frexp(low.astype(np.float64))
    return np.where(x == 0, i32(-1), e.astype(i32) - i32(1))


def _cls(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x).view(i32)
    v = _u(x ^ (x >> i32(31)))
    return np.where(v == 0, i32(-1), _clz(v))


def _brev(x: np.ndarray) -> np.ndarray:
    x = _u(x)
    return (_REV8[x & u32(0xFF)] << u32(24)) | (_REV8[(x >> u32(8)) & u32(0xFF)] << u32(16)) | \
        (_REV8[(x >> u32(16)) & u32(0xFF)] << u32(8)) | _REV8[x >> u32(24)]


def _perm(a: np.ndarray, b: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """v_perm_b32: bytes of {a, b} (b is bytes 0-3) picked by the bytes of sel."""
    comb = (np.asarray(a, dtype=u64) << u64(32)) | np.asarray(b, dtype=u64)
    out = np.zeros(np.broadcast_shapes(np.shape(comb), np.shape(sel)), dtype=u32)
    for k in range(4):
        s = (sel >> u32(8 * k)) & u32(0xFF)
        byte = ((comb >> (u64(8) * (s & u32(7)).astype(u64))) & u64(0xFF)).astype(u32)
        sign = ((comb >> (u64(16) * (s & u32(3)).astype(u64) + u64(15))) & u64(1)).astype(u32)
        val = np.where(s < 8, byte, np.where(s < 12, sign * u32(0xFF),
                                             np.where(s == 12, u32(0), u32(0xFF))))
        out |= val.astype(u32) << u32(8 * k)
    return out


def _cvt_i32(x: np.ndarray) -> np.ndarray:
    return fp.cvt_int(x, i32, -2147483648.0, 2147483647.0)


def _cvt_u32(x: np.ndarray) -> np.ndarray:
    return fp.cvt_int(x, u32, 0.0, 4294967295.0)


def _mul_hi_u(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return ((a.astype(u64) * b.astype(u64)) >> u64(32)).astype(u32)


def _mul_hi_i(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return ((a.astype(i64) * b.astype(i64)) >> i64(32)).astype(i32)


def _dx9_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Legacy multiply: 0 times anything (even inf/NaN) is 0."""
    return np.where((a == 0) | (b == 0), np.float32(0), a * b).astype(np.float32)


def _med3(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))


def _tau(x: np.ndarray) -> np.ndarray:
    return (np.asarray(x, dtype=np.float64) * (2 * np.pi))


FLOAT_UNARY: dict[str, Fn] = {
    "rcp": lambda a: np.divide(1, a, dtype=a.dtype),
    "rcp_iflag": lambda a: np.divide(1, a, dtype=a.dtype),
    "rsq": lambda a: np.divide(1, np.sqrt(a.astype(np.float64))).astype(a.dtype),
    "sqrt": np.sqrt,
    "exp": lambda a: np.exp2(a),
    "log": lambda a: np.log2(a),
    "sin": lambda a: np.sin(_tau(a)).astype(a.dtype),
    "cos": lambda a: np.cos(_tau(a)).astype(a.dtype),
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rndne": np.rint,
    "fract": fp.fract, "frexp_mant": fp.frexp_mant,
}

TABLE: dict[str, Fn] = {
    # f32 (and the f16/f64 forms registered below)
    "v_add_f32": lambda a, b: a + b,
    "v_sub_f32": lambda a, b: a - b,
    "v_subrev_f32": lambda a, b: b - a,
    "v_mul_f32": lambda a, b: a * b,
    "v_mul_dx9_zero_f32": _dx9_mul,
    "v_fma_f32": fp.fma32,
    "v_fma_dx9_zero_f32": lambda a, b, c: np.where((a == 0) | (b == 0), c, fp.fma32(a, b, c)),
    "v_min_f32": fp.fmin, "v_max_f32": fp.fmax,
    "v_min3_f32": lambda a, b, c: fp.fmin(fp.fmin(a, b), c),
    "v_max3_f32": lambda a, b, c: fp.fmax(fp.fmax(a, b), c),
    "v_med3_f32": fp.fmed3,
    "v_minmax_f32": lambda a, b, c: fp.fmax(fp.fmin(a, b), c),
    "v_maxmin_f32": lambda a, b, c: fp.fmin(fp.fmax(a, b), c),
    "v_ldexp_f32": fp.ldexp, "v_frexp_exp_i32_f32": fp.frexp_exp,
    "v_cvt_f32_i32": lambda a: a.astype(np.float32),
    "v_cvt_f32_u32": lambda a: a.astype(np.float32),
    "v_cvt_i32_f32": _cvt_i32, "v_cvt_u32_f32": _cvt_u32,
    "v_cvt_floor_i32_f32": lambda a: _cvt_i32(np.floor(a)),
    "v_cvt_nearest_i32_f32": lambda a: _cvt_i32(np.floor(a.astype(np.float64) + 0.5)),
    "v_cvt_f32_ubyte0": lambda a: (a & u32(0xFF)).astype(np.float32),
    "v_cvt_f32_ubyte1": lambda a: ((a >> u32(8)) & u32(0xFF)).astype(np.float32),
    "v_cvt_f32_ubyte2": lambda a: ((a >> u32(16)) & u32(0xFF)).astype(np.float32),
    "v_cvt_f32_ubyte3": lambda a: (a >> u32(24)).astype(np.float32),
    "v_cvt_f16_f32": lambda a: a.astype(np.float16),
    "v_cvt_f32_f16": lambda a: a.astype(np.float32),
    "v_cvt_f32_f64": lambda a: a.astype(np.float32),
    "v_cvt_f64_f32": lambda a: a.astype(np.float64),
    "v_cvt_f64_i32": lambda a: a.astype(np.float64),
    "v_cvt_f64_u32": lambda a: a.astype(np.float64),
    "v_cvt_i32_f64": _cvt_i32, "v_cvt_u32_f64": _cvt_u32,
    # f64
    "v_add_f64": lambda a, b: a + b,
    "v_mul_f64": lambda a, b: a * b,
    "v_fma_f64": fp.fma64,
    "v_min_f64": fp.fmin, "v_max_f64": fp.fmax,
    "v_ldexp_f64": fp.ldexp, "v_frexp_exp_i32_f64": fp.frexp_exp,
    "v_div_fixup_f32": fp.div_fixup, "v_div_fixup_f64": fp.div_fixup,
    # 32-bit integer
    "v_mov_b32": lambda a: a,
    "v_not_b32": lambda a: ~a,
    "v_add_nc_u32": lambda a, b: a + b,
    "v_sub_nc_u32": lambda a, b: a - b,
    "v_subrev_nc_u32": lambda a, b: b - a,
    "v_add_nc_i32": lambda a, b: a + b,
    "v_sub_nc_i32": lambda a, b: a - b,
    "v_mul_lo_u32": lambda a, b: a * b,
    "v_mul_hi_u32": _mul_hi_u,
    "v_mul_hi_i32": _mul_hi_i,
    "v_mul_u32_u24": lambda a, b: (a & u32(0xFFFFFF)) * (b & u32(0xFFFFFF)),
    "v_mul_hi_u32_u24": lambda a, b: _mul_hi_u(a & u32(0xFFFFFF), b & u32(0xFFFFFF)),
    "v_mul_i32_i24": lambda a, b: _sext24(a) * _sext24(b),
    "v_mul_hi_i32_i24": lambda a, b: _mul_hi_i(_sext24(a), _sext24(b)),
    "v_mad_u32_u24": lambda a, b, c: (a & u32(0xFFFFFF)) * (b & u32(0xFFFFFF)) + c,
    "v_mad_i32_i24": lambda a, b, c: _sext24(a) * _sext24(b) + c,
    "v_and_b32": lambda a, b: a & b,
    "v_or_b32": lambda a, b: a | b,
    "v_xor_b32": lambda a, b: a ^ b,
    "v_xnor_b32": lambda a, b: ~(a ^ b),
    "v_lshlrev_b32": lambda a, b: b << (a & M5),
    "v_lshrrev_b32": lambda a, b: b >> (a & M5),
    "v_ashrrev_i32": lambda a, b: b >> (a & i32(31)),
    "v_lshlrev_b64": lambda a, b: b << (a & M6).astype(u64),
    "v_lshrrev_b64": lambda a, b: b >> (a & M6).astype(u64),
    "v_ashrrev_i64": lambda a, b: b >> (a & M6).astype(i64),
    "v_bfe_u32": _bfe_u, "v_bfe_i32": _bfe_i,
    "v_bfi_b32": lambda a, b, c: (a & b) | (~a & c),
    "v_bfm_b32": lambda a, b: ((u64(1) << (a & M5).astype(u64)) - u64(1)).astype(u32)
    << (b & M5),
    "v_alignbit_b32": lambda a, b, c: (((a.astype(u64) << u64(32)) | b.astype(u64))
                                       >> (c & M5).astype(u64)).astype(u32),
    "v_alignbyte_b32": lambda a, b, c: (((a.astype(u64) << u64(32)) | b.astype(u64))
                                        >> (u64(8) * (c & u32(3)).astype(u64))).astype(u32),
    "v_lshl_add_u32": lambda a, b, c: (a << (b & M5)) + c,
    "v_add_lshl_u32": lambda a, b, c: (a + b) << (c & M5),
    "v_lshl_or_b32": lambda a, b, c: (a << (b & M5)) | c,
    "v_and_or_b32": lambda a, b, c: (a & b) | c,
    "v_or3_b32": lambda a, b, c: a | b | c,
    "v_xor3_b32": lambda a, b, c: a ^ b ^ c,
    "v_add3_u32": lambda a, b, c: a + b + c,
    "v_xad_u32": lambda a, b, c: (a ^ b) + c,
    "v_min_i32": np.minimum, "v_max_i32": np.maximum,
    "v_min_u32": np.minimum, "v_max_u32": np.maximum,
    "v_min3_i32": lambda a, b, c: np.minimum(np.minimum(a, b), c),
    "v_min3_u32": lambda a, b, c: np.minimum(np.minimum(a, b), c),
    "v_max3_i32": lambda a, b, c: np.maximum(np.maximum(a, b), c),
    "v_max3_u32": lambda a, b, c: np.maximum(np.maximum(a, b), c),
    "v_med3_i32": _med3, "v_med3_u32": _med3,
    "v_minmax_i32": lambda a, b, c: np.maximum(np.minimum(a, b), c),
    "v_maxmin_i32": lambda a, b, c: np.minimum(np.maximum(a, b), c),
    "v_minmax_u32": lambda a, b, c: np.maximum(np.minimum(a, b), c),
    "v_maxmin_u32": lambda a, b, c: np.minimum(np.maximum(a, b), c),
    "v_bcnt_u32_b32": lambda a, b: popcount(a).astype(u32) + b,
    "v_bfrev_b32": _brev,
    "v_clz_i32_u32": _clz, "v_ctz_i32_b32": _ctz, "v_cls_i32": _cls,
    "v_perm_b32": _perm,
    "v_cvt_pk_u16_u32": lambda a, b: (a & u32(0xFFFF)) | ((b & u32(0xFFFF)) << u32(16)),
    "v_cvt_pk_i16_i32": lambda a, b: (_u(a) & u32(0xFFFF)) | ((_u(b) & u32(0xFFFF)) << u32(16)),
    "v_pack_b32_f16": lambda a, b: a.view(np.uint16).astype(u32)
    | (b.view(np.uint16).astype(u32) << u32(16)),
    # 16-bit integer (the low or op_sel-selected half of a VGPR)
    "v_add_nc_u16": lambda a, b: a + b, "v_sub_nc_u16": lambda a, b: a - b,
    "v_mul_lo_u16": lambda a, b: a * b,
    "v_lshlrev_b16": lambda a, b: b << (a & np.uint16(15)),
    "v_lshrrev_b16": lambda a, b: b >> (a & np.uint16(15)),
    "v_ashrrev_i16": lambda a, b: b >> (a & np.int16(15)),
    "v_and_b16": lambda a, b: a & b, "v_or_b16": lambda a, b: a | b,
    "v_xor_b16": lambda a, b: a ^ b, "v_not_b16": lambda a: ~a,
    "v_min_u16": np.minimum, "v_max_u16": np.maximum,
    "v_min_i16": np.minimum, "v_max_i16": np.maximum,
    "v_cvt_f16_u16": lambda a: a.astype(np.float16),
    "v_cvt_f16_i16": lambda a: a.astype(np.float16),
    "v_cvt_u16_f16": lambda a: fp.cvt_int(a, np.uint16, 0, 65535),
    "v_cvt_i16_f16": lambda a: fp.cvt_int(a, np.int16, -32768, 32767),
    "v_mad_u16": lambda a, b, c: a * b + c, "v_mad_i16": lambda a, b, c: a * b + c,
    "v_mad_u32_u16": lambda a, b, c: a.astype(u32) * b.astype(u32) + c,
    "v_mad_i32_i16": lambda a, b, c: a.astype(i32) * b.astype(i32) + c,
    "v_cvt_u32_u16": lambda a: a.astype(u32), "v_cvt_i32_i16": lambda a: a.astype(i32),
}

for _name, _fn in FLOAT_UNARY.items():
    for _t, _dt in (("f32", np.float32), ("f64", np.float64), ("f16", np.float16)):
        TABLE.setdefault(f"v_{_name}_{_t}", _fn)
for _t in ("f16",):
    TABLE.update({
        f"v_add_{_t}": lambda a, b: a + b, f"v_sub_{_t}": lambda a, b: a - b,
        f"v_subrev_{_t}": lambda a, b: b - a, f"v_mul_{_t}": lambda a, b: a * b,
        f"v_fma_{_t}": lambda a, b, c: (a.astype(np.float64) * b + c).astype(np.float16),
        f"v_min_{_t}": fp.fmin, f"v_max_{_t}": fp.fmax, f"v_ldexp_{_t}": fp.ldexp,
    })


# -- comparisons: v_cmp_<pred>_<type> and v_cmpx_<pred>_<type>
def _not(f: Fn) -> Fn:
    return lambda a, b: ~f(a, b)


CMP: dict[str, Fn] = {
    "f": lambda a, b: np.zeros(np.broadcast_shapes(np.shape(a), np.shape(b)), dtype=bool),
    "t": lambda a, b: np.ones(np.broadcast_shapes(np.shape(a), np.shape(b)), dtype=bool),
    "lt": np.less, "eq": np.equal, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "ne": np.not_equal,
    "lg": lambda a, b: (a < b) | (a > b),
    "o": lambda a, b: ~(np.isnan(a) | np.isnan(b)),
    "u": lambda a, b: np.isnan(a) | np.isnan(b),
    "neq": _not(np.equal), "nlt": _not(np.less), "nle": _not(np.less_equal),
    "ngt": _not(np.greater), "nge": _not(np.greater_equal),
    "nlg": lambda a, b: ~((a < b) | (a > b)),
    "class": fp.classify,
}


def compare(name: str) -> Fn | None:
    """The predicate of a v_cmp/v_cmpx mnemonic, or None."""
    parts = name.split("_")
    if len(parts) != 4 or parts[1] not in ("cmp", "cmpx"):
        return None
    return CMP.get(parts[2])
