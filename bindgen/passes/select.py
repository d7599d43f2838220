"""Pass ``select``: which declarations and macros a target keeps.

Reads the declaration index (``ParseResult.decls``, see ``bindgen.decls``), the parsed macros and
the target's ``keep`` rules and ``libraries``. Writes ``Module.records``, ``enums``, ``typedefs``,
``functions``, ``variables`` (their IR with declaration keys for names: the ``naming`` pass comes
next), ``Module.libraries``, ``Module.skipped`` (what it leaves out, and why) and
``Context.kept_macros``.

The rules, in order:

1. *Roots.* A declaration at file or namespace scope is a root when its file matches ``keep.files``
   (default: the target's headers) and its name passes ``keep.names`` and ``keep.exclude``. The name
   a rule sees is the C name; an anonymous enum is matched by the name the naming pass gives it
   (``anon_enum_LINE``), and anonymous records are never roots (their typedef or parent is).
   Functions and variables are roots only at file scope (C++ namespaces mangle their symbols) and
   only when something can be bound: a ``static`` or ``inline`` function (C code no library
   exports), or any function or variable of a target without ``libraries``, is left out with the
   reason; with ``wrap_static_fns`` a ``static``/``inline`` function defined in the header is a
   root too, bound through its exported wrapper (``bindgen.wrappers``). A ``static const``
   variable needs no library: its value (clang evaluates the initializer) is bound as a module
   constant; a ``static`` one that is not const, or whose value is not a constant, is left out
   with the reason.
2. *Closure.* Everything a root refers to is kept too, transitively: field and element types,
   typedef targets and signatures, through pointers as well. Nothing else is converted.
3. *What cannot be represented.* A declaration that ctypes cannot express (a ``_Complex`` member,
   say) is left out with the reason, and so is every kept declaration that refers to one, however
   indirectly (cycles included), so no emitted name refers to a missing one. What such a
   declaration used is still emitted if it can be.
4. *By value.* A function that takes or returns by value what CPython's libffi passes wrongly (a
   union, a packed record, ``long double``, a member off its alignment, over-aligned) is left out
   with the reason; the types it names stay.

A macro is kept when its ``#define`` is in a kept file and, where the target has name rules, its
name passes them. Declarations are written in the order the walk first reached them (the naming
pass sorts); ``Module.skipped`` lists what is left out in the order the walk finished with it.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from typing import TYPE_CHECKING, Iterable

from .. import ir, wrappers
from ..decls import Converted, Decl, Declarations
from .naming import anonymous_enum_name

if TYPE_CHECKING:
    from ..cexpr import MacroDef
    from ..spec import Target
    from . import Context

# Module lists by declaration kind.
_LISTS = {
    "record": "records",
    "enum": "enums",
    "typedef": "typedefs",
    "function": "functions",
    "variable": "variables",
}


class Rules:
    """A target's ``keep`` rules: files (globs over ``source:path``) and names (regexes)."""

    def __init__(self, t: Target) -> None:
        self.globs = t.keep_files
        self.names = [re.compile(p) for p in t.keep_names]
        self.exclude = [re.compile(p) for p in t.exclude_names]
        self._files: dict[str, bool] = {}

    @property
    def filtered(self) -> bool:
        return bool(self.names or self.exclude)

    def file(self, shown: str | None) -> bool:
        if shown is None:
            return False
        hit = self._files.get(shown)
        if hit is None:
            hit = self._files[shown] = any(fnmatch.fnmatch(shown, g) for g in self.globs)
        return hit

    def name(self, name: str) -> bool:
        if any(p.search(name) for p in self.exclude):
            return False
        return not self.names or any(p.search(name) for p in self.names)


def kept_macros(t: Target, macros: Iterable[MacroDef]) -> frozenset[str]:
    """The macros ``t`` emits (when they translate): defined in a kept file, with a kept name."""
    rules = Rules(t)
    return frozenset(
        md.name
        for md in macros
        if md.loc and rules.file(md.loc.file) and (not rules.filtered or rules.name(md.name))
    )


def select(ctx: Context) -> None:
    t, decls, m = ctx.target, ctx.parsed.decls, ctx.module
    ctx.kept_macros = kept_macros(t, ctx.parsed.macros)
    m.libraries = [(lib.name, lib.candidates) for lib in t.libraries]
    library = t.libraries[0].name if t.libraries else None
    walk = _Walk(decls)
    for key, refusal in _roots(t, decls, library is not None):
        walk.visit(key, refusal)
    failed = walk.unrepresentable()
    refused = dict(walk.refused)
    types = _Types(walk.reached)
    for key, conv in walk.reached.items():
        if key in failed or not isinstance(conv.node, ir.Function):
            continue
        problem = types.by_value_problem(conv.node.type)
        if problem:
            refused[key] = (
                "function",
                f"{problem}: CPython's libffi passes it wrongly (a crash or a wrong value), so no "
                "callable is emitted; call it through a C wrapper that takes a pointer",
            )
    wrapped = False
    for key, conv in walk.reached.items():
        node = conv.node
        if node is None or key in failed or key in refused:
            continue
        if isinstance(node, ir.Function) and decls.info(key).inline:
            node = dataclasses.replace(
                node, library=wrappers.LIBRARY, symbol=decls.info(key).spelling + wrappers.SUFFIX
            )
            wrapped = True
        elif isinstance(node, (ir.Function, ir.Var)):
            node = _with_library(node, library)
        getattr(m, _LISTS[decls.info(key).kind]).append(node)
    if wrapped:
        so = wrappers.file_names(t.output)[1]
        m.libraries.append((wrappers.LIBRARY, (f"./{so}",)))
    for key in walk.finished:
        if key in failed or key in refused:
            d = decls.info(key)
            what, reason = refused.get(key) or (d.kind, failed[key])
            node = walk.reached[key].node if key in walk.reached else None
            m.skipped.append(ir.Skipped(key, what, reason, getattr(node, "loc", None) or d.loc))


def _roots(t: Target, decls: Declarations, bindable: bool) -> Iterable[tuple[str, str]]:
    """(key, "") for each root in the unit's order, or (key, reason) for a kept function or
    variable that cannot be bound."""
    rules = Rules(t)
    for d in decls.top:
        if not rules.file(d.loc.file if d.loc else None):
            continue
        if d.kind == "record" and not d.spelling:
            continue  # reached through its typedef or parent
        name = d.spelling or (anonymous_enum_name(d) if d.kind == "enum" else "")
        if not rules.name(name):
            continue
        if d.kind in ("function", "variable"):
            if d.namespace:
                continue
            if d.inline:
                if t.wrap_static_fns:  # bound through a compiled wrapper (bindgen.wrappers)
                    yield d.key, ""
                    continue
                yield d.key, (
                    f"{d.inline} function: its body is C code in the header and no library "
                    "exports it (`wrap_static_fns: true` binds it through a compiled wrapper)"
                )
                continue
            if not bindable and not d.static:  # a static variable needs no library (its value)
                yield d.key, "no library declared for this target"
                continue
        yield d.key, ""


class _Walk:
    """The closure over ``uses`` from the roots, with an explicit stack (a chain of thousands of
    records does not recurse)."""

    def __init__(self, decls: Declarations) -> None:
        self.decls = decls
        self.reached: dict[str, Converted] = {}  # in the order first reached
        self.finished: list[str] = []  # reached or refused, in the order the walk finished them
        self.refused: dict[str, tuple[str, str]] = {}  # key → (what, reason)

    def visit(self, root: str, refusal: str) -> None:
        if root in self.reached or root in self.refused:
            return
        if refusal:
            what = "inline function" if self.decls.info(root).inline else self.decls.info(root).kind
            self.refused[root] = (what, refusal)
            self.finished.append(root)
            return
        stack = [(root, iter(self._reach(root).uses))]
        while stack:
            key, todo = stack[-1]
            for u in todo:
                if u not in self.reached:
                    stack.append((u, iter(self._reach(u).uses)))
                    break
            else:
                stack.pop()
                self.finished.append(key)

    def _reach(self, key: str) -> Converted:
        conv = self.reached[key] = self.decls.convert(key)
        return conv

    def unrepresentable(self) -> dict[str, str]:
        """Key → reason for every reached declaration that cannot be emitted: its own conversion
        failed, or it uses one that cannot be emitted (a fixed point, so cycles are covered)."""
        bad = {k for k, c in self.reached.items() if c.node is None}
        users: dict[str, list[str]] = {}
        for k, c in self.reached.items():
            for u in c.uses:
                users.setdefault(u, []).append(k)
        todo = list(bad)
        while todo:
            for user in users.get(todo.pop(), ()):
                if user not in bad:
                    bad.add(user)
                    todo.append(user)
        out: dict[str, str] = {}
        for k in bad:
            c = self.reached[k]
            if c.node is None:
                out[k] = c.error
                continue
            # The first use that cannot be emitted, and the field that uses it.
            u = next(u for u in c.uses if u in bad)
            why = f"uses {self.decls.info(u).describe()}, which is not emitted"
            out[k] = f"{_field_of(c.node, u, self.decls.info(k))}{why}"
        return out


def _field_of(node: object, key: str, d: Decl) -> str:
    """``FILE:LINE: field s.f: `` for the first field of record ``node`` that refers to ``key``
    ("" for other declarations)."""
    if isinstance(node, ir.Record):
        label = d.spelling or f"<anonymous {node.kind}>"
        for f in node.fields:
            if key in _keys(f.type):
                return f"{f.loc}: field {label}.{f.name}: "
    return ""


def _keys(t: ir.Type) -> list[str]:
    """The declaration keys type ``t`` names."""
    if isinstance(t, ir.Named):
        return [t.name]
    if isinstance(t, ir.Pointer):
        return _keys(t.pointee)
    if isinstance(t, ir.Array):
        return _keys(t.elem)
    if isinstance(t, ir.FuncType):
        return [k for p in (t.ret, *t.params) for k in _keys(p)]
    return []


class _Types:
    """Typedefs and records among the reached declarations, by key, for the by-value rule."""

    def __init__(self, reached: dict[str, Converted]) -> None:
        self.typedefs = {k: c.node for k, c in reached.items() if isinstance(c.node, ir.Typedef)}
        self.records = {k: c.node for k, c in reached.items() if isinstance(c.node, ir.Record)}

    def strip(self, t: ir.Type) -> ir.Type:
        while isinstance(t, ir.Named) and t.kind == "typedef" and t.name in self.typedefs:
            t = self.typedefs[t.name].type
        return t

    def by_value_problem(self, ft: ir.FuncType) -> str | None:
        """Why a parameter or the result cannot go through libffi by value, or None."""
        return next(filter(None, (self.problem(t) for t in (ft.ret, *ft.params))), None)

    def problem(self, t: ir.Type, seen: frozenset[str] = frozenset()) -> str | None:
        t = self.strip(t)
        if isinstance(t, ir.Prim) and t.name == "c_longdouble":
            return "long double by value"
        if isinstance(t, ir.Prim) and t.name in ("_rt.c_int128", "_rt.c_uint128"):
            return "__int128 by value (libffi has no 128-bit integer type)"
        if isinstance(t, ir.Array):
            return self.problem(t.elem, seen)
        if not (isinstance(t, ir.Named) and t.name in self.records) or t.name in seen:
            return None
        rec = self.records[t.name]
        what = f"{rec.c_name or 'an anonymous ' + rec.kind} by value"
        if rec.kind == "union":
            return f"{what} (a union: libffi has no union type)"
        if rec.packed:
            return f"{what} (packed)"
        if (rec.align or 0) > 16:
            return f"{what} (aligned to {rec.align})"
        for f in rec.fields:
            ft = self.strip(f.type)
            member = f.name or "(anonymous)"
            if isinstance(ft, ir.Prim) and f.bit_width is None and f.bit_offset % (8 * ft.align):
                return f"{what} (member {member} off its alignment)"
            inner = self.problem(ft, seen | {t.name})
            if inner:
                return f"{what} (member {member}: {inner})"
        return None


def _with_library(node: ir.Function | ir.Var, library: str | None) -> ir.Function | ir.Var:
    if isinstance(node, ir.Var) and node.value is not None:
        return node  # a static const: a value, from no library
    return dataclasses.replace(node, library=library)
