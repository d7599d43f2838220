# numpy's stubs type lane arithmetic on uint32 scalars and arrays as unions mypy cannot narrow:
# mypy: disable-error-code="arg-type"
"""IEEE float helpers with the RDNA3 semantics numpy lacks (fused multiply-add, the division
helpers, saturating conversions, class tests).

Fused multiply-add in f32: the product of two f32 values is exact in f64 (24+24 < 53 bits), so
fma = round_f32(a*b + c) needs the f64 sum rounded once. Rounding the f64 sum to f64 and then to
f32 is wrong only when the f64 result lands exactly on an f32 rounding midpoint (or in the f32
denormal range, where more bits are dropped); those lanes are recomputed with round-to-odd (an
exact two-sum error term makes the f64 sum "sticky"), which makes the second rounding correct.
So v_fma_f32 / v_fmac_f32 are correctly rounded, like the hardware. f64 FMA uses Dekker's exact
product and a two-sum, which is faithful but can differ from a true FMA in the last bit in rare
halfway cases (documented limitation; f64 is rare in kernels).
"""
from __future__ import annotations

import sys

import numpy as np

# Constants as 0-d arrays: numpy takes a 0-d operand's fast path, and a numpy scalar one costs
# more per call on small arrays.
F32_MIN_NORMAL = np.array(2.0 ** -126)
_MID = np.array(0x10000000, dtype=np.uint64)
_LOW29 = np.array(0x1FFFFFFF, dtype=np.uint64)


def _round_to_odd_sum(p: np.ndarray, c: np.ndarray) -> np.ndarray:
    """p + c in f64 with round-to-odd (exact inputs in f64)."""
    s = p + c
    bb = s - p
    err = (p - (s - bb)) + (c - bb)
    bits = s.view(np.int64).copy()
    inexact = (err != 0) & np.isfinite(s)
    # If round-to-nearest went away from zero, step back toward zero first, then set the lsb.
    away = inexact & (np.signbit(err) != np.signbit(s))
    bits -= away.astype(np.int64)
    bits = np.where(inexact, bits | 1, bits)
    return bits.view(np.float64)


def fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Correctly rounded f32 fused multiply-add."""
    # Same-dtype ufuncs on converted operands: numpy's mixed-dtype loops cost more per call.
    s = np.asarray(a).astype(np.float64)
    b64 = np.asarray(b).astype(np.float64)
    s = np.multiply(s, b64, out=s) if s.ndim and s.shape == b64.shape else s * b64
    c64 = np.asarray(c).astype(np.float64)
    s = np.add(s, c64, out=s) if s.ndim and s.shape == c64.shape else s + c64
    r = s.astype(np.float32)
    # Double rounding can only bite where s sits exactly on an f32 rounding midpoint (the 29
    # bits f32 drops are 1000...0) or in f32's denormal range (below 2^-126, where more bits are
    # dropped): two cheap whole-array tests, then a closer look only if one fires.
    bits = s.view(np.uint64)
    if np.count_nonzero((bits & _LOW29) == _MID) or \
            np.count_nonzero(np.abs(s) < F32_MIN_NORMAL):
        return _redo_double_rounded(a, b, c64, s, r)
    return r


def _redo_double_rounded(a: np.ndarray, b: np.ndarray, c64: np.ndarray, s: np.ndarray,
                         r: np.ndarray) -> np.ndarray:
    """fma32's result with the lanes where rounding s = p + c (f64) to f32 went wrong redone:
    those at a midpoint or in the denormal range whose f64 sum was inexact (an exact sum rounds
    once, so f32(s) is right there) get a round-to-odd sum."""
    p = np.multiply(np.asarray(a).astype(np.float64), np.asarray(b).astype(np.float64))
    pb, cb, sb = np.broadcast_arrays(p, c64, s)
    bb = sb - pb
    err = (pb - (sb - bb)) + (cb - bb)   # two-sum: s + err == p + c exactly
    risky = ((sb.view(np.uint64) & _LOW29) == _MID) | (np.abs(sb) < F32_MIN_NORMAL)
    risky &= (err != 0) & np.isfinite(sb)
    if not np.count_nonzero(risky):
        return r
    out = np.array(r, dtype=np.float32)
    out[risky] = _round_to_odd_sum(pb[risky], cb[risky]).astype(np.float32)
    return out


# f32 bit-pattern constants of the power-of-two scaling tests below.
EXP_ABOVE_1 = np.array(0x7F000000, dtype=np.uint32)   # nonzero iff biased exponent >= 2
_U1 = np.array(1, dtype=np.uint32)
_BELOW_EXP2 = np.array(0x01FFFFFF, dtype=np.uint32)
_FLT_MAX = 3.4028234663852886e38


LITTLE = sys.byteorder == "little"


def exponents_above_1(bits: np.ndarray, tmp: np.ndarray) -> bool:
    """Whether every f32 bit pattern in `bits` (uint32) has a biased exponent of
    at least 2 (then x * 0.5 is exact): for one wave's 32 lanes on the bytes of the register
    (bits 30:24 of each lane, in its top byte, are not all zero: the byte is neither 0x00 nor
    0x80), else `tmp` (uint32 of the same shape) takes the masked bits."""
    if LITTLE and bits.size <= 32:
        top = bits.tobytes()[3::4]
        return 0 not in top and 0x80 not in top
    np.bitwise_and(bits, EXP_ABOVE_1, out=tmp)
    return bool(np.count_nonzero(tmp) == tmp.size)


def halves_exactly(bits: np.ndarray) -> bool:
    """Whether x * 0.5 is exact in f32 for every lane of the bit patterns `bits`: x is ±0, or
    its biased exponent is >= 2 (so x / 2 is normal). Denormals and the smallest normals may
    drop their last bit (as may inf/NaN patterns' payloads: not counted as exact either)."""
    if np.count_nonzero(bits & EXP_ABOVE_1) == bits.size:   # the usual case, in two calls
        return True
    # Without the sign bit, exponent <= 1 and not zero is 1 <= b <= 0x01FFFFFF, i.e. b - 1
    # (wrapping ±0 to 0xFFFFFFFF) below 0x01FFFFFF.
    return not np.count_nonzero(((bits << _U1) - _U1) < _BELOW_EXP2)


def scaled_exactly(x: np.ndarray, k: float) -> bool:
    """Whether x * k is exact in f32 in every lane, for k = ±0.5, ±1, ±2, ±4: no product
    overflows (|k| > 1) and none drops bits below the normal range (|k| = 0.5, see
    halves_exactly). Lanes that are ±inf (for 2, 4) also answer False: callers then take the
    general path."""
    ak = abs(k)
    if ak == 1.0:
        return True
    x = np.asarray(x)
    if ak < 1.0:
        return halves_exactly(x.view(np.uint32))
    return not np.count_nonzero(np.abs(x) > np.float32(_FLT_MAX / ak))


def fma32_pow2(x: np.ndarray, k: np.float32, c: np.ndarray,
               out: np.ndarray | None = None) -> np.ndarray:
    """fma(x, k, c) for k = ±0.5, ±1, ±2, ±4 (an inline constant): where x * k is exact in f32
    one f32 rounding of the sum is the fused result; otherwise the general fma32. `out`: an f32
    array of the result's shape to write (may be c itself)."""
    if scaled_exactly(x, float(k)):
        p = np.multiply(x, k)
        if out is not None:
            return np.add(p, c, out=out)
        return np.add(p, c, out=p) if p.ndim and p.shape == np.shape(c) else p + c
    r = fma32(x, k, c)
    if out is not None:
        out[...] = r
        return out
    return r


def _split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = x * 134217729.0  # 2^27 + 1 (Dekker)
    hi = t - (t - x)
    return hi, x - hi


def fma64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """f64 fused multiply-add via an exact product (Dekker) and two-sum; see module notes."""
    a, b, c = (np.asarray(x, dtype=np.float64) for x in (a, b, c))
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    s = p + c
    bb = s - p
    t = (p - (s - bb)) + (c - bb)
    out = s + (t + e)
    # Infinities/NaNs: the error terms are meaningless; use the plain result.
    return np.where(np.isfinite(out) & np.isfinite(p), out, p + c)


def _quiet_bit(x: np.ndarray) -> np.ndarray:
    """The mantissa's top bit (quiet-NaN bit) of each element of an f16/f32/f64 array."""
    if x.dtype == np.float32:
        return (x.view(np.uint32) & np.uint32(0x00400000)) != 0
    if x.dtype == np.float64:
        return (x.view(np.uint64) & np.uint64(1 << 51)) != 0
    return (x.view(np.uint16) & np.uint16(0x0200)) != 0


def _is_snan(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return np.isnan(x) & ~_quiet_bit(x)


def _minmax(a: np.ndarray, b: np.ndarray, is_min: bool) -> np.ndarray:
    """IEEE-mode v_min/v_max (ISA pseudo-code): a signalling NaN operand gives that NaN
    quieted, a quiet NaN gives the other operand, and -0 orders below +0."""
    r = np.fmin(a, b) if is_min else np.fmax(a, b)
    both_zero = (a == 0) & (b == 0)
    if both_zero.any():
        neg = np.signbit(a) | np.signbit(b) if is_min else np.signbit(a) & np.signbit(b)
        zero = np.where(neg, -0.0, 0.0).astype(r.dtype)
        r = np.where(both_zero, zero, r)
    a_nan, b_nan = np.isnan(a), np.isnan(b)
    if a_nan.any() or b_nan.any():
        qa, qb = (np.abs(a) * 1).astype(r.dtype), (np.abs(b) * 1).astype(r.dtype)  # quieted
        r = np.where(_is_snan(b), np.copysign(qb, b), r)
        r = np.where(_is_snan(a), np.copysign(qa, a), r)
    return r


def fmin(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _minmax(a, b, True)


def fmax(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _minmax(a, b, False)


def fmed3(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """v_med3_f32: the median; with a NaN input the ISA returns min3 (IEEE mode)."""
    med = np.fmax(np.fmin(a, b), np.fmin(np.fmax(a, b), c))
    nan = np.isnan(a) | np.isnan(b) | np.isnan(c)
    return np.where(nan, np.fmin(np.fmin(a, b), c), med)


def cvt_int(x: np.ndarray, dt: type, lo: float, hi: float) -> np.ndarray:
    """Float → integer conversion truncating toward zero, saturating, NaN → 0 (ISA v_cvt_*)."""
    x = np.asarray(x, dtype=np.float64)
    return np.where(np.isnan(x), 0, np.clip(np.trunc(x), lo, hi)).astype(dt)


def frexp_mant(x: np.ndarray) -> np.ndarray:
    """Mantissa in [0.5, 1) with the sign; inf/NaN pass through (ISA v_frexp_mant)."""
    m, _ = np.frexp(x)
    return np.where(np.isfinite(x), m, x).astype(x.dtype)


def frexp_exp(x: np.ndarray) -> np.ndarray:
    _, e = np.frexp(x)
    return np.where(np.isfinite(x), e, 0).astype(np.int32)


def ldexp(x: np.ndarray, e: np.ndarray) -> np.ndarray:
    e = np.clip(np.asarray(e, dtype=np.int64), -1100, 1100).astype(np.int32)
    return np.ldexp(x, e).astype(x.dtype)


def _exponent(x: np.ndarray) -> np.ndarray:
    """The biased exponent field of an f16/f32/f64 (ISA pseudo-code `exponent()`)."""
    if x.dtype == np.float32:
        return ((x.view(np.uint32) >> np.uint32(23)) & np.uint32(0xFF)).astype(np.int32)
    if x.dtype == np.float16:
        return ((x.view(np.uint16) >> np.uint16(10)) & np.uint16(0x1F)).astype(np.int32)
    return ((x.view(np.uint64) >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int32)


def _is_denorm(x: np.ndarray) -> np.ndarray:
    return (x != 0) & (_exponent(x) == 0) & np.isfinite(x)


def div_scale(s0: np.ndarray, s1: np.ndarray, s2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """v_div_scale_f32/f64 (RDNA3 ISA pseudo-code): (scaled value, VCC lane flag).

    s0 is the value to scale (numerator or denominator), s1 the denominator, s2 the numerator.
    Scaling by 2^±64 (f32) / 2^±128 (f64) keeps the Newton-Raphson steps away from denormals
    and overflow; the flag tells v_div_fmas to undo it.
    """
    s0, s1, s2 = np.broadcast_arrays(s0, s1, s2)
    is32 = s0.dtype == np.float32
    big, mant = (64, 23) if is32 else (128, 52)
    near_max = 96 if is32 else 768
    dt = s0.dtype
    d = np.array(s0, dtype=dt, copy=True)
    vcc = np.zeros(d.shape, dtype=bool)
    done = np.zeros(d.shape, dtype=bool)
    with np.errstate(all="ignore"):
        exp1, exp2 = _exponent(s1), _exponent(s2)
        recip_denorm = _is_denorm((1.0 / s1.astype(np.float64)).astype(dt)) if is32 else \
            _is_denorm(1.0 / s1)
        quot_denorm = _is_denorm((s2 / s1).astype(dt))

        def case(cond: np.ndarray, value: np.ndarray | None, flag: bool) -> None:
            cond = cond & ~done
            if value is not None:
                d[cond] = value[cond]
            if flag:
                vcc[cond] = True
            done[cond] = True

        up = np.ldexp(s0, big).astype(dt)
        down = np.ldexp(s0, -big).astype(dt)
        nan = np.full(d.shape, np.nan, dtype=dt)
        case((s2 == 0) | (s1 == 0), nan, False)
        c = (exp2 - exp1) >= near_max
        case(c & (s0 == s1), up, True)
        case(c, None, True)
        case(_is_denorm(s1), up, False)
        c = recip_denorm & quot_denorm
        # Huge denominator and tiny quotient: scale the denominator down (the quotient then
        # comes out 2^64 too big and v_div_fmas scales it back).
        case(c & (s0 == s1), down, True)
        case(c, None, True)
        case(recip_denorm, down, False)
        case(quot_denorm & (s0 == s2), up, True)
        case(quot_denorm, None, True)
        case(exp2 <= mant, up, False)
    return d, vcc


def div_fmas(a: np.ndarray, b: np.ndarray, c: np.ndarray, vcc: np.ndarray) -> np.ndarray:
    """v_div_fmas: fma(a, b, c), rescaled by 2^±64 (f32) / 2^±128 (f64) where VCC is set.

    The direction follows the ISA pseudo-code: up when c's exponent says the quotient was scaled
    down (huge numerator), down otherwise.
    """
    is32 = np.asarray(a).dtype == np.float32
    r = fma32(a, b, c) if is32 else fma64(a, b, c)
    if not np.any(vcc):
        return r
    big = 64 if is32 else 128
    cc = np.broadcast_to(np.asarray(c, dtype=r.dtype), r.shape)
    up = _exponent(cc) > (127 if is32 else 1023)
    scale = np.where(up, big, -big)
    with np.errstate(all="ignore"):
        scaled = np.ldexp(r.astype(np.float64), scale).astype(r.dtype)
    return np.where(vcc, scaled, r)


def div_fixup(q: np.ndarray, den: np.ndarray, num: np.ndarray) -> np.ndarray:
    """v_div_fixup: special cases of num/den (NaN, zeros, infinities), else the quotient q."""
    q, den, num = np.broadcast_arrays(q, den, num)
    dt = q.dtype
    sign_out = np.signbit(den) ^ np.signbit(num)
    inf = np.where(sign_out, -np.inf, np.inf).astype(dt)
    zero = np.where(sign_out, -0.0, 0.0).astype(dt)
    out = np.where(sign_out, -np.abs(q), np.abs(q)).astype(dt)
    out = np.where((den == 0) & (num != 0) | np.isinf(num) & ~np.isinf(den), inf, out)
    out = np.where((num == 0) & (den != 0) | np.isinf(den) & ~np.isinf(num), zero, out)
    nan = np.isnan(den) | np.isnan(num) | (den == 0) & (num == 0) | np.isinf(den) & np.isinf(num)
    out = np.where(nan, np.array(np.nan, dtype=dt), out)
    return out.astype(dt)


def classify(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """v_cmp_class: whether x is in any class whose bit is set in mask (ISA table)."""
    x = np.asarray(x)
    neg = np.signbit(x)
    fin = np.isfinite(x)
    den = _is_denorm(x)
    zero = x == 0
    normal = fin & ~den & ~zero
    quiet = _quiet_bit(x)
    nan = np.isnan(x)
    classes = [nan & ~quiet, nan & quiet, np.isneginf(x), normal & neg, den & neg, zero & neg,
               zero & ~neg, den & ~neg, normal & ~neg, np.isposinf(x)]
    mask = np.asarray(mask, dtype=np.uint32)
    out = np.zeros(np.broadcast_shapes(x.shape, mask.shape), dtype=bool)
    for bit, cls in enumerate(classes):
        out |= cls & ((mask >> np.uint32(bit)) & np.uint32(1)).astype(bool)
    return out


def fract(x: np.ndarray) -> np.ndarray:
    """x - floor(x), kept below 1.0 (ISA v_fract); inf → NaN."""
    dt = x.dtype
    below_one = np.nextafter(np.array(1.0, dtype=dt), np.array(0.0, dtype=dt))
    with np.errstate(all="ignore"):
        r = np.minimum(x - np.floor(x), below_one)
    return np.where(np.isinf(x), np.array(np.nan, dtype=dt), r).astype(dt)
