"""The declaration index: what the parser hands the selection and naming passes.

``bindgen.parse`` lists every declaration of the translation unit at file or namespace scope
(:attr:`Declarations.top`, in the unit's order) with the facts selection and naming decide on
(:class:`Decl`), and converts one declaration to IR when a pass asks (:meth:`Declarations.convert`),
so a target that keeps a few names of a large header pays only for what it keeps.

Until the naming pass has run, every name in converted IR is a declaration *key* (clang's USR; an
anonymous record's adds its position, since sibling anonymous records share one): the ``name`` of a
record, enum, typedef, function or variable, ``ir.Named.name`` in every type, and the name of each
``Module.skipped`` entry ``select`` writes. Fields and parameters carry their C spelling (``""`` for
an anonymous member or an unnamed parameter).

This module imports no clang: tests build a :class:`Declarations` from plain IR.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

from . import ir

Node = Union[ir.Record, ir.Enum, ir.Typedef, ir.Function, ir.Var]


@dataclass(frozen=True, slots=True)
class Decl:
    """One declaration, as the parser found it (facts only: nothing here is decided yet)."""

    key: str
    kind: str  # "record" | "enum" | "typedef" | "function" | "variable"
    spelling: str  # its C name; "" for an anonymous record or enum
    loc: ir.Location | None  # None: outside every declared source (clang builtins)
    line: int = 0  # its line, known even where ``loc`` is None
    file_base: str = "x"  # the base name of its file, as clang read it
    namespace: bool = False  # declared inside a C++ namespace
    inline: str = ""  # functions: "static", "inline" or "static inline" (nothing exports it)
    static: bool = False  # variables: ``static`` (each C file has its own; no library exports it)
    # An anonymous record nested in a record: the enclosing record's key, the name of its member
    # of this type ("" if that member is unnamed too, or if there is none), and its position among
    # the enclosing record's nested struct and union declarations.
    parent: str = ""
    member: str = ""
    nested_index: int = 0

    def describe(self) -> str:
        """How messages name it: ``record foo``, or ``anonymous record at FILE:LINE``."""
        if self.spelling:
            return f"{self.kind} {self.spelling}"
        return f"anonymous {self.kind}" + (f" at {self.loc}" if self.loc else "")


@dataclass(frozen=True, slots=True)
class Converted:
    """A declaration in IR form (names are keys, see the module docstring), or why it has none."""

    node: Node | None
    uses: tuple[str, ...] = ()  # keys of the declarations it refers to, in order of first use
    error: str = ""  # why it cannot be represented (``node`` is None); its ``uses`` stop there
    positions: tuple[int, ...] = ()  # records: each field's position among the C members


class Declarations:
    """The index of one translation unit: :attr:`top`, the facts of every key handed out, and
    conversion on demand (each declaration converted once, by ``convert``).

    ``info`` may be shared with ``convert``'s owner, which registers what it meets below file scope
    (an anonymous record inside a record) there; the owner need not refer back to this object.
    """

    def __init__(
        self,
        top: list[Decl],
        info: dict[str, Decl],
        convert: Callable[[str], Converted],
    ) -> None:
        self.top = top  # file- and namespace-scope declarations, in the unit's order
        self._info = info
        self._convert = convert
        self._converted: dict[str, Converted] = {}

    def info(self, key: str) -> Decl:
        return self._info[key]

    def convert(self, key: str) -> Converted:
        c = self._converted.get(key)
        if c is None:
            c = self._converted[key] = self._convert(key)
        return c
