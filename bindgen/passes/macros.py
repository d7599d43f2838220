"""Pass ``macros``: the target's macros translated with C's semantics (``bindgen.cexpr``).

Reads the parsed macro definitions, the C types and enum constants the parser found, the macros
``select`` kept, the record names ``naming`` gave, and the spec's ``macros`` rules; writes ``Module.constants``, ``Module.macro_functions`` and
``Module.ioctls`` (replacing them) and appends what cannot be translated to ``Module.skipped``.
"""

from __future__ import annotations

from .. import ir
from ..cexpr import MacroContext, MacroOptions, translate_macros

TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import Context


def translate(ctx: Context) -> None:
    """Nothing when the spec turns macros off."""
    t, pr = ctx.target, ctx.parsed
    if not t.macros.enabled:
        return
    m = ctx.module
    opts = MacroOptions(
        bit_ranges=t.macros.bit_ranges,
        range_wrappers=t.macros.range_wrappers,
        predefined=dict(t.macros.predefined),
        skip=t.macros.skip,
    )
    mctx = MacroContext(
        types=pr.macro_ctx_types, enum_constants=pr.enum_constants, record_names=ctx.record_names
    )
    res = translate_macros(pr.macros, mctx, opts, ctx.kept_macros.__contains__)
    emitted_types = {r.name for r in m.records}
    m.constants = list(res.constants)
    m.macro_functions = list(res.functions)
    m.ioctls = [
        io if io.arg is None or io.arg in emitted_types else _without_arg(io) for io in res.ioctls
    ]
    m.skipped += list(res.skipped)


def _without_arg(io: ir.Ioctl) -> ir.Ioctl:
    # The argument record is outside the kept set: the request number is still exact.
    return ir.Ioctl(io.name, io.direction, io.type_, io.nr, None, io.arg_size, io.request, io.loc)
