"""IR → Python module text; deterministic by construction. The renderer only reads the IR (the
``order`` pass fixed the order typedefs and layouts need).

Every target renders as one readable module: records declared first as classes (docstring from
the header, one annotation per C-visible field for type checkers and IDEs), then enums, typedefs,
one ``_layout_`` call per record with one field per line (C type, bit offset, width, and a comment
with the byte offset and the header's comment), functions, constants, function-like macros and
ioctls, each an ordinary statement. Lines stay within 100 columns (``bindgen.pyfmt``).

A lazy target writes that module as its definitions module (``_NAME.py``) with an index appended
(for ``bindgen_rt.lazy``), and a small module ``NAME.py`` that materialises names from it on
first use and re-exports it for type checkers.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from mako.template import Template

from . import ir
from .cexpr.model import MACRO_HELPERS  # the helpers emitted code may call
from .docs import first_line
from .pyfmt import WIDTH, wrap

TEMPLATES = Path(__file__).parent / "templates"
INDEX_MARK = "\n# bindgen-index: "  # bindgen_rt.lazy.INDEX_MARK
LAYOUTS_MARK = "\n# bindgen-index layouts\n"  # bindgen_rt.lazy.LAYOUTS_MARK
POINTERS_MARK = "\n# bindgen-index pointers\n"  # bindgen_rt.lazy.POINTERS_MARK

_PY_SCALARS = {"c_bool": "bool", "c_float": "float", "c_double": "float", "c_longdouble": "float"}


@dataclass
class RenderInfo:
    spec_file: str  # as shown: relative to the project root
    title: str
    fingerprint: str
    inputs_hash: str
    headers_hash: str
    library_envs: dict[str, str]
    defs_module: str = ""  # lazy targets: the definitions module's name (``_rm_580``)
    static_build_id: str = ""  # wrap_static_fns: the build id its shared object must carry


@dataclass
class Rendered:
    text: str  # the module people import
    defs: str | None = None  # lazy targets: the definitions module, with its index


@dataclass
class _Chunk:
    """One statement of the module body: the names it defines (for the lazy index)."""

    text: str
    names: tuple[str, ...] = ()
    layout: bool = False  # a record's ``_layout_`` call (indexed apart from its class)
    before: str = ""  # comment lines above the statement (not part of what is compiled)
    gap: int = 0  # blank lines before it
    pointed: tuple[str, ...] = ()  # names it uses only as ``_rt.ptr(NAME)`` (the lazy index)


@dataclass
class _Section:
    title: str
    chunks: list[_Chunk] = field(default_factory=list)


class _Ctx:
    """Type spelling, annotations and field lines; collects the ctypes names it uses."""

    def __init__(self, m: ir.Module) -> None:
        self.m = m
        self.records = {r.name: r for r in m.records}
        self.typedef_map = {t.name: t for t in m.typedefs}
        self.enum_map = {e.name: e for e in m.enums}
        self.used: set[str] = set()
        # Records some ``POINTER(...)`` of the module points at: their layouts make the pointer type
        # first (``bindgen_rt.records._RecordMixin._layout_``'s ``pointee``).
        self.pointees: set[str] = set()
        # While a statement is spelled (``begin``/``pointer_only``): the module's names it uses
        # as types now, and those it uses only behind a pointer made on first use.
        self._now: set[str] | None = None
        self._later: set[str] = set()

    def begin(self) -> None:
        self._now, self._later = set(), set()

    def pointer_only(self) -> tuple[str, ...]:
        """The names the statement spelled since ``begin`` uses only as ``_rt.ptr(NAME)``."""
        assert self._now is not None
        out = tuple(sorted(self._later - self._now))
        self._now = None
        return out

    @staticmethod
    def lib_var(name: str | None) -> str:
        return "_lib_" + re.sub(r"\W", "_", name or "none")

    @staticmethod
    def record_base(rec: ir.Record) -> str:
        if rec.opaque:
            return "_rt.Opaque"
        return "_rt.Union" if rec.kind == "union" else "_rt.Struct"

    # -- ctypes spelling (what runs)
    def type(self, t: ir.Type) -> str:
        if isinstance(t, ir.Prim):
            if not t.name.startswith("_rt."):  # bindgen_rt's own (128-bit integers)
                self.used.add(t.name)
            return t.name
        if isinstance(t, ir.Void):
            return "None"
        if isinstance(t, ir.Named):
            en = self.enum_map.get(t.name) if t.kind == "enum" else None
            if en is not None and en.py_class:  # the name is the enum class: C sees the integer
                return self.type(en.underlying)
            if self._now is not None:
                self._now.add(t.name)
            return t.name
        if isinstance(t, ir.Pointer):
            p = self.through_functype_typedefs(t.pointee)
            if isinstance(p, ir.Void):
                self.used.add("c_void_p")
                return "c_void_p"
            if isinstance(p, ir.Prim) and p.name == "c_char":
                self.used.add("c_char_p")
                return "c_char_p"
            if isinstance(p, ir.FuncType):
                return self.functype(p)
            self.used.add("POINTER")
            target = self.resolve(p)
            if isinstance(target, ir.Named) and target.name in self.records:
                self.pointees.add(target.name)
            return f"POINTER({self.type(p)})"
        if isinstance(t, ir.Array):
            return f"({self.type(t.elem)} * {t.count if t.count is not None else 0})"
        if isinstance(t, ir.FuncType):
            return self.functype(t)
        raise TypeError(t)

    def through_functype_typedefs(self, p: ir.Type) -> ir.Type:
        while (
            isinstance(p, ir.Named)
            and p.kind == "typedef"
            and p.name in self.typedef_map
            and isinstance(self.typedef_map[p.name].type, ir.FuncType)
        ):
            p = self.typedef_map[p.name].type
        return p

    def const_bytes(self, t: ir.Type) -> bool:
        """Whether ``t`` points to const bytes other than ``char`` (``const uint8_t *``, ``const
        signed char *``): such a parameter also takes ``bytes`` (``char`` pointers are
        ``c_char_p`` and ``void`` pointers ``c_void_p``, which take it already)."""
        if not isinstance(t, ir.Pointer) or not t.const:
            return False
        p = t.pointee
        for _ in range(64):
            if not (isinstance(p, ir.Named) and p.kind == "typedef" and p.name in self.typedef_map):
                break
            p = self.typedef_map[p.name].type
        return isinstance(p, ir.Prim) and p.name in ("c_uint8", "c_int8")

    def ret(self, t: ir.Type) -> str:
        return "None" if isinstance(t, ir.Void) else self.type(t)

    def later_pointer(self, t: ir.Type) -> str | None:
        """``_rt.ptr(RECORD)`` where ``t`` points at a record of the module: made into
        ``POINTER(RECORD)`` on first use (``bindgen_rt.records.PointerTo``), since most of a big
        module's pointer types would otherwise be made on import, unused."""
        if not isinstance(t, ir.Pointer):
            return None
        p = self.through_functype_typedefs(t.pointee)
        target = self.resolve(p)
        if not (isinstance(p, ir.Named) and isinstance(target, ir.Named)
                and target.name in self.records):
            return None
        self._later.add(p.name)
        return f"_rt.ptr({p.name})"

    def param(self, t: ir.Type) -> str:
        """A function's parameter or result type (a pointer to a record made on first call)."""
        return self.later_pointer(t) or self.ret(t)

    def functype(self, f: ir.FuncType) -> str:
        self.used.add("CFUNCTYPE")
        args = "".join(", " + self.type(p) for p in f.params)
        return f"CFUNCTYPE({self.ret(f.ret)}{args})"

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

    def signed(self, t: ir.Type) -> bool:
        t = self.resolve(t)
        if isinstance(t, ir.Prim):
            return t.signed and not t.is_float and t.name != "c_bool"
        return False

    # -- annotations (what type checkers see; never evaluated at run time)
    def annotation(self, t: ir.Type, bitfield: bool = False) -> str:
        r = self.resolve(t)
        if isinstance(r, ir.Prim):
            return "bytes" if r.name == "c_char" else _PY_SCALARS.get(r.name, "int")
        if bitfield:
            return "int"
        if isinstance(r, ir.Named):
            name = t.name if isinstance(t, ir.Named) else r.name
            return name if r.name in self.records else "Any"
        if isinstance(r, ir.Array):
            elem = self.resolve(r.elem)
            if isinstance(elem, ir.Prim) and elem.name == "c_char":
                return "bytes"
            if isinstance(r.elem, (ir.Prim, ir.Named)):
                return f"Array[{self.type(r.elem)}]"
            return "Array[Any]"
        if isinstance(r, ir.Pointer):
            p = self.resolve(self.through_functype_typedefs(r.pointee))
            if isinstance(p, ir.Void):
                return "int | None"
            if isinstance(p, ir.Prim) and p.name == "c_char":
                return "bytes | None"
            if isinstance(r.pointee, (ir.Prim, ir.Named)) and not isinstance(p, ir.FuncType):
                return f"_Pointer[{self.type(r.pointee)}]"
        return "Any"

    def annotations(self, rec: ir.Record) -> list[tuple[str, str, str]]:
        """(name, annotation, doc) of every field a record shows, promoted ones included."""
        out: list[tuple[str, str, str]] = []
        for f in rec.fields:
            if f.bit_width == 0 or (f.bit_width is not None and f.name.startswith("_anon")):
                continue
            out.append((f.name, self.annotation(f.type, f.bit_width is not None), f.doc))
            if f.anonymous:
                inner = self.resolve(f.type)
                if isinstance(inner, ir.Named) and inner.name in self.records:
                    out += self.annotations(self.records[inner.name])
        return out

    # -- field tuples of _layout_
    def field(self, f: ir.Field) -> str:
        t = self.field_type(f) if f.bit_width is None and not f.anonymous else self.type(f.type)
        if f.bit_width is not None:
            return f"({f.name!r}, {t}, {f.bit_offset}, {f.bit_width}, {self.signed(f.type)})"
        if f.anonymous:
            return f"({f.name!r}, {t}, {f.bit_offset}, None, False, True)"
        return f"({f.name!r}, {t}, {f.bit_offset})"

    def field_type(self, f: ir.Field) -> str:
        """A field's C type; a pointer to a record of the module is made on first use of the
        field (``later_pointer``)."""
        return self.later_pointer(f.type) or self.type(f.type)

    @staticmethod
    def where(f: ir.Field) -> str:
        if f.bit_width is not None:
            lo = f.bit_offset
            if f.bit_width == 0:
                return f"zero-width: aligns the next field (bit {lo})"
            return f"bits {lo}..{lo + f.bit_width - 1} (byte {lo // 8})"
        if f.anonymous:
            return f"byte {f.bit_offset // 8}, anonymous: its fields are promoted"
        return f"byte {f.bit_offset // 8}"


# ---------------------------------------------------------------- small text helpers


# Annotations written bare: everything else is a string, because generated modules run without
# ``from __future__ import annotations`` (see bindgen_rt's docstring) and a class body evaluates
# its annotations: a record named before its class exists, or ``Array[...]``, would fail.
_BARE_ANNOTATIONS = frozenset({"int", "float", "bytes", "bool"})


def _annotation_text(ann: str) -> str:
    return ann if ann in _BARE_ANNOTATIONS else repr(ann)


def _docstring(text: str, indent: str) -> str:
    """A docstring literal of ``text`` at ``indent``, lines wrapped to the width."""
    body = text.replace("\\", "\\\\").replace('"""', '\\"""')
    if body.endswith('"'):
        body = body[:-1] + '\\"'
    lines: list[str] = []
    for para in body.split("\n"):
        lines += _fill(para, WIDTH - len(indent) - 3) if para.strip() else [""]
    if len(lines) == 1 and len(indent) + len(lines[0]) + 6 <= WIDTH:
        return f'{indent}"""{lines[0]}"""'
    inner = "\n".join(f"{indent}{ln}" if ln else "" for ln in lines)
    return f'{indent}"""{inner.lstrip()}\n{indent}"""'


def _fill(text: str, width: int) -> list[str]:
    words, out, cur = text.split(), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            out.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    return out + [cur] if cur else out


def _comment_lines(text: str, indent: str = "") -> str:
    """``text`` as ``#`` comment lines within the width (blank lines between paragraphs kept)."""
    out: list[str] = []
    for para in text.split("\n"):
        if not para.strip():
            if out and out[-1] != f"{indent}#":
                out.append(f"{indent}#")
            continue
        out += [f"{indent}# {ln}" for ln in _fill(para, WIDTH - len(indent) - 2)]
    while out and out[-1] == f"{indent}#":
        out.pop()
    return "\n".join(out)


def _with_doc(stmt: str, doc: str, indent: str = "") -> tuple[str, str]:
    """(comment lines above, statement): a short doc trails the statement, a long one goes above."""
    stmt = wrap(stmt)
    if not doc:
        return "", stmt
    short = first_line(doc, WIDTH)
    if "\n" not in stmt and "\n" not in doc and len(stmt) + 4 + len(short) <= WIDTH:
        return "", f"{stmt}  # {short}"
    return _comment_lines(doc, indent), stmt


def _import_line(module: str, names: list[str], indent: str = "") -> str:
    """``from MODULE import NAMES``, parenthesized one name a line when it would be too long."""
    if not names:
        return ""
    line = f"{indent}from {module} import {', '.join(names)}"
    if len(line) <= WIDTH:
        return line
    return f"{indent}from {module} import (\n" + "".join(
        f"{indent}    {n},\n" for n in names
    ) + f"{indent})"


def _loc(loc: ir.Location | None) -> str:
    return f" ({loc})" if loc else ""


# ---------------------------------------------------------------- the body


def _body(m: ir.Module, r: _Ctx, info: RenderInfo) -> list[_Section]:
    sections: list[_Section] = []

    recs = _Section("records: declared first, so that layouts and pointers may refer to any")
    for rec in m.records:
        what = rec.c_name or f"anonymous {rec.kind}"
        opaque = ": opaque (declared, never defined)" if rec.opaque else ""
        head = f"{what}{_loc(rec.loc)}{opaque}"
        doc = head + (f"\n\n{rec.doc}" if rec.doc else "")
        lines = [f"class {rec.name}({r.record_base(rec)}):", _docstring(doc, "    ")]
        anns = [] if rec.opaque else r.annotations(rec)
        taken = {name for name, _, _ in anns}
        if not rec.opaque:
            # no instance __dict__: a misspelt field name fails instead of adding an attribute
            lines += ["", "    __slots__ = ()"]
        for name, ann, fdoc in anns:
            if any(w in taken for w in re.findall(r"\w+", ann)):
                ann = "Any"  # a field named like a type: the class scope would find the field
            before, stmt = _with_doc(f"    {name}: {_annotation_text(ann)}", fdoc, "    ")
            lines += [before, stmt] if before else [stmt]
        recs.chunks.append(_Chunk("\n".join(lines), (rec.name,), gap=2))
    sections.append(recs)

    enums = _Section("enums: the type is the underlying integer; enumerators are module constants")
    for en in m.enums:
        r.used.add(en.underlying.name)
        what = en.c_name or "anonymous enum"
        doc = f"{what}{_loc(en.loc)}" + (f": {en.doc}" if en.doc else "")
        if en.py_class:
            enums.chunks += _enum_class(en, doc)
            continue
        enums.chunks.append(
            _Chunk(f"{en.name} = {en.underlying.name}", (en.name,), before=_comment_lines(doc),
                   gap=1)
        )
        docs = en.value_docs or ("",) * len(en.values)
        for (k, v), vdoc in zip(en.values, docs):
            before, stmt = _with_doc(f"{k} = {v}", vdoc)
            enums.chunks.append(_Chunk(stmt, (k,), before=before))
    if m.enums:
        rows = "".join(
            f"    {e.name!r}: {{{', '.join(f'{k!r}: {v}' for k, v in e.values)}}},\n"
            for e in m.enums
        )
        table = "\n".join(wrap(ln) for ln in rows.rstrip("\n").split("\n"))
        enums.chunks.append(
            _Chunk(f"__enums__ = {{\n{table}\n}}", ("__enums__",), gap=1,
                   before="# every enum's values by enum name")
        )
    sections.append(enums)

    tds = _Section("typedefs")
    by_name = {t.name: t for t in m.typedefs}
    for td in m.typedefs:
        before, stmt = _with_doc(f"{td.name} = {r.type(by_name[td.name].type)}", td.doc)
        tds.chunks.append(_Chunk(stmt, (td.name,), before=before))
    sections.append(tds)

    lays = _Section(
        "layouts, as clang placed them: (name, C type, bit offset[, width, signed[, anonymous]])"
    )
    field_lines: list[tuple[ir.Record, list[str], tuple[str, ...]]] = []
    for name in m.layout_order:
        rec = r.records[name]
        lines = []
        r.begin()
        for f in rec.fields:
            note = r.where(f)
            before, stmt = _with_doc(f"    {r.field(f)},", f"{note}: {f.doc}" if f.doc else note,
                                     "    ")
            lines += [before, stmt] if before else [stmt]
        field_lines.append((rec, lines, r.pointer_only()))
    sections.append(lays)  # its statements are written last: they need every pointer's pointee

    fns = _Section("functions (resolved from the library on first call)")
    for fn in m.functions:
        r.begin()
        params = ", ".join(r.param(p) for p in fn.type.params)
        var = ", variadic=True" if fn.type.variadic else ""
        const = [i for i, p in enumerate(fn.type.params) if r.const_bytes(p)]
        if const:
            var += f", const_bytes={tuple(const)!r}"
        sig = f"{fn.name}({', '.join(fn.param_names)}){_loc(fn.loc)}"
        stmt = (
            f"{fn.name} = {r.lib_var(fn.library)}.function({fn.symbol or fn.name!r}, "
            f"{r.param(fn.type.ret)}, [{params}]{var})"
        )
        text = wrap(stmt)
        if fn.doc:  # the header's comment, for help() and IDEs
            text += f"\n{fn.name}.__doc__ = (\n{_docstring(fn.doc, '    ')}\n)"
        fns.chunks.append(
            _Chunk(text, (fn.name,), before=_comment_lines(sig), pointed=r.pointer_only())
        )
    statics = _Section("static const variables: the value clang computed, in their C type")
    for gvar in m.variables:
        if gvar.value is not None:
            doc = f"{gvar.c_type}{_loc(gvar.loc)}" + (f": {gvar.doc}" if gvar.doc else "")
            statics.chunks.append(
                _Chunk(wrap(f"{gvar.name} = {_static_text(r, gvar.type, gvar.value)}"),
                       (gvar.name,),
                       before=_comment_lines(doc))
            )
            continue
        symbol = gvar.symbol or gvar.name
        text = (
            f"def {gvar.name}() -> 'Any':\n"
            + wrap(f"    return {r.lib_var(gvar.library)}.variable({symbol!r}, "
                   f"{r.type(gvar.type)})")
        )
        fns.chunks.append(_Chunk(text, (gvar.name,), gap=1))
    sections.append(fns)
    sections.append(statics)

    consts = _Section("constants (object-like macros)")
    for c in m.constants:
        before, stmt = _with_doc(f"{c.name} = {c.expr}", c.doc)
        consts.chunks.append(_Chunk(stmt, (c.name,), before=before, gap=1 if before else 0))
    sections.append(consts)

    mfns = _Section("function-like macros")
    for mf in m.macro_functions:
        lines = [f"def {mf.name}({', '.join(mf.params)}):"]
        if mf.doc:
            lines.append(_docstring(mf.doc, "    "))
        lines.append(wrap(f"    return {mf.body}"))
        mfns.chunks.append(_Chunk("\n".join(lines), (mf.name,), gap=1))
    sections.append(mfns)

    ioctls = _Section("ioctls: int(request) is the number; calling it performs the ioctl")
    for io in m.ioctls:
        before, stmt = _with_doc(
            f"{io.name} = _rt.IoctlRequest({io.request:#x}, {io.name!r}, {io.arg or 'None'})",
            io.doc,
        )
        ioctls.chunks.append(_Chunk(stmt, (io.name,), before=before))
    sections.append(ioctls)

    extra = _Section("extra code from the spec's patches")
    for code in m.extra_code:
        lines = [
            _comment_lines(ln.strip()[2:]) if ln.startswith("# ") and len(ln) > WIDTH else ln
            for ln in code.rstrip().split("\n")
        ]
        extra.chunks.append(_Chunk("\n".join(lines), _defined_names(code), gap=1))
    sections.append(extra)

    for rec, lines, pointed in field_lines:
        head = f"{rec.name}._layout_(size={rec.size}, align={rec.align}, fields=["
        tail = "], pointee=True)" if rec.name in r.pointees else "])"
        text = "\n".join([head, *lines, tail])
        lays.chunks.append(_Chunk(text, (rec.name,), layout=True, gap=1, pointed=pointed))
    return [s for s in sections if s.chunks]


def _enum_member(name: str) -> bool:
    """Whether an enumerator can be a member of an enum class written in class syntax: not a
    name Enum reserves (``_sunder_``, ``mro``) or one the class body would mangle (``__x``)."""
    sunder = len(name) > 2 and name[0] == name[-1] == "_" and name[1] != "_" and name[-2] != "_"
    return not (sunder or name.startswith("__") or name == "mro")


def _enum_class(en: ir.Enum, doc: str) -> list[_Chunk]:
    """An enum as ``class NAME(_rt.CEnum)`` (or ``CFlag``), one member per enumerator, and each
    enumerator as a module constant naming its member (C code uses them unqualified)."""
    base = "_rt.CFlag" if en.py_class == "IntFlag" else "_rt.CEnum"
    head = f"{en.name}, {en.py_class} over {en.underlying.name}: {doc}"
    lines = [f"class {en.name}({base}):", _docstring(head, "    ")]
    docs = en.value_docs or ("",) * len(en.values)
    outside: list[_Chunk] = []
    members: list[_Chunk] = []
    for (k, v), vdoc in zip(en.values, docs):
        if _enum_member(k):
            before, stmt = _with_doc(f"    {k} = {v}", vdoc, "    ")
            lines += [before, stmt] if before else [stmt]
            members.append(_Chunk(f"{k} = {en.name}.{k}", (k,)))
        else:  # a plain constant
            before, stmt = _with_doc(f"{k} = {v}", vdoc)
            outside.append(_Chunk(stmt, (k,), before=before))
    after = [*members, *outside]
    if after:
        after[0].gap = 2
    return [_Chunk("\n".join(lines), (en.name,), gap=2), *after]


def _library_line(
    r: _Ctx, name: str, cands: tuple[str, ...], env: str,
    libraries: list[tuple[str, tuple[str, ...], str]], build_id: str,
) -> str:
    """``_lib_NAME = _rt.Library(...)``; a library beside the module (``./FILE``, the compiled
    wrappers of static inline functions) is found from the module's file, needs the target's
    other libraries loaded first and must carry the build id of this module's C file."""
    extra = ""
    if any(c.startswith("./") for c in cands):
        needs = "".join(f"{r.lib_var(n)}, " for n, c, _ in libraries if n != name)
        extra = f", globals().get('__file__') or '', ({needs}), {build_id!r}"
    return wrap(f"{r.lib_var(name)} = _rt.Library({name!r}, {tuple(cands)!r}, {env!r}{extra})")


def _static_text(r: _Ctx, t: ir.Type, v: object) -> str:
    """A static const's value as Python source: a record is an instance of its class (the fields
    that are not zero as keywords), an array a ctypes array (its elements up to the last that is
    not zero; a ``char`` array as ``bytes``), so either passes to C as the C object would."""
    rt = r.resolve(t)
    if v == 0 and not isinstance(v, (ir.RecordValue, ir.ArrayValue)):  # an element left zero
        if isinstance(rt, ir.Array):
            v = ir.ArrayValue(())
        elif isinstance(rt, ir.Named) and rt.name in r.records:
            v = ir.RecordValue(())
    if isinstance(v, ir.RecordValue) and isinstance(rt, ir.Named) and rt.name in r.records:
        return f"{rt.name}({', '.join(_static_fields(r, rt.name, v))})"
    if isinstance(v, ir.ArrayValue) and isinstance(rt, ir.Array):
        elem = r.resolve(rt.elem)
        if isinstance(elem, ir.Prim) and elem.name == "c_char":
            return repr(bytes(x & 0xFF for x in v.items))  # type: ignore[operator]
        items = ", ".join(_static_text(r, rt.elem, x) for x in v.items)
        return f"{r.type(rt)}({items})"
    if isinstance(rt, ir.Prim) and rt.name == "c_char" and isinstance(v, int):
        return repr(bytes([v & 0xFF]))
    return _value_text(v)


def _static_fields(r: _Ctx, record: str, v: ir.RecordValue) -> list[str]:
    """``name=value`` of a record value's fields; an anonymous member's are its promoted fields
    (the names C code and the record's constructor use)."""
    out: list[str] = []
    rec = r.records[record]
    for i, fv in v.fields:
        f = rec.fields[i]
        inner = r.resolve(f.type)
        if f.anonymous and isinstance(fv, ir.RecordValue) and isinstance(inner, ir.Named):
            out += _static_fields(r, inner.name, fv)
        else:
            out.append(f"{f.name}={_static_text(r, f.type, fv)}")
    return out


def _value_text(v: object) -> str:
    """A static const's value as Python source: large integers in hex (they are mostly flags)."""
    if isinstance(v, int) and not isinstance(v, bool) and v >= 0x100:
        return hex(v)
    return repr(v)


def _defined_names(code: str) -> tuple[str, ...]:
    """Top-level names a piece of spec-provided code assigns, defines or imports."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return ()
    out: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            out.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out += [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out += [(a.asname or a.name).split(".")[0] for a in node.names]
    return tuple(dict.fromkeys(out))


# ---------------------------------------------------------------- assembling


_TEMPLATES: dict[str, Template] = {}  # compiled templates, a cache safe to drop


def _template(name: str) -> Template:
    if name not in _TEMPLATES:
        _TEMPLATES[name] = Template(filename=str(TEMPLATES / name), strict_undefined=True)
    return _TEMPLATES[name]


def load_templates() -> None:
    """Compiles every template now (before worker processes fork: they inherit them)."""
    for path in sorted(TEMPLATES.glob("*.mako")):
        _template(path.name)


def render_module(m: ir.Module, info: RenderInfo, lazy: bool = False) -> Rendered:
    """The module text and, for lazy targets, the definitions module's text (with its index)."""
    r = _Ctx(m)
    sections = _body(m, r, info)
    bodies = " ".join(f.body for f in m.macro_functions)
    helpers = [h for h in MACRO_HELPERS if h in bodies]
    libraries = [(n, c, info.library_envs[n]) for n, c in m.libraries]
    typing_names = sorted(
        n for n in ("Any",) if any(n in c.text for s in sections for c in s.chunks)
    )
    ctypes_typing = sorted(
        n for n in ("Array", "_Pointer")
        if any(f"{n}[" in c.text for s in sections for c in s.chunks)
    )
    head = _template("module.py.mako").render(
        m=m,
        info=info,
        title=_comment_lines(f"generated by bindgen, do not edit: {info.title}"),
        docstring=_docstring(
            f"{info.title}: the definitions of the lazy module `{m.target}`." if lazy
            else f"{info.title}.", ""),
        ctypes_import=_import_line("ctypes", sorted(r.used)),
        helpers=helpers,
        libraries=[
            _library_line(r, n, c, env, libraries, info.static_build_id)
            for n, c, env in libraries
        ],
        typing_names=typing_names,
        ctypes_typing=ctypes_typing,
        lazy=lazy,
    )
    header_code = head.split("# -- imports\n", 1)[1].split("\n# -- end of imports\n", 1)[0]
    head = head.replace("# -- imports\n", "").replace("\n# -- end of imports\n", "\n")
    parts = [head.rstrip("\n") + "\n"]
    entries: list[tuple[str, int, int, int]] = []  # (name, line, offset, length)
    layouts: list[tuple[str, int, int, int]] = []
    pointed: list[str] = []  # "NAME REF..." lines
    # Offsets and lengths are in bytes of the UTF-8 file (bindgen_rt.lazy never decodes it whole).
    header_at = parts[0].find(header_code)
    entries.append(("__header__", parts[0].count("\n", 0, header_at) + 1,
                    len(parts[0][:header_at].encode()), len(header_code.encode())))
    size = len(parts[0].encode())
    lines = parts[0].count("\n")

    def add(text: str) -> None:
        nonlocal size, lines
        parts.append(text)
        size += len(text.encode())
        lines += text.count("\n")

    for sec in sections:
        add("\n\n" + f"# ---- {sec.title}" + "\n")
        for i, ch in enumerate(sec.chunks):
            add("\n" * (ch.gap if i else 1))
            if ch.before:
                add(ch.before + "\n")
            for name in ch.names:
                (layouts if ch.layout else entries).append(
                    (name, lines + 1, size, len(ch.text.encode()))
                )
            for name in ch.names:
                refs = [p for p in ch.pointed if p != name]  # itself: declared before its layout
                if refs:
                    pointed.append(f"{name} {' '.join(refs)}")
            add(ch.text + "\n")
    full = "".join(parts)
    if not lazy:
        return Rendered(full)
    title = "NAME LINE OFFSET LENGTH (bytes) of each statement, for bindgen_rt.lazy\n"
    index = [INDEX_MARK + title]
    index += [f"#@ {n} {ln} {off} {length}\n" for n, ln, off, length in entries]
    index.append(LAYOUTS_MARK)
    index += [f"#@ {n} {ln} {off} {length}\n" for n, ln, off, length in layouts]
    if pointed:
        index.append(POINTERS_MARK)
        index += [f"#@ {line}\n" for line in pointed]
    defs = full + "".join(index)[1:]
    public = sorted({n for n, *_ in entries if n != "__header__"})
    private = [n for n in public if n.startswith("_")]
    stub = _template("lazy_module.py.mako").render(
        m=m,
        info=info,
        title=_comment_lines(f"generated by bindgen, do not edit: {info.title}"),
        docstring=_docstring(f"{info.title} (lazy).", "").rstrip('"'),
        private=_import_line(f".{info.defs_module}", [f"{n} as {n}" for n in private], "    "),
    )
    return Rendered(stub, defs)


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
