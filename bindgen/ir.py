"""The intermediate representation: plain frozen dataclasses that the parser fills, the passes
(``bindgen.passes``) rewrite and the renderer reads.

Names: the parser writes declaration keys where names go (``bindgen.decls``) and C spellings for
fields and parameters; from the ``naming`` pass on, every name is the Python one. The IR never
imports the renderer. Types are a small closed set of nodes; records carry clang's
layout (size, alignment, bit offsets) so that the renderer places fields exactly where the C
compiler does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union


# ---------------------------------------------------------------- types


@dataclass(frozen=True, slots=True)
class Prim:
    """A builtin arithmetic type; ``name`` is its ctypes name (``c_uint32``, ``c_double``, ...)."""

    name: str
    size: int
    align: int
    signed: bool = False
    is_float: bool = False


@dataclass(frozen=True, slots=True)
class Void:
    pass


@dataclass(frozen=True, slots=True)
class Named:
    """A reference to a declared record, enum or typedef by its name (its key before naming)."""

    name: str
    kind: str  # "record" | "enum" | "typedef"


@dataclass(frozen=True, slots=True)
class Pointer:
    """A pointer; ``const``: the pointee is const-qualified (``const uint8_t *``), so a
    function parameter of this type may be given read-only memory such as ``bytes``."""

    pointee: "Type"
    const: bool = False


@dataclass(frozen=True, slots=True)
class Array:
    elem: "Type"
    count: int | None  # None: flexible / incomplete array (renders as a zero-length array)


@dataclass(frozen=True, slots=True)
class FuncType:
    ret: "Type"
    params: tuple["Type", ...]
    variadic: bool = False


Type = Union[Prim, Void, Named, Pointer, Array, FuncType]


# ---------------------------------------------------------------- declarations


@dataclass(frozen=True, slots=True)
class Location:
    file: str  # path relative to its source root, never absolute
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True, slots=True)
class Field:
    name: str  # "" only before naming, for an anonymous member (anonymous=True), then _anonN
    type: Type
    bit_offset: int  # from the start of the record, as clang reports it
    bit_width: int | None = None  # None: not a bitfield
    anonymous: bool = False  # an anonymous struct/union member whose fields are promoted
    doc: str = ""  # the header's comment for this field, cleaned (see bindgen.docs)
    loc: Location | None = None  # the C member it came from, for error messages


@dataclass(frozen=True, slots=True)
class Record:
    name: str
    kind: str  # "struct" | "union"
    size: int | None  # None: opaque (forward-declared only)
    align: int | None
    fields: tuple[Field, ...] = ()
    packed: bool = False
    loc: Location | None = None
    c_name: str = ""  # spelling in C (``struct foo``), for probes and reports
    doc: str = ""

    @property
    def opaque(self) -> bool:
        return self.size is None


@dataclass(frozen=True, slots=True)
class Enum:
    name: str
    underlying: Prim
    values: tuple[tuple[str, int], ...]
    loc: Location | None = None
    c_name: str = ""
    doc: str = ""
    value_docs: tuple[str, ...] = ()  # one per value ("" where the header has none)
    py_class: str = ""  # "" (a plain int type), "IntEnum" or "IntFlag": pass enum_classes


@dataclass(frozen=True, slots=True)
class Typedef:
    name: str
    type: Type
    loc: Location | None = None
    doc: str = ""


@dataclass(frozen=True, slots=True)
class Function:
    name: str
    type: FuncType
    param_names: tuple[str, ...]
    library: str | None = None
    loc: Location | None = None
    doc: str = ""
    symbol: str = ""  # the C name the library exports, where the Python name differs
    # static inline functions: (return type, parameter types, inline kind) as C spells them, for
    # the exported wrapper that bindgen.wrappers writes ("", (), "") for other functions
    c_signature: tuple[str, tuple[str, ...], str] = ("", (), "")


@dataclass(frozen=True, slots=True)
class RecordValue:
    """A ``static const`` record's value: (index in the record's ``fields``, value) of each field
    that is not zero, in field order; the values are ints, floats and these value nodes."""

    fields: tuple[tuple[int, object], ...]


@dataclass(frozen=True, slots=True)
class ArrayValue:
    """A ``static const`` array's value: its elements up to the last one that is not zero."""

    items: tuple[object, ...]


@dataclass(frozen=True, slots=True)
class Var:
    """A global variable: looked up in its library, or, for a ``static const`` one (``value``
    not None), a module constant of the value clang computed, with its C type."""

    name: str
    type: Type
    library: str | None = None
    loc: Location | None = None
    value: object = None  # static const: an int, a float, bytes, a RecordValue or an ArrayValue
    c_type: str = ""  # static const: the C type as written (``const VkFlags64``)
    doc: str = ""
    symbol: str = ""  # the C name the library exports, where the Python name differs


@dataclass(frozen=True, slots=True)
class Constant:
    """An object-like macro translated to Python: ``expr`` is Python source, ``value`` its value."""

    name: str
    expr: str
    value: object
    loc: Location | None = None
    doc: str = ""


@dataclass(frozen=True, slots=True)
class MacroFunction:
    """A function-like macro with an expression body: ``def name(params): return body``."""

    name: str
    params: tuple[str, ...]
    body: str
    loc: Location | None = None
    doc: str = ""


@dataclass(frozen=True, slots=True)
class Ioctl:
    """An ioctl request macro: ``_IOWR(type, nr, struct)`` etc."""

    name: str
    direction: str  # "" | "R" | "W" | "WR"
    type_: int
    nr: int
    arg: str | None  # Python name of the argument record, or None for _IO
    arg_size: int
    request: int
    loc: Location | None = None
    doc: str = ""


@dataclass(frozen=True, slots=True)
class Skipped:
    """Something not emitted, with the reason; every one ends up in the target's report."""

    name: str
    what: str  # "macro" | "function-macro" | "record" | ...
    reason: str
    loc: Location | None = None


@dataclass
class Module:
    """Everything one target emits, in a deterministic order (the renderer does not reorder;
    the naming pass puts declarations in name order)."""

    target: str
    records: list[Record] = field(default_factory=list)
    enums: list[Enum] = field(default_factory=list)
    typedefs: list[Typedef] = field(default_factory=list)
    functions: list[Function] = field(default_factory=list)
    variables: list[Var] = field(default_factory=list)
    constants: list[Constant] = field(default_factory=list)
    macro_functions: list[MacroFunction] = field(default_factory=list)
    ioctls: list[Ioctl] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    extra_code: list[str] = field(default_factory=list)
    libraries: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)  # (name, candidates)
    # Set by the ordering pass: records in an order where a record embedded by value (directly or
    # in an array) comes before the records that embed it. The renderer lays them out in it.
    layout_order: list[str] = field(default_factory=list)

    def declaration_lists(self) -> list[tuple[str, str, list]]:
        """(attribute, kind, list) for every kind of named declaration, in emission order."""
        return [(attr, kind, getattr(self, attr)) for attr, kind in DECLARATION_KINDS]


# Module attributes holding named declarations, and what each kind is called in messages.
DECLARATION_KINDS = (
    ("records", "record"),
    ("enums", "enum"),
    ("typedefs", "typedef"),
    ("functions", "function"),
    ("variables", "variable"),
    ("constants", "constant"),
    ("macro_functions", "macro function"),
    ("ioctls", "ioctl"),
)
