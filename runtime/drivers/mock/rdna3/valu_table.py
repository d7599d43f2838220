# numpy's stubs type lane arithmetic on uint32 scalars and arrays as unions mypy cannot narrow:
# mypy: disable-error-code="arg-type"
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
# shift-amount masks (0-d arrays: see fp's constants)
M5, M6 = np.array(31, dtype=u32), np.array(63, dtype=u32)
M5_I = np.array(31, dtype=i32)
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


class Convert:
    """A conversion that is exactly numpy's cast to `dtype` (int → float rounds to nearest even,
    f32 → f16 too); fast_valu assigns the source into the destination plane instead, which
    casts the same way without a temporary."""

    __slots__ = ("dtype",)

    def __init__(self, dtype: type) -> None:
        self.dtype = dtype

    def __call__(self, a: np.ndarray) -> np.ndarray:
        return np.asarray(a).astype(self.dtype)


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


def cvt_rtz_f16(x: np.ndarray) -> np.ndarray:
    """f32 → f16 rounding toward zero (v_cvt_pk_rtz_f16_f32): a round-to-nearest result that
    moved away from zero steps back one ulp (so overflow gives ±65504, not ±inf)."""
    x = np.asarray(x, dtype=np.float32)
    r = x.astype(np.float16)
    away = np.abs(r.astype(np.float32)) > np.abs(x)
    return np.where(away, np.nextafter(r, np.float16(0)), r).astype(np.float16)


def _snorm(x: np.ndarray) -> np.ndarray:
    """f16/f32 → signed normalized i16: clamp to [-1, 1], scale by 32767, round to nearest
    even; NaN → 0."""
    v = np.clip(np.nan_to_num(np.asarray(x, dtype=np.float64), nan=0.0), -1.0, 1.0)
    return np.rint(v * 32767.0).astype(np.int16)


def _unorm(x: np.ndarray) -> np.ndarray:
    v = np.clip(np.nan_to_num(np.asarray(x, dtype=np.float64), nan=0.0), 0.0, 1.0)
    return np.rint(v * 65535.0).astype(np.uint16)


def _pk16(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return np.asarray(lo).view(np.uint16).astype(u32) | \
        (np.asarray(hi).view(np.uint16).astype(u32) << u32(16))


def _bytes(x: np.ndarray) -> list[np.ndarray]:
    return [(np.asarray(x, dtype=u32) >> u32(8 * k)) & u32(0xFF) for k in range(4)]


def _absdiff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(a > b, a - b, b - a)


def _sad_u8(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    out = np.asarray(c, dtype=u32)
    for x, y in zip(_bytes(a), _bytes(b)):
        out = out + _absdiff(x, y)
    return out


def _msad_u8(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Masked SAD: bytes where the reference (S1) is 0 do not count."""
    out = np.asarray(c, dtype=u32)
    for x, y in zip(_bytes(a), _bytes(b)):
        out = out + np.where(y == 0, u32(0), _absdiff(x, y))
    return out


def _sad_u16(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, dtype=u32), np.asarray(b, dtype=u32)
    lo = _absdiff(a & u32(0xFFFF), b & u32(0xFFFF))
    hi = _absdiff(a >> u32(16), b >> u32(16))
    return np.asarray(c, dtype=u32) + lo + hi


def _qsad(msad: bool) -> Fn:
    """v_qsad_pk_u16_u8 / v_mqsad_pk_u16_u8: four SADs of S1 against byte windows of the 64-bit
    S0 (offsets 0, 8, 16, 24), each added to a 16-bit field of S2; 16-bit results packed."""
    sad = _msad_u8 if msad else _sad_u8

    def fn(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        a, c = np.asarray(a, dtype=u64), np.asarray(c, dtype=u64)
        out = np.zeros(np.broadcast_shapes(a.shape, np.shape(b), c.shape), dtype=u64)
        for k in range(4):
            win = ((a >> u64(8 * k)) & u64(0xFFFFFFFF)).astype(u32)
            acc = ((c >> u64(16 * k)) & u64(0xFFFF)).astype(u32)
            out |= (sad(win, b, acc) & u32(0xFFFF)).astype(u64) << u64(16 * k)
        return out
    return fn


def _lerp_u8(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Per byte: (a + b + the low bit of c's byte) >> 1."""
    out = np.zeros(np.broadcast_shapes(np.shape(a), np.shape(b), np.shape(c)), dtype=u32)
    for k, (x, y, z) in enumerate(zip(_bytes(a), _bytes(b), _bytes(c))):
        out |= ((x + y + (z & u32(1))) >> u32(1)) << u32(8 * k)
    return out


def _cvt_pk_u8(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Converts S0 to u8 (saturating, round to nearest even) into byte S1[1:0] of S2."""
    sh = (np.asarray(b, dtype=u32) & u32(3)) * u32(8)
    v = np.clip(np.rint(np.nan_to_num(np.asarray(a, dtype=np.float64), nan=0.0)), 0, 255)
    return (np.asarray(c, dtype=u32) & ~(u32(0xFF) << sh)) | (v.astype(u32) << sh)


def _sat_pk_u8(a: np.ndarray) -> np.ndarray:
    """Two i16 halves saturated to u8, packed into 16 bits."""
    a = np.asarray(a, dtype=u32)
    lo = np.clip((a & u32(0xFFFF)).astype(np.uint16).view(np.int16), 0, 255).astype(u32)
    hi = np.clip((a >> u32(16)).astype(np.uint16).view(np.int16), 0, 255).astype(u32)
    return (lo | (hi << u32(8))).astype(np.uint16)


def _cube(which: str) -> Fn:
    """v_cubeid/cubesc/cubetc/cubema_f32 (ISA pseudo-code): face id, S/T coordinates and twice
    the major axis of the direction (x, y, z)."""
    def fn(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
        ax, ay, az = np.abs(x), np.abs(y), np.abs(z)
        zmaj = (az >= ax) & (az >= ay)
        ymaj = ~zmaj & (ay >= ax)
        f32 = np.float32
        if which == "id":
            r = np.where(zmaj, np.where(z < 0, f32(5), f32(4)),
                         np.where(ymaj, np.where(y < 0, f32(3), f32(2)),
                                  np.where(x < 0, f32(1), f32(0))))
        elif which == "ma":
            r = np.where(zmaj, z * f32(2), np.where(ymaj, y * f32(2), x * f32(2)))
        elif which == "sc":
            r = np.where(zmaj, np.where(z < 0, -x, x), np.where(ymaj, x, np.where(x < 0, z, -z)))
        else:
            r = np.where(zmaj, -y, np.where(ymaj, np.where(y < 0, -z, z), -y))
        return np.asarray(r, dtype=np.float32)
    return fn


def _mullit(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    bad = (b == -np.finfo(np.float32).max) | np.isneginf(b) | np.isnan(b) | (c <= 0) | np.isnan(c)
    return np.where(bad, -np.finfo(np.float32).max, a * b).astype(np.float32)


def _frexp_exp16(x: np.ndarray) -> np.ndarray:
    _, e = np.frexp(x.astype(np.float32))
    return np.where(np.isfinite(x), e, 0).astype(np.int16)


# V_CVT_OFF_F32_I4: the signed 4-bit value of S0[3:0] divided by 16.
_CVT_OFF = np.array([k / 16 if k < 8 else (k - 16) / 16 for k in range(16)], dtype=np.float32)


def _two_over_pi_bits() -> int:
    """floor(2/π · 2^1201): the fraction bits of 2/π that V_TRIG_PREOP_F64 reads (Machin's
    formula in fixed point with guard bits)."""
    prec = 1201 + 64
    one = 1 << prec

    def atan_inv(n: int) -> int:
        total, term, k, sign = 0, one // n, 1, 1
        while term:
            total += sign * (term // k)
            term //= n * n
            k += 2
            sign = -sign
        return total
    pi = 16 * atan_inv(5) - 4 * atan_inv(239)
    return ((2 * one * one) // pi) >> 64


_TWO_OVER_PI: list[int] = []


def _trig_preop(x: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """V_TRIG_PREOP_F64: 53 bits of 2/π starting at bit 53·S1[4:0] (shifted further for large
    exponents), scaled so that the pieces sum to 2/π (ISA pseudo-code). The big-integer work is
    done once per distinct shift (a kernel has few)."""
    if not _TWO_OVER_PI:
        _TWO_OVER_PI.append(_two_over_pi_bits())
    bits = _TWO_OVER_PI[0]
    x, sel = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(sel, dtype=u32))
    exp = ((x.view(u64) >> u64(52)) & u64(0x7FF)).astype(np.int64)
    shift = (sel & u32(31)).astype(np.int64) * 53 + np.maximum(exp - 1077, 0)
    uniq, inv = np.unique(shift, return_inverse=True)
    # (2/π · 2^1201) << shift, keeping bits 1200..1148 of the shifted fraction: 53 bits
    chunks = np.array([float((bits << int(s) >> 1148) & ((1 << 53) - 1)) for s in uniq],
                      dtype=np.float64)
    scale = -53 - shift + np.where(exp >= 1968, 128, 0)
    return np.ldexp(chunks[inv.reshape(shift.shape)], np.maximum(scale, -1100).astype(np.int32))


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
    # (numpy's ufuncs where the op is one: the same arithmetic as the operators, and fast_valu
    # can compute them straight into the destination register)
    "v_add_f32": np.add,
    "v_sub_f32": np.subtract,
    "v_subrev_f32": lambda a, b: b - a,
    "v_mul_f32": np.multiply,
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
    "v_cvt_f32_i32": Convert(np.float32),
    "v_cvt_f32_u32": Convert(np.float32),
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
    "v_mov_b32": Convert(u32),
    "v_not_b32": lambda a: ~a,
    "v_add_nc_u32": np.add,
    "v_sub_nc_u32": np.subtract,
    "v_subrev_nc_u32": lambda a, b: b - a,
    "v_add_nc_i32": np.add,
    "v_sub_nc_i32": np.subtract,
    "v_mul_lo_u32": np.multiply,
    "v_mul_hi_u32": _mul_hi_u,
    "v_mul_hi_i32": _mul_hi_i,
    "v_mul_u32_u24": lambda a, b: (a & u32(0xFFFFFF)) * (b & u32(0xFFFFFF)),
    "v_mul_hi_u32_u24": lambda a, b: _mul_hi_u(a & u32(0xFFFFFF), b & u32(0xFFFFFF)),
    "v_mul_i32_i24": lambda a, b: _sext24(a) * _sext24(b),
    "v_mul_hi_i32_i24": lambda a, b: _mul_hi_i(_sext24(a), _sext24(b)),
    "v_mad_u32_u24": lambda a, b, c: (a & u32(0xFFFFFF)) * (b & u32(0xFFFFFF)) + c,
    "v_mad_i32_i24": lambda a, b, c: _sext24(a) * _sext24(b) + c,
    "v_and_b32": np.bitwise_and,
    "v_or_b32": np.bitwise_or,
    "v_xor_b32": np.bitwise_xor,
    "v_xnor_b32": lambda a, b: ~(a ^ b),
    "v_lshlrev_b32": lambda a, b: b << (a & M5),
    "v_lshrrev_b32": lambda a, b: b >> (a & M5),
    "v_ashrrev_i32": lambda a, b: b >> (a & M5_I),
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
    "v_add_nc_i16": lambda a, b: a + b, "v_sub_nc_i16": lambda a, b: a - b,
    "v_min3_i16": lambda a, b, c: np.minimum(np.minimum(a, b), c),
    "v_min3_u16": lambda a, b, c: np.minimum(np.minimum(a, b), c),
    "v_max3_i16": lambda a, b, c: np.maximum(np.maximum(a, b), c),
    "v_max3_u16": lambda a, b, c: np.maximum(np.maximum(a, b), c),
    "v_med3_i16": _med3, "v_med3_u16": _med3,
    # packing conversions
    "v_cvt_pk_rtz_f16_f32": lambda a, b: _pk16(cvt_rtz_f16(a), cvt_rtz_f16(b)),
    "v_cvt_pk_i16_f32": lambda a, b: _pk16(fp.cvt_int(a, np.int16, -32768, 32767),
                                           fp.cvt_int(b, np.int16, -32768, 32767)),
    "v_cvt_pk_u16_f32": lambda a, b: _pk16(fp.cvt_int(a, np.uint16, 0, 65535),
                                           fp.cvt_int(b, np.uint16, 0, 65535)),
    "v_cvt_pknorm_i16_f32": lambda a, b: _pk16(_snorm(a), _snorm(b)),
    "v_cvt_pknorm_u16_f32": lambda a, b: _pk16(_unorm(a), _unorm(b)),
    "v_cvt_pk_norm_i16_f16": lambda a, b: _pk16(_snorm(a), _snorm(b)),
    "v_cvt_pk_norm_u16_f16": lambda a, b: _pk16(_unorm(a), _unorm(b)),
    "v_cvt_norm_i16_f16": _snorm, "v_cvt_norm_u16_f16": _unorm,
    "v_cvt_pk_u8_f32": _cvt_pk_u8, "v_sat_pk_u8_i16": _sat_pk_u8,
    "v_cvt_off_f32_i4": lambda a: _CVT_OFF[np.asarray(a, dtype=u32) & u32(15)],
    "v_frexp_exp_i16_f16": _frexp_exp16,
    # sums of absolute differences and byte interpolation
    "v_sad_u8": _sad_u8, "v_msad_u8": _msad_u8, "v_sad_u16": _sad_u16,
    "v_sad_u32": lambda a, b, c: _absdiff(a, b) + c,
    "v_sad_hi_u8": lambda a, b, c: (_sad_u8(a, b, u32(0)) << u32(16)) + c,
    "v_qsad_pk_u16_u8": _qsad(False), "v_mqsad_pk_u16_u8": _qsad(True),
    "v_lerp_u8": _lerp_u8,
    # graphics helpers
    "v_cubeid_f32": _cube("id"), "v_cubesc_f32": _cube("sc"), "v_cubetc_f32": _cube("tc"),
    "v_cubema_f32": _cube("ma"), "v_mullit_f32": _mullit, "v_trig_preop_f64": _trig_preop,
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
        f"v_min3_{_t}": lambda a, b, c: fp.fmin(fp.fmin(a, b), c),
        f"v_max3_{_t}": lambda a, b, c: fp.fmax(fp.fmax(a, b), c),
        f"v_med3_{_t}": fp.fmed3,
        f"v_minmax_{_t}": lambda a, b, c: fp.fmax(fp.fmin(a, b), c),
        f"v_maxmin_{_t}": lambda a, b, c: fp.fmin(fp.fmax(a, b), c),
        f"v_div_fixup_{_t}": fp.div_fixup,
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
