"""Support runtime for generated bindings: the only project module that generated code imports.

Records are real ``ctypes.Structure``/``ctypes.Union`` subclasses with real field types, so they
keep their natural alignment, embed correctly in other records and pass by value through libffi with
the right register classes. What plain ctypes gets wrong is left to this runtime (``cabi_records``):

* every field is placed at the byte offset clang reported (explicit padding and the smallest
  ``_pack_`` that reproduces the layout are derived there, never guessed by the template);
* bitfields are not ctypes bitfields (CPython < 3.14 lays out packed and mixed-type bitfields unlike
  GCC); their bytes are covered by plain integer storage fields and each bitfield is a descriptor
  that reads and writes its bits at clang's bit offset, sign-extending signed ones;
* anonymous struct/union members promote their fields through forwarding descriptors (bitfields too,
  which ctypes' ``_anonymous_`` cannot do).

Importing this module must stay cheap, because every generated module pays it: it needs only ``os``.
Records (``cabi_records``), ioctls and libraries (``cabi_calls``) and ``ctypes`` itself are loaded
on first use; not even ``typing`` is imported (annotations are strings).
"""

from __future__ import annotations

# typing costs more to import than this whole module: its names are for checkers only
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

import os

# Loaded on first use: a lazy generated module needs only LazyDefs at import time.
_PARTS = {
    "bindgen.cabi_records": (
        "Struct",
        "Union",
        "Opaque",
        "func_ptr",
        "FieldSpec",
        "_plan",
        "_plan_union",
        "_layout",
        "_BitField",
        "_Forward",
        "_Misaligned",
        "_RecordMixin",
        "_norm",
        "_fill",
        "_storage_cap",
        "_INT_BY_SIZE",
        "_ALIGNERS",
    ),
    "bindgen.cabi_calls": ("IoctlRequest", "Library", "_IOC_NAMES"),
}
_WHERE = {name: mod for mod, names in _PARTS.items() for name in names}

__all__ = [
    "Struct",
    "Union",
    "Opaque",
    "IoctlRequest",
    "Library",
    "LazyDefs",
    "FieldSpec",
    "_c_div",
    "_c_mod",
    "_c_bool",
    "_c_sext",
    "_c_trunc",
]


def __getattr__(name: str) -> Any:
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module 'bindgen.cabi' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value  # later lookups skip this hook
    return value


# ---------------------------------------------------------------- C-semantics helpers for macros


def _c_div(a: Any, b: Any) -> Any:
    """C division: integers truncate toward zero; floats divide."""
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return a / b


def _c_mod(a: int, b: int) -> int:
    """C remainder: has the sign of the dividend."""
    return a - _c_div(a, b) * b


def _c_bool(v: Any) -> int:
    """C's logical results are int 0/1."""
    return 1 if v else 0


def _c_sext(v: int, bits: int) -> int:
    """Wrap ``v`` into a signed integer of ``bits`` bits (a cast to a signed C type)."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _c_trunc(v: int, bits: int) -> int:
    """Wrap ``v`` into an unsigned integer of ``bits`` bits (a cast to an unsigned C type)."""
    return v & ((1 << bits) - 1)


# ---------------------------------------------------------------- lazily materialised modules


class LazyDefs:
    """Definitions of a large generated module, each kept as one line of source until first use.

    The definitions live in a ``.defs`` file beside the module (one ``NAME<TAB>source`` line each,
    newlines inside a definition written as \\x1f), read on first use: importing a module with tens
    of thousands of definitions costs almost nothing, even without bytecode caches. Each name is
    compiled when it is first looked up (module ``__getattr__``), and names it refers to are
    materialised on demand through the ``locals`` mapping, so definition order does not matter.
    """

    # Lookups before the full index pays off scan the text with str.find (C speed); a module used
    # for more than a few names gets a dict.
    _SCANS_BEFORE_INDEX = 32

    def __init__(self, module_globals: dict, defs_file: str) -> None:
        self.g = module_globals
        self.defs_file = defs_file
        self._text: bytes | None = None
        self._index: dict[str, str] | None = None
        self._scans = 0

    def text(self) -> bytes:
        """The definitions file, undecoded (decoding megabytes costs more than searching them)."""
        if self._text is None:
            table = self.g.get("__bindgen_defs__")  # set by the generator's own verification
            if table is not None:
                self._text = b"\n" + table.encode()
            else:
                path = os.path.join(os.path.dirname(self.g["__file__"]), self.defs_file)
                with open(path, "rb") as f:
                    self._text = b"\n" + f.read()
        return self._text

    def index(self) -> dict[str, str]:
        if self._index is None:
            idx: dict[str, str] = {}
            for line in self.text().decode().split("\n"):
                if line:
                    name, _, src = line.partition("\t")
                    idx[name] = src
            self._index = idx
        return self._index

    def source(self, name: str) -> str | None:
        """The definition of ``name``, or None."""
        if self._index is None and self._scans < self._SCANS_BEFORE_INDEX:
            self._scans += 1
            text = self.text()
            key = f"\n{name}\t".encode()
            at = text.find(key)
            if at < 0:
                return None
            start = at + len(key)
            end = text.find(b"\n", start)
            return text[start : end if end >= 0 else len(text)].decode()
        return self.index().get(name)

    def __getitem__(self, name: str) -> Any:  # the ``locals`` mapping seen by exec
        g = self.g
        if name in g:
            return g[name]
        if self.source(name) is not None:
            return self.get(name)
        if name.startswith("c_") or name in ("POINTER", "CFUNCTYPE"):
            import ctypes  # definitions name ctypes types; the module itself never imported them

            if hasattr(ctypes, name):
                return getattr(ctypes, name)
        raise KeyError(name)

    def __setitem__(self, name: str, value: Any) -> None:
        self.g[name] = value

    def get(self, name: str) -> Any:
        src = self.source(name)
        if src is None:
            raise AttributeError(f"module {self.g.get('__name__')!r} has no attribute {name!r}")
        exec(src.replace("\x1f", "\n"), self.g, self)  # type: ignore[arg-type]
        value = self.g[name]
        code = getattr(value, "__code__", None)
        if code is not None:
            # A function body looks names up in the module dict when it runs, not through this
            # mapping: materialise what it refers to now.
            for ref in code.co_names:
                if ref not in self.g and self.source(ref) is not None:
                    self.get(ref)
        return value

    def names(self) -> list[str]:
        return list(self.index())

    def materialize_all(self) -> None:
        for name in self.index():
            if name not in self.g:
                self.get(name)
