"""Pass ``order``: the order Python needs definitions in, where C's order does not give it.

Reads ``Module.typedefs`` and ``Module.records``. Reorders ``Module.typedefs`` so that a typedef
comes after the typedefs it names (a typedef chain), and writes ``Module.layout_order``: record
names such that a record embedded by value (directly, in an array, or through typedefs) is laid
out before the records that embed it. Otherwise the IR's order is kept (the name order of a
depth-first walk in declaration order), so the output is deterministic. Both walks use an
explicit stack: a chain of thousands of records does not recurse.
"""

from __future__ import annotations

from .. import ir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from . import Context


def order(ctx: Context) -> None:
    m = ctx.module
    typedefs = {t.name: t for t in m.typedefs}
    enums = {e.name for e in m.enums}
    records = {r.name: r for r in m.records}

    def typedef_deps(name: str) -> list[str]:
        return [d for d in _named(typedefs[name].type, pointers=True) if d in typedefs]

    m.typedefs = [typedefs[n] for n in _postorder([t.name for t in m.typedefs], typedef_deps)]

    def resolve(name: str) -> str | None:
        """The record a typedef chain ends in (by value), if any."""
        seen = 0
        while name in typedefs and seen < 64:
            seen += 1
            t = typedefs[name].type
            while isinstance(t, ir.Array):
                t = t.elem
            if not isinstance(t, ir.Named) or t.name in enums:
                return None
            name = t.name
        return name if name in records else None

    def record_deps(name: str) -> list[str]:
        out = []
        for f in records[name].fields:
            for d in _named(f.type, pointers=False):
                r = resolve(d)
                if r is not None:
                    out.append(r)
        return out

    m.layout_order = [
        n for n in _postorder([r.name for r in m.records], record_deps) if not records[n].opaque
    ]


def _named(t: ir.Type, pointers: bool) -> list[str]:
    """Names ``t`` refers to; through pointers and function types only when ``pointers``."""
    if isinstance(t, ir.Named):
        return [t.name]
    if isinstance(t, ir.Array):
        return _named(t.elem, pointers)
    if not pointers:
        return []
    if isinstance(t, ir.Pointer):
        return _named(t.pointee, pointers)
    if isinstance(t, ir.FuncType):
        return [d for p in (t.ret, *t.params) for d in _named(p, pointers)]
    return []


def _postorder(roots: list[str], deps: Callable[[str], list[str]]) -> list[str]:
    """Depth-first post-order over ``roots`` (in order) and their dependencies; cycles are cut."""
    out: list[str] = []
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    for root in roots:
        if root in state:
            continue
        state[root] = 1
        stack: list[tuple[str, list[str]]] = [(root, deps(root)[::-1])]
        while stack:
            name, todo = stack[-1]
            while todo and todo[-1] in state:
                todo.pop()
            if todo:
                d = todo.pop()
                state[d] = 1
                stack.append((d, deps(d)[::-1]))
                continue
            stack.pop()
            state[name] = 2
            out.append(name)
    return out
