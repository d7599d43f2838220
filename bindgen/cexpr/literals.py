"""C literals (C11 6.4.4, 6.4.5) to typed values: integer suffixes and types, floats,
character and string literals with their escapes.
"""

from __future__ import annotations

import re

from .model import CType, _Fail
from .ctype import _DOUBLE, _FLOAT, _INT, _INT128, _LDOUBLE, _LONG, _UINT, _ULONG, _f32, _wrap
from .nodes import _Lit


# ---------------------------------------------------------------- literals

_INT_RE = re.compile(r"(0[xX][0-9a-fA-F]+|0[bB][01]+|[0-9]+)([uUlL]*)")
_DEC_FLOAT_RE = re.compile(r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INT_SUFFIXES = {"", "u", "l", "ul", "lu", "ll", "ull", "llu"}
_ESCAPES = {
    "n": 10,
    "t": 9,
    "r": 13,
    "a": 7,
    "b": 8,
    "f": 12,
    "v": 11,
    "\\": 92,
    "'": 39,
    '"': 34,
    "?": 63,
    "e": 27,
    "E": 27,
}
_HEX_DIGITS = set("0123456789abcdefABCDEF")


def _literal_types(decimal: bool, unsigned: bool, longs: int) -> tuple[CType, ...]:
    """C11 6.4.4.1p5: the candidate types of an integer constant, first that fits wins."""
    if unsigned:
        return (_UINT, _ULONG) if longs == 0 else (_ULONG,)
    if decimal:
        return (_INT, _LONG) if longs == 0 else (_LONG,)
    if longs == 0:
        return (_INT, _UINT, _LONG, _ULONG)
    return (_LONG, _ULONG)


def _number(text: str) -> _Lit:
    s = text.replace("'", "")  # C23 digit separators
    m = _INT_RE.fullmatch(s)
    if m is None:
        return _float_literal(s, text)
    digits, suffix = m.groups()
    low = digits.lower()
    if low.startswith("0x"):
        v, base = int(digits[2:], 16), 16
    elif low.startswith("0b"):
        v, base = int(digits[2:], 2), 2
    elif len(digits) > 1 and digits[0] == "0":
        if "8" in digits or "9" in digits:
            raise _Fail(f"invalid octal literal {text}")
        v, base = int(digits, 8), 8
    else:
        v, base = int(digits), 10
    suf = suffix.lower()
    if suf not in _INT_SUFFIXES:
        raise _Fail(f"invalid integer suffix in {text}")
    for ct in _literal_types(base == 10, "u" in suf, suf.count("l")):
        if v < 1 << (ct.size * 8 - ct.signed):
            return _Lit(v, ct, hex_=base == 16)
    if v < 1 << 127 and "u" not in suf and base == 10:
        return _Lit(v, _INT128)  # gcc types such decimal constants __int128 (with a warning)
    if v < 1 << 128:
        return _Lit(v, CType(16, False), hex_=base == 16)
    raise _Fail(f"integer literal {text} too large")


def _float_literal(s: str, text: str) -> _Lit:
    low = s.lower()
    ct = _DOUBLE
    body = s
    is_hex = low.startswith("0x")
    # In a hex float the suffix can only follow the binary exponent; 'f' before it is a digit.
    if low[-1] in "fl" and (not is_hex or "p" in low[:-1]):
        ct = _FLOAT if low[-1] == "f" else _LDOUBLE
        body = s[:-1]
    try:
        if is_hex:
            if "p" not in low:
                raise ValueError
            v = float.fromhex(body)
        else:
            if not _DEC_FLOAT_RE.fullmatch(body):
                raise ValueError
            v = float(body)
    except ValueError:
        raise _Fail(f"invalid number {text}") from None
    return _Lit(_f32(v) if ct is _FLOAT else v, ct)


def _unescape(body: str, text: str) -> list[tuple[int, bool]]:
    """(code, is_escape) per character: escapes give code units, other characters code points."""
    out: list[tuple[int, bool]] = []
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c != "\\":
            out.append((ord(c), False))
            i += 1
            continue
        i += 1
        c = body[i] if i < n else ""
        if c in _ESCAPES:
            out.append((_ESCAPES[c], True))
            i += 1
        elif c and c in "01234567":
            j = i
            while j < n and j < i + 3 and body[j] in "01234567":
                j += 1
            out.append((int(body[i:j], 8), True))
            i = j
        elif c == "x":
            j = i + 1
            while j < n and body[j] in _HEX_DIGITS:
                j += 1
            if j == i + 1:
                raise _Fail(f"invalid escape in {text}")
            out.append((int(body[i + 1 : j], 16), True))
            i = j
        elif c in ("u", "U"):
            k = 4 if c == "u" else 8
            h = body[i + 1 : i + 1 + k]
            if len(h) != k or not set(h) <= _HEX_DIGITS:
                raise _Fail(f"invalid escape in {text}")
            out.append((int(h, 16), False))
            i += 1 + k
        else:
            raise _Fail(f"invalid escape in {text}")
    return out


def _char(text: str) -> _Lit:
    q = text.index("'")
    prefix, units = text[:q], _unescape(text[q + 1 : -1], text)
    if not units:
        raise _Fail(f"empty character literal {text}")
    if prefix == "":
        data: list[int] = []
        for v, esc in units:
            if esc:
                data.append(v & 0xFF)
            else:
                data.extend(chr(v).encode("utf-8"))
        v = 0
        for b in data:  # gcc: a multi-character constant packs its chars big-endian into an int
            v = (v << 8) | b
        # One char converts through (signed) char: '\xff' is -1 on x86.
        return _Lit(_wrap(v, CType(1, True)) if len(data) == 1 else _wrap(v, _INT), _INT)
    ct = {"L": _INT, "u": CType(2, False), "U": _UINT, "u8": CType(1, False)}[prefix]
    if len(units) != 1:
        raise _Fail(f"multi-character wide literal {text}")
    return _Lit(_wrap(units[0][0], ct), ct)


def _string(parts: list[str]) -> _Lit:
    chars: list[str] = []
    for text in parts:  # adjacent literals concatenate (C11 5.1.1.2 phase 6)
        q = text.index('"')
        chars.extend(chr(min(v, 0x10FFFF)) for v, _ in _unescape(text[q + 1 : -1], text))
    bad = next((c for c in chars if 0xDC80 <= ord(c) <= 0xDCFF), None)
    if bad is not None:  # a raw byte that is not UTF-8 (read with surrogateescape)
        raise _Fail(f"string literal holds the byte 0x{ord(bad) - 0xDC00:02x}, which is not UTF-8")
    return _Lit("".join(chars), None, is_str=True)
