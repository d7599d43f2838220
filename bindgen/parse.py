"""libclang → IR.

One translation unit per target: a synthetic main file includes every declared header, parsed with
``-nostdinc`` and only the include folders the spec names, so every header read comes from a pinned
source and is recorded with its sha256. Error diagnostics are fatal and shown with their location.
"""

from __future__ import annotations

import ctypes
import fnmatch
import hashlib
import keyword
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import clang.cindex as ci

from . import ir
from .docs import clean
from .cexpr import CType, MacroDef
from .errors import ClangError, SourceError, UnsupportedConstruct
from .spec import MacroTableRule, SourcePath, Target

CK = ci.CursorKind
TK = ci.TypeKind

_PRIMS: dict[TK, tuple[str, bool, bool]] = {  # kind → (ctypes name, signed, float)
    TK.BOOL: ("c_bool", False, False),
    TK.CHAR_S: ("c_char", True, False),
    TK.SCHAR: ("c_int8", True, False),
    TK.CHAR_U: ("c_uint8", False, False),
    TK.UCHAR: ("c_uint8", False, False),
    TK.SHORT: ("c_int16", True, False),
    TK.USHORT: ("c_uint16", False, False),
    TK.INT: ("c_int32", True, False),
    TK.UINT: ("c_uint32", False, False),
    TK.LONG: ("c_int64", True, False),
    TK.ULONG: ("c_uint64", False, False),
    TK.LONGLONG: ("c_int64", True, False),
    TK.ULONGLONG: ("c_uint64", False, False),
    TK.FLOAT: ("c_float", True, True),
    TK.DOUBLE: ("c_double", True, True),
    TK.LONGDOUBLE: ("c_longdouble", True, True),
    TK.WCHAR: ("c_int32", True, False),
    TK.CHAR16: ("c_uint16", False, False),
    TK.CHAR32: ("c_uint32", False, False),
}
_INT_NAMES = {
    (1, True): "c_int8",
    (1, False): "c_uint8",
    (2, True): "c_int16",
    (2, False): "c_uint16",
    (4, True): "c_int32",
    (4, False): "c_uint32",
    (8, True): "c_int64",
    (8, False): "c_uint64",
}


@dataclass
class HeaderRecord:
    shown: str  # "source:path"
    sha256: str


@dataclass
class ParseResult:
    module: ir.Module
    macros: list[MacroDef]
    macro_ctx_types: dict[str, CType]
    enum_constants: dict[str, tuple[int, CType]]
    record_names: dict[str, str]
    headers: list[HeaderRecord]
    emit_macro: set[str] = field(default_factory=set)
    tables: list = field(default_factory=list)  # (MacroTableRule, rows)
    files: list[tuple[str, str]] = field(default_factory=list)  # (shown, absolute path) read


class _Paths:
    """Maps absolute paths under resolved source roots back to ``source:relative``."""

    def __init__(self, roots: dict[str, Path]) -> None:
        self.roots = sorted(
            ((str(p.resolve()) + os.sep, n) for n, p in roots.items()), key=lambda x: -len(x[0])
        )

    def show(self, path: str) -> str | None:
        real = os.path.realpath(path)
        for prefix, name in self.roots:
            if real.startswith(prefix):
                return f"{name}:{real[len(prefix) :]}"
        return None


def parse_target(target: Target, roots: dict[str, Path]) -> ParseResult:
    """Parses the target's headers. ``roots`` maps each source name to its resolved folder."""
    paths = _Paths(roots)
    header_files = []

    def at(sp: SourcePath) -> str:  # the spec line that names ``sp``
        return f"{target.spec_shown}:{sp.line or target.line}: target {target.name}"

    for h in target.headers:
        p = roots[h.source] / h.path
        if "*" in h.path:  # a glob: every match, in name order
            matches = sorted(x for x in roots[h.source].glob(h.path) if x.is_file())
            if not matches:
                raise SourceError(f"{at(h)}: header pattern {h} matches no file")
            header_files += matches
            continue
        if not p.is_file():
            raise SourceError(
                f"{at(h)}: declared header {h} does not exist (looked in source {h.source})"
            )
        header_files.append(p)
    args = [
        "-x",
        "c++" if target.language == "c++" else "c",
        "-std=gnu++17" if target.language == "c++" else "-std=gnu11",
        "-nostdinc",
        "-nostdinc++",
        "--target=x86_64-linux-gnu",
        "-fno-ms-extensions",
        "-Wno-pragma-once-outside-header",
        "-fparse-all-comments",  # ordinary comments become docs too (bindgen.docs)
    ]
    for inc in target.include_dirs:
        d = roots[inc.source] / inc.path
        if not d.is_dir():
            raise SourceError(f"{at(inc)}: include folder {inc} does not exist")
        args.append(f"-I{d}")
    for pre in target.preinclude:
        f = roots[pre.source] / pre.path
        if not f.is_file():
            raise SourceError(f"{at(pre)}: preinclude {pre} does not exist")
        args += ["-include", str(f)]
    args += list(target.clang_args)
    main = "".join(f'#include "{p}"\n' for p in header_files)
    index = ci.Index.create()
    main_name = "bindgen_main.h" if target.language == "c" else "bindgen_main.hpp"

    def parse(flags: int) -> ci.TranslationUnit:
        return index.parse(
            main_name,
            args=args,
            unsaved_files=[(main_name, main)],
            options=flags | ci.TranslationUnit.PARSE_SKIP_FUNCTION_BODIES,
        )

    # Declarations come from a parse without the preprocessing record: with it, every macro is a
    # top-level cursor and walking 47,000 of them costs more than parsing twice.
    try:
        tu = parse(0)
    except ci.TranslationUnitLoadError:
        # libclang gives no reason; a bad option (`-std=bogus`) is the usual one.
        raise ClangError(
            f"{target.spec_shown}:{target.line}: target {target.name}: clang refused to parse "
            f"with these arguments: {' '.join(args)}; check the target's clang_args"
        ) from None
    errors = []
    for d in tu.diagnostics:
        if d.severity >= ci.Diagnostic.Error:
            loc = d.location
            where = (
                (paths.show(loc.file.name) or os.path.basename(loc.file.name))
                if loc.file
                else "<command line>"
            )
            msg = d.spelling
            for name, root in roots.items():  # no absolute paths in messages either
                msg = msg.replace(str(root.resolve()) + os.sep, f"{name}:")
            errors.append(f"{where}:{loc.line}:{loc.column}: error: {msg}")
    if errors:
        raise ClangError(
            f"target {target.name}: clang reported {len(errors)} error(s):\n  "
            + "\n  ".join(errors[:50])
        )

    headers: dict[str, HeaderRecord] = {}
    files_in_order: list[tuple[str, str]] = []  # (shown, absolute) in inclusion order
    for p in header_files:
        shown = paths.show(str(p)) or p.name
        headers[shown] = HeaderRecord(shown, _sha(p))
    includes = list(tu.get_includes())
    main_seen = False
    for inc in includes:
        if inc.depth == 1 and not main_seen:
            main_seen = True
        src = inc.include.name
        shown = paths.show(src)
        if shown and all(shown != f[0] for f in files_in_order):
            files_in_order.append((shown, src))
    for p in header_files:
        shown = paths.show(str(p)) or p.name
        if all(shown != f[0] for f in files_in_order):
            files_in_order.append((shown, str(p)))
    for inc in includes:
        f = inc.include.name
        shown = paths.show(f)
        if shown is None:
            raise SourceError(
                f"target {target.name}: {os.path.basename(f)} was read from outside "
                f"every declared source (add its folder as a source)"
            )
        if shown not in headers:
            headers[shown] = HeaderRecord(shown, _sha(Path(f)))
    skipped = (
        _skipped_lines(parse(ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD))
        if target.macros.enabled
        else {}
    )
    macros = (
        _command_line_macros(args) + _scan_macros(files_in_order, skipped)
        if target.macros.enabled
        else []
    )
    tables = [(rule, _scan_table(files_in_order, skipped, rule)) for rule in target.macros.tables]
    result = _Builder(target, tu, paths).build(
        sorted(headers.values(), key=lambda h: h.shown), macros
    )
    result.tables = tables
    result.files = files_in_order
    return result


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


_INLINE_WORDS = {"inline", "__inline", "__inline__"}


def _inline_kind(c: ci.Cursor) -> str:
    """"static inline", "static", "inline" for a function no library can export, else ""."""
    static = c.storage_class == ci.StorageClass.STATIC
    inline = any(t.spelling in _INLINE_WORDS for t in c.get_tokens())
    return " ".join(w for w, on in (("static", static), ("inline", inline)) if on)


def _py_ident(name: str) -> str:
    return name + "_" if keyword.iskeyword(name) or name in ("None", "True", "False") else name


def _unnamed(spelling: str) -> bool:
    return not spelling or "(unnamed" in spelling or "(anonymous" in spelling


class _Builder:
    def __init__(self, target: Target, tu: ci.TranslationUnit, paths: _Paths) -> None:
        self.t, self.tu, self.paths = target, tu, paths
        self.records: dict[str, ir.Record] = {}  # py name → record
        self.record_by_usr: dict[str, str] = {}  # usr → py name
        self.enums: dict[str, ir.Enum] = {}
        self.typedefs: dict[str, ir.Typedef] = {}
        self.functions: dict[str, ir.Function] = {}
        self.vars: dict[str, ir.Var] = {}
        self.skipped: list[ir.Skipped] = []
        self.keep_globs = target.keep_files
        self.keep_names = [re.compile(p) for p in target.keep_names]
        self.exclude = [re.compile(p) for p in target.exclude_names]
        self.file_cache: dict[str, str | None] = {}
        self.kept_cache: dict[str, bool] = {}
        self.wanted: set[str] = set()  # typedef names reached from kept declarations
        self.wanted_records: set[str] = set()
        self.lines_cache: dict[str, list[str]] = {}
        self.typedef_cursors: dict[str, ci.Cursor] = {}
        self.record_cursors: dict[str, ci.Cursor] = {}
        self.enum_cursors: dict[str, ci.Cursor] = {}
        self.tag_names: set[str] = set()

    # -- locations and selection
    def shown(self, c: ci.Cursor) -> str | None:
        f = c.location.file
        if f is None:
            return None
        name = f.name
        if name not in self.file_cache:
            self.file_cache[name] = self.paths.show(name)
        return self.file_cache[name]

    def doc(self, c: ci.Cursor) -> str:
        """The header's comment for ``c``: the one clang attaches, if it is on the declaration's
        own lines or ends on the line just above it (clang also attaches a comment separated by
        blank lines, such as a file's opening comment, which documents no declaration)."""
        raw = c.raw_comment
        if not raw:
            return ""
        f = c.extent.start.file
        if f is None:
            return ""
        lines = self.lines_cache.get(f.name)
        if lines is None:
            try:
                lines = Path(f.name).read_text(errors="replace").split("\n")
            except OSError:
                lines = []
            self.lines_cache[f.name] = lines
        first, last = c.extent.start.line, c.extent.end.line
        own = "\n".join(lines[first - 1 : last])
        above = lines[first - 2].strip() if first >= 2 and first - 2 < len(lines) else ""
        head = raw.strip().split("\n", 1)[0].strip()
        if head in own or above.endswith("*/") or above.startswith("//"):
            return clean(raw)
        return ""

    def loc(self, c: ci.Cursor) -> ir.Location | None:
        s = self.shown(c)
        return ir.Location(s, c.location.line) if s else None

    def kept_file(self, c: ci.Cursor) -> bool:
        s = self.shown(c)
        if s is None:
            return False
        hit = self.kept_cache.get(s)
        if hit is None:
            hit = self.kept_cache[s] = any(fnmatch.fnmatch(s, g) for g in self.keep_globs)
        return hit

    def kept_name(self, name: str) -> bool:
        if any(p.search(name) for p in self.exclude):
            return False
        return not self.keep_names or any(p.search(name) for p in self.keep_names)

    # -- naming
    def record_key(self, c: ci.Cursor) -> str:
        # Sibling anonymous records share a USR (c:@S@t@Ua@Sa): add their position to tell them
        # apart.
        usr = c.get_usr()
        if _unnamed(c.spelling):
            loc = c.location
            usr += f"@{loc.line}:{loc.column}"
        return usr

    def record_name(self, c: ci.Cursor) -> str:
        usr = self.record_key(c)
        if usr in self.record_by_usr:
            return self.record_by_usr[usr]
        spelling = c.spelling
        if _unnamed(spelling):
            parent = c.semantic_parent
            if parent is not None and parent.kind in (CK.STRUCT_DECL, CK.UNION_DECL):
                pname = self.record_name(parent)
                member = ""
                for f in parent.type.get_fields():
                    if self.record_key(f.type.get_canonical().get_declaration()) == usr:
                        member = "" if _unnamed(f.spelling) else f.spelling
                        break
                idx = [
                    self.record_key(ch)
                    for ch in parent.get_children()
                    if ch.kind in (CK.STRUCT_DECL, CK.UNION_DECL)
                ].index(usr)
                name = f"{pname}_{member}" if member else f"{pname}_anon{idx}"
            else:
                name = (
                    f"anon_{os.path.basename(c.location.file.name if c.location.file else 'x')}"
                    f"_{c.location.line}".replace(".", "_").replace("-", "_")
                )
        else:
            name = spelling
        name = _py_ident(name)
        self.record_by_usr[usr] = name
        return name

    # -- types
    def conv(self, t: ci.Type) -> ir.Type:
        k = t.kind
        if k == TK.ELABORATED:
            return self.conv(t.get_named_type())
        if k == TK.TYPEDEF:
            decl = t.get_declaration()
            name = decl.spelling
            if name not in self.typedef_cursors:
                self.typedef_cursors[name] = decl
            self.want_typedef(name, decl)
            return ir.Named(name, "typedef")
        if k in _PRIMS:
            pname, signed, is_float = _PRIMS[k]
            if pname == "c_char":
                pname = "c_char"
            return ir.Prim(pname, t.get_size(), t.get_align(), signed, is_float)
        if k == TK.VOID:
            return ir.Void()
        if k == TK.POINTER:
            return ir.Pointer(self.conv(t.get_pointee()))
        if k == TK.CONSTANTARRAY:
            return ir.Array(self.conv(t.element_type), t.element_count)
        if k == TK.INCOMPLETEARRAY:
            return ir.Array(self.conv(t.element_type), None)
        if k in (TK.FUNCTIONPROTO, TK.FUNCTIONNOPROTO):
            args = tuple(self.conv(a) for a in t.argument_types()) if k == TK.FUNCTIONPROTO else ()
            return ir.FuncType(
                self.conv(t.get_result()), args, k == TK.FUNCTIONPROTO and t.is_function_variadic()
            )
        if k == TK.RECORD:
            decl = t.get_declaration()
            name = self.want_record(decl)
            return ir.Named(name, "record")
        if k == TK.ENUM:
            decl = t.get_declaration()
            name = self.want_enum(decl)
            return ir.Named(name, "enum")
        if k in (TK.INT128, TK.UINT128):
            return ir.Array(ir.Prim("c_uint64", 8, 16), 2)
        raise UnsupportedConstruct(f"type {t.spelling!r} (kind {k.name})")

    # -- declarations
    def want_record(self, c: ci.Cursor) -> str:
        defn = c.get_definition() or c
        name = self.record_name(defn)
        if name in self.records or name in self.wanted_records:
            return name
        self.wanted_records.add(name)
        try:
            self.records[name] = self.make_record(defn, name)
        except UnsupportedConstruct as e:
            # Not emitted, and said so; whoever embeds it is not emitted either (the caller's
            # field conversion fails with this error), so nothing refers to a missing class.
            self.wanted_records.discard(name)
            self.skipped.append(ir.Skipped(name, "record", str(e), self.loc(defn)))
            raise UnsupportedConstruct(f"uses record {name}, which is not emitted") from None
        return name

    def make_record(self, c: ci.Cursor, name: str) -> ir.Record:
        kind = "union" if c.kind == CK.UNION_DECL else "struct"
        c_name = f"{kind} {c.spelling}" if not _unnamed(c.spelling) else ""
        if c.get_usr() in (f"c:@SA@{c.spelling}", f"c:@UA@{c.spelling}"):
            c_name = c.spelling  # typedef struct {...} name: named by its typedef only
        if not c.is_definition():
            return ir.Record(name, kind, None, None, (), loc=self.loc(c), c_name=c_name)
        t = c.type
        size, align = t.get_size(), t.get_align()
        fields: list[ir.Field] = []
        packed = any(ch.kind == CK.PACKED_ATTR for ch in c.get_children())
        for i, f in enumerate(t.get_fields()):
            offset = f.get_field_offsetof()
            anon = _unnamed(f.spelling)
            if anon and f.is_bitfield():
                # An unnamed bitfield is padding C cannot name: the named fields keep clang's
                # offsets without it, and a generated name would be promoted out of an anonymous
                # member over its parent's own members.
                continue
            fname = f"_anon{i}" if anon else _py_ident(f.spelling)
            try:
                ftype = self.conv(f.type)
            except UnsupportedConstruct as e:
                raise UnsupportedConstruct(f"{self.loc(f)}: field {name}.{f.spelling}: {e}")
            width = f.get_bitfield_width() if f.is_bitfield() else None
            fields.append(
                ir.Field(fname, ftype, offset, width, anon, self.doc(f), self.loc(f))
            )
        return ir.Record(
            name, kind, size, align, tuple(fields), packed, self.loc(c), c_name, self.doc(c)
        )

    def by_value_problem(self, t: ir.Type, seen: frozenset[str] = frozenset()) -> str | None:
        """Why a parameter or result of type ``t`` cannot go through libffi by value, or None."""
        while isinstance(t, ir.Named) and t.kind == "typedef" and t.name in self.typedefs:
            t = self.typedefs[t.name].type
        if isinstance(t, ir.Prim) and t.name == "c_longdouble":
            return "long double by value"
        if isinstance(t, ir.Array):
            return self.by_value_problem(t.elem, seen)
        if not (isinstance(t, ir.Named) and t.name in self.records) or t.name in seen:
            return None
        rec = self.records[t.name]
        what = f"{rec.c_name or rec.name} by value"
        if rec.kind == "union":
            return f"{what} (a union: libffi has no union type)"
        if rec.packed:
            return f"{what} (packed)"
        if (rec.align or 0) > 16:
            return f"{what} (aligned to {rec.align})"
        for f in rec.fields:
            ft = f.type
            while isinstance(ft, ir.Named) and ft.kind == "typedef" and ft.name in self.typedefs:
                ft = self.typedefs[ft.name].type
            if isinstance(ft, ir.Prim) and f.bit_width is None and f.bit_offset % (8 * ft.align):
                return f"{what} (member {f.name} off its alignment)"
            inner = self.by_value_problem(ft, seen | {t.name})
            if inner:
                return f"{what} (member {f.name}: {inner})"
        return None

    def want_enum(self, c: ci.Cursor) -> str:
        name = _py_ident(c.spelling) if not _unnamed(c.spelling) else f"anon_enum_{c.location.line}"
        if name not in self.enums:
            ut = c.enum_type.get_canonical()
            pname, signed, _ = _PRIMS.get(ut.kind, ("c_int32", True, False))
            prim = ir.Prim(
                _INT_NAMES[(ut.get_size(), signed)], ut.get_size(), ut.get_align(), signed
            )
            consts = [ch for ch in c.get_children() if ch.kind == CK.ENUM_CONSTANT_DECL]
            self.enums[name] = ir.Enum(
                name,
                prim,
                tuple((ch.spelling, ch.enum_value) for ch in consts),
                self.loc(c),
                f"enum {c.spelling}" if not _unnamed(c.spelling) else "",
                self.doc(c),
                tuple(self.doc(ch) for ch in consts),
            )
        return name

    def want_typedef(self, name: str, c: ci.Cursor) -> None:
        if name in self.typedefs or name in self.wanted:
            return
        self.wanted.add(name)
        ut = c.underlying_typedef_type
        try:
            target = self.conv(ut)
        except UnsupportedConstruct as e:
            self.skipped.append(ir.Skipped(name, "typedef", str(e), self.loc(c)))
            self.wanted.discard(name)
            return
        self.typedefs[name] = ir.Typedef(name, target, self.loc(c), self.doc(c))

    # -- the walk
    def build(self, headers: list[HeaderRecord], macros: list[MacroDef]) -> ParseResult:
        kept_files = {
            f: any(fnmatch.fnmatch(f, g) for g in self.keep_globs)
            for f in {md.loc.file for md in macros if md.loc}
        }
        filtered = bool(self.keep_names or self.exclude)
        emit_macro: set[str] = {
            md.name
            for md in macros
            if md.loc and kept_files[md.loc.file] and (not filtered or self.kept_name(md.name))
        }
        libs = self.t.libraries
        lib_name = libs[0].name if libs else None
        for c in self.tu.cursor.get_children():
            k = c.kind
            if not self.kept_file(c):
                continue
            name = c.spelling
            try:
                if k in (CK.STRUCT_DECL, CK.UNION_DECL):
                    if _unnamed(name) or not self.kept_name(name):
                        continue  # unnamed ones are reached through their typedef or parent
                    self.want_record(c)
                elif k == CK.ENUM_DECL:
                    if _unnamed(name) and c.is_definition():
                        en = self.want_enum(c)
                        if not self.kept_name(en):
                            del self.enums[en]
                    elif self.kept_name(name):
                        self.want_enum(c)
                elif k == CK.TYPEDEF_DECL:
                    if self.kept_name(name):
                        self.want_typedef(name, c)
                elif k == CK.FUNCTION_DECL:
                    if not self.kept_name(name):
                        continue
                    what = _inline_kind(c)
                    if what:
                        # static or inline functions in a header: C code that no library
                        # exports, so there is nothing to bind.
                        self.skipped.append(
                            ir.Skipped(
                                name,
                                "inline function",
                                f"{what} function: its body is C code in the header and no "
                                "library exports it",
                                self.loc(c),
                            )
                        )
                        continue
                    if lib_name is None:
                        self.skipped.append(
                            ir.Skipped(
                                name, "function", "no library declared for this target", self.loc(c)
                            )
                        )
                        continue
                    ft = self.conv(c.type)
                    assert isinstance(ft, ir.FuncType)
                    problem = next(
                        filter(None, (self.by_value_problem(t) for t in (ft.ret, *ft.params))),
                        None,
                    )
                    if problem:
                        self.skipped.append(
                            ir.Skipped(
                                name,
                                "function",
                                f"{problem}: CPython's libffi passes it wrongly (a crash or a "
                                "wrong value), so no callable is emitted; call it through a C "
                                "wrapper that takes a pointer",
                                self.loc(c),
                            )
                        )
                        continue
                    params = tuple(
                        _py_ident(a.spelling) or f"arg{i}" for i, a in enumerate(c.get_arguments())
                    )
                    self.functions[name] = ir.Function(
                        name, ft, params, lib_name, self.loc(c), self.doc(c)
                    )
                elif k == CK.VAR_DECL:
                    if not self.kept_name(name):
                        continue
                    if lib_name is None:
                        self.skipped.append(
                            ir.Skipped(
                                name, "variable", "no library declared for this target", self.loc(c)
                            )
                        )
                        continue
                    self.vars[name] = ir.Var(name, self.conv(c.type), lib_name, self.loc(c))
                elif k == CK.NAMESPACE:
                    self.walk_namespace(c)
            except UnsupportedConstruct as e:
                self.skipped.append(ir.Skipped(name, k.name.lower(), str(e), self.loc(c)))

        # Tag and typedef namespaces are one in Python: a typedef naming its own record is dropped,
        # a record clashing with a different typedef is renamed struct_<name>.
        for name in list(self.typedefs):
            td = self.typedefs[name]
            if isinstance(td.type, ir.Named) and td.type.name == name:
                del self.typedefs[name]
        module = ir.Module(self.t.name)
        module.records = [self.records[n] for n in sorted(self.records)]
        module.enums = [self.enums[n] for n in sorted(self.enums)]
        module.typedefs = [self.typedefs[n] for n in sorted(self.typedefs)]
        module.functions = [self.functions[n] for n in sorted(self.functions)]
        module.variables = [self.vars[n] for n in sorted(self.vars)]
        module.skipped = list(self.skipped)
        module.libraries = [(lib.name, lib.candidates) for lib in libs]

        types, enum_consts, record_names = self.macro_context()
        return ParseResult(module, macros, types, enum_consts, record_names, headers, emit_macro)

    def walk_namespace(self, ns: ci.Cursor) -> None:
        for c in ns.get_children():
            try:
                if c.kind in (CK.STRUCT_DECL, CK.UNION_DECL, CK.CLASS_DECL) and c.is_definition():
                    if not _unnamed(c.spelling) and self.kept_name(c.spelling):
                        self.want_record(c)
                elif c.kind == CK.ENUM_DECL and self.kept_name(c.spelling):
                    self.want_enum(c)
                elif c.kind in (CK.TYPEDEF_DECL, CK.TYPE_ALIAS_DECL) and self.kept_name(c.spelling):
                    self.want_typedef(c.spelling, c)
                elif c.kind == CK.NAMESPACE:
                    self.walk_namespace(c)
            except UnsupportedConstruct as e:
                self.skipped.append(
                    ir.Skipped(c.spelling, c.kind.name.lower(), str(e), self.loc(c))
                )

    def macro_context(
        self,
    ) -> tuple[dict[str, CType], dict[str, tuple[int, CType]], dict[str, str]]:
        """Every type spelling a macro may name (sizeof, casts), from the whole translation unit."""
        types: dict[str, CType] = {}
        for spelling, (size, signed) in {
            "char": (1, True),
            "signed char": (1, True),
            "unsigned char": (1, False),
            "short": (2, True),
            "short int": (2, True),
            "signed short": (2, True),
            "unsigned short": (2, False),
            "unsigned short int": (2, False),
            "int": (4, True),
            "signed": (4, True),
            "signed int": (4, True),
            "unsigned": (4, False),
            "unsigned int": (4, False),
            "long": (8, True),
            "long int": (8, True),
            "signed long": (8, True),
            "unsigned long": (8, False),
            "unsigned long int": (8, False),
            "long long": (8, True),
            "long long int": (8, True),
            "signed long long": (8, True),
            "unsigned long long": (8, False),
            "unsigned long long int": (8, False),
            "_Bool": (1, False),
            "bool": (1, False),
        }.items():
            types[spelling] = CType(size, signed)
        types["float"] = CType(4, True, is_float=True)
        types["double"] = CType(8, True, is_float=True)
        types["void *"] = CType(8, False, is_pointer=True)
        enum_consts: dict[str, tuple[int, CType]] = {}
        record_names: dict[str, str] = {}

        def visit(cursor: ci.Cursor) -> None:
            for c in cursor.get_children():
                k = c.kind
                if k == CK.TYPEDEF_DECL:
                    ct = c.underlying_typedef_type.get_canonical()
                    size = ct.get_size()
                    if size > 0:
                        types[c.spelling] = _ctype(ct)
                        decl = ct.get_declaration()
                        if ct.kind == TK.RECORD:
                            rn = self.record_by_usr.get(
                                self.record_key(decl.get_definition() or decl)
                            )
                            if rn:
                                record_names[c.spelling] = rn
                elif (
                    k in (CK.STRUCT_DECL, CK.UNION_DECL)
                    and c.is_definition()
                    and not _unnamed(c.spelling)
                ):
                    word = "union" if k == CK.UNION_DECL else "struct"
                    size = c.type.get_size()
                    if size >= 0:
                        types[f"{word} {c.spelling}"] = CType(size, False)
                    rn = self.record_by_usr.get(self.record_key(c))
                    if rn:
                        record_names[f"{word} {c.spelling}"] = rn
                elif k == CK.ENUM_DECL:
                    ct = c.enum_type.get_canonical()
                    ctyp = _ctype(ct)
                    if not _unnamed(c.spelling):
                        types[f"enum {c.spelling}"] = ctyp
                    for e in c.get_children():
                        if e.kind == CK.ENUM_CONSTANT_DECL:
                            enum_consts[e.spelling] = (e.enum_value, ctyp)
                elif k == CK.NAMESPACE:
                    visit(c)

        visit(self.tu.cursor)
        return types, enum_consts, record_names


def _ctype(t: ci.Type) -> CType:
    k = t.kind
    if k in _PRIMS:
        _, signed, is_float = _PRIMS[k]
        return CType(t.get_size(), signed, is_float=is_float)
    if k == TK.POINTER:
        return CType(8, False, is_pointer=True)
    if k == TK.ENUM:
        return _ctype(t.get_declaration().enum_type.get_canonical())
    return CType(max(t.get_size(), 0), False)


# ---------------------------------------------------------------- macros
#
# libclang's per-token cursors cost ~80 µs a macro (47,000 macros in the GC register headers);
# instead the headers' text is scanned for #define directives, keeping only those outside the regions the
# preprocessor skipped in this translation unit (clang_getAllSkippedRanges).

_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+((?:[^\n\\]|\\.|\\\n)*)", re.M)
_GUARD = re.compile(r"\s*#[ \t]*(ifndef)[ \t]+(\w+)[ \t]*\n\s*#[ \t]*define[ \t]+\2\b")
_COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'', re.S)


def _strip_comments(text: str) -> str:
    def repl(m: re.Match[str]) -> str:
        t = m.group(0)
        if t.startswith("/*"):
            return " " + "\n" * t.count("\n")  # keep line numbers
        if t.startswith("//"):
            return " "
        return t

    return _COMMENT.sub(repl, text)


# One alternation, no groups, so findall returns the tokens themselves (whitespace never matches;
# a stray character comes out alone through \S and cexpr rejects it).
_FAST_TOKEN = re.compile(
    r"""L?"(?:[^"\\\n]|\\.)*"|L?'(?:[^'\\\n]|\\.)*'|\.?\d(?:[eEpP][+-]|[\w.])*|[A-Za-z_]\w*"""
    r"""|\.\.\.|<<=|>>=|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||\#\#|\S"""
)


def _tokens(text: str) -> list[str]:
    return _FAST_TOKEN.findall(text)


def _scan_macros(
    files: list[tuple[str, str]], skipped: dict[str, list[tuple[int, int]]]
) -> list[MacroDef]:
    out: list[MacroDef] = []
    for shown, path in files:
        try:
            # Bytes that are not UTF-8 survive as surrogates, so a string using them is refused
            # by the literal parser instead of turning silently into U+FFFD.
            text = _strip_comments(Path(path).read_text(errors="surrogateescape"))
        except OSError:
            continue
        ranges = skipped.get(os.path.realpath(path), [])
        guard = _GUARD.match(text)
        if guard and ranges:
            # A second inclusion skips the whole include-guarded body; the first one read it.
            gline = text.count("\n", 0, guard.start(1)) + 1
            ranges = [r for r in ranges if r[0] != gline - 1]
        line, pos = 1, 0
        for m in _DIRECTIVE.finditer(text):
            line += text.count("\n", pos, m.start())
            pos = m.start()
            if ranges and any(a < line < b for a, b in ranges):
                continue
            raw = m.group(1).replace("\\\n", " ")
            nm = re.match(r"([A-Za-z_]\w*)(\()?", raw)
            if not nm:
                continue
            name = nm.group(1)
            params: tuple[str, ...] | None = None
            rest = raw[nm.end(1) :]
            if nm.group(2):  # "(" right after the name: function-like (C11 6.10.3p3)
                close = rest.find(")")
                if close < 0:
                    continue
                params = tuple(p.strip() for p in rest[1:close].split(",") if p.strip())
                rest = rest[close + 1 :]
            out.append(
                MacroDef(name, params, tuple(_tokens(rest.strip())), ir.Location(shown, line))
            )
    return out


def _command_line_macros(args: list[str]) -> list[MacroDef]:
    """``-DNAME``, ``-DNAME=text`` and ``-UNAME`` from the clang arguments, as definitions that
    come before every header's (a header may redefine them; none of them is emitted)."""
    out: list[MacroDef] = []
    it = iter(args)
    for a in it:
        if a in ("-D", "-U"):
            a += next(it, "")
        if a.startswith("-D") and len(a) > 2:
            name, eq, text = a[2:].partition("=")
            nm = re.match(r"([A-Za-z_]\w*)(\(([^)]*)\))?$", name)
            if not nm:
                continue
            params = (
                tuple(p.strip() for p in nm.group(3).split(",") if p.strip())
                if nm.group(2)
                else None
            )
            out.append(MacroDef(nm.group(1), params, tuple(_tokens(text if eq else "1"))))
        elif a.startswith("-U"):
            out = [md for md in out if md.name != a[2:]]
    return out


def _table_value(tokens: list[str]) -> object:
    """One X-macro argument: a number, a string, or an identifier kept as its name."""
    if len(tokens) == 1:
        t = tokens[0]
        if re.fullmatch(r"[A-Za-z_]\w*", t):
            return t
        if re.fullmatch(r"(0[xX][0-9a-fA-F]+|\d+)[uUlL]*", t):
            return int(t.rstrip("uUlL"), 0)
    if tokens and all(t.startswith('"') for t in tokens):
        import ast

        return "".join(ast.literal_eval(t) for t in tokens)
    return " ".join(tokens)


def _scan_table(
    files: list[tuple[str, str]], skipped: dict[str, list[tuple[int, int]]], rule: "MacroTableRule"
) -> list[tuple[object, ...]]:
    """Rows of every top-level ``rule.invocation(...)`` line in the files ``rule.files`` matches."""
    rows: list[tuple[object, ...]] = []
    call = re.compile(rf"^[ \t]*{re.escape(rule.invocation)}[ \t]*\((.*)\)[ \t]*;?[ \t]*$", re.M)
    matched = False
    for shown, path in files:
        if not any(fnmatch.fnmatch(shown, g) for g in rule.files):
            continue
        matched = True
        text = _strip_comments(Path(path).read_text(errors="surrogateescape"))
        ranges = skipped.get(os.path.realpath(path), [])
        for m in call.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            if any(a < line < b for a, b in ranges):
                continue
            args: list[list[str]] = [[]]
            depth = 0
            for tok in _tokens(m.group(1)):
                if tok == "," and depth == 0:
                    args.append([])
                    continue
                depth += tok in "([{"
                depth -= tok in ")]}"
                args[-1].append(tok)
            rows.append(tuple(_table_value(a) for a in args))
    if not matched:
        raise SourceError(f"macro table {rule.name}: no header read matches {list(rule.files)}")
    return rows


class _RangeList(ctypes.Structure):
    _fields_ = [("count", ctypes.c_uint), ("ranges", ctypes.POINTER(ci.SourceRange))]


def _skipped_lines(tu: ci.TranslationUnit) -> dict[str, list[tuple[int, int]]]:
    """Preprocessor-skipped line ranges per file (real path): #if branches not taken."""
    lib = ci.conf.lib
    fn = lib.clang_getAllSkippedRanges
    fn.restype = ctypes.POINTER(_RangeList)
    fn.argtypes = [ci.TranslationUnit]
    lst = fn(tu)
    out: dict[str, list[tuple[int, int]]] = {}
    real: dict[str, str] = {}  # realpath costs a few lstat calls; thousands of ranges share files
    try:
        for i in range(lst.contents.count):
            r = lst.contents.ranges[i]
            start = r.start
            f = start.file
            if f is not None:
                name = f.name
                key = real.get(name) or real.setdefault(name, os.path.realpath(name))
                out.setdefault(key, []).append((start.line - 1, r.end.line + 1))
    finally:
        lib.clang_disposeSourceRangeList.argtypes = [ctypes.POINTER(_RangeList)]
        lib.clang_disposeSourceRangeList(lst)
    return out
