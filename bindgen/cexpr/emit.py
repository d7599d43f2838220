"""The Python emitter: how values and C conversions are spelled in generated source (literals,
wrapping at a C type's width, conversions between C types).
"""

from __future__ import annotations

import math

from .model import CType, _Fail
from .ctype import _ULONG, _fits


def _py_literal(v: object, hex_: bool) -> str:
    """Deterministic Python source for a value."""
    if isinstance(v, tuple):
        return "(" + ", ".join(_py_literal(x, False) for x in v) + ")"
    if isinstance(v, int):
        if hex_:
            return ("-" if v < 0 else "") + hex(abs(v))
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "float('nan')"
        if math.isinf(v):
            return "float('inf')" if v > 0 else "-float('inf')"
        return repr(v)
    return repr(v)


def _code_literal(v: object, hex_: bool) -> str:
    s = _py_literal(v, hex_)
    return f"({s})" if s.startswith("-") else s


def _wrap_code(code: str, ct: CType) -> str:
    """Python source that converts the int ``code`` to type ``ct`` the way C wraps it."""
    if ct.is_float:
        if ct.size == 4:
            # Rounding to binary32 would need a helper that bindgen_rt does not have.
            raise _Fail("32-bit float arithmetic on a parameter")
        return code
    if ct.is_pointer:
        raise _Fail("pointer arithmetic")
    bits = ct.size * 8
    if ct.signed:
        return f"_c_sext({code}, {bits})"
    return f"({code} & {hex((1 << bits) - 1)})"


def _wide_unsigned(known: CType | None) -> CType | None:
    """The common type of ``known`` and an operand of unknown integer type, where it is certain.

    An unsigned 8-byte operand (``size_t``, ``1UL``) makes the result unsigned long whatever the
    other integer is (none is wider on LP64), so ``(x) / sizeof(T)`` wraps a negative ``x`` as C
    does. Otherwise the unknown type decides, and plain Python arithmetic is used.
    """
    if (
        known is not None
        and known.size == 8
        and not known.signed
        and not known.is_float
        and not known.is_pointer
    ):
        return _ULONG
    return None


def _convert_code(code: str, src: CType | None, dst: CType | None) -> str:
    if dst is None:
        return code  # a parameter's type is not known: plain Python arithmetic
    if src is None:
        return code if dst.is_float else _wrap_code(code, dst)
    if dst.is_float:
        if src.is_float and dst.size < src.size:
            raise _Fail("32-bit float arithmetic on a parameter")
        return code
    if src.is_float:
        return _wrap_code(f"int({code})", dst)
    return code if _fits(src, dst) else _wrap_code(code, dst)
