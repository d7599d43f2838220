"""Pass ``tables``: X-macro tables (the spec's ``macros.tables`` rules) become constants.

Reads the rows the parser scanned for each rule; appends one ``Module.constants`` entry per rule,
a tuple of row tuples.
"""

from __future__ import annotations

from .. import ir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import Context


def add(ctx: Context) -> None:
    for rule, rows in ctx.parsed.tables:
        ctx.module.constants.append(ir.Constant(rule.name, repr(tuple(rows)), tuple(rows)))
