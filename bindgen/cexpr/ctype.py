"""C arithmetic types on LP64 Linux and their conversions (C11 6.3): promotions, usual
arithmetic conversions, wrapping at a type's width.
"""

from __future__ import annotations

import math
import struct

from .model import CType, _Fail


# ---------------------------------------------------------------- C types (LP64)

_INT = CType(4, True)
_UINT = CType(4, False)
_LONG = CType(8, True)
_ULONG = CType(8, False)
_INT128 = CType(16, True)
_FLOAT = CType(4, True, is_float=True)
_DOUBLE = CType(8, True, is_float=True)
_LDOUBLE = CType(16, True, is_float=True)
_PTR = CType(8, False, is_pointer=True)

# Typedefs every Linux header set has; used only when the context does not name them itself.
_STD_TYPES: dict[str, CType] = {
    "size_t": _ULONG,
    "ssize_t": _LONG,
    "ptrdiff_t": _LONG,
    "intptr_t": _LONG,
    "uintptr_t": _ULONG,
    "wchar_t": _INT,
    "__int128_t": _INT128,
    "__uint128_t": CType(16, False),
}
for _bits in (8, 16, 32, 64):
    _STD_TYPES[f"int{_bits}_t"] = _STD_TYPES[f"__s{_bits}"] = CType(_bits // 8, True)
    _STD_TYPES[f"uint{_bits}_t"] = _STD_TYPES[f"__u{_bits}"] = CType(_bits // 8, False)
    if _bits > 8:
        _STD_TYPES[f"__le{_bits}"] = _STD_TYPES[f"__be{_bits}"] = CType(_bits // 8, False)

def _promote(ct: CType) -> CType:
    """C11 6.3.1.1: types narrower than int become int (int holds all their values)."""
    if ct.size < 4 and not ct.is_float and not ct.is_pointer:
        return _INT
    return ct


def _common(a: CType, b: CType) -> CType:
    """C11 6.3.1.8, the usual arithmetic conversions (long and long long are both 8 bytes)."""
    if a.is_float or b.is_float:
        if a.is_float and b.is_float:
            return a if a.size >= b.size else b
        return a if a.is_float else b
    a, b = _promote(a), _promote(b)
    if a == b:
        return a
    if a.signed == b.signed:
        return a if a.size >= b.size else b
    u, s = (b, a) if a.signed else (a, b)
    # An unsigned type at least as wide wins; a wider signed type holds every unsigned value.
    return u if u.size >= s.size else s


def _f32(x: float) -> float:
    """Round to IEEE binary32, as a C ``float`` holds it."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def _wrap(v: int | float, ct: CType) -> int | float:
    """Convert a value to type ``ct``: wrap integers at its width (gcc's modular behaviour)."""
    if ct.is_float:
        v = float(v)
        return _f32(v) if ct.size == 4 else v
    bits = ct.size * 8
    n = int(v)  # a value of an integer type is an int (``_convert`` truncates floats first)
    n &= (1 << bits) - 1
    if ct.signed and n >> (bits - 1):
        n -= 1 << bits
    return n


def _fits(src: CType, dst: CType) -> bool:
    """Whether every value of integer type ``src`` is representable in ``dst``."""
    s_signed = src.signed and not src.is_pointer
    if s_signed == dst.signed:
        return src.size <= dst.size
    return not s_signed and src.size < dst.size


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _convert(v: int | float, ct: CType) -> int | float:
    if isinstance(v, float) and not ct.is_float:
        if not math.isfinite(v):
            raise _Fail("floating-point value out of range of an integer type")
        v = math.trunc(v)
    return _wrap(v, ct)
