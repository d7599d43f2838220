"""Pass ``dedupe``: Python has one namespace where C has several.

Reads every named declaration of the module; a name declared as two different kinds fails the run
(a clash would silently shadow: the error says to add a rename patch). Removes from
``Module.constants`` the macros that repeat an enum constant's name (the enum value is kept).
"""

from __future__ import annotations

from ..errors import BindgenError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import Context


def check(ctx: Context) -> None:
    m = ctx.module
    seen: dict[str, str] = {}
    for _, kind, items in m.declaration_lists():
        for it in items:
            if it.name in seen and not (kind == "constant" and seen[it.name] == "enum"):
                raise BindgenError(
                    f"target {ctx.target.name}: name {it.name!r} is both a {seen[it.name]} and a "
                    f"{kind}; add a rename patch to the spec"
                )
            seen.setdefault(it.name, kind)
    enum_values = {k for e in m.enums for k, _ in e.values}
    m.constants = [c for c in m.constants if c.name not in enum_values]
