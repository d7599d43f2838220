"""Pass ``macros``: the target's macros translated with C's semantics (``bindgen.cexpr``).

Reads the parsed macro definitions, the C types and enum constants the parser found, the macros
``select`` kept, the record names ``naming`` gave, and the spec's ``macros`` rules; writes ``Module.constants``, ``Module.macro_functions`` and
``Module.ioctls`` (replacing them) and appends what cannot be translated to ``Module.skipped``.
"""

from __future__ import annotations

from .. import ir
from ..cexpr import MacroContext, MacroDef, MacroOptions, translate_macros

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
    aliases = _function_aliases(pr.macros, res.skipped, m.functions)
    m.constants += [
        ir.Constant(s.name, aliases[s.name], None, s.loc) for s in res.skipped
        if s.name in aliases
    ]
    m.skipped += [s for s in res.skipped if s.name not in aliases]


_MAX_ALIAS_CHAIN = 16


def _function_aliases(
    macros: list[MacroDef], skipped: list[ir.Skipped], functions: list[ir.Function]
) -> dict[str, str]:
    """Macro name → Python name of the function it renames, for the skipped macros that only
    rename an emitted function: ``#define cuMemAlloc cuMemAlloc_v2``, a chain of such macros, or
    ``#define f(a, b) f_v2(a, b)`` passing its parameters through in order. In C a call of the
    macro is a call of the function; in Python the macro's name is bound to the function."""
    by_symbol = {f.symbol or f.name: f.name for f in functions}
    defs = {md.name: md for md in macros}  # the last definition is the one in force

    def renamed(md: MacroDef) -> str | None:
        body = list(md.body)
        if md.params is None:
            while len(body) >= 3 and body[0] == "(" and body[-1] == ")":
                body = body[1:-1]
            if len(body) == 4 and body[1] == "(" and body[3] == ")":
                # `__CUDA_API_PTDS(cuMemcpy_v2)`, through a macro that returns its argument
                inner = defs.get(body[0])
                if inner is not None and inner.params and len(inner.params) == 1 and list(
                    inner.body
                ) == [inner.params[0]]:
                    return body[2]
            return body[0] if len(body) == 1 else None
        want = ["("] + [t for i, p in enumerate(md.params) for t in ([","] if i else []) + [p]]
        if len(body) >= 2 and body[1:] == want + [")"]:
            return body[0]
        return None

    out: dict[str, str] = {}
    for s in skipped:
        md = defs.get(s.name)
        if md is None or s.what not in ("macro", "function-macro"):
            continue
        name = renamed(md)
        for _ in range(_MAX_ALIAS_CHAIN):
            if name is None or name in by_symbol:
                break
            nxt = defs.get(name)
            name = renamed(nxt) if nxt is not None and nxt.params is None else None
        # (`#define cuCtxCreate_v3 cuCtxCreate_v3` names the function itself: nothing to bind)
        if name is not None and name in by_symbol and s.name not in by_symbol:
            out[s.name] = by_symbol[name]
    return out


def _without_arg(io: ir.Ioctl) -> ir.Ioctl:
    # The argument record is outside the kept set: the request number is still exact.
    return ir.Ioctl(io.name, io.direction, io.type_, io.nr, None, io.arg_size, io.request, io.loc)
