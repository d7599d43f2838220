"""Wraps a long line of generated Python at its brackets, so that generated source stays within
:data:`WIDTH` columns (only a single token longer than that, such as a long string literal, is
left as it is).

A line is split inside its outermost bracket pair: one element per line when the brackets hold a
comma-separated list (with a trailing comma), else one operand per line at the operators of
lowest precedence. An assignment or ``return`` whose value has no enclosing brackets gets a pair
of parentheses first. Elements that are still too long are wrapped the same way, one level deeper.
"""

from __future__ import annotations

import io
import re
import tokenize
from bisect import bisect_left

WIDTH = 100
INDENT = "    "

_OPEN = {"(": ")", "[": "]", "{": "}"}
# Binary operators by precedence, lowest first (Python's grammar): where a bracketed expression
# without commas is split, one operand per line.
_OPERATOR_LEVELS = (
    ("if", "else"),
    ("or",),
    ("and",),
    ("==", "!=", "<", ">", "<=", ">="),
    ("|",),
    ("^",),
    ("&",),
    ("<<", ">>"),
    ("+", "-"),
    ("*", "/", "//", "%"),
)
_BINARY = {op for level in _OPERATOR_LEVELS for op in level} | {",", "not", "~", "=", "return"}
_UNARY = {"-", "+"}
# tokenize's own patterns (Python 3.11's, kept by later versions for compatibility)
_PSEUDO_TOKEN = re.compile(tokenize.PseudoToken)  # type: ignore[attr-defined]
_TRIPLE_QUOTED = frozenset(tokenize.triple_quoted)  # type: ignore[attr-defined]


def wrap(line: str, width: int = WIDTH, inside: bool = False) -> str:
    """``line`` (one logical line, possibly indented) as one or more lines of at most ``width``
    columns where its brackets allow. ``inside``: the line is within brackets already, so it may
    also break at its own operators."""
    return _wrap(line, width, inside, None)


_Tokens = list[tuple[str, int]]


def _wrap(line: str, width: int, inside: bool, toks: _Tokens | None) -> str:
    """:func:`wrap`, given the tokens of ``line`` when the caller has them (the pieces of a line
    are never tokenized again: their tokens are the line's, moved)."""
    if len(line) <= width or "\n" in line:
        return line
    indent = line[: len(line) - len(line.lstrip())]
    if toks is None:
        toks = _tokens(line)
        if toks is None:
            return line
    if inside:
        n = len(indent)
        items, sep = _split(line.strip(), toks, n)
        if items is not None and len(items) > 1 and sep != ",":
            (first, ftoks), rest = items[0], items[1:]
            out = [_wrap(indent + first, width, True, _moved(ftoks, n))]
            deeper = n + len(INDENT)
            out += [
                _wrap(indent + INDENT + it, width, True, _moved(itoks, deeper))
                for it, itoks in rest
            ]
            return "\n".join(out)
    pair = _outer_pair(toks)
    if pair is None:
        return line if inside else _parenthesize(line, indent, toks, width)
    o, c = pair
    at = toks[o][1] + 1
    head, inner, tail = line[:at], line[at : toks[c][1]], line[toks[c][1] :]
    items, sep = _split(inner, toks[o + 1 : c], at)
    if items is None:  # one element (a call, a bracketed expression): one level deeper
        if not inner.strip():
            return line
        items, sep = [(inner, [])], ""
    inner_indent = indent + INDENT
    n = len(inner_indent)
    out = [head.rstrip()]
    for item, found in items:
        text = item.strip()
        itoks: _Tokens | None = None  # one element: tokenized as it is
        if sep:
            itoks = _moved(found, n)
            if sep == ",":
                text += ","
                itoks.append((",", n + len(text) - 1))
        out.append(_wrap(inner_indent + text, width, True, itoks))
    out.append(indent + tail.strip())
    return "\n".join(out)


def _moved(toks: _Tokens, by: int) -> _Tokens:
    return [(s, c + by) for s, c in toks]


def _tokens(line: str) -> list[tuple[str, int]] | None:
    """(token text, column) of each significant token; None when ``line`` does not tokenize.

    The loop of :mod:`tokenize` for one line, without its per-token objects (wrapping a large
    module tokenizes hundreds of thousands of tokens); anything that would continue onto another
    line (a backslash, a triple-quoted or continued string) goes to :mod:`tokenize` itself."""
    src = line.lstrip()
    shift = len(line) - len(src)
    text = src + "\n"
    out: list[tuple[str, int]] = []
    depth = 0
    pos, end = 0, len(text)
    match = _PSEUDO_TOKEN.match
    while pos < end:
        m = match(text, pos)
        if m is None:  # no token starts here: tokenize's ERRORTOKEN, one character
            out.append((text[pos], pos + shift))
            pos += 1
            continue
        start, pos = m.span(1)
        if start == pos:
            continue
        tok = text[start:pos]
        first = tok[0]
        if first in "#\r\n":
            continue
        if first == "\\" or tok in _TRIPLE_QUOTED or tok[-1] == "\n":
            return _tokenize(line)
        if first in _OPEN:
            depth += 1
        elif first in ")]}":
            depth -= 1
        out.append((tok, start + shift))
    return out if depth == 0 else None  # tokenize: "EOF in multi-line statement"


def _tokenize(line: str) -> list[tuple[str, int]] | None:
    src = line.lstrip()
    shift = len(line) - len(src)
    out: list[tuple[str, int]] = []
    try:
        for t in tokenize.generate_tokens(io.StringIO(src + "\n").readline):
            if t.type in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.COMMENT):
                continue
            if t.type in (tokenize.INDENT, tokenize.DEDENT):
                continue
            out.append((t.string, t.start[1] + shift))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    return out


def _outer_pair(toks: list[tuple[str, int]]) -> tuple[int, int] | None:
    """Indexes of the depth-0 bracket pair that encloses the most tokens (the last one on a tie)."""
    best: tuple[int, int] | None = None
    stack: list[int] = []
    for i, (s, _) in enumerate(toks):
        if s in _OPEN:
            stack.append(i)
        elif s in (")", "]", "}") and stack:
            o = stack.pop()
            if not stack and (best is None or i - o >= best[1] - best[0]):
                best = (o, i)
    return best if best is not None and best[1] - best[0] > 1 else None


def _split(
    inner: str, toks: _Tokens, base: int = 0
) -> tuple[list[tuple[str, _Tokens]] | None, str]:
    """``inner`` (the text between a bracket pair; ``toks`` its tokens, columns counted from
    ``base`` columns before it) split at its depth-0 commas, else at its lowest-precedence
    depth-0 operators (each later operand keeps its operator in front). Each piece comes with its
    own tokens, columns counted from its start."""
    if not toks:
        return None, ""
    depth0: list[tuple[str, int]] = []
    depth = 0
    prev = ""
    for s, col in toks:
        if s in _OPEN:
            depth += 1
        elif s in (")", "]", "}"):
            depth -= 1
        elif depth == 0 and not (s in _UNARY and (not prev or prev in _BINARY or prev in _OPEN)):
            depth0.append((s, col - base))  # (a unary sign is no place to split)
        prev = s
    commas = [col for s, col in depth0 if s == ","]
    cols = [col for _, col in toks]
    if commas:
        cuts = [0] + [c + 1 for c in commas] + [len(inner)]
        parts = [_piece(inner, toks, cols, base, a, b, ",") for a, b in zip(cuts, cuts[1:])]
        return [p for p in parts if p[0]], ","
    for level in _OPERATOR_LEVELS:
        at = [col for s, col in depth0 if s in level and col > 0]
        if at:
            cuts = [0] + at + [len(inner)]
            pieces = [_piece(inner, toks, cols, base, a, b) for a, b in zip(cuts, cuts[1:])]
            return pieces, level[0]
    return None, ""


def _piece(
    inner: str, toks: _Tokens, cols: list[int], base: int, a: int, b: int, strip: str = ""
) -> tuple[str, _Tokens]:
    """``inner[a:b]`` without ``strip`` characters at its end and whitespace around, with its
    tokens (``cols``: the tokens' columns, ascending, counted from ``base`` before ``inner``)."""
    raw = inner[a:b].rstrip(strip) if strip else inner[a:b]
    text = raw.strip()
    lo = base + a + len(raw) - len(raw.lstrip())
    hi = lo + len(text)
    return text, [(s, c - lo) for s, c in toks[bisect_left(cols, lo) : bisect_left(cols, hi)]]


def _parenthesize(line: str, indent: str, toks: list[tuple[str, int]], width: int) -> str:
    """``NAME = value`` or ``return value`` with parentheses around a value that has none."""
    if toks and toks[0][0] == "return":
        value_col = toks[1][1] if len(toks) > 1 else None
    elif len(toks) > 2 and toks[1][0] == "=":
        value_col = toks[2][1]
    else:
        return line
    if value_col is None:
        return line
    head, value = line[:value_col], line[value_col:]
    if len(head) + 1 > width:  # a name longer than the width: nothing to gain
        return line
    wrapped = _wrap(f"{head}({value})", width, False, None)
    return wrapped if wrapped.count("\n") else line
