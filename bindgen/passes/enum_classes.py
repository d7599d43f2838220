"""Pass ``enum_classes``: what a C enum is in Python (the target's ``enums`` and ``flag_enums``).

Reads the target's ``enums`` and ``flag_enums`` and ``Module.enums``; writes each enum's
``py_class``. With ``enums: int`` (the default) nothing changes: the enum's name is its underlying ctypes integer
type and its enumerators are int constants. With ``enums: IntEnum`` every enum of the module is
marked ``IntEnum``, or ``IntFlag`` where its Python name matches a ``flag_enums`` regex (run after
``patches``, so renamed names are the ones matched); the renderer then makes it an enum class
(``bindgen_rt.CEnum``/``CFlag``) and spells its ctypes type, wherever a field, parameter or typedef
uses it, as the underlying integer. Whether an enum is a set of flags is a meaning no header
states (an enum of 1, 2 and 4 may count exclusive states), so it is the spec's to say.
"""

from __future__ import annotations

import dataclasses
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import Context


def mark(ctx: Context) -> None:
    t = ctx.target
    if t.enums != "IntEnum":
        return
    flags = [re.compile(p) for p in t.flag_enums]
    ctx.module.enums = [
        dataclasses.replace(
            e, py_class="IntFlag" if any(p.search(e.name) for p in flags) else "IntEnum"
        )
        for e in ctx.module.enums
    ]
