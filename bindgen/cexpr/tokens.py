"""Preprocessing tokens: the tokenizer, token kinds, operator precedences and the C keywords
the translator recognises.
"""

from __future__ import annotations

import operator
import re
from typing import Iterable, Sequence

TYPE_CHECKING = False
if TYPE_CHECKING:  # nodes import this module
    from .nodes import _Node


# ---------------------------------------------------------------- tokens

_ID, _NUM, _CHAR, _STR, _PUNCT, _NODE, _MARK = range(7)
_NO_HIDE: frozenset[str] = frozenset()

# Binding strength, higher binds tighter (C11 6.5); used by the parser and to decide when a
# reference may be replaced by its evaluated node without changing how the expression groups.
_P_COMMA, _P_COND, _P_UNARY, _P_PRIMARY = 1, 2, 13, 14
_BINARY_PREC = {
    "||": 3,
    "&&": 4,
    "|": 5,
    "^": 6,
    "&": 7,
    "==": 8,
    "!=": 8,
    "<": 9,
    ">": 9,
    "<=": 9,
    ">=": 9,
    "<<": 10,
    ">>": 10,
    "+": 11,
    "-": 11,
    "*": 12,
    "/": 12,
    "%": 12,
}
_COMPARE = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
    "<=": operator.le,
    ">=": operator.ge,
}
_SHIFT = ("<<", ">>")
_ARITH = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "&": operator.and_,
    "|": operator.or_,
    "^": operator.xor,
}

_TYPE_WORDS = {
    "void",
    "char",
    "short",
    "int",
    "long",
    "float",
    "double",
    "signed",
    "unsigned",
    "_Bool",
    "bool",
    "__int128",
    "__signed__",
    "__signed",
}
_QUALIFIERS = {
    "const",
    "volatile",
    "restrict",
    "__restrict",
    "__restrict__",
    "__const",
    "__const__",
    "__volatile",
    "__volatile__",
    "_Atomic",
}
_TAGS = {"struct", "union", "enum"}
_STATEMENT_PUNCT = {
    "{",
    "}",
    ";",
    "=",
    "+=",
    "-=",
    "*=",
    "/=",
    "%=",
    "&=",
    "|=",
    "^=",
    "<<=",
    ">>=",
    "++",
    "--",
}
_STATEMENT_WORDS = {
    "do",
    "while",
    "for",
    "if",
    "else",
    "return",
    "switch",
    "case",
    "goto",
    "break",
    "continue",
    "default",
}
_STATEMENT_ANY = frozenset(_STATEMENT_PUNCT | _STATEMENT_WORDS)  # string literals keep quotes
_ATTRIBUTE_WORDS = {
    "__attribute__",
    "__attribute",
    "__declspec",
    "__asm__",
    "__asm",
    "asm",
    "_Pragma",
    "__pragma",
    "_Alignas",
    "alignas",
    "_Static_assert",
    "static_assert",
}
_KEYWORDS = {
    "static",
    "extern",
    "inline",
    "__inline",
    "__inline__",
    "register",
    "typedef",
    "auto",
    "_Noreturn",
    "noreturn",
    "_Thread_local",
    "__thread",
    "__forceinline",
    "__cdecl",
    "__stdcall",
} | _QUALIFIERS

# The ioctl encoders (include/uapi/asm-generic/ioctl.h), intercepted so the argument type is seen.
_IOCTL_DIRS = {
    "_IO": "",
    "_IOR": "R",
    "_IOW": "W",
    "_IOWR": "WR",
    "_IOR_BAD": "R",
    "_IOW_BAD": "W",
    "_IOWR_BAD": "WR",
}
_IOC_DIR_BITS = {"": 0, "W": 1, "R": 2, "WR": 3}  # _IOC_NONE, _IOC_WRITE, _IOC_READ

_MAX_DEPTH = 100  # nested on-demand evaluations (only reached through ## -built names)
_MAX_EXPANSION = 200_000  # tokens one definition's expansion may scan (exponential macros)
_MAX_NESTING = 64  # macro calls nested in each other's arguments (clear of Python's stack)

_TOKEN_RE = re.compile(
    r"""
    (?P<ws>(?:\s|\\\n)+|/\*.*?\*/|//[^\n]*)
  | (?P<str>(?:u8|[uUL])?"(?:[^"\\\n]|\\.)*")
  | (?P<chr>(?:u8|[uUL])?'(?:[^'\\\n]|\\.)*')
  | (?P<num>\.?[0-9](?:[eEpP][+-]|[0-9A-Za-z_.])*)
  | (?P<id>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<punct>\.\.\.|<<=|>>=|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^]=|\#\#
              |[][(){}.,;:?~!<>=+\-*/%&|^\#])
""",
    re.X | re.S,
)


def tokenize(text: str) -> list[str]:
    """Split C source text into token spellings as libclang would (comments and spaces dropped)."""
    out: list[str] = []
    pos, n = 0, len(text)
    while pos < n:
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            raise ValueError(f"cannot tokenize {text[pos : pos + 20]!r}")
        if m.lastgroup != "ws":
            out.append(m.group())
        pos = m.end()
    return out


def _kind_of(s: str) -> int:
    if not s:
        return _PUNCT  # never produced by a tokenizer; the parser rejects it like a stray '@'
    c = s[0]
    if c == '"' or (s[-1] == '"' and len(s) > 1):
        return _STR
    if c == "'" or (s[-1] == "'" and len(s) > 1):
        return _CHAR
    if c.isalpha() or c in "_$":
        return _ID
    if c.isdigit() or (c == "." and len(s) > 1 and s[1].isdigit()):
        return _NUM
    return _PUNCT


class _Tok:
    """A token; ``hide`` is its hide set (C11 6.10.3.4), ``node`` what a NODE stands for."""

    __slots__ = ("kind", "text", "hide", "node", "prec")

    def __init__(
        self,
        kind: int,
        text: str,
        hide: frozenset[str] = _NO_HIDE,
        node: _Node | None = None,
        prec: int = _P_PRIMARY,
    ) -> None:
        self.kind, self.text, self.hide, self.node, self.prec = kind, text, hide, node, prec

    def __repr__(self) -> str:
        return f"_Tok({self.text!r})"


_PLACEMARKER = _Tok(_MARK, "")
_EOF = _Tok(_PUNCT, "")  # ends every parser input
_COMMA_TOK = _Tok(_PUNCT, ",")


def _is_punct(t: _Tok | None, text: str) -> bool:
    return t is not None and t.kind == _PUNCT and t.text == text


def _with_hide(toks: Iterable[_Tok], hs: frozenset[str]) -> list[_Tok]:
    return [_Tok(t.kind, t.text, (t.hide | hs) if t.hide else hs, t.node, t.prec) for t in toks]


def _fully_parenthesized(toks: Sequence[_Tok]) -> bool:
    if not toks or not _is_punct(toks[0], "("):
        return False
    depth = 0
    for i, t in enumerate(toks):
        if t.kind == _PUNCT:
            if t.text == "(":
                depth += 1
            elif t.text == ")":
                depth -= 1
                if depth == 0:
                    return i == len(toks) - 1
    return False


def _spell(toks: Sequence[_Tok]) -> str:
    return " ".join(t.text for t in toks)
