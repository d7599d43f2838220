"""C comments → the plain text generated code carries as docstrings and comments.

Declarations and fields get the comment libclang attaches to them (the parser runs clang with
``-fparse-all-comments``, so ordinary ``/* */`` and ``//`` comments count, not only ``/** */``).
Macros are read from header text, so their comments are found here: a comment on the ``#define``
line itself, else a comment block ending on the line just above it.
"""

from __future__ import annotations

import re

_OPEN = re.compile(r"^\s*(/\*+!?<?|//+!?<?)\s?")
_CLOSE = re.compile(r"\s*\*+/\s*$")
_STAR = re.compile(r"^\s*\*(?!/)\s?")
_RULE = re.compile(r"^[\s\-=*_#~+]*$")  # a line of dashes, stars, ... (decoration)
_LICENSE = re.compile(r"SPDX-License-Identifier|Copyright|Permission is hereby granted", re.I)


def clean(raw: str | None) -> str:
    """The text of a C comment (one or several adjacent ones): delimiters, leading stars and
    decoration lines removed, paragraphs kept (a blank line between them), lines stripped. License
    boilerplate is no documentation: it gives ""."""
    if not raw:
        return ""
    lines: list[str] = []
    for line in raw.replace("\r", "").split("\n"):
        line = _OPEN.sub("", line)
        line = _CLOSE.sub("", line)
        line = _STAR.sub("", line)
        line = line.rstrip()
        if _RULE.match(line) and line.strip():
            continue
        lines.append(line.strip())
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    if _LICENSE.search(text):
        return ""
    return text


def first_line(doc: str, width: int) -> str:
    """The first sentence or line of ``doc``, at most ``width`` characters (cut with '…')."""
    line = doc.split("\n", 1)[0].strip()
    if len(line) <= width:
        return line
    return line[: width - 1].rstrip() + "…"


_COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'', re.S)
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define\b", re.M)


def macro_docs(text: str) -> dict[int, str]:
    """Line number of each ``#define`` in ``text`` → its doc comment (see the module docstring).
    """
    if "/*" not in text and "//" not in text:
        return {}
    defines: set[int] = set()
    line, pos = 1, 0
    for m in _DEFINE.finditer(text):
        line += text.count("\n", pos, m.start())
        pos = m.start()
        defines.add(line)
    out: dict[int, str] = {}
    above: dict[int, str] = {}
    line, pos = 1, 0
    for m in _COMMENT.finditer(text):
        c = m.group(0)
        if c[0] in "\"'":
            continue
        line += text.count("\n", pos, m.start())
        pos = m.start()
        bol = text.rfind("\n", 0, m.start()) + 1
        if text[bol : m.start()].strip():  # code before it on its line: a trailing comment
            if line in defines and line not in out:
                out[line] = c
        else:
            last = line + c.count("\n")
            if last + 1 in defines:
                above[last + 1] = c
    for ln, c in above.items():
        out.setdefault(ln, c)
    docs = {ln: clean(c) for ln, c in out.items()}
    return {ln: d for ln, d in docs.items() if d}
