"""Pass ``macro_docs``: emitted constants, macro functions and ioctls get the header's comment for
their ``#define`` (``bindgen.docs.macro_docs``: a comment on the line itself, else one ending just
above it).

Reads the headers' text (only files that define an emitted macro) and each declaration's location;
replaces entries of ``Module.constants``, ``Module.macro_functions`` and ``Module.ioctls`` by
copies with ``doc`` set.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..docs import macro_docs

TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import Context


def attach(ctx: Context) -> None:
    m, files = ctx.module, dict(ctx.parsed.files)
    cache: dict[str, dict[int, str]] = {}

    def doc_of(loc: object) -> str:
        file, line = getattr(loc, "file", None), getattr(loc, "line", 0)
        if file not in files:
            return ""
        if file not in cache:
            try:
                cache[file] = macro_docs(Path(files[file]).read_text(errors="replace"))
            except OSError:
                cache[file] = {}
        return cache[file].get(line, "")

    for attr in ("constants", "macro_functions", "ioctls"):
        items = getattr(m, attr)
        setattr(
            m,
            attr,
            [
                dataclasses.replace(it, doc=d) if not it.doc and (d := doc_of(it.loc)) else it
                for it in items
            ],
        )
