"""Pass ``naming``: the Python name of every kept declaration, field and parameter.

Reads the declarations ``select`` wrote (named by their keys, ``bindgen.decls``), the facts of the
declaration index, and ``ParseResult.record_keys``. Rewrites every key in the module to a Python
name (declarations, ``ir.Named`` references, ``Module.skipped``), names fields and parameters, folds
typedefs into the record or enum of the same name, puts each declaration list in name order, and
writes ``Context.record_names`` (C spelling → Python class, for macros that name records).

C has separate namespaces for tags, typedefs, enumerators and macros; a Python module has one. The
rules (docs/spec-format.md, "Python names", says the same for users):

- a C name is kept as it is, except that a Python keyword (or ``None``, ``True``, ``False``) gets a
  trailing underscore (:func:`py_ident`): a field ``in`` is ``in_``, a struct ``class`` is
  ``class_``, a function ``lambda`` is ``lambda_``. This applies to records, enums, typedefs,
  fields, parameters, functions and variables (a function or variable keeps its C name as the
  symbol looked up in the library); enumerators and macros keep theirs;
- tags (struct, union and enum names) and ordinary identifiers are separate namespaces in C:
  ``struct stat`` and the function ``stat`` are two things. Where a tag's name is also that of a
  kept function, variable, enumerator or typedef of another type, the ordinary identifier keeps
  the name and the tag is ``struct_NAME``, ``union_NAME`` or ``enum_NAME`` (``struct_stat``). A
  typedef of the tag's own type (``typedef struct foo foo;``, also through other typedefs) is no
  clash: it is folded into the tag;
- an anonymous struct or union inside a record is named after its parent and its member
  (``kfd_event_data_memory``); when the member is unnamed too, after the parent and its position
  among the parent's nested struct and union declarations (``kfd_event_data_anon0``);
- an anonymous record elsewhere is ``anon_FILE_LINE`` (the file's base name, ``.`` and ``-`` made
  ``_``), an anonymous enum ``anon_enum_LINE``;
- an unnamed member (an anonymous struct or union) is the field ``_anonN``, N its position among the
  record's C members (unnamed bitfields count, though they are padding and not emitted);
- an unnamed parameter is ``argN``, N its position;
- a typedef whose name is that of the record or enum it names (``typedef struct foo foo;``, or
  ``typedef bar foo;`` where ``bar`` names ``struct foo``) is folded into it;
- two declarations of one kind that get the same name are one name: the first the selection reached
  is emitted, the other is left out with the reason, and a reference to either means the first.

Clashes between kinds (a typedef and a macro of one name) are the ``dedupe`` pass's.
"""

from __future__ import annotations

import dataclasses
import keyword
from typing import TYPE_CHECKING

from .. import ir

if TYPE_CHECKING:
    from ..decls import Decl, Declarations
    from . import Context


def py_ident(name: str) -> str:
    """``name``, with a trailing underscore if Python reserves it."""
    return name + "_" if keyword.iskeyword(name) or name in ("None", "True", "False") else name


def anonymous_enum_name(d: Decl) -> str:
    return f"anon_enum_{d.line}"


def field_name(spelling: str, position: int) -> str:
    return py_ident(spelling) if spelling else f"_anon{position}"


def param_name(spelling: str, position: int) -> str:
    return py_ident(spelling) if spelling else f"arg{position}"


class Names:
    """Key → Python name for the declarations of one index (memoised). ``ordinary``: the C names
    of the kept ordinary identifiers that a tag of the same name must make way for."""

    def __init__(self, decls: Declarations, ordinary: frozenset[str] = frozenset()) -> None:
        self.decls = decls
        self.ordinary = ordinary
        self.memo: dict[str, str] = {}

    def __call__(self, key: str) -> str:
        name = self.memo.get(key)
        if name is None:
            name = self.memo[key] = self._name(self.decls.info(key))
        return name

    def _name(self, d: Decl) -> str:
        if d.kind in ("record", "enum") and d.spelling in self.ordinary:
            node = self.decls.convert(d.key).node
            word = node.kind if isinstance(node, ir.Record) else d.kind
            return f"{word}_{d.spelling}"
        if d.spelling:
            return py_ident(d.spelling)
        if d.kind == "enum":
            return anonymous_enum_name(d)
        if d.parent:
            parent = self(d.parent)
            return py_ident(
                f"{parent}_{d.member}" if d.member else f"{parent}_anon{d.nested_index}"
            )
        return py_ident(f"anon_{d.file_base}_{d.line}".replace(".", "_").replace("-", "_"))


def name(ctx: Context) -> None:
    decls, m = ctx.parsed.decls, ctx.module
    names = Names(decls, _ordinary(m, decls))
    renamed = _Renamer(names)
    # Declarations of one kind sharing a name: the first reached is kept.
    for attr, kind in (
        ("records", "record"),
        ("enums", "enum"),
        ("typedefs", "typedef"),
        ("functions", "function"),
        ("variables", "variable"),
    ):
        kept: dict[str, str] = {}  # name → key
        items = []
        for it in getattr(m, attr):
            n = names(it.name)
            if n in kept:
                first = decls.info(kept[n])
                m.skipped.append(
                    ir.Skipped(
                        it.name,
                        kind,
                        f"its Python name {n} is that of the {kind} at {first.loc or '?'}, which "
                        "is emitted under it (a reference to either means that one)",
                        decls.info(it.name).loc,
                    )
                )
                continue
            kept[n] = it.name
            items.append(it)
        setattr(m, attr, items)

    m.records = sorted((renamed.record(r, decls) for r in m.records), key=_by_name)
    m.enums = sorted((_enum(e, names(e.name)) for e in m.enums), key=_by_name)
    typedefs = [ir.Typedef(names(t.name), renamed.type(t.type), t.loc, t.doc) for t in m.typedefs]
    # `typedef struct foo foo;` is one name: the typedef that names its own record goes, and so
    # does one that reaches it through other typedefs (`typedef struct foo bar; typedef bar foo;`).
    by_name = {t.name: t for t in typedefs}
    m.typedefs = sorted(
        (t for t in typedefs if _tag_behind(t.type, by_name) != t.name), key=_by_name
    )
    m.functions = sorted((renamed.function(f, decls) for f in m.functions), key=_by_name)
    m.variables = sorted(
        (
            dataclasses.replace(
                v, name=names(v.name), type=renamed.type(v.type), symbol=_symbol(v.name, decls)
            )
            for v in m.variables
        ),
        key=_by_name,
    )
    m.skipped = [ir.Skipped(names(s.name), s.what, s.reason, s.loc) for s in m.skipped]
    ctx.record_names = {sp: names(key) for sp, key in ctx.parsed.record_keys.items()}


def _symbol(key: str, decls: Declarations) -> str:
    """The C name of a function or variable, where its Python name differs ("" otherwise)."""
    spelling = decls.info(key).spelling
    return spelling if py_ident(spelling) != spelling else ""


def _tag_behind(t: ir.Type, typedefs: dict[str, ir.Typedef]) -> str:
    """The name of the record or enum a typedef's type is, through other typedefs ("" if
    none)."""
    seen = 0
    while isinstance(t, ir.Named) and t.kind == "typedef" and t.name in typedefs and seen < 64:
        seen += 1
        t = typedefs[t.name].type
    return t.name if isinstance(t, ir.Named) and t.kind in ("record", "enum") else ""


def _ordinary(m: ir.Module, decls: Declarations) -> frozenset[str]:
    """The C names of kept ordinary identifiers (functions, variables, enumerators, typedefs of a
    type other than the tag of the same name): a tag named like one makes way."""
    out = {decls.info(f.name).spelling for f in m.functions}
    out.update(decls.info(v.name).spelling for v in m.variables)
    out.update(k for e in m.enums for k, _ in e.values)
    typedefs = {t.name: t for t in m.typedefs}
    for t in m.typedefs:
        spelling = decls.info(t.name).spelling
        tag = _tag_behind(t.type, typedefs)
        if not (tag and decls.info(tag).spelling == spelling):
            out.add(spelling)
    return frozenset(out)


def _by_name(node: ir.Record | ir.Enum | ir.Typedef | ir.Function | ir.Var) -> str:
    return node.name


def _enum(e: ir.Enum, name: str) -> ir.Enum:
    return ir.Enum(name, e.underlying, e.values, e.loc, e.c_name, e.doc, e.value_docs)


class _Renamer:
    """Rewrites keys to names inside IR nodes."""

    def __init__(self, names: Names) -> None:
        self.names = names

    def type(self, t: ir.Type) -> ir.Type:
        if isinstance(t, ir.Named):
            return ir.Named(self.names(t.name), t.kind)
        if isinstance(t, ir.Pointer):
            return dataclasses.replace(t, pointee=self.type(t.pointee))
        if isinstance(t, ir.Array):
            return ir.Array(self.type(t.elem), t.count)
        if isinstance(t, ir.FuncType):
            return ir.FuncType(
                self.type(t.ret), tuple(self.type(p) for p in t.params), t.variadic
            )
        return t

    def record(self, r: ir.Record, decls: Declarations) -> ir.Record:
        positions = decls.convert(r.name).positions
        fields = tuple(
            ir.Field(
                field_name(f.name, pos),
                self.type(f.type),
                f.bit_offset,
                f.bit_width,
                f.anonymous,
                f.doc,
                f.loc,
            )
            for f, pos in zip(r.fields, positions)
        )
        return ir.Record(
            self.names(r.name), r.kind, r.size, r.align, fields, r.packed, r.loc, r.c_name, r.doc
        )

    def function(self, f: ir.Function, decls: Declarations) -> ir.Function:
        ft = self.type(f.type)
        assert isinstance(ft, ir.FuncType)
        params = tuple(param_name(p, i) for i, p in enumerate(f.param_names))
        return ir.Function(
            self.names(f.name), ft, params, f.library, f.loc, f.doc,
            f.symbol or _symbol(f.name, decls), f.c_signature,
        )
