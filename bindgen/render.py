"""IR → Python module text through the Mako templates; deterministic by construction.

The renderer only reads the IR. Order is the IR's order except where Python needs definitions first
(typedef chains, records embedded by value), which is a topological sort with name order as
tiebreak.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from mako.template import Template

from . import ir
from .cexpr.model import MACRO_HELPERS  # the helpers emitted code may call

TEMPLATES = Path(__file__).parent / "templates"


@dataclass
class RenderInfo:
    spec_file: str  # as shown: relative to the project root
    title: str
    fingerprint: str
    inputs_hash: str
    headers_hash: str
    library_envs: dict[str, str]
    defs_name: str = ""


class _Ctx:
    """What templates call: type spelling, field tuples, ordering."""

    def __init__(self, m: ir.Module, info: RenderInfo) -> None:
        self.m, self.info = m, info
        self.spec_file, self.title = info.spec_file, info.title
        self.defs_name = info.defs_name
        self.fingerprint, self.inputs_hash, self.headers_hash = (
            info.fingerprint,
            info.inputs_hash,
            info.headers_hash,
        )
        self.records = {r.name: r for r in m.records}
        self.typedef_map = {t.name: t for t in m.typedefs}
        self.enum_map = {e.name: e for e in m.enums}
        self.used: set[str] = set()
        self.typedefs = self._order_typedefs()
        self.layouts = self._order_layouts()
        self.libraries = [(n, c, info.library_envs[n]) for n, c in m.libraries]
        bodies = " ".join(f.body for f in m.macro_functions)
        self.macro_helpers = [h for h in MACRO_HELPERS if h in bodies]
        self.needs_macro_helpers = bool(self.macro_helpers)
        # Render everything once so the imports list is exact.
        for td in self.typedefs:
            self.type(td.type)
        for rec in self.layouts:
            for f in rec.fields:
                self.field(f)
        for fn in m.functions:
            self.ret(fn.type.ret)
            for p in fn.type.params:
                self.type(p)
        for v in m.variables:
            self.type(v.type)
        for en in m.enums:
            self.used.add(en.underlying.name)
        self.ctypes_imports = sorted(self.used | {"c_void_p"})

    # -- names
    def lib_var(self, name: str | None) -> str:
        return "_lib_" + re.sub(r"\W", "_", name or "none")

    def record_base(self, rec: ir.Record) -> str:
        if rec.opaque:
            return "_rt.Opaque"
        return "_rt.Union" if rec.kind == "union" else "_rt.Struct"

    # -- types
    def type(self, t: ir.Type) -> str:
        if isinstance(t, ir.Prim):
            self.used.add(t.name)
            return t.name
        if isinstance(t, ir.Void):
            self.used.add("c_void_p")
            return "None"
        if isinstance(t, ir.Named):
            return t.name
        if isinstance(t, ir.Pointer):
            p = t.pointee
            while (
                isinstance(p, ir.Named)
                and p.kind == "typedef"
                and p.name in self.typedef_map
                and isinstance(self.typedef_map[p.name].type, ir.FuncType)
            ):
                p = self.typedef_map[p.name].type
            if isinstance(p, ir.Void):
                self.used.add("c_void_p")
                return "c_void_p"
            if isinstance(p, ir.Prim) and p.name == "c_char":
                self.used.add("c_char_p")
                return "c_char_p"
            if isinstance(p, ir.FuncType):
                return self.functype(p)
            self.used.add("POINTER")
            return f"POINTER({self.type(p)})"
        if isinstance(t, ir.Array):
            return f"({self.type(t.elem)} * {t.count if t.count is not None else 0})"
        if isinstance(t, ir.FuncType):
            return self.functype(t)
        raise TypeError(t)

    def ret(self, t: ir.Type) -> str:
        return "None" if isinstance(t, ir.Void) else self.type(t)

    def functype(self, f: ir.FuncType) -> str:
        self.used.add("CFUNCTYPE")
        args = "".join(", " + self.type(p) for p in f.params)
        return f"CFUNCTYPE({self.ret(f.ret)}{args})"

    def field(self, f: ir.Field) -> str:
        t = self.type(f.type)
        if f.bit_width is not None:
            return f"({f.name!r}, {t}, {f.bit_offset}, {f.bit_width}, {self.signed(f.type)})"
        if f.anonymous:
            return f"({f.name!r}, {t}, {f.bit_offset}, None, False, True)"
        return f"({f.name!r}, {t}, {f.bit_offset})"

    def signed(self, t: ir.Type) -> bool:
        t = self.resolve(t)
        if isinstance(t, ir.Prim):
            return t.signed and not t.is_float and t.name != "c_bool"
        return False

    def resolve(self, t: ir.Type) -> ir.Type:
        seen = 0
        while isinstance(t, ir.Named) and seen < 64:
            seen += 1
            if t.kind == "typedef" and t.name in self.typedef_map:
                t = self.typedef_map[t.name].type
            elif t.kind == "enum" and t.name in self.enum_map:
                return self.enum_map[t.name].underlying
            else:
                break
        return t

    # -- ordering
    def _order_typedefs(self) -> list[ir.Typedef]:
        out: list[ir.Typedef] = []
        state: dict[str, int] = {}

        def deps(t: ir.Type) -> list[str]:
            if isinstance(t, ir.Named):
                return [t.name] if t.kind == "typedef" else []
            if isinstance(t, ir.Pointer):
                return deps(t.pointee)
            if isinstance(t, ir.Array):
                return deps(t.elem)
            if isinstance(t, ir.FuncType):
                return [d for p in (t.ret,) + t.params for d in deps(p)]
            return []

        def visit(name: str) -> None:
            if state.get(name) or name not in self.typedef_map:
                return
            state[name] = 1
            for d in deps(self.typedef_map[name].type):
                visit(d)
            state[name] = 2
            out.append(self.typedef_map[name])

        for td in self.m.typedefs:
            visit(td.name)
        return out

    def _order_layouts(self) -> list[ir.Record]:
        out: list[ir.Record] = []
        state: dict[str, int] = {}

        def by_value(t: ir.Type) -> list[str]:
            t2 = self.resolve(t) if isinstance(t, ir.Named) and t.kind == "typedef" else t
            # A typedef naming its own record (typedef struct {..} x_t) was folded into the record.
            if isinstance(t2, ir.Named) and (t2.kind == "record" or t2.name in self.records):
                return [t2.name]
            if isinstance(t2, ir.Array):
                return by_value(t2.elem)
            return []

        def visit(name: str) -> None:
            if state.get(name) or name not in self.records:
                return
            state[name] = 1
            rec = self.records[name]
            for f in rec.fields:
                for d in by_value(f.type):
                    visit(d)
            state[name] = 2
            if not rec.opaque:
                out.append(rec)

        for rec in self.m.records:
            visit(rec.name)
        return out

    # -- lazy modules: one line of source per name
    def lazy_table(self) -> str:
        lines: list[tuple[str, str]] = []
        for rec in self.m.records:
            base = self.record_base(rec)
            src = f"class {rec.name}({base}): pass"
            if not rec.opaque:
                fields = ", ".join(self.field(f) for f in rec.fields)
                src += f"\x1f{rec.name}._layout_({rec.size}, {rec.align}, [{fields}])"
            lines.append((rec.name, src))
        enum_vals = []
        for en in self.m.enums:
            lines.append((en.name, f"{en.name} = {en.underlying.name}"))
            for k, v in en.values:
                lines.append((k, f"{k} = {v}"))
            enum_vals.append(f"{en.name!r}: {{{', '.join(f'{k!r}: {v}' for k, v in en.values)}}}")
        lines.append(("__enums__", f"__enums__ = {{{', '.join(enum_vals)}}}"))
        for td in self.typedefs:
            lines.append((td.name, f"{td.name} = {self.type(td.type)}"))
        for fn in self.m.functions:
            params = ", ".join(self.type(p) for p in fn.type.params)
            var = ", variadic=True" if fn.type.variadic else ""
            lines.append(
                (
                    fn.name,
                    f"{fn.name} = {self.lib_var(fn.library)}.function({fn.name!r}, "
                    f"{self.ret(fn.type.ret)}, [{params}]{var})",
                )
            )
        for c in self.m.constants:
            lines.append((c.name, f"{c.name} = {c.expr}"))
        for f in self.m.macro_functions:
            lines.append((f.name, f"def {f.name}({', '.join(f.params)}): return {f.body}"))
        for io in self.m.ioctls:
            lines.append(
                (
                    io.name,
                    f"{io.name} = _rt.IoctlRequest({io.request:#x}, {io.name!r}, "
                    f"{io.arg or 'None'})",
                )
            )
        for line in lines:
            if "\n" in line[1] or "\t" in line[0]:
                raise ValueError(f"definition of {line[0]} does not fit on one line")
        return "".join(f"{n}\t{s}\n" for n, s in lines)


_TEMPLATES: dict[str, Template] = {}  # compiled templates, a cache safe to drop


def render_module(m: ir.Module, info: RenderInfo, lazy: bool = False) -> tuple[str, str | None]:
    """Module text and, for lazy modules, the text of its ``.defs`` file."""
    name = "lazy_module.py.mako" if lazy else "module.py.mako"
    if name not in _TEMPLATES:
        _TEMPLATES[name] = Template(filename=str(TEMPLATES / name), strict_undefined=True)
    ctx = _Ctx(m, info)
    text = _TEMPLATES[name].render(m=m, r=ctx)
    return re.sub(r"\n{3,}", "\n\n", text).rstrip() + "\n", ctx.lazy_table() if lazy else None


def render_report(m: ir.Module, info: RenderInfo, headers: list[tuple[str, str]]) -> str:
    """The target's report: headers read (with sha256), counts, and everything not emitted, why."""
    lines = [
        f"# bindgen report for target {m.target} (spec {info.spec_file})",
        f"# fingerprint: {info.fingerprint}",
        "",
        "## headers read (sha256)",
    ]
    lines += [f"{sha}  {shown}" for shown, sha in headers]
    lines += [
        "",
        "## emitted",
        f"records: {len(m.records)}  enums: {len(m.enums)}  typedefs: {len(m.typedefs)}  "
        f"functions: {len(m.functions)}  variables: {len(m.variables)}",
        f"constants: {len(m.constants)}  function-like macros: {len(m.macro_functions)}  "
        f"ioctls: {len(m.ioctls)}",
        "",
        f"## not emitted ({len(m.skipped)})",
    ]
    for s in m.skipped:
        lines.append(f"{s.what} {s.name}: {s.reason}" + (f"  [{s.loc}]" if s.loc else ""))
    over = [r for r in m.records if (r.align or 0) > OVER_ALIGNED]
    if over:
        lines += ["", f"## emitted with a limit ({len(over)})"]
        for r in over:
            lines.append(
                f"record {r.name}: aligned to {r.align}: exact on Python >= 3.13 (`_align_`); "
                f"older ctypes reports alignment {OVER_ALIGNED} and allocates instances "
                f"{OVER_ALIGNED}-byte aligned (size, field offsets and array strides are exact)"
                + (f"  [{r.loc}]" if r.loc else "")
            )
    return "\n".join(lines) + "\n"


# The largest alignment ctypes can give a type before Python 3.13 (c_longdouble's).
OVER_ALIGNED = 16
