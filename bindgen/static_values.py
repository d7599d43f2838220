"""The value of a ``static const`` record or array: its initializer list read as C reads it.

clang evaluates a scalar initializer for us (``clang_Cursor_Evaluate``) but not an initializer
list, and libclang shows only the list's written form: designators (``.y = 5``, ``[2] = 9``,
``.a.x = 1``) and elided braces (``{1, 2, 3, 4}`` for an ``int[2][2]``) are as written. This
module places each initializer as C11 6.7.9 says: a current object per brace level, a designator
moving it, a value that is not a brace list filling the first scalar (or the first char array, for
a string literal) at or inside the current subobject, a union taking one member, everything not
initialized zero. Each scalar is evaluated by clang and converted to its member's type as C
converts it (integers wrap, bitfields keep their width, a float truncates toward zero).

Values are IR values (``ir.RecordValue``, ``ir.ArrayValue``, int, float); a record's fields are
indexed as the parser indexes them (its members without unnamed bitfields). What cannot be a
Python constant, a pointer other than NULL and a GNU range designator, raises
``UnsupportedConstruct``.
"""

from __future__ import annotations

import clang.cindex as ci

from . import ir
from .errors import UnsupportedConstruct

CK = ci.CursorKind
TK = ci.TypeKind

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

_INTS = {
    TK.BOOL: (1, False), TK.CHAR_S: (8, True), TK.SCHAR: (8, True), TK.CHAR_U: (8, False),
    TK.UCHAR: (8, False), TK.SHORT: (16, True), TK.USHORT: (16, False), TK.INT: (32, True),
    TK.UINT: (32, False), TK.LONG: (64, True), TK.ULONG: (64, False), TK.LONGLONG: (64, True),
    TK.ULONGLONG: (64, False), TK.INT128: (128, True), TK.UINT128: (128, False),
    TK.WCHAR: (32, True), TK.CHAR16: (16, False), TK.CHAR32: (32, False),
}
_FLOATS = (TK.FLOAT, TK.DOUBLE, TK.LONGDOUBLE)


class _Slot:
    """One aggregate being filled: its members' types and the values given so far."""

    def __init__(self, t: ci.Type, unnamed: Callable[[str], bool]) -> None:
        self.t = t.get_canonical()
        self.union = self.t.kind == TK.RECORD and self.t.get_declaration().kind == CK.UNION_DECL
        self.values: dict[int, object] = {}
        self.fields: list[ci.Cursor] = []
        if self.t.kind == TK.RECORD:
            self.fields = [
                f for f in self.t.get_fields() if not (unnamed(f.spelling) and f.is_bitfield())
            ]
            self.count = len(self.fields)
        else:
            self.count = self.t.element_count

    def member(self, i: int) -> ci.Type:
        return self.fields[i].type if self.fields else self.t.element_type

    def width(self, i: int) -> int | None:
        f = self.fields[i] if self.fields else None
        return f.get_bitfield_width() if f is not None and f.is_bitfield() else None

    def put(self, i: int, value: object) -> None:
        if self.union:
            self.values.clear()
        self.values[i] = value

    def sub(self, i: int, unnamed: Callable[[str], bool]) -> "_Slot":
        """The member ``i`` as an aggregate to fill (what an earlier initializer gave it kept,
        as C keeps it when a later designator reaches inside)."""
        have = self.values.get(i)
        if isinstance(have, _Slot):
            return have
        s = _Slot(self.member(i), unnamed)
        if isinstance(have, ir.RecordValue):  # `.a = {1}, .a.y = 2`: a keeps its x
            s.values.update(have.fields)
        elif isinstance(have, ir.ArrayValue):
            s.values.update(enumerate(have.items))
        self.put(i, s)
        return s

    def frozen(self) -> object:
        vals = {i: v.frozen() if isinstance(v, _Slot) else v for i, v in self.values.items()}
        vals = {i: v for i, v in vals.items() if not _zero(v)}
        if self.fields:
            return ir.RecordValue(tuple(sorted(vals.items())))
        n = max(vals, default=-1) + 1
        return ir.ArrayValue(tuple(vals.get(i, 0) for i in range(n)))


def _zero(v: object) -> bool:
    if isinstance(v, ir.RecordValue):
        return not v.fields
    if isinstance(v, ir.ArrayValue):
        return not v.items
    return v == 0


def _aggregate(t: ci.Type) -> bool:
    return t.get_canonical().kind in (TK.RECORD, TK.CONSTANTARRAY)


def _char_array(t: ci.Type) -> bool:
    c = t.get_canonical()
    return c.kind == TK.CONSTANTARRAY and c.element_type.get_canonical().get_size() == 1


class _Reader:
    def __init__(
        self, evaluate: Callable[[ci.Cursor], object], unnamed: Callable[[str], bool]
    ) -> None:
        self.evaluate, self.unnamed = evaluate, unnamed

    def value(self, t: ci.Type, c: ci.Cursor) -> object:
        """The value of an object of type ``t`` initialized by the expression or list ``c``."""
        if c.kind == CK.INIT_LIST_EXPR:
            items = list(c.get_children())
            if not _aggregate(t):  # braces around a scalar: `int x = {5}`
                if not items:
                    return 0
                return self.value(t, items[0])
            slot = _Slot(t, self.unnamed)
            self.fill(slot, items)
            return slot.frozen()
        if _char_array(t):
            raw = self.evaluate(c)
            if isinstance(raw, bytes):
                n = t.get_canonical().element_count
                data = raw[:n]
                signed = t.get_canonical().element_type.get_canonical().kind in (
                    TK.CHAR_S, TK.SCHAR
                )
                ints = [b - 256 if signed and b > 127 else b for b in data]
                while ints and ints[-1] == 0:
                    ints.pop()
                return ir.ArrayValue(tuple(ints))
        if _aggregate(t):
            raise UnsupportedConstruct(
                f"an initializer of type {t.spelling!r} that is not a brace list (a copy of "
                "another object is not a constant bindgen can read)"
            )
        return self.scalar(t, c, None)

    def scalar(self, t: ci.Type, c: ci.Cursor, width: int | None) -> object:
        k = t.get_canonical().kind
        raw = self.evaluate(c)
        if k == TK.ENUM:
            k = t.get_canonical().get_declaration().enum_type.get_canonical().kind
        if k == TK.POINTER:
            if _null(c, self.evaluate):
                return 0
            raise UnsupportedConstruct(
                "holds a pointer: its value is an address, known only when the program is linked"
            )
        if raw is None or isinstance(raw, bytes):
            raise UnsupportedConstruct(
                f"an initializer clang cannot evaluate to a number ({_text(c)!r})"
            )
        if k in _FLOATS:
            return float(raw)  # type: ignore[arg-type]
        if k not in _INTS:
            raise UnsupportedConstruct(f"a member of type {t.spelling!r}")
        bits, signed = _INTS[k]
        v = int(raw)  # type: ignore[call-overload]
        if k == TK.BOOL:
            return 1 if v else 0
        if width is not None:
            bits = width
        v &= (1 << bits) - 1
        return v - (1 << bits) if signed and v >> (bits - 1) else v

    def fill(self, top: _Slot, items: list[ci.Cursor]) -> None:
        """Places the items of one brace list in ``top`` (C11 6.7.9p17-20)."""
        stack: list[list] = [[top, 0]]  # (aggregate, index of its next member)
        for item in items:
            value = item
            if item.kind == CK.UNEXPOSED_EXPR and item.type.kind == TK.VOID:  # designated
                *designators, value = list(item.get_children())
                if any(tok.spelling == "..." for tok in item.get_tokens()):
                    raise UnsupportedConstruct("a GNU range designator ([a ... b])")
                stack = [[top, 0]]
                for j, d in enumerate(designators):
                    slot = stack[-1][0]
                    path = self.designate(slot, d)
                    for step, i in enumerate(path):
                        stack[-1][1] = i
                        if j < len(designators) - 1 or step < len(path) - 1:
                            stack.append([stack[-1][0].sub(i, self.unnamed), 0])
            self.place(stack, value)

    def designate(self, slot: _Slot, d: ci.Cursor) -> list[int]:
        """The member indexes a designator names: one, or a path through anonymous members."""
        if slot.fields:
            if d.kind != CK.MEMBER_REF:
                raise UnsupportedConstruct(f"a designator {_text(d)!r} for a record")
            if self.unnamed(d.spelling):  # the anonymous member clang adds before a promoted name
                want = d.type.get_canonical().spelling
                for i, f in enumerate(slot.fields):
                    if self.unnamed(f.spelling) and f.type.get_canonical().spelling == want:
                        return [i]
            path = _field_path(slot.t, d.spelling, self.unnamed)
            if path is None:
                raise UnsupportedConstruct(f"a designator naming no field: .{d.spelling}")
            return path
        at = self.evaluate(d)
        if not isinstance(at, int) or not 0 <= at < slot.count:
            raise UnsupportedConstruct(f"an array designator out of range ({_text(d)!r})")
        return [at]

    def place(self, stack: list[list], c: ci.Cursor) -> None:
        while stack[-1][1] >= stack[-1][0].count:
            if len(stack) == 1:
                raise UnsupportedConstruct("more initializers than members")
            stack.pop()
            stack[-1][1] += 1
        slot, i = stack[-1]
        t = slot.member(i)
        descend = (
            c.kind != CK.INIT_LIST_EXPR
            and _aggregate(t)
            and not (_char_array(t) and c.kind == CK.STRING_LITERAL)
            and not _same_record(t, c.type)
        )
        if descend:  # braces elided: the value starts the member's first scalar
            stack.append([slot.sub(i, self.unnamed), 0])
            self.place(stack, c)
            return
        if c.kind != CK.INIT_LIST_EXPR and not _aggregate(t):
            slot.put(i, self.scalar(t, c, slot.width(i)))
        else:
            slot.put(i, self.value(t, c))
        stack[-1][1] = slot.count if slot.union else i + 1


def _null(c: ci.Cursor, evaluate: Callable[[ci.Cursor], object]) -> bool:
    """Whether ``c`` is a null pointer constant (``0``, ``NULL``, ``(void *)0``): clang evaluates
    the integer inside the conversions, not the pointer."""
    for _ in range(16):
        raw = evaluate(c)
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw == 0
        if c.kind not in (CK.UNEXPOSED_EXPR, CK.PAREN_EXPR, CK.CSTYLE_CAST_EXPR):
            return False
        inner = list(c.get_children())
        if not inner:
            return False
        c = inner[-1]
    return False


def _same_record(t: ci.Type, other: ci.Type) -> bool:
    a, b = t.get_canonical(), other.get_canonical()
    return a.kind == TK.RECORD and b.kind == TK.RECORD and a.spelling == b.spelling


def _field_path(t: ci.Type, name: str, unnamed: Callable[[str], bool]) -> list[int] | None:
    fields = [f for f in t.get_fields() if not (unnamed(f.spelling) and f.is_bitfield())]
    for i, f in enumerate(fields):
        if f.spelling == name:
            return [i]
    for i, f in enumerate(fields):
        if unnamed(f.spelling) and f.type.get_canonical().kind == TK.RECORD:
            inner = _field_path(f.type.get_canonical(), name, unnamed)
            if inner is not None:
                return [i, *inner]
    return None


def _text(c: ci.Cursor) -> str:
    return " ".join(tok.spelling for tok in c.get_tokens())[:60]


def static_value(
    c: ci.Cursor, evaluate: Callable[[ci.Cursor], object], unnamed: Callable[[str], bool]
) -> object:
    """The value of the ``static const`` record or array variable ``c`` (an IR value)."""
    # The initializer is the declaration's last child (an array's size expression comes first).
    init = None
    for init in c.get_children():
        pass
    if init is None or init.kind != CK.INIT_LIST_EXPR:
        raise UnsupportedConstruct(
            "static const record or array without a brace-list initializer"
        )
    return _Reader(evaluate, unnamed).value(c.type, init)
