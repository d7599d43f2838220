"""Pass ``patches``: the spec's declarative post-processing. Reads the target's ``patches`` in spec
order; renames, aliases, retypes or drops declarations (names only) anywhere in the module and
appends to ``Module.extra_code`` (alias, and extra: code, the one patch that is code by design).
"""

from __future__ import annotations

import dataclasses
import re

from .. import ir
from ..errors import PatchError
from ..spec import Patch, Target

TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import Context

_PRIM_NAMES = {
    "c_int8",
    "c_uint8",
    "c_int16",
    "c_uint16",
    "c_int32",
    "c_uint32",
    "c_int64",
    "c_uint64",
    "c_float",
    "c_double",
    "c_char",
    "c_bool",
}
_PRIM_SIZES = {
    "c_int8": 1,
    "c_uint8": 1,
    "c_int16": 2,
    "c_uint16": 2,
    "c_int32": 4,
    "c_uint32": 4,
    "c_int64": 8,
    "c_uint64": 8,
    "c_float": 4,
    "c_double": 8,
    "c_char": 1,
    "c_bool": 1,
}


def _where(t: Target, p: Patch) -> str:
    return f"{t.spec_shown}:{p.line}: target {t.name}: {p.op} patch"


def _names(m: ir.Module) -> dict[str, str]:
    out: dict[str, str] = {}
    for _, kind, items in m.declaration_lists():
        for it in items:
            out[it.name] = kind
    for en in m.enums:
        for k, _ in en.values:
            out.setdefault(k, "enumerator")
    return out


def _refs(t: ir.Type) -> list[str]:
    """Names of the declarations a type refers to."""
    if isinstance(t, ir.Named):
        return [t.name]
    if isinstance(t, ir.Pointer):
        return _refs(t.pointee)
    if isinstance(t, ir.Array):
        return _refs(t.elem)
    if isinstance(t, ir.FuncType):
        return [n for x in (t.ret, *t.params) for n in _refs(x)]
    return []


def _check_no_dangling(t: Target, p: Patch, m: ir.Module, dropped: set[str]) -> None:
    """A dropped declaration that a kept one still uses would fail at import: refuse it here."""
    users = [(r.name, f.type) for r in m.records for f in r.fields]
    users += [(td.name, td.type) for td in m.typedefs]
    users += [(fn.name, fn.type) for fn in m.functions]
    for name, ty in users:
        hit = next((n for n in _refs(ty) if n in dropped), None)
        if hit is not None:
            raise PatchError(
                f"{_where(t, p)}: drops {hit}, which {name} still uses; drop {name} too, or "
                "narrow the pattern"
            )


def _retype(t: ir.Type, old: str, new: str) -> ir.Type:
    if isinstance(t, ir.Named):
        return dataclasses.replace(t, name=new) if t.name == old else t
    if isinstance(t, ir.Pointer):
        return dataclasses.replace(t, pointee=_retype(t.pointee, old, new))
    if isinstance(t, ir.Array):
        return ir.Array(_retype(t.elem, old, new), t.count)
    if isinstance(t, ir.FuncType):
        return ir.FuncType(
            _retype(t.ret, old, new), tuple(_retype(p, old, new) for p in t.params), t.variadic
        )
    return t


def _retype_fn(t: ir.FuncType, old: str, new: str) -> ir.FuncType:
    return ir.FuncType(
        _retype(t.ret, old, new), tuple(_retype(p, old, new) for p in t.params), t.variadic
    )


def apply(ctx: Context) -> None:
    """The pass: see :func:`apply_ir_patches`."""
    apply_ir_patches(ctx.target, ctx.module)


def apply_ir_patches(t: Target, m: ir.Module) -> None:
    """Applies every IR-level patch of the target in spec order."""
    for p in t.patches:
        if p.op == "rename":
            old, new, only = p.get("from"), p.get("to"), p.get("kind")
            names = _names(m)
            if old not in names:
                raise PatchError(f"{_where(t, p)}: nothing named {old!r} to rename")
            if only and not any(
                it.name == old for _, kind, lst in m.declaration_lists() if kind == only
                for it in lst
            ):
                raise PatchError(f"{_where(t, p)}: no {only} named {old!r} to rename")
            if new in names:
                raise PatchError(f"{_where(t, p)}: {new!r} already exists")
            for _, kind, lst in m.declaration_lists():
                if only and kind != only:
                    continue
                for i, it in enumerate(lst):
                    if it.name == old:
                        lst[i] = dataclasses.replace(it, name=new)
                        if isinstance(it, (ir.Function, ir.Var)) and not it.symbol:
                            # the library still exports it under its C name
                            lst[i] = dataclasses.replace(lst[i], symbol=old)
            if only in ("function", "variable", "constant", "macro function", "ioctl"):
                continue  # no type refers to these by name
            m.records = [
                dataclasses.replace(
                    r,
                    fields=tuple(
                        dataclasses.replace(f, type=_retype(f.type, old, new)) for f in r.fields
                    ),
                )
                for r in m.records
            ]
            m.typedefs = [
                dataclasses.replace(td, type=_retype(td.type, old, new)) for td in m.typedefs
            ]
            # (signatures name records too: `int st(struct st *)`)
            m.functions = [
                dataclasses.replace(fn, type=_retype_fn(fn.type, old, new)) for fn in m.functions
            ]
            m.variables = [
                dataclasses.replace(v, type=_retype(v.type, old, new)) for v in m.variables
            ]
            m.ioctls = [
                dataclasses.replace(io, arg=new if io.arg == old else io.arg) for io in m.ioctls
            ]
            if not only:  # an enumerator has no kind of its own to name
                m.enums = [
                    dataclasses.replace(
                        e, values=tuple((new if k == old else k, v) for k, v in e.values)
                    )
                    for e in m.enums
                ]
        elif p.op == "alias":
            name, to = p.get("name"), p.get("to")
            if name not in _names(m):
                raise PatchError(f"{_where(t, p)}: nothing named {name!r} to alias")
            m.extra_code.append(f"{to} = {name}  # alias: {p.why}")
        elif p.op == "type":
            rec, fname, to = p.get("record"), p.get("field"), p.get("to")
            names = _names(m)
            if to not in _PRIM_NAMES and names.get(to) not in ("record", "enum", "typedef"):
                raise PatchError(f"{_where(t, p)}: unknown type {to!r}")
            new_t: ir.Type = (
                ir.Prim(to, _PRIM_SIZES[to], _PRIM_SIZES[to])
                if to in _PRIM_NAMES
                else ir.Named(to, names[to])
            )
            for i, r in enumerate(m.records):
                if r.name == rec:
                    if not any(f.name == fname for f in r.fields):
                        raise PatchError(f"{_where(t, p)}: record {rec} has no field {fname!r}")
                    m.records[i] = dataclasses.replace(
                        r,
                        fields=tuple(
                            dataclasses.replace(f, type=new_t) if f.name == fname else f
                            for f in r.fields
                        ),
                    )
                    break
            else:
                raise PatchError(f"{_where(t, p)}: no record named {rec!r}")
        elif p.op == "drop":
            rx = re.compile(p.get("pattern"))
            dropped: list[ir.Skipped] = []
            for attr, kind, items in m.declaration_lists():
                kept = [it for it in items if not rx.fullmatch(it.name)]
                dropped += [
                    ir.Skipped(
                        it.name, kind, f"dropped by patch ({_where(t, p)}): {p.why}", it.loc
                    )
                    for it in items
                    if rx.fullmatch(it.name)
                ]
                setattr(m, attr, kept)
            if not dropped:
                raise PatchError(f"{_where(t, p)}: pattern {p.get('pattern')!r} matched nothing")
            _check_no_dangling(t, p, m, {d.name for d in dropped})
            m.skipped += dropped  # one line per declaration: the report names each
        elif p.op == "extra":
            code = p.get("code").rstrip()
            try:  # a syntax error is the patch's, not the renderer's: say which patch
                compile(code, f"{t.spec_shown}:{p.line}", "exec")
            except SyntaxError as e:
                raise PatchError(
                    f"{_where(t, p)}: line {e.lineno} of its code: {e.msg}"
                ) from None
            m.extra_code.append(f"# extra: {p.why}\n{code}")

