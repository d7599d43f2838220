"""gfx11 buffer data formats and the conversions between memory and VGPRs.

The unified format enumeration of RDNA3 ISA section 10.7 (Table 52, "Buffer and Image Data
Formats"); codes 1-63 are the buffer formats and the names llvm-mc-16 prints as
`format:[BUF_FMT_*]`; 0 is INVALID (an unbound V#); 64 and up are image-only. A name lists
the components from the most significant bits down, as Mesa's format translation reads it:
2_10_10_10 has X in bits [9:0] and W in [31:30], 10_11_11 has an 11-bit X in bits [10:0].
X sits at the lowest address (or lowest bits) of an element.

Conversions (ISA sections 9.2 "Load Data Format" and 9.3.1 "D16 Instructions"):
  load  UNORM c / (2^n - 1); SNORM max(c / (2^(n-1) - 1), -1); USCALED/SSCALED the integer as
        a float; UINT/SINT zero-/sign-extended; FLOAT widened (16-bit and the unsigned 11/10-bit
        floats exactly; 32-bit data is not converted). Float results are the correctly
        rounded float32.
  d16   float results as float16: from 32-bit floats by truncation, from everything else
        round-to-nearest-even; integer results are the low 16 bits (the pseudocode's 16'B()).
  store UNORM/SNORM clamp to [0, 1] / [-1, 1], scale, round to nearest even; SCALED round to
        nearest even and saturate; UINT/SINT saturate to the component's range; NaN becomes 0
        for every non-float format; FLOAT rounds to nearest even (11/10-bit floats have no sign:
        negative values become 0). d16 stores widen their 16-bit value first (float16 exactly,
        ushort/sshort by zero/sign extension).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

u16, u32 = np.uint16, np.uint32
INTEGER = ("UINT", "SINT")

# Table 52 codes 0-63, in order.
_NAMES = (
    "INVALID", "8_UNORM", "8_SNORM", "8_USCALED", "8_SSCALED", "8_UINT", "8_SINT",
    "16_UNORM", "16_SNORM", "16_USCALED", "16_SSCALED", "16_UINT", "16_SINT", "16_FLOAT",
    "8_8_UNORM", "8_8_SNORM", "8_8_USCALED", "8_8_SSCALED", "8_8_UINT", "8_8_SINT",
    "32_UINT", "32_SINT", "32_FLOAT",
    "16_16_UNORM", "16_16_SNORM", "16_16_USCALED", "16_16_SSCALED", "16_16_UINT", "16_16_SINT",
    "16_16_FLOAT", "10_11_11_FLOAT", "11_11_10_FLOAT",
    "10_10_10_2_UNORM", "10_10_10_2_SNORM", "10_10_10_2_UINT", "10_10_10_2_SINT",
    "2_10_10_10_UNORM", "2_10_10_10_SNORM", "2_10_10_10_USCALED", "2_10_10_10_SSCALED",
    "2_10_10_10_UINT", "2_10_10_10_SINT",
    "8_8_8_8_UNORM", "8_8_8_8_SNORM", "8_8_8_8_USCALED", "8_8_8_8_SSCALED", "8_8_8_8_UINT",
    "8_8_8_8_SINT", "32_32_UINT", "32_32_SINT", "32_32_FLOAT",
    "16_16_16_16_UNORM", "16_16_16_16_SNORM", "16_16_16_16_USCALED", "16_16_16_16_SSCALED",
    "16_16_16_16_UINT", "16_16_16_16_SINT", "16_16_16_16_FLOAT",
    "32_32_32_UINT", "32_32_32_SINT", "32_32_32_FLOAT",
    "32_32_32_32_UINT", "32_32_32_32_SINT", "32_32_32_32_FLOAT",
)


@dataclass(frozen=True)
class BufFormat:
    """One data format: component widths (X first, X in the low bits) and number type."""

    code: int
    name: str
    bits: tuple[int, ...]
    num: str

    @property
    def size_B(self) -> int:
        return sum(self.bits) // 8

    @property
    def count(self) -> int:
        return len(self.bits)

    @property
    def integer(self) -> bool:
        return self.num in INTEGER

    def one(self, d16: bool) -> int:
        """The value a component select of SEL_1 gives: 1 or 1.0 in the VGPR's type."""
        if self.integer:
            return 1
        return 0x3C00 if d16 else 0x3F800000


def _parse(code: int, name: str) -> BufFormat:
    *widths, num = name.split("_")
    return BufFormat(code, name, tuple(int(w) for w in reversed(widths)), num)


FORMATS: dict[int, BufFormat] = {c: _parse(c, n) for c, n in enumerate(_NAMES) if c}
INVALID = 0


# -- memory element <-> component bits ------------------------------------------------------------
def components(fmt: BufFormat, raw: np.ndarray) -> list[np.ndarray]:
    """Each component's bits (uint32 [k]) of k elements given as bytes (uint8 [k, size])."""
    raw = np.ascontiguousarray(raw)
    w = fmt.bits[0]
    if all(b == w for b in fmt.bits) and w % 8 == 0:
        lanes = raw.view({8: np.uint8, 16: np.uint16, 32: np.uint32}[w])
        return [lanes[:, i].astype(u32) for i in range(fmt.count)]
    word = raw.view(u32)[:, 0]   # the packed formats are one dword
    out, at = [], 0
    for b in fmt.bits:
        out.append((word >> u32(at)) & u32((1 << b) - 1))
        at += b
    return out


def element(fmt: BufFormat, comps: list[np.ndarray]) -> np.ndarray:
    """The bytes (uint8 [k, size]) of k elements from each component's bits (uint32 [k])."""
    w = fmt.bits[0]
    if all(b == w for b in fmt.bits) and w % 8 == 0:
        dt = {8: np.uint8, 16: np.uint16, 32: np.uint32}[w]
        out = np.stack([c.astype(dt) for c in comps], axis=1)
        return np.ascontiguousarray(out).view(np.uint8).reshape(len(comps[0]), fmt.size_B)
    word = np.zeros(len(comps[0]), dtype=u32)
    at = 0
    for b, c in zip(fmt.bits, comps):
        word |= (c & u32((1 << b) - 1)) << u32(at)
        at += b
    return word.view(np.uint8).reshape(-1, 4)


# -- small floats ---------------------------------------------------------------------------------
def _small_mant(width: int) -> int:
    return width - 5   # 11-bit: e5m6, 10-bit: e5m5 (no sign bit)


def _small_to_f16(c: np.ndarray, width: int) -> np.ndarray:
    """An unsigned 11/10-bit float's bits as float16 bits: same exponent, shorter mantissa."""
    return (c << u32(10 - _small_mant(width))).astype(u16)


def _f32_to_small(x: np.ndarray, width: int) -> np.ndarray:
    """float32 values to unsigned 11/10-bit float bits, rounding to nearest even."""
    m = _small_mant(width)
    v = x.astype(np.float64)
    out = np.zeros(v.shape, dtype=u32)
    pos = v > 0
    if pos.any():
        p = v[pos]
        e = np.frexp(np.where(np.isinf(p), 1.0, p))[1] - 1
        q = np.ldexp(1.0, np.maximum(e, -14) - m)   # the representable step around p
        r = np.where(np.isinf(p), p, np.rint(p / q) * q)
        with np.errstate(over="ignore"):   # 2^16 and up become infinity, as they should
            out[pos] = r.astype(np.float16).view(u16).astype(u32) >> u32(10 - m)
    out[np.isnan(v)] = u32((0x1F << m) | (1 << (m - 1)))   # a quiet NaN
    return out


def _f32_to_f16_rtz(x: np.ndarray) -> np.ndarray:
    """float32 to float16 bits rounding toward zero (the d16 rule for 32-bit float data)."""
    with np.errstate(over="ignore"):
        h = x.astype(np.float16)
    over = (np.abs(h.astype(np.float64)) > np.abs(x.astype(np.float64))) & ~np.isnan(x)
    bits = h.view(u16).copy()
    bits[over] -= u16(1)   # one step toward zero (inf becomes the largest finite value)
    return bits


# -- loads ----------------------------------------------------------------------------------------
def _sext(c: np.ndarray, width: int) -> np.ndarray:
    v = c.astype(np.int64)
    return np.where(v >= 1 << (width - 1), v - (1 << width), v)


def _exact(fmt: BufFormat, c: np.ndarray, width: int) -> np.ndarray:
    """The value of a non-integer, non-FLOAT component as float64 (exact before rounding)."""
    if fmt.num == "UNORM":
        return c.astype(np.float64) / ((1 << width) - 1)
    if fmt.num == "SNORM":
        return np.maximum(_sext(c, width) / ((1 << (width - 1)) - 1), -1.0)
    if fmt.num == "USCALED":
        return c.astype(np.float64)
    return _sext(c, width).astype(np.float64)   # SSCALED


def load32(fmt: BufFormat, c: np.ndarray, width: int) -> np.ndarray:
    """A component's bits converted to the 32-bit VGPR value (uint32 [k])."""
    if fmt.num == "UINT":
        return c.astype(u32)
    if fmt.num == "SINT":
        return _sext(c, width).astype(np.int32).view(u32)
    if fmt.num == "FLOAT":
        if width == 32:
            return c.astype(u32)
        h = c.astype(u16) if width == 16 else _small_to_f16(c, width)
        return h.view(np.float16).astype(np.float32).view(u32)
    return _exact(fmt, c, width).astype(np.float32).view(u32)


def load16(fmt: BufFormat, c: np.ndarray, width: int) -> np.ndarray:
    """A component's bits converted to the 16-bit VGPR half of a d16 load (uint16 [k])."""
    if fmt.integer:
        return load32(fmt, c, width).astype(u16)   # the low 16 bits
    if fmt.num == "FLOAT":
        if width == 32:
            return _f32_to_f16_rtz(c.astype(u32).view(np.float32))
        return c.astype(u16) if width == 16 else _small_to_f16(c, width)
    with np.errstate(over="ignore"):
        return _exact(fmt, c, width).astype(np.float16).view(u16)


# -- stores ---------------------------------------------------------------------------------------
def store32(fmt: BufFormat, v: np.ndarray, width: int) -> np.ndarray:
    """32-bit VGPR values (uint32 [k]) converted to a component's bits (uint32 [k])."""
    mask = (1 << width) - 1
    if fmt.num == "UINT":
        return np.minimum(v.astype(u32), u32(mask))
    if fmt.num == "SINT":
        lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
        s = np.clip(v.astype(u32).view(np.int32).astype(np.int64), lo, hi)
        return (s & mask).astype(u32)
    f = v.astype(u32).view(np.float32)
    if fmt.num == "FLOAT":
        if width == 32:
            return v.astype(u32)
        if width == 16:
            with np.errstate(over="ignore"):
                return f.astype(np.float16).view(u16).astype(u32)
        return _f32_to_small(f, width)
    x = np.nan_to_num(f.astype(np.float64), nan=0.0)
    if fmt.num == "UNORM":
        r = np.rint(np.clip(x, 0.0, 1.0) * mask)
    elif fmt.num == "SNORM":
        r = np.rint(np.clip(x, -1.0, 1.0) * ((1 << (width - 1)) - 1))
    elif fmt.num == "USCALED":
        r = np.clip(np.rint(x), 0, mask)
    else:  # SSCALED
        r = np.clip(np.rint(x), -(1 << (width - 1)), (1 << (width - 1)) - 1)
    return (r.astype(np.int64) & mask).astype(u32)


def store16(fmt: BufFormat, h: np.ndarray, width: int) -> np.ndarray:
    """A d16 store's 16-bit values (uint16 [k]) converted to a component's bits."""
    h = h.astype(u16)
    if fmt.num == "UINT":
        wide = h.astype(u32)
    elif fmt.num == "SINT":
        wide = h.view(np.int16).astype(np.int32).view(u32)
    else:
        wide = h.view(np.float16).astype(np.float32).view(u32)
    return store32(fmt, wide, width)
