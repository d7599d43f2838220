"""libclang → IR: the declaration index (``bindgen.decls``), macros, and the headers read.

Parsing only converts. It reads of the spec what to parse (headers, include folders, clang
arguments, the macro tables to scan); which declarations a target keeps is the ``select`` pass's
decision, and what they are called in Python the ``naming`` pass's (``bindgen.passes``). One
translation unit per target: a synthetic main file includes every declared header, parsed with
``-nostdinc`` and only the include folders the spec names, so every header read comes from a pinned
source and is recorded with its sha256. Error diagnostics are fatal and shown with their location.
"""

from __future__ import annotations

import ctypes
import fnmatch
import functools
import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import clang.cindex as ci

from . import ir
from .cexpr import CType, MacroDef
from .decls import Converted, Decl, Declarations, Node
from .docs import clean
from .errors import ClangError, SourceError, UnsupportedConstruct
from .spec import MacroTableRule, SourcePath, Target
from .static_values import static_value

CK = ci.CursorKind
TK = ci.TypeKind

_PRIMS: dict[ci.TypeKind, tuple[str, bool, bool]] = {  # kind → (ctypes name, signed, float)
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
    """What the passes read: the declaration index, the macros and what they may name, the
    headers read, and the rows of the spec's macro tables."""

    decls: Declarations  # the declarations, converted to IR on demand (bindgen.decls)
    macros: list[MacroDef]
    macro_ctx_types: dict[str, CType]
    enum_constants: dict[str, tuple[int, CType]]
    record_keys: dict[str, str]  # "struct foo" or a typedef naming a record → the record's key
    headers: list[HeaderRecord]
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


# The source name under which headers from clang's builtin folder are recorded.
BUILTIN_SOURCE = "clang-builtin"
_RESOURCE_ENV = "BINDGEN_CLANG_RESOURCE_DIR"


@functools.lru_cache(maxsize=1)
def clang_builtin_headers() -> Path | None:
    """The folder of clang's own builtin headers (stddef.h, stdarg.h, stdatomic.h, the intrinsics
    headers): ``$BINDGEN_CLANG_RESOURCE_DIR/include`` if set; else the resource folder of the
    libclang in use (``<its lib folder>/clang/<version>/include``, present in a full LLVM
    install); else that of the first of clang-18, clang-17, clang-16 and clang on PATH (beside
    its binary, or ``-print-resource-dir``), since the libclang wheel ships none. Always the same order, so
    the same machine always picks the same folder; the headers read from it are recorded with
    their sha256 like any other (as ``clang-builtin:NAME``)."""
    env = os.environ.get(_RESOURCE_ENV)
    if env:
        return Path(env) / "include" if (Path(env) / "include").is_dir() else None
    try:
        lib = Path(ci.conf.lib._name).resolve()  # type: ignore[attr-defined]
        for inc in sorted(lib.parent.glob("clang/*/include"), reverse=True):
            if (inc / "stddef.h").is_file():
                return inc
    except (AttributeError, OSError, TypeError):
        pass
    for exe in ("clang-18", "clang-17", "clang-16", "clang"):
        path = shutil.which(exe)
        if path is None:
            continue
        # An LLVM install keeps them at PREFIX/lib/clang/VERSION/include beside PREFIX/bin: read
        # that first (starting a clang process to ask is slow).
        prefix = Path(path).resolve().parent.parent
        found = sorted(prefix.glob("lib/clang/*/include/stddef.h"))
        if len(found) == 1:
            return found[0].parent
        try:
            out = subprocess.run([path, "-print-resource-dir"], capture_output=True, text=True,
                                 timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out and (Path(out) / "include" / "stddef.h").is_file():
            return Path(out) / "include"
    return None


def parse_target(target: Target, roots: dict[str, Path]) -> ParseResult:
    """Parses the target's headers. ``roots`` maps each source name to its resolved folder."""
    builtin = clang_builtin_headers()
    if builtin is not None and BUILTIN_SOURCE not in roots:
        roots = {**roots, BUILTIN_SOURCE: builtin}
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
    if builtin is not None and roots.get(BUILTIN_SOURCE) == builtin:
        # clang's builtin headers, searched after every folder the spec names (as a compiler
        # searches its own after -I): -nostdinc above dropped them with the system folders.
        args += ["-isystem", str(builtin)]
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
    shown: str | None
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
    conv = _Converter(tu, paths, target.language == "c")
    types, enum_consts, record_keys = conv.macro_context()
    return ParseResult(
        conv.declarations(),
        macros,
        types,
        enum_consts,
        record_keys,
        sorted(headers.values(), key=lambda h: h.shown),
        tables,
        files_in_order,
    )


def _raw_comment_bytes(c: ci.Cursor) -> bytes:
    """The comment clang attaches to ``c``, as the bytes it spans in its file (the Python
    binding decodes it as strict UTF-8)."""
    fn = ci.conf.lib.clang_Cursor_getCommentRange
    fn.argtypes, fn.restype = [ci.Cursor], ci.SourceRange
    rng = fn(c)
    if rng.start.file is None:
        return b""
    try:
        with open(rng.start.file.name, "rb") as f:
            f.seek(rng.start.offset)
            return f.read(max(rng.end.offset - rng.start.offset, 0))
    except OSError:
        return b""


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _function_type(t: ci.Type) -> ci.Type:
    """``t`` without typedefs and elaboration down to its function type (where it is one)."""
    seen = 0
    while seen < 64:
        seen += 1
        try:
            k = t.kind
        except ValueError:
            return t
        if k == TK.ELABORATED:
            t = t.get_named_type()
        elif k == TK.TYPEDEF:
            t = t.get_declaration().underlying_typedef_type
        else:
            break
    return t


class _EvalKind:  # CXEvalResultKind
    INT, FLOAT, STR = 1, 2, 4


def _evaluate(c: ci.Cursor) -> object:
    """The value of a variable's initializer as clang evaluates it (clang_Cursor_Evaluate): an
    int (in the variable's own type's range: clang converts), a float, bytes (a string literal),
    or None where it is not a constant."""
    lib = ci.conf.lib
    if not hasattr(lib, "clang_Cursor_Evaluate"):
        return None
    ev = lib.clang_Cursor_Evaluate
    ev.argtypes, ev.restype = [ci.Cursor], ctypes.c_void_p
    res = ev(c)
    if not res:
        return None
    try:
        kind_of = lib.clang_EvalResult_getKind
        kind_of.argtypes, kind_of.restype = [ctypes.c_void_p], ctypes.c_int
        kind = kind_of(res)
        if kind == _EvalKind.INT:
            unsigned = lib.clang_EvalResult_isUnsignedInt
            unsigned.argtypes, unsigned.restype = [ctypes.c_void_p], ctypes.c_uint
            if unsigned(res):
                get = lib.clang_EvalResult_getAsUnsigned
                get.argtypes, get.restype = [ctypes.c_void_p], ctypes.c_ulonglong
            else:
                get = lib.clang_EvalResult_getAsLongLong
                get.argtypes, get.restype = [ctypes.c_void_p], ctypes.c_longlong
            return int(get(res))
        if kind == _EvalKind.FLOAT:
            getd = lib.clang_EvalResult_getAsDouble
            getd.argtypes, getd.restype = [ctypes.c_void_p], ctypes.c_double
            return float(getd(res))
        if kind == _EvalKind.STR:
            gets = lib.clang_EvalResult_getAsStr
            gets.argtypes, gets.restype = [ctypes.c_void_p], ctypes.c_char_p
            raw = gets(res)
            return None if raw is None else bytes(raw)
        return None
    finally:
        dispose = lib.clang_EvalResult_dispose
        dispose.argtypes, dispose.restype = [ctypes.c_void_p], None
        dispose(res)


def _const(t: ci.Type) -> bool:
    """Whether ``t`` is const, written on it or inside its typedef (``typedef const T ct``)."""
    return t.is_const_qualified() or t.get_canonical().is_const_qualified()


_INLINE_WORDS = {"inline", "__inline", "__inline__"}


def _inline_kind(c: ci.Cursor) -> str:
    """"static inline", "static", "inline" for a function no library can export, else ""."""
    static = c.storage_class == ci.StorageClass.STATIC
    inline = any(t.spelling in _INLINE_WORDS for t in c.get_tokens())
    return " ".join(w for w, on in (("static", static), ("inline", inline)) if on)


def _unnamed(spelling: str) -> bool:
    return not spelling or "(unnamed" in spelling or "(anonymous" in spelling


_KINDS = {
    CK.STRUCT_DECL: "record",
    CK.UNION_DECL: "record",
    CK.CLASS_DECL: "record",
    CK.ENUM_DECL: "enum",
    CK.TYPEDEF_DECL: "typedef",
    CK.TYPE_ALIAS_DECL: "typedef",
    CK.FUNCTION_DECL: "function",
    CK.VAR_DECL: "variable",
}
_RECORD_KINDS = (CK.STRUCT_DECL, CK.UNION_DECL)


class _Converter:
    """Indexes the translation unit's declarations and converts one to IR when asked.

    Names in the IR it makes are declaration keys (``bindgen.decls``): which declarations a target
    keeps and what they are called in Python is for the passes (``select``, ``naming``).
    """

    def __init__(self, tu: ci.TranslationUnit, paths: _Paths, c_language: bool = True) -> None:
        self.tu, self.paths = tu, paths
        self.c_language = c_language
        self.cursors: dict[str, ci.Cursor] = {}  # key → the cursor its conversion reads
        self.file_cache: dict[str, tuple[str | None, str]] = {}
        self.lines_cache: dict[str, list[str]] = {}
        self.top: list[Decl] = []  # file- and namespace-scope declarations, in the unit's order
        self.info: dict[str, Decl] = {}  # key → facts (a redeclaration's: the first's)
        self.index(tu.cursor, False)

    def declarations(self) -> Declarations:
        # The index refers to this converter, never the other way: no reference cycle keeps a
        # translation unit alive after its target is generated.
        return Declarations(self.top, self.info, self.convert)

    def index(self, scope: ci.Cursor, namespace: bool) -> None:
        for c in scope.get_children():
            kind = _KINDS.get(c.kind)
            if kind is not None:
                # The index lists each cursor where it is (selection reads its file); the facts of
                # its key are those of the cursor converted.
                key, conv = self.identity(c, kind)
                here = self.fact(c, kind, key, namespace)
                if key not in self.cursors:
                    self.cursors[key] = conv
                    self.info[key] = here if conv is c else self.fact(conv, kind, key, namespace)
                self.top.append(here)
                if kind == "record" and not namespace and self.c_language:
                    # A struct, union or enum declared inside a record has file scope in C.
                    self.index_nested(c)
            elif c.kind == CK.NAMESPACE:
                self.index(c, True)

    def index_nested(self, rec: ci.Cursor) -> None:
        for c in rec.get_children():
            if c.kind in _RECORD_KINDS or c.kind == CK.ENUM_DECL:
                kind = _KINDS[c.kind]
                if not _unnamed(c.spelling):
                    key, conv = self.identity(c, kind)
                    if key not in self.cursors:
                        self.cursors[key] = conv
                        self.info[key] = self.fact(conv, kind, key)
                        self.top.append(self.info[key])
                self.index_nested(c)

    # -- facts
    def shown(self, c: ci.Cursor) -> str | None:
        f = c.location.file
        return None if f is None else self.show(f.name)[0]

    def show(self, path: str) -> tuple[str | None, str]:
        """(``source:path`` or None, the base name) of a file clang read."""
        hit = self.file_cache.get(path)
        if hit is None:
            hit = self.file_cache[path] = (self.paths.show(path), os.path.basename(path))
        return hit

    def loc(self, c: ci.Cursor) -> ir.Location | None:
        s = self.shown(c)
        return ir.Location(s, c.location.line) if s else None

    def doc(self, c: ci.Cursor) -> str:
        """The header's comment for ``c``: the one clang attaches, if it is on the declaration's
        own lines or ends on the line just above it (clang also attaches a comment separated by
        blank lines, such as a file's opening comment, which documents no declaration)."""
        try:
            raw = c.raw_comment
        except UnicodeDecodeError:  # a byte that is not UTF-8 in the comment (a Latin-1 name)
            raw = _raw_comment_bytes(c).decode("utf-8", "replace")
        if not raw:
            return ""
        f = c.extent.start.file
        if f is None:
            return ""
        lines = self.source_lines(f.name)
        first, last = c.extent.start.line, c.extent.end.line
        own = "\n".join(lines[first - 1 : last])
        above = lines[first - 2].strip() if first >= 2 and first - 2 < len(lines) else ""
        head = raw.strip().split("\n", 1)[0].strip()
        if head in own or above.endswith("*/") or above.startswith("//"):
            return clean(raw)
        return ""

    def source_lines(self, path: str) -> list[str]:
        """The lines of a file clang read (empty if it cannot be read now), read once."""
        lines = self.lines_cache.get(path)
        if lines is None:
            try:
                lines = Path(path).read_text(errors="replace").split("\n")
            except OSError:
                lines = []
            self.lines_cache[path] = lines
        return lines

    @staticmethod
    def record_key(c: ci.Cursor) -> str:
        # Sibling anonymous records share a USR (c:@S@t@Ua@Sa): add their position to tell them
        # apart.
        usr = c.get_usr()
        if _unnamed(c.spelling):
            loc = c.location
            usr += f"@{loc.line}:{loc.column}"
        return usr

    def identity(self, c: ci.Cursor, kind: str) -> tuple[str, ci.Cursor]:
        """The key of ``c`` and the cursor that converts it (a record's or an enum's definition,
        where there is one)."""
        if kind in ("record", "enum") and not c.is_definition():
            c = c.get_definition() or c
        if kind == "record":
            return self.record_key(c), c
        return c.get_usr() or f"{kind}:{c.spelling}@{c.location.line}:{c.location.column}", c

    def key(self, c: ci.Cursor, kind: str) -> str:
        """The key of a declaration met in a type or as a record's parent; the first time, it is
        registered with its facts if the index walk did not list it (a record nested in one)."""
        key, conv = self.identity(c, kind)
        if key not in self.cursors:
            self.cursors[key] = conv
            if key not in self.info:
                self.info[key] = self.fact(conv, kind, key)
        return key

    def fact(self, c: ci.Cursor, kind: str, key: str, namespace: bool = False) -> Decl:
        """What selection and naming need to know of ``c`` (``bindgen.decls.Decl``)."""
        loc = c.location
        f = loc.file
        path = f.name if f is not None else None
        spelling = c.spelling
        spelling = "" if _unnamed(spelling) else spelling
        parent, member, nested = "", "", 0
        if kind == "record" and not spelling:
            p = c.semantic_parent
            if p is not None and p.kind in _RECORD_KINDS:
                parent = self.key(p, "record")
                for f in p.type.get_fields():
                    if self.record_key(f.type.get_canonical().get_declaration()) == key:
                        member = "" if _unnamed(f.spelling) else f.spelling
                        break
                nested = [
                    self.record_key(ch) for ch in p.get_children() if ch.kind in _RECORD_KINDS
                ].index(key)
        shown, base = self.show(path) if path is not None else (None, "x")
        line = loc.line
        return Decl(
            key,
            kind,
            spelling,
            ir.Location(shown, line) if shown else None,
            line,
            base,
            namespace,
            _inline_kind(c) if kind == "function" else "",
            kind == "variable" and c.storage_class == ci.StorageClass.STATIC,
            parent,
            member,
            nested,
        )

    # -- conversion
    def convert(self, key: str) -> Converted:
        c = self.cursors[key]
        kind = self.info[key].kind
        uses: dict[str, None] = {}  # the keys it refers to, in order
        positions: tuple[int, ...] = ()
        node: Node
        try:
            if kind == "record":
                node, positions = self.record(key, c, uses)
            elif kind == "enum":
                node = self.enum(key, c)
            elif kind == "typedef":
                node = ir.Typedef(
                    key, self.conv(c.underlying_typedef_type, uses), self.loc(c), self.doc(c)
                )
            elif kind == "function":
                # A function declared through a function typedef (`typedef int F(int); F g;`)
                # has the typedef as its type: its signature is the typedef's.
                ft = self.conv(_function_type(c.type), uses)
                assert isinstance(ft, ir.FuncType)
                params = tuple(a.spelling for a in c.get_arguments())
                if len(params) != len(ft.params):
                    params = tuple("" for _ in ft.params)
                inline = self.info[key].inline
                sig = self.c_signature(c, inline) if inline else ("", (), "")
                node = ir.Function(
                    key, ft, params, None, self.loc(c), self.doc(c), c_signature=sig
                )
            elif self.info[key].static:
                node = self.static_variable(key, c, uses)
            else:
                node = ir.Var(key, self.conv(c.type, uses), None, self.loc(c))
        except UnsupportedConstruct as e:
            return Converted(None, tuple(uses), str(e))
        return Converted(node, tuple(uses), "", positions)

    def conv(self, t: ci.Type, uses: dict[str, None]) -> ir.Type:
        try:
            k = t.kind
        except ValueError:  # a type kind newer than these Python bindings (_Float16 in some)
            raise UnsupportedConstruct(
                f"type {t.spelling!r}: no ctypes type matches it (its kind is newer than "
                "the libclang Python bindings)"
            ) from None
        if k == TK.ELABORATED:
            return self.conv(t.get_named_type(), uses)
        if k == TK.TYPEDEF:
            return self.ref(t.get_declaration(), "typedef", uses)
        if k in _PRIMS:
            pname, signed, is_float = _PRIMS[k]
            return _prim(pname, t.get_size(), t.get_align(), signed, is_float)
        if k == TK.VOID:
            return ir.Void()
        if k == TK.POINTER:
            pointee = t.get_pointee()
            return ir.Pointer(self.conv(pointee, uses), _const(pointee))
        if k == TK.CONSTANTARRAY:
            return ir.Array(self.conv(t.element_type, uses), t.element_count)
        if k == TK.INCOMPLETEARRAY:
            return ir.Array(self.conv(t.element_type, uses), None)
        if k in (TK.FUNCTIONPROTO, TK.FUNCTIONNOPROTO):
            args = (
                tuple(self.param(a, uses) for a in t.argument_types())
                if k == TK.FUNCTIONPROTO
                else ()
            )
            return ir.FuncType(
                self.conv(t.get_result(), uses),
                args,
                k == TK.FUNCTIONPROTO and t.is_function_variadic(),
            )
        if k == TK.RECORD:
            return self.ref(t.get_declaration(), "record", uses)
        if k == TK.ENUM:
            return self.ref(t.get_declaration(), "enum", uses)
        if k in (TK.INT128, TK.UINT128):  # ctypes has none: bindgen_rt's, read as an int
            signed = k == TK.INT128
            return ir.Prim("_rt.c_int128" if signed else "_rt.c_uint128", 16, 16, signed)
        raise UnsupportedConstruct(f"type {t.spelling!r} (kind {k.name})")

    def param(self, t: ci.Type, uses: dict[str, None]) -> ir.Type:
        """A parameter's type as C adjusts it (C11 6.7.6.3p7-8): an array of T is a pointer to
        T (``int a[]``, ``int a[4]``, ``int m[][3]``, ``int *ps[]``, an array typedef), a
        function is a pointer to it. Sizes written in brackets bind nothing: any pointer will do."""
        bare = t
        while True:
            try:
                k = bare.kind
            except ValueError:
                return self.conv(t, uses)
            if k == TK.ELABORATED:
                bare = bare.get_named_type()
            elif k == TK.TYPEDEF:
                bare = bare.get_declaration().underlying_typedef_type
            else:
                break
        if k in (TK.CONSTANTARRAY, TK.INCOMPLETEARRAY, TK.VARIABLEARRAY, TK.DEPENDENTSIZEDARRAY):
            elem = bare.element_type
            return ir.Pointer(self.conv(elem, uses), _const(elem))
        if k in (TK.FUNCTIONPROTO, TK.FUNCTIONNOPROTO):
            return ir.Pointer(self.conv(t, uses))
        return self.conv(t, uses)

    def c_signature(self, c: ci.Cursor, inline: str) -> tuple[str, tuple[str, ...], str]:
        """(return type, parameter types, inline kind) of an inline function as C spells them,
        for its exported wrapper (``bindgen.wrappers``); why it cannot be wrapped otherwise."""
        if not self.has_body(c):
            raise UnsupportedConstruct(
                f"{inline} function declared but not defined in the header: nothing to wrap"
            )
        if c.type.kind == TK.FUNCTIONPROTO and c.type.is_function_variadic():
            raise UnsupportedConstruct(
                f"variadic {inline} function: a wrapper cannot pass its arguments on"
            )
        ret = c.result_type.spelling
        params = tuple(a.type.spelling for a in c.get_arguments())
        for s in (ret, *params):
            if "(" in s or "[" in s:
                raise UnsupportedConstruct(
                    f"{inline} function with the type {s!r}, which a wrapper's declaration "
                    "cannot spell"
                )
        return ret, params, inline

    def has_body(self, c: ci.Cursor) -> bool:
        """Whether a function's declaration is followed by its body (clang skips bodies, so
        its extent ends at the parameter list): the next character that is not a space is
        ``{``."""
        end = c.extent.end
        f = end.file
        if f is None:
            return False
        lines = self.source_lines(f.name)
        rest = lines[end.line - 1][end.column - 1 :] if end.line - 1 < len(lines) else ""
        for line in [rest, *lines[end.line : end.line + 20]]:
            text = line.strip()
            if text:
                return text.startswith("{")
        return False

    def static_variable(self, key: str, c: ci.Cursor, uses: dict[str, None]) -> ir.Var:
        """A ``static const`` variable: no library exports it, and its value is known when
        the header is compiled, so it is bound as a constant of the value clang computes."""
        where = self.loc(c)
        t = c.type
        while t.kind in (TK.CONSTANTARRAY, TK.INCOMPLETEARRAY):  # an array's constness: its element's
            t = t.element_type
        if not t.is_const_qualified() and not t.get_canonical().is_const_qualified():
            raise UnsupportedConstruct(
                "static variable that is not const: each C file that includes the header has "
                "its own copy, which no library exports"
            )
        value = _evaluate(c)
        if value is None and c.type.get_canonical().kind in (TK.RECORD, TK.CONSTANTARRAY):
            value = static_value(c, _evaluate, _unnamed)
        if value is None:
            raise UnsupportedConstruct(
                "static const variable whose initializer clang cannot evaluate to a number or "
                "a string"
            )
        return ir.Var(key, self.conv(c.type, uses), None, where, value=value,
                      c_type=f"static {c.type.spelling}", doc=self.doc(c))

    def ref(self, decl: ci.Cursor, kind: str, uses: dict[str, None]) -> ir.Named:
        key = self.key(decl, kind)
        uses[key] = None
        return ir.Named(key, kind)

    def record(
        self, key: str, c: ci.Cursor, uses: dict[str, None]
    ) -> tuple[ir.Record, tuple[int, ...]]:
        kind = "union" if c.kind == CK.UNION_DECL else "struct"
        named = not _unnamed(c.spelling)
        c_name = f"{kind} {c.spelling}" if named else ""
        if key in (f"c:@SA@{c.spelling}", f"c:@UA@{c.spelling}"):
            c_name = c.spelling  # typedef struct {...} name: named by its typedef only
        if not c.is_definition():
            return ir.Record(key, kind, None, None, (), loc=self.loc(c), c_name=c_name), ()
        t = c.type
        label = c.spelling if named else f"<anonymous {kind}>"
        fields: list[ir.Field] = []
        positions: list[int] = []
        packed = any(ch.kind == CK.PACKED_ATTR for ch in c.get_children())
        for i, f in enumerate(t.get_fields()):
            spelling = f.spelling
            anon = _unnamed(spelling)
            if anon and f.is_bitfield():
                # An unnamed bitfield is padding C cannot name: the named fields keep clang's
                # offsets without it, and a generated name would be promoted out of an anonymous
                # member over its parent's own members.
                continue
            floc = self.loc(f)
            try:
                ftype = self.conv(f.type, uses)
            except UnsupportedConstruct as e:
                raise UnsupportedConstruct(f"{floc}: field {label}.{spelling}: {e}") from None
            width = f.get_bitfield_width() if f.is_bitfield() else None
            fields.append(
                ir.Field(
                    "" if anon else spelling,
                    ftype,
                    f.get_field_offsetof(),
                    width,
                    anon,
                    self.doc(f),
                    floc,
                )
            )
            positions.append(i)
        rec = ir.Record(
            key,
            kind,
            t.get_size(),
            t.get_align(),
            tuple(fields),
            packed,
            self.loc(c),
            c_name,
            self.doc(c),
        )
        return rec, tuple(positions)

    def enum(self, key: str, c: ci.Cursor) -> ir.Enum:
        ut = c.enum_type.get_canonical()
        _, signed, _ = _PRIMS.get(ut.kind, ("c_int32", True, False))
        if ut.get_size() < 0:
            # Declared, never defined (`enum E;`, a GNU extension): an incomplete type that only
            # pointers use. It is given unsigned int, the type gcc completes such an enum with
            # when its values are not negative.
            prim = ir.Prim("c_uint32", 4, 4, False)
        else:
            prim = ir.Prim(
                _INT_NAMES[(ut.get_size(), signed)], ut.get_size(), ut.get_align(), signed
            )
        consts = [ch for ch in c.get_children() if ch.kind == CK.ENUM_CONSTANT_DECL]
        return ir.Enum(
            key,
            prim,
            tuple((ch.spelling, ch.enum_value) for ch in consts),
            self.loc(c),
            f"enum {c.spelling}" if not _unnamed(c.spelling) else "",
            self.doc(c),
            tuple(self.doc(ch) for ch in consts),
        )

    def macro_context(
        self,
    ) -> tuple[dict[str, CType], dict[str, tuple[int, CType]], dict[str, str]]:
        """Every type spelling a macro may name (sizeof, casts), from the whole translation unit:
        C types by spelling, enumerators, and the key of the record each record spelling
        (``struct foo``, a typedef naming a record) stands for."""
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
        record_keys: dict[str, str] = {}

        # An explicit stack, not a recursive closure: a closure that calls itself is a reference
        # cycle, which would keep this converter (its translation unit and every cursor) alive
        # until the cyclic collector runs, and generation pauses that collector.
        # Namespaces are read where they appear (a later spelling replaces an earlier one).
        scopes = [iter(self.tu.cursor.get_children())]
        while scopes:
            for c in scopes[-1]:
                k = c.kind
                if k == CK.TYPEDEF_DECL:
                    ct = c.underlying_typedef_type.get_canonical()
                    size = ct.get_size()
                    if size > 0:
                        types[c.spelling] = _ctype(ct)
                        decl = ct.get_declaration()
                        if ct.kind == TK.RECORD:
                            record_keys[c.spelling] = self.key(decl, "record")
                elif (
                    k in (CK.STRUCT_DECL, CK.UNION_DECL)
                    and c.is_definition()
                    and not _unnamed(c.spelling)
                ):
                    word = "union" if k == CK.UNION_DECL else "struct"
                    size = c.type.get_size()
                    if size >= 0:
                        types[f"{word} {c.spelling}"] = CType(size, False)
                    record_keys[f"{word} {c.spelling}"] = self.key(c, "record")
                elif k == CK.ENUM_DECL:
                    ct = c.enum_type.get_canonical()
                    ctyp = _ctype(ct)
                    if not _unnamed(c.spelling):
                        types[f"enum {c.spelling}"] = ctyp
                    for e in c.get_children():
                        if e.kind == CK.ENUM_CONSTANT_DECL:
                            enum_consts[e.spelling] = (e.enum_value, ctyp)
                elif k == CK.NAMESPACE:
                    scopes.append(iter(c.get_children()))
                    break
            else:
                scopes.pop()
        return types, enum_consts, record_keys


@functools.lru_cache(maxsize=None)
def _prim(name: str, size: int, align: int, signed: bool, is_float: bool) -> ir.Prim:
    """One shared node per builtin type: a header of many fields names few of them."""
    return ir.Prim(name, size, align, signed, is_float)


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
# libclang's per-token cursors are slow for headers of tens of thousands of macros (the GC
# register headers): instead the headers' text is scanned for #define directives, keeping only those
# outside the regions the preprocessor skipped in this translation unit
# (clang_getAllSkippedRanges).

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
