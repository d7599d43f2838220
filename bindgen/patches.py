"""Declarative post-processing from the spec: applied to the IR before rendering (rename, alias,
type, drop, extra) or, as a last resort, to the rendered text (replace, which must match)."""

from __future__ import annotations

import dataclasses
import re

from . import ir
from .errors import PatchError
from .spec import Patch, Target

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


def _retype(t: ir.Type, old: str, new: str) -> ir.Type:
    if isinstance(t, ir.Named):
        return dataclasses.replace(t, name=new) if t.name == old else t
    if isinstance(t, ir.Pointer):
        return ir.Pointer(_retype(t.pointee, old, new))
    if isinstance(t, ir.Array):
        return ir.Array(_retype(t.elem, old, new), t.count)
    if isinstance(t, ir.FuncType):
        return ir.FuncType(
            _retype(t.ret, old, new), tuple(_retype(p, old, new) for p in t.params), t.variadic
        )
    return t


def apply_ir_patches(t: Target, m: ir.Module) -> None:
    """Applies every IR-level patch of the target in spec order."""
    for p in t.patches:
        if p.op == "rename":
            old, new = p.get("from"), p.get("to")
            names = _names(m)
            if old not in names:
                raise PatchError(f"{_where(t, p)}: nothing named {old!r} to rename")
            if new in names:
                raise PatchError(f"{_where(t, p)}: {new!r} already exists")
            for _, _, lst in m.declaration_lists():
                for i, it in enumerate(lst):
                    if it.name == old:
                        lst[i] = dataclasses.replace(it, name=new)
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
            m.ioctls = [
                dataclasses.replace(io, arg=new if io.arg == old else io.arg) for io in m.ioctls
            ]
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
            m.skipped += dropped  # one line per declaration: the report names each
        elif p.op == "extra":
            m.extra_code.append(f"# extra: {p.why}\n{p.get('code').rstrip()}")


def apply_text_patches(t: Target, text: str) -> str:
    """Applies the regex ``replace`` patches to rendered text; each must match (count if given)."""
    for p in t.patches:
        if p.op != "replace":
            continue
        text, n = re.subn(p.get("pattern"), p.get("with"), text, flags=re.M)
        want = p.get("count") or 0
        if n == 0 or (want and n != want):
            raise PatchError(
                f"{_where(t, p)}: pattern {p.get('pattern')!r} matched {n} time(s)"
                + (f", expected {want}" if want else "")
            )
    return text
