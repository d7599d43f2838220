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
import tokenize

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


def wrap(line: str, width: int = WIDTH, inside: bool = False) -> str:
    """``line`` (one logical line, possibly indented) as one or more lines of at most ``width``
    columns where its brackets allow. ``inside``: the line is within brackets already, so it may
    also break at its own operators."""
    if len(line) <= width or "\n" in line:
        return line
    indent = line[: len(line) - len(line.lstrip())]
    toks = _tokens(line)
    if toks is None:
        return line
    if inside:
        items, sep = _split(line.strip())
        if items is not None and len(items) > 1 and sep != ",":
            out = [wrap(indent + items[0], width, True)]
            out += [wrap(indent + INDENT + it, width, True) for it in items[1:]]
            return "\n".join(out)
    pair = _outer_pair(toks)
    if pair is None:
        return line if inside else _parenthesize(line, indent, toks, width)
    o, c = pair
    head, inner, tail = line[: toks[o][1] + 1], line[toks[o][1] + 1 : toks[c][1]], line[toks[c][1] :]
    items, sep = _split(inner)
    if items is None:  # one element (a call, a bracketed expression): one level deeper
        if not inner.strip():
            return line
        items, sep = [inner], ""
    inner_indent = indent + INDENT
    out = [head.rstrip()]
    for item in items:
        text = item.strip()
        if sep == ",":
            text += ","
        out.append(wrap(inner_indent + text, width, True))
    out.append(indent + tail.strip())
    return "\n".join(out)


def _tokens(line: str) -> list[tuple[str, int]] | None:
    """(token text, column) of each significant token; None when ``line`` does not tokenize."""
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


def _split(inner: str) -> tuple[list[str] | None, str]:
    """``inner`` (the text between a bracket pair) split at its depth-0 commas, else at its
    lowest-precedence depth-0 operators (each later operand keeps its operator in front)."""
    toks = _tokens(inner)
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
            depth0.append((s, col))  # (a unary sign is no place to split)
        prev = s
    commas = [col for s, col in depth0 if s == ","]
    if commas:
        cuts = [0] + [c + 1 for c in commas] + [len(inner)]
        parts = [inner[a:b].rstrip(",").strip() for a, b in zip(cuts, cuts[1:])]
        return [p for p in parts if p], ","
    for level in _OPERATOR_LEVELS:
        cols = [col for s, col in depth0 if s in level and col > 0]
        if cols:
            cuts = [0] + cols + [len(inner)]
            return [inner[a:b].strip() for a, b in zip(cuts, cuts[1:])], level[0]
    return None, ""


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
    wrapped = wrap(f"{head}({value})", width)
    return wrapped if wrapped.count("\n") else line
