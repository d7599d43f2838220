"""The evaluator: typed C expression nodes. Each node computes its value with C's rules
(``value()``) and spells itself as Python through the emitter (``code()``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .model import CType, _Fail
from .ctype import (
    _DOUBLE,
    _FLOAT,
    _INT,
    _LDOUBLE,
    _PTR,
    _common,
    _convert,
    _promote,
    _trunc_div,
    _wrap,
)
from .tokens import _ARITH, _BINARY_PREC, _COMPARE, _P_COMMA, _P_COND, _P_PRIMARY, _P_UNARY, _SHIFT
from .emit import _code_literal, _convert_code, _wide_unsigned, _wrap_code


# ---------------------------------------------------------------- expression nodes

_UNSET = object()


class _Node:
    """A typed C expression. ``ctype`` None means unknown (it depends on a macro parameter).

    ``value()`` evaluates once and caches (errors too): nodes are shared between every macro that
    refers to the one they came from. ``code()`` gives Python source, folding closed subtrees (no
    parameters, calls or by-name references) to literals.
    """

    __slots__ = ("ctype", "is_str", "hex", "closed", "prec", "_cache")

    def __init__(
        self,
        ctype: CType | None,
        *,
        is_str: bool = False,
        hex_: bool = False,
        closed: bool = True,
        prec: int = _P_PRIMARY,
    ) -> None:
        self.ctype, self.is_str, self.hex = ctype, is_str, hex_
        self.closed, self.prec = closed, prec
        self._cache: object = _UNSET

    def value(self) -> object:
        c = self._cache
        if c is _UNSET:
            try:
                c = self._eval()
            except _Fail as f:
                c = f.with_traceback(None)
            self._cache = c
        if isinstance(c, _Fail):
            raise _Fail(c.reason, c.contextual)
        return c

    def code(self) -> str:
        if self.closed:
            try:
                return _code_literal(self.value(), self.hex)
            except _Fail:
                pass  # e.g. a division by zero in a branch that may never run: keep the code
        return self._code()

    def _eval(self) -> object:
        raise NotImplementedError

    def _code(self) -> str:
        raise NotImplementedError


class _Lit(_Node):
    __slots__ = ()

    def __init__(
        self,
        v: object,
        ctype: CType | None,
        *,
        hex_: bool = False,
        is_str: bool = False,
        prec: int = _P_PRIMARY,
    ) -> None:
        super().__init__(ctype, is_str=is_str, hex_=hex_, prec=prec)
        self._cache = v

    def _code(self) -> str:
        return _code_literal(self._cache, self.hex)


def _typed_code(n: _Node) -> str:
    """Python code for ``n`` as a (value, bits, signed) triple (see bindgen_rt._c_arg): operands
    of an operation whose C type is known only when the macro is called."""
    typed = getattr(n, "typed_code", None)
    if typed is not None and n.ctype is None:
        code = typed()
        if code is not None:
            return code
    ct = n.ctype
    if ct is None:
        return f"_c_arg({n.code()})"  # typed as a C literal of its value would be
    if ct.is_pointer:
        raise _Fail("pointer arithmetic")
    return f"({n.code()}, {0 if ct.is_float else ct.size * 8}, {ct.signed})"


class _Param(_Node):
    """A macro parameter: of unknown type, or typed where a translation assumes one (the fast
    path of a function-like macro for plain int arguments)."""

    __slots__ = ("name",)

    def __init__(self, name: str, ctype: CType | None = None) -> None:
        super().__init__(ctype, closed=False)
        self.name = name

    def _eval(self) -> object:
        raise _Fail(f"parameter {self.name} has no value")

    def _code(self) -> str:
        return self.name


class _MacroRef(_Node):
    """An object-like macro used by value; in Python code it is inlined as a literal."""

    __slots__ = ("name", "target")

    def __init__(self, name: str, target: _Node) -> None:
        super().__init__(
            target.ctype,
            is_str=target.is_str,
            hex_=target.hex,
            closed=target.closed,
            prec=target.prec,
        )
        self.name, self.target = name, target

    def _eval(self) -> object:
        return self.target.value()

    def _code(self) -> str:
        return self.target.code()


class _Folded(_MacroRef):
    """A function-like macro call expanded once and parsed (``bindgen.cexpr.preprocess``): it
    stands for its expansion's tokens ``toks`` (kept for ``#`` and ``##``) wherever the same call
    appears again, so a macro whose expansion repeats a call costs the distinct calls, not the
    text."""

    __slots__ = ("toks",)

    def __init__(self, name: str, target: _Node, toks: list) -> None:
        super().__init__(name, target)
        self.toks = toks


class _NameRef(_MacroRef):
    """An emitted constant used inside a function body: Python code names it."""

    __slots__ = ()

    def __init__(self, name: str, target: _Node) -> None:
        super().__init__(name, target)
        self.closed = False

    def _code(self) -> str:
        return self.name


class _Call(_Node):
    """A call of an emitted function-like macro, by name, inside another function body."""

    __slots__ = ("name", "args")

    def __init__(self, name: str, args: list[_Node], ret: CType | None) -> None:
        super().__init__(ret, closed=False)
        self.name, self.args = name, args

    def _eval(self) -> object:
        raise _Fail(f"call of {self.name} has no value")

    def _code(self) -> str:
        return f"{self.name}({', '.join(a.code() for a in self.args)})"


class _Unary(_Node):
    __slots__ = ("op", "a")

    def __init__(self, op: str, a: _Node) -> None:
        if a.is_str and op != "!":
            raise _Fail("string literal in arithmetic")
        ct = a.ctype
        if op == "!":
            rt: CType | None = _INT
        elif ct is None:
            rt = None
        else:
            if ct.is_pointer:
                raise _Fail("pointer arithmetic")
            if op == "~" and ct.is_float:
                raise _Fail("'~' on a floating-point value")
            rt = _promote(ct)
        super().__init__(rt, hex_=a.hex and op != "!", closed=a.closed, prec=_P_UNARY)
        self.op, self.a = op, a

    def _eval(self) -> object:
        v = self.a.value()
        if self.op == "!":
            return 0 if v else 1
        if self.op == "+":
            return v
        assert self.ctype is not None
        return _wrap(-v if self.op == "-" else ~v, self.ctype)  # type: ignore[operator]

    def typed_code(self) -> str | None:
        if self.ctype is None and self.op in ("-", "~"):
            return f"_c_un({self.op!r}, {_typed_code(self.a)})"
        return None

    def _code(self) -> str:
        typed = self.typed_code()
        if typed is not None:
            return f"{typed}[0]"
        a = self.a.code()
        if self.op == "!":
            return f"_c_bool(not {a})"
        if self.op == "+":
            return a
        expr = f"({self.op}{a})"
        ct = self.ctype
        if ct is None or ct.is_float or (self.op == "~" and ct.signed):
            return expr  # ~ of an in-range signed value stays in range
        return _wrap_code(expr, ct)


class _Binary(_Node):
    __slots__ = ("op", "a", "b", "common")

    def __init__(self, op: str, a: _Node, b: _Node) -> None:
        if a.is_str or b.is_str:
            raise _Fail("string literal in arithmetic")
        ta, tb = a.ctype, b.ctype
        common: CType | None = None
        if op in ("&&", "||"):
            rt: CType | None = _INT
        elif op in _SHIFT:
            for t in (ta, tb):
                if t is not None and t.is_float:
                    raise _Fail(f"'{op}' on a floating-point value")
                if t is not None and t.is_pointer:
                    raise _Fail("pointer arithmetic")
            rt = _promote(ta) if ta is not None else None  # the left operand's type only
        elif ta is None or tb is None:
            known = ta or tb
            if known is not None and known.is_float and op in ("%", "&", "|", "^"):
                raise _Fail(f"'{op}' on a floating-point value")
            if known is not None and known.is_pointer:
                if op not in _COMPARE:
                    raise _Fail("pointer arithmetic")
                common = _PTR
            else:
                common = _wide_unsigned(known)
            rt = _INT if op in _COMPARE else common
        else:
            if ta.is_pointer or tb.is_pointer:
                if op not in _COMPARE:
                    raise _Fail("pointer arithmetic")
                common = _PTR
            else:
                if (ta.is_float or tb.is_float) and op in ("%", "&", "|", "^"):
                    raise _Fail(f"'{op}' on a floating-point value")
                common = _common(ta, tb)
            rt = _INT if op in _COMPARE else common
        logical = op in _COMPARE or op in ("&&", "||")
        super().__init__(
            rt,
            hex_=(a.hex or b.hex) and not logical,
            closed=a.closed and b.closed,
            prec=_BINARY_PREC[op],
        )
        self.op, self.a, self.b, self.common = op, a, b, common

    def _eval(self) -> object:
        op = self.op
        if op == "&&":  # short-circuit: the right side is not evaluated (C11 6.5.13)
            return 1 if (self.a.value() and self.b.value()) else 0
        if op == "||":
            return 1 if (self.a.value() or self.b.value()) else 0
        va, vb = self.a.value(), self.b.value()
        if op in _SHIFT:
            ct = self.ctype
            assert ct is not None
            if not 0 <= vb < ct.size * 8:  # type: ignore[operator]
                raise _Fail(f"shift count {vb} out of range")
            if op == "<<":
                return _wrap(va << vb, ct)  # type: ignore[operator]
            return va >> vb  # type: ignore[operator]  # gcc shifts signed values arithmetically
        ct = self.common
        assert ct is not None
        va, vb = _convert(va, ct), _convert(vb, ct)  # type: ignore[arg-type]
        if op in _COMPARE:
            return 1 if _COMPARE[op](va, vb) else 0
        if op == "/":
            if ct.is_float:
                if vb == 0:  # IEEE 754, as C computes it
                    return (
                        math.nan
                        if va == 0 or math.isnan(va)
                        else math.copysign(math.inf, va) * math.copysign(1.0, vb)
                    )
                return _wrap(va / vb, ct)
            if vb == 0:
                raise _Fail("division by zero")
            return _wrap(_trunc_div(va, vb), ct)  # type: ignore[arg-type]
        if op == "%":
            if vb == 0:
                raise _Fail("division by zero")
            return _wrap(va - vb * _trunc_div(va, vb), ct)  # type: ignore[arg-type,operator]
        return _wrap(_ARITH[op](va, vb), ct)

    def typed_code(self) -> str | None:
        """C's conversions at call time, where an operand's type depends on a parameter."""
        op, ta, tb = self.op, self.a.ctype, self.b.ctype
        if op in ("&&", "||") or self.common is not None:
            return None
        if ta is not None and (tb is not None or op in _SHIFT):
            return None  # the result type is known when the macro is translated
        return f"_c_op({op!r}, {_typed_code(self.a)}, {_typed_code(self.b)})"

    def _code(self) -> str:
        typed = self.typed_code()
        if typed is not None:
            return f"{typed}[0]"
        op = self.op
        a, b = self.a.code(), self.b.code()
        if op == "&&":
            return f"_c_bool({a} and {b})"
        if op == "||":
            return f"_c_bool({a} or {b})"
        if op in _SHIFT:
            expr = f"({a} {op} {b})"
            if op == "<<" and self.ctype is not None:
                return _wrap_code(expr, self.ctype)
            return expr
        ct = self.common
        if ct is not None:
            a = _convert_code(a, self.a.ctype, ct)
            b = _convert_code(b, self.b.ctype, ct)
        if op in _COMPARE:
            return f"_c_bool({a} {op} {b})"
        if op == "/":
            expr = f"({a} / {b})" if ct is not None and ct.is_float else f"_c_div({a}, {b})"
        elif op == "%":
            expr = f"_c_mod({a}, {b})"
        else:
            expr = f"({a} {op} {b})"
        if ct is not None and op in ("+", "-", "*", "/"):
            return _wrap_code(expr, ct)  # & | ^ of in-range operands stay in range
        return expr


class _Cond(_Node):
    __slots__ = ("c", "a", "b")

    def __init__(self, c: _Node, a: _Node, b: _Node) -> None:
        is_str = False
        rt: CType | None = None
        if a.is_str or b.is_str:
            if not (a.is_str and b.is_str):
                raise _Fail("string literal in arithmetic")
            is_str = True
        elif a.ctype is not None and b.ctype is not None:
            if a.ctype.is_pointer or b.ctype.is_pointer:
                rt = _PTR
            else:
                rt = _common(a.ctype, b.ctype)  # C11 6.5.15p5: typed by both branches
        else:
            known = a.ctype or b.ctype
            rt = _PTR if known is not None and known.is_pointer else _wide_unsigned(known)
        super().__init__(
            rt,
            is_str=is_str,
            hex_=a.hex or b.hex,
            closed=c.closed and a.closed and b.closed,
            prec=_P_COND,
        )
        self.c, self.a, self.b = c, a, b

    def _eval(self) -> object:
        v = (self.a if self.c.value() else self.b).value()
        return v if self.ctype is None else _convert(v, self.ctype)  # type: ignore[arg-type]

    def _code(self) -> str:
        a, b = self.a.code(), self.b.code()
        if self.ctype is not None and not self.ctype.is_pointer:
            a = _convert_code(a, self.a.ctype, self.ctype)
            b = _convert_code(b, self.b.ctype, self.ctype)
        return f"({a} if {self.c.code()} else {b})"


class _Comma(_Node):
    __slots__ = ("a", "b")

    def __init__(self, a: _Node, b: _Node) -> None:
        super().__init__(
            b.ctype, is_str=b.is_str, hex_=b.hex, closed=a.closed and b.closed, prec=_P_COMMA
        )
        self.a, self.b = a, b

    def _eval(self) -> object:
        self.a.value()
        return self.b.value()

    def _code(self) -> str:
        return f"({self.a.code()}, {self.b.code()})[1]"


class _Cast(_Node):
    __slots__ = ("a", "is_bool")

    def __init__(self, target: CType, is_bool: bool, a: _Node) -> None:
        if a.is_str:
            raise _Fail("cast of a string literal")
        src = a.ctype
        if src is not None and (
            src.is_pointer and target.is_float or src.is_float and target.is_pointer
        ):
            raise _Fail("cast between pointer and floating-point")
        super().__init__(target, hex_=a.hex, closed=a.closed, prec=_P_UNARY)
        self.a, self.is_bool = a, is_bool

    def _eval(self) -> object:
        v = self.a.value()
        if self.is_bool:
            return 1 if v else 0  # (_Bool)2 is 1 (C11 6.3.1.2)
        assert self.ctype is not None
        return _convert(v, self.ctype)  # type: ignore[arg-type]

    def _code(self) -> str:
        code, src, t = self.a.code(), self.a.ctype, self.ctype
        assert t is not None
        if self.is_bool:
            return f"_c_bool({code})"
        if t.is_pointer:
            raise _Fail("pointer-valued cast")
        if t.is_float:
            if src is not None and src.is_float and src.size <= t.size:
                return code
            if t.size == 4:
                raise _Fail("32-bit float arithmetic on a parameter")
            return f"float({code})"
        if src is None:
            return _wrap_code(code, t)  # unknown source type: always reduce to the target's range
        return _convert_code(code, src, t)


class _Ioctl(_Node):
    """``_IOC(dir, type, nr, size)`` as asm-generic/ioctl.h builds it; ``expr`` holds that sum."""

    __slots__ = ("direction", "t", "nr", "size", "arg", "expr")

    def __init__(
        self, direction: str, t: _Node, nr: _Node, size: int, arg: str | None, expr: _Node
    ) -> None:
        super().__init__(expr.ctype, hex_=True, closed=expr.closed)
        self.direction, self.t, self.nr, self.size, self.arg, self.expr = (
            direction,
            t,
            nr,
            size,
            arg,
            expr,
        )

    def _eval(self) -> object:
        return self.expr.value()

    def _code(self) -> str:
        return self.expr.code()


def _unwrap(node: _Node) -> _Node:
    while isinstance(node, _MacroRef):
        node = node.target
    return node


# ---------------------------------------------------------------- types named in casts / sizeof


@dataclass(frozen=True)
class _TypeName:
    base: str  # "unsigned int", "NvU32", "struct foo"
    ctype: CType | None  # None: void, or unknown to the context
    is_void: bool = False
    is_bool: bool = False
    is_record: bool = False
    pointers: int = 0
    dims: tuple[int, ...] = ()

    def size(self) -> int:
        if self.pointers:
            n = 8
        elif self.is_void:
            n = 1  # gcc's sizeof(void)
        elif self.ctype is None:
            raise _Fail(f"unknown type {self.base}")
        else:
            n = self.ctype.size
        for d in self.dims:
            n *= d
        return n

    def cast_target(self) -> CType:
        if self.dims:
            raise _Fail("cast to an array type")
        if self.pointers:
            return _PTR
        if self.is_void:
            raise _Fail("cast to void")
        if self.is_record:
            raise _Fail(f"cast to record type {self.base}")
        if self.ctype is None:
            raise _Fail(f"unknown type {self.base}")
        return self.ctype


def _builtin_type(words: list[str]) -> tuple[CType | None, bool, bool]:
    """(type, is_void, is_bool) of a keyword type such as ``long unsigned int``."""
    unsigned = "unsigned" in words
    if "void" in words:
        return None, True, False
    if "_Bool" in words or "bool" in words:
        return CType(1, False), False, True
    if "float" in words:
        return _FLOAT, False, False
    if "double" in words:
        return (_LDOUBLE if "long" in words else _DOUBLE), False, False
    if "char" in words:
        return CType(1, not unsigned), False, False  # plain char is signed on x86
    if "__int128" in words:
        return CType(16, not unsigned), False, False
    if "short" in words:
        return CType(2, not unsigned), False, False
    if "long" in words:
        return CType(8, not unsigned), False, False
    return CType(4, not unsigned), False, False
