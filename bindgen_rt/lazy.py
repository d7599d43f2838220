"""Large generated modules, materialised one definition at a time.

A lazy target is two files: the module people import (``rm_580.py``, a few lines) and its
definitions module beside it (``_rm_580.py``), plain readable Python that also runs as a whole.
The definitions module ends with an index (``#@ NAME LINE OFFSET LENGTH`` comment lines, offsets
in bytes) that says where each definition's statement is, and where each record's layout is. On first use of a name,
:class:`LazyModule` compiles that statement with the definitions module's real file name and
line numbers, so tracebacks, ``inspect.getsource`` and debuggers show the real source, and runs it
in the namespace of the definitions module (registered in ``sys.modules`` under its own name, so
records pickle and ``inspect`` finds them). Importing the small module reads nothing; the first
name reads the file once. Type checkers and IDEs never run this: the small module re-exports the
definitions module under ``TYPE_CHECKING``.

Materialising a name first materialises what it refers to, with an explicit stack (a chain of
ten thousand records, each embedding the next, does not recurse). A record is declared (its
``class`` statement) before anything it refers to is touched and laid out after, so records that
point at each other resolve in any order. What a statement refers to only through a pointer made
on first use (``_rt.ptr(NAME)``: a record's pointer field, a function's record pointer; the
index's last section lists them) is not made first: the statement gets a
:class:`bindgen_rt.records.Later` for it, made when the pointer is first used, so using one record
of a chain of records makes that record only. :meth:`LazyModule.materialize_all` imports the
definitions module as a whole (from its bytecode cache) when nothing was materialised yet; where
there is no bytecode and none may be written, it runs the file in parts of whole statements,
so memory is bounded by a part rather than the whole file's syntax tree.
"""

import os
import sys

# typing costs more to import than this whole module: its names are for checkers only
TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import CodeType
    from typing import Any, Iterator

# Statements compile as the file runs as a whole: without ``from __future__ import annotations``
# (importing ``__future__`` costs a fresh interpreter more than a small module's body), so
# generated annotations that name records or typing-only names are strings.
_COMPILE_FLAGS = 0
INDEX_MARK = "\n# bindgen-index: "
LAYOUTS_MARK = "\n# bindgen-index layouts\n"
# After the layouts: "#@ NAME REF..." where NAME's statement (a record's layout, a function)
# refers to each REF only through a pointer made on first use (``_rt.ptr(REF)``). Making NAME
# leaves those to be made when the pointer is first used.
POINTERS_MARK = "\n# bindgen-index pointers\n"


class LazyModule:
    """The loader behind one lazy generated module (``stub_globals``: that module's globals,
    ``defs``: the definitions module's name relative to its package, e.g. ``"_rm_580"``)."""

    # Lookups before the full index pays off scan the index text (str.find, C speed); a module
    # used for more than a few names builds a dict.
    _SCANS_BEFORE_INDEX = 32

    def __init__(
        self, stub_globals: "dict[str, Any]", defs: str, fingerprint: "str | None" = None
    ) -> None:
        self.stub = stub_globals
        # The stub and its definitions are written as a set; one from another run (a regen
        # killed between two renames, a partial copy) must not serve stale definitions.
        self.fingerprint = fingerprint
        package = stub_globals["__name__"].rpartition(".")[0]
        self.name = f"{package}.{defs}" if package else defs
        self.package = package
        source = stub_globals.get("__bindgen_source__")  # set by the generator's verification
        self.in_memory = source is not None
        self.file = (
            f"<bindgen:{self.name}>"
            if source is not None
            else os.path.join(os.path.dirname(stub_globals["__file__"]), defs + ".py")
        )
        # The file stays bytes: decoding megabytes costs more than searching them; only the
        # statements that are compiled are read as source.
        self._text: bytes | None = source.encode() if source is not None else None
        self._g: dict[str, Any] | None = None
        self._header_done = False
        self._index_at = -1
        self._layouts_at = -1
        self._layouts_end = -1
        self._pointers: dict[bytes, list[str]] | None = None
        self._tokens: list[bytes] | None = None
        self._layout_tokens: list[bytes] | None = None
        self._where: dict[bytes, int] | None = None
        self._layout_where: dict[bytes, int] | None = None
        self._scans = 0
        self._absent: set[str] = set()

    # ------------------------------------------------------------ the definitions text

    def text(self) -> bytes:
        if self._text is None:
            with open(self.file, "rb") as f:
                self._text = f.read()
            want = f"# fingerprint: {self.fingerprint}\n"
            if self.fingerprint and want.encode() not in self._text[:1024]:
                raise ImportError(
                    f"{self.file} is not from the same generation as the module "
                    f"{self.stub['__name__']} (expected {want.strip()!r}); regenerate both "
                    "with `bindgen regen`, or reinstall the package"
                )
        if self._index_at < 0:
            t = self._text
            self._index_at = t.rfind(INDEX_MARK.encode())
            self._layouts_at = t.find(LAYOUTS_MARK.encode(), self._index_at)
            if self._index_at < 0 or self._layouts_at < 0:
                raise ImportError(f"{self.file}: no bindgen index at its end (regenerate it)")
            pointers_at = t.find(POINTERS_MARK.encode(), self._layouts_at)
            self._layouts_end = pointers_at if pointers_at >= 0 else len(t)
        return self._text

    def _build_index(self) -> None:
        t = self.text()
        first = t.find(b"\n", self._index_at + 1)  # the index's title line
        # "#@ NAME LINE OFFSET LENGTH" lines: five tokens each, NAME at 5k+1
        defs = t[first:self._layouts_at].split()
        layouts = t[self._layouts_at + len(LAYOUTS_MARK) : self._layouts_end].split()
        self._where = dict(zip(defs[1::5], range(2, len(defs), 5)))
        self._layout_where = dict(zip(layouts[1::5], range(2, len(layouts), 5)))
        self._tokens, self._layout_tokens = defs, layouts

    def _locate(self, name: str, layout: bool = False) -> "tuple[int, int, int] | None":
        """(line, offset, length) of ``name``'s statement (of its layout when ``layout``)."""
        if self._where is None:
            if self._scans >= self._SCANS_BEFORE_INDEX:
                self._build_index()
            else:
                self._scans += 1
                t = self.text()
                lo, hi = (
                    (self._layouts_at, self._layouts_end)
                    if layout
                    else (self._index_at, self._layouts_at)
                )
                at = t.find(f"\n#@ {name} ".encode(), lo, hi)
                if at < 0:
                    return None
                end = t.find(b"\n", at + 1)
                _, _, line, off, length = t[at + 1 : end if end >= 0 else len(t)].split()
                return int(line), int(off), int(length)
        where = self._layout_where if layout else self._where
        tk = self._layout_tokens if layout else self._tokens
        assert where is not None and tk is not None
        k = where.get(name.encode())
        if k is None:
            return None
        return int(tk[k]), int(tk[k + 1]), int(tk[k + 2])

    def _pointed(self, name: str) -> "list[str]":
        """What ``name``'s statement refers to only through pointers made on first use."""
        t = self.text()
        if self._where is None:  # a few names so far: scan, as ``_locate`` does
            at = t.find(f"\n#@ {name} ".encode(), self._layouts_end)
            if at < 0:
                return []
            end = t.find(b"\n", at + 1)
            return [r.decode() for r in t[at + 1 : end if end >= 0 else len(t)].split()[2:]]
        if self._pointers is None:
            self._pointers = {}
            for line in t[self._layouts_end + len(POINTERS_MARK) :].split(b"\n"):
                toks = line.split()
                if len(toks) > 2 and toks[0] == b"#@":
                    self._pointers[toks[1]] = [r.decode() for r in toks[2:]]
        return self._pointers.get(name.encode(), [])

    def names(self) -> "list[str]":
        """Every name the definitions module defines."""
        if self._where is None:
            self._build_index()
        assert self._where is not None
        return [n.decode() for n in self._where if n != b"__header__"]

    # ------------------------------------------------------------ the namespace

    def module(self) -> "dict[str, Any]":
        """The definitions module's namespace (registered in ``sys.modules`` unless in memory)."""
        if self._g is None:
            mod = None if self.in_memory else sys.modules.get(self.name)
            if mod is None:
                mod = type(sys)(self.name)
                mod.__file__ = self.file
                mod.__package__ = self.package
                g = mod.__dict__
                g["__getattr__"] = self.get  # the definitions module is lazy too
                g["__dir__"] = self.dir
                if not self.in_memory:
                    sys.modules[self.name] = mod
            self._g = mod.__dict__
        return self._g

    def __getitem__(self, name: str) -> "Any":  # the ``locals`` mapping seen by exec
        g = self._g
        assert g is not None
        if name in g:
            return g[name]
        if name.startswith("c_") or name in ("POINTER", "CFUNCTYPE"):
            import ctypes  # ctypes names that the header's import line did not bring (unused)

            if hasattr(ctypes, name):
                return getattr(ctypes, name)
        if self._locate(name) is not None:
            # Only a pointer to it is declared (``_materialize`` made everything else): it is
            # made when that pointer is first used.
            from .records import Later

            return Later(name, self.get)
        raise KeyError(name)

    def __setitem__(self, name: str, value: "Any") -> None:
        assert self._g is not None
        self._g[name] = value

    def _header(self) -> None:
        """Runs the definitions module's import lines (ctypes names, bindgen_rt, helpers)."""
        if self._header_done:
            return
        self._header_done = True
        loc = self._locate("__header__")
        if loc is not None:
            exec(self._compile(*loc), self.module())

    # ------------------------------------------------------------ materialising

    def get(self, name: str) -> "Any":
        """The value of ``name``, materialised on first use (module ``__getattr__``)."""
        g = self.module()
        if name == "__all__":  # ``from module import *`` takes every definition, as when eager
            return [n for n in self.names() if not n.startswith("_")]
        if name not in g:
            if name in self._absent or name == "__header__":
                raise AttributeError(f"module {self.stub['__name__']!r} has no attribute {name!r}")
            if self._locate(name) is None:
                self._absent.add(name)
                raise AttributeError(f"module {self.stub['__name__']!r} has no attribute {name!r}")
            self._materialize(name)
        value = g[name]
        self.stub[name] = value  # later lookups skip the module __getattr__
        return value

    def dir(self) -> "list[str]":
        return sorted(set(self.stub) | set(self.names()))

    def _compile(self, line: int, offset: int, length: int) -> "CodeType":
        src = self.text()[offset : offset + length]
        code = compile(src, self.file, "exec", _COMPILE_FLAGS, True)
        return _shift(code, line - 1) if line > 1 else code

    def _materialize(self, root: str) -> None:
        g = self.module()
        pending: dict[str, CodeType | None] = {}  # name -> what runs once its references exist
        declared: list[str] = []
        stack = [root]
        try:
            while stack:
                name = stack[-1]
                if name in pending:  # everything it refers to exists now
                    stack.pop()
                    code = pending.pop(name)
                    if code is not None:
                        exec(code, g, self)  # type: ignore[arg-type]
                    continue
                if name in g:
                    stack.pop()
                    continue
                loc = self._locate(name)
                if loc is None:
                    stack.pop()
                    continue
                value = _literal(self.text(), name, loc[1], loc[2])
                if value is not _NOT_LITERAL:
                    g[name] = value
                    stack.pop()
                    continue
                self._header()  # the import lines: only what is compiled needs them
                later: CodeType | None = self._compile(*loc)
                if self.text().startswith(b"class ", loc[1]):
                    exec(later, g, self)  # type: ignore[arg-type]  # declared before its fields
                    declared.append(name)
                    layout = self._locate(name, layout=True)
                    later = self._compile(*layout) if layout is not None else None
                pending[name] = later
                if later is not None:
                    pointed = self._pointed(name)
                    for ref in _names(later):
                        if (
                            ref not in g
                            and ref not in pending
                            and ref not in self._absent
                            and ref != name
                            and ref not in pointed
                        ):
                            if self._locate(ref) is None:
                                self._absent.add(ref)
                            else:
                                stack.append(ref)
        except BaseException:
            for name in declared:  # a record whose layout failed is not left half made
                if name in pending:
                    g.pop(name, None)
            raise

    def materialize_all(self) -> None:
        """Every definition, now, by running the definitions module as a whole (from its bytecode
        cache: the cheapest way). When nothing was made yet it is simply imported; otherwise it
        runs in the namespace that holds what was handed out, whose objects it keeps (a statement
        never replaces a name that exists, and laying out a record again is a no-op). Where that
        would compile the file and keep no bytecode, it runs in parts instead
        (:func:`compile_in_parts`)."""
        in_parts = not self.in_memory and self._compiles_without_cache()
        if self._g is None and not in_parts and self.name not in sys.modules:
            import importlib

            self._g = importlib.import_module(self.name).__dict__
        g = self.module()
        if any(name not in g for name in self.names()):
            if in_parts:
                self._run_in_parts(g)
            else:
                exec(self._whole_code(), g, _Keep(g))  # type: ignore[arg-type]
        for name in self.names():
            self.stub[name] = g[name]

    def _compiles_without_cache(self) -> bool:
        """Whether running the whole file would compile it and keep no bytecode for next time
        (writing bytecode is off and none is there): then it is compiled in parts, so memory
        stays bounded by a part rather than the whole file's syntax tree."""
        if not sys.dont_write_bytecode:
            return False
        from importlib.util import cache_from_source

        try:
            return not os.path.exists(cache_from_source(self.file))
        except (NotImplementedError, ValueError):
            return True

    def _run_in_parts(self, g: "dict[str, Any]") -> None:
        """Runs the definitions file part after part in ``g`` (existing names kept, as a whole
        run keeps them); a file that does not split into parts runs whole."""
        keep = _Keep(g)
        try:
            for code in compile_in_parts(self.text().decode("utf-8"), self.file):
                exec(code, g, keep)  # type: ignore[arg-type]
        except NotInParts:
            exec(self._whole_code(), g, keep)  # type: ignore[arg-type]

    def _whole_code(self) -> "CodeType":
        """The definitions module's code object (its bytecode cache when there is one)."""
        if not self.in_memory:
            from importlib.machinery import SourceFileLoader

            code = SourceFileLoader(self.name, self.file).get_code(self.name)
            if code is None:
                raise ImportError(f"{self.file}: no code")
            return code
        return compile(self.text(), self.file, "exec", _COMPILE_FLAGS, True)


class NotInParts(ValueError):
    """The text does not compile as separate runs of statements (see :func:`compile_in_parts`)."""


# A top-level statement starts a line with something other than white space, a comment or a
# closing bracket (the end of a statement that spans lines).
_NOT_STATEMENT_START = frozenset(" \t\n\r\x0b\x0c#)]}")
_PART_CHARS = 1 << 16


def compile_in_parts(text: str, filename: str) -> "Iterator[CodeType]":
    """``text`` compiled as consecutive runs of whole top-level statements of about 64 KB each,
    each code object with the line numbers it has in the whole text; executed in order in one
    namespace, they do what the whole does. CPython's parser and compiler hold the syntax tree and
    tokens of everything they compile at once, about 90 bytes per byte of source (a module of
    50,000 records: over a gigabyte); in parts, that is bounded by one part, and a part's code
    can be dropped once it ran.

    Raises :class:`NotInParts` (before the first part, or at the part concerned) where the text
    must be compiled whole: a future statement (it changes how everything after it compiles), a
    part that does not compile alone, or a later part starting with a string literal (it would
    set the module's docstring)."""
    if len(text) > _PART_CHARS and "__future__" in text:
        raise NotInParts("a future statement")
    start, line = 0, 0
    while start < len(text):
        end = len(text)
        at = start + _PART_CHARS
        while at < len(text):
            at = text.find("\n", at)
            if at < 0 or at + 1 >= len(text):
                break
            if text[at + 1] not in _NOT_STATEMENT_START:
                end = at + 1
                break
            at += 1
        try:
            code = compile(text[start:end], filename, "exec", _COMPILE_FLAGS, True)
        except (SyntaxError, ValueError) as e:
            raise NotInParts(f"a part does not compile alone: {e}") from None
        if start and "__doc__" in code.co_names:
            raise NotInParts("a part would set the module's docstring")
        yield _shift(code, line) if line else code
        line += text.count("\n", start, end)
        start = end


class _Keep:
    """The ``locals`` of a whole-module run over a namespace that already holds some
    definitions: existing names win (``setdefault``), so objects handed out stay the ones
    everything refers to."""

    __slots__ = ("g",)

    def __init__(self, g: "dict[str, Any]") -> None:
        self.g = g

    def __getitem__(self, name: str) -> "Any":
        return self.g[name]

    def __setitem__(self, name: str, value: "Any") -> None:
        self.g.setdefault(name, value)


_NOT_LITERAL = object()
_DIGITS = frozenset(b"0123456789abcdefxABCDEFX-")


def _literal(text: bytes, name: str, offset: int, length: int) -> "Any":
    """The value of a statement ``NAME = <integer literal>`` (most of a register header), without
    compiling it; ``_NOT_LITERAL`` for anything else."""
    if not text.startswith(b" = ", offset + len(name)):
        return _NOT_LITERAL
    stmt = text[offset + len(name) + 3 : offset + length]
    value = stmt.partition(b"  #")[0].rstrip()
    if not value or not _DIGITS.issuperset(value):
        return _NOT_LITERAL
    try:
        return int(value, 0)
    except ValueError:
        return _NOT_LITERAL


def _names(code: "CodeType") -> "list[str]":
    """Global names ``code`` and the code nested in it (function bodies) refer to."""
    out = list(code.co_names)
    for c in code.co_consts:
        if hasattr(c, "co_names"):
            out += _names(c)
    return out


def _shift(code: "CodeType", delta: int) -> "CodeType":
    """``code`` (and the code nested in it) moved ``delta`` lines down."""
    consts = tuple(_shift(c, delta) if hasattr(c, "co_firstlineno") else c for c in code.co_consts)
    return code.replace(co_firstlineno=code.co_firstlineno + delta, co_consts=consts)
