"""Expression parser: fully macro-expanded tokens to typed nodes (C11 6.5 precedence).
"""

from __future__ import annotations

from typing import Sequence

from .model import _Fail
from .ctype import _ULONG
from .tokens import (
    _BINARY_PREC,
    _CHAR,
    _EOF,
    _ID,
    _NODE,
    _NUM,
    _PUNCT,
    _P_UNARY,
    _QUALIFIERS,
    _STR,
    _TAGS,
    _TYPE_WORDS,
    _Tok,
)
from .literals import _char, _string
from .nodes import (
    _Binary,
    _Cast,
    _Comma,
    _Cond,
    _Lit,
    _Node,
    _Param,
    _TypeName,
    _Unary,
    _builtin_type,
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # the translator imports this module
    from .translate import _Translator


# ---------------------------------------------------------------- parser


class _Parser:
    """Precedence-climbing parser over expanded tokens, building typed nodes.

    The token list ends with the ``_EOF`` sentinel, so lookahead needs no bounds checks.
    """

    __slots__ = ("toks", "pos", "tr")

    def __init__(self, toks: Sequence[_Tok], tr: _Translator) -> None:
        self.toks = [*toks, _EOF]
        self.pos = 0
        self.tr = tr

    def peek(self, k: int = 0) -> _Tok:
        i = self.pos + k
        return self.toks[i] if i < len(self.toks) else _EOF

    def punct(self, text: str) -> bool:
        t = self.toks[self.pos]
        return t.kind == _PUNCT and t.text == text

    def at_end(self) -> bool:
        return self.toks[self.pos] is _EOF

    def unexpected(self) -> _Fail:
        t = self.toks[self.pos]
        if t is _EOF:
            return _Fail("incomplete expression", True)
        return _Fail(f"unexpected '{t.text}'", True)

    def expect(self, text: str) -> None:
        t = self.toks[self.pos]
        if t.kind != _PUNCT or t.text != text:
            if t is _EOF:
                raise _Fail(f"expected '{text}' at the end", True)
            raise _Fail(f"expected '{text}' before '{t.text}'", True)
        self.pos += 1

    def expression(self) -> _Node:
        e = self.conditional()
        while self.punct(","):
            self.pos += 1
            e = _Comma(e, self.conditional())
        return e

    def conditional(self) -> _Node:
        c = self.binary(3)
        if self.punct("?"):
            self.pos += 1
            a = self.expression()
            self.expect(":")
            return _Cond(c, a, self.conditional())
        return c

    def binary(self, min_prec: int) -> _Node:
        left = self.unary()
        toks = self.toks
        while True:
            t = toks[self.pos]
            if t.kind != _PUNCT:
                return left
            p = _BINARY_PREC.get(t.text)
            if p is None or p < min_prec:
                return left
            self.pos += 1
            left = _Binary(t.text, left, self.binary(p + 1))

    def unary(self) -> _Node:
        t = self.toks[self.pos]
        k = t.kind
        if k == _PUNCT:
            op = t.text
            if op in ("+", "-", "~", "!"):
                self.pos += 1
                return _Unary(op, self.unary())
            if (
                op == "("
                and self.peek(2).text == ")"
                and isinstance(self.peek(1).node, _Param)
                and self.peek(3).kind in (_NUM, _CHAR, _STR, _ID, _NODE)
            ):
                raise _Fail("casts to a type passed as a parameter")
            if op == "(" and self.starts_type(1):
                self.pos += 1
                tn = self.type_name()
                self.expect(")")
                if self.punct("{"):
                    raise _Fail("compound literal")
                target = tn.cast_target()
                return _Cast(target, tn.is_bool and not tn.pointers, self.unary())
            if op == "&":
                raise _Fail("takes an address")
            if op == "*":
                raise _Fail("dereferences a pointer")
            if op in ("++", "--"):
                raise _Fail("statement body", True)
        elif k == _ID:
            w = t.text
            if w == "sizeof":
                self.pos += 1
                if self.punct("(") and self.starts_type(1):
                    self.pos += 1
                    tn = self.type_name()
                    self.expect(")")
                    return _Lit(tn.size(), _ULONG, prec=_P_UNARY)
                return _Lit(self._sizeof_expr(self.unary()), _ULONG, prec=_P_UNARY)
            if w in ("_Alignof", "__alignof__", "__alignof", "alignof"):
                raise _Fail(f"uses {w}")
            if w == "__extension__":
                self.pos += 1
                return self.unary()
        node = self.primary()
        t = self.toks[self.pos]
        if t.kind == _PUNCT and t.text in ("[", ".", "->", "("):  # postfix operators
            if t.text == "[":
                raise _Fail("uses a subscript")
            if t.text == "(":
                raise _Fail("calls something that is not a function-like macro")
            raise _Fail("uses member access")
        return node

    @staticmethod
    def _sizeof_expr(node: _Node) -> int:
        if node.is_str:
            return len(str(node.value()).encode("utf-8", "surrogatepass")) + 1
        if node.ctype is None:
            raise _Fail("sizeof of a parameter")
        return node.ctype.size

    def primary(self) -> _Node:
        t = self.toks[self.pos]
        k = t.kind
        if k == _NODE:
            self.pos += 1
            assert t.node is not None
            if t.node.is_str and self._string_follows():
                return self._concatenated(t.node)
            return t.node
        if k == _PUNCT:
            if t.text != "(":
                raise self.unexpected()
            self.pos += 1
            e = self.expression()
            self.expect(")")
            return e
        self.pos += 1
        if k == _NUM:
            return self.tr.number(t.text)
        if k == _CHAR:
            return _char(t.text)
        if k == _STR:
            parts = [t.text]
            while (n := self.toks[self.pos]).kind == _STR:
                parts.append(n.text)
                self.pos += 1
            lit = _string(parts)
            return self._concatenated(lit) if self._string_follows() else lit
        return self.tr.identifier(t.text, self.punct("("))

    def _string_follows(self) -> bool:
        """Whether the next token is a string: a literal, or a macro whose value is one."""
        n = self.toks[self.pos]
        return n.kind == _STR or (n.kind == _NODE and n.node is not None and n.node.is_str)

    def _concatenated(self, first: _Node) -> _Node:
        """``first`` and the strings right after it as one literal: adjacent string literals
        concatenate (C11 5.1.1.2 phase 6), also where a macro expanded to one
        (``"/dev/dri/" DRM_NAME "%d"``)."""
        text = [str(first.value())]
        while self._string_follows():
            n = self.toks[self.pos]
            self.pos += 1
            if n.kind == _STR:
                parts = [n.text]
                while (m := self.toks[self.pos]).kind == _STR:
                    parts.append(m.text)
                    self.pos += 1
                text.append(str(_string(parts).value()))
            else:
                assert n.node is not None
                text.append(str(n.node.value()))
        return _Lit("".join(text), None, is_str=True)

    def starts_type(self, k: int) -> bool:
        t = self.peek(k)
        if t.kind != _ID:
            return False
        w = t.text
        return w in _TYPE_WORDS or w in _QUALIFIERS or w in _TAGS or self.tr.is_typedef(w)

    def type_name(self) -> _TypeName:
        words: list[str] = []
        base: str | None = None
        while (t := self.toks[self.pos]).kind == _ID:
            w = t.text
            if w in _QUALIFIERS:
                self.pos += 1
            elif w in _TYPE_WORDS:
                words.append("signed" if w in ("__signed__", "__signed") else w)
                self.pos += 1
            elif w in _TAGS:
                tag = self.peek(1)
                if tag.kind != _ID:
                    raise _Fail(f"anonymous {w} type", True)
                base = f"{w} {tag.text}"
                self.pos += 2
            elif base is None and not words and self.tr.is_typedef(w):
                base = w
                self.pos += 1
            else:
                break
        if base is None and not words:
            raise _Fail("expected a type", True)
        if base is not None and words:
            raise _Fail(f"invalid type '{' '.join(words)} {base}'")
        pointers = 0
        while self.punct("*"):
            pointers += 1
            self.pos += 1
            while (t := self.toks[self.pos]).kind == _ID and t.text in _QUALIFIERS:
                self.pos += 1
        dims: list[int] = []
        while self.punct("["):
            self.pos += 1
            n = self.conditional().value()
            if not isinstance(n, int) or n < 0:
                raise _Fail("invalid array size")
            self.expect("]")
            dims.append(n)
        if self.punct("("):
            raise _Fail("uses a function type")
        if words:
            ct, is_void, is_bool = _builtin_type(words)
            return _TypeName(" ".join(words), ct, is_void, is_bool, False, pointers, tuple(dims))
        assert base is not None
        return _TypeName(
            base,
            self.tr.lookup_type(base),
            False,
            False,
            base in self.tr.ctx.record_names,
            pointers,
            tuple(dims),
        )
