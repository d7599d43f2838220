"""Record types of the bindings support runtime: exact-offset structs and unions.

Part of ``bindgen_rt`` (which loads it on first use, so that importing a lazy generated module
does not compile it). See the ``bindgen_rt`` docstring for why records are built this way. Every
generated module lays out each of its records when imported, so the common case is kept to a
plain ``_fields_`` list and a check that ctypes puts each field where clang did (``_natural``);
``bindgen_rt.placement`` (imported only when needed) handles bitfields, packing, padding and
anonymous members.
"""

# typing costs more to import than this whole module: its names are for checkers only
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable, Sequence

import ctypes
import sys
from ctypes import alignment, sizeof

FieldSpec = tuple  # (name, ctype, bit_offset, bit_width or None, signed, anonymous)


if TYPE_CHECKING:
    # mypy's ctypes plugin cannot type an Array subclass that has its own ``value``: checkers
    # see a plain ctypes type of 16 bytes
    _Words = ctypes.Structure
else:
    _Words = ctypes.Array


class _Int128(_Words):
    """A 128-bit integer (``__int128``, ``unsigned __int128``): ctypes has none, so its 16 bytes
    are two 64-bit words; ``value`` (and ``int()``) reads and writes it as one Python int, wrapping
    as C converts to the type. A record's field of this type reads and writes ints directly."""

    _type_ = ctypes.c_uint64
    _length_ = 2
    _signed_ = False

    def __init__(self, value: int = 0) -> None:
        super().__init__()
        self._set(value)

    def _get(self) -> int:
        raw = ctypes.string_at(ctypes.addressof(self), 16)
        return int.from_bytes(raw, "little", signed=self._signed_)

    def _set(self, v: int) -> None:
        ctypes.memmove(ctypes.addressof(self), (int(v) & _MASK128).to_bytes(16, "little"), 16)

    value = property(_get, _set)

    def __int__(self) -> int:
        return self._get()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value})"


_MASK128 = (1 << 128) - 1


class c_int128(_Int128):
    _signed_ = True


class c_uint128(_Int128):
    _signed_ = False


class _Int128Field:
    """A record's 128-bit integer field, read and written as a Python int (ctypes' own field
    would take only a ``c_int128``). ``offset`` and ``size`` as a ctypes field has them."""

    __slots__ = ("name", "offset", "size", "signed")

    def __init__(self, name: str, offset: int, signed: bool) -> None:
        self.name, self.offset, self.size, self.signed = name, offset, 16, signed

    def __get__(self, obj: "Any", cls: "Any" = None) -> "Any":
        if obj is None:
            return self
        raw = ctypes.string_at(ctypes.addressof(obj) + self.offset, 16)
        return int.from_bytes(raw, "little", signed=self.signed)

    def __set__(self, obj: "Any", value: "Any") -> None:
        data = (int(value) & _MASK128).to_bytes(16, "little")
        ctypes.memmove(ctypes.addressof(obj) + self.offset, data, 16)


def _int128_fields(cls: "Any", fields: "Sequence[Any]") -> None:
    for f in fields:
        t = f[1]
        if isinstance(t, type) and issubclass(t, _Int128) and (len(f) < 4 or f[3] is None):
            setattr(cls, f[0], _Int128Field(f[0], f[2] // 8, t._signed_))


class _Forward:
    """Descriptor promoting ``inner`` of the anonymous member ``outer`` to the enclosing record."""

    __slots__ = ("outer", "inner")

    def __init__(self, outer: str, inner: str) -> None:
        self.outer, self.inner = outer, inner

    def __get__(self, obj: "Any", cls: "Any" = None) -> "Any":
        if obj is None:
            return self
        return getattr(getattr(obj, self.outer), self.inner)

    def __set__(self, obj: "Any", value: "Any") -> None:
        setattr(getattr(obj, self.outer), self.inner, value)


class PointerTo:
    """``POINTER(target)`` for a record's field, made when the field is first used.

    A module of many records that point at each other would otherwise make one ctypes pointer
    type per record while it is imported, each as costly as the record's class, for pointers
    that are mostly never followed. Laying out a record, the field is stored as a pointer-sized
    placeholder (``c_void_p``: same size, alignment and libffi class, so the record's size and
    how it passes by value do not change) and its class attribute is a ``_PointerField``; the
    first access to the field (on the class or an instance, read or write) puts the real ctypes
    field of type ``POINTER(target)`` in its place. From then on it is ctypes' own field: reads
    give ``POINTER(target)`` instances sharing the record's memory, writes check the type and
    keep the pointee alive as ctypes does. ``__bindgen_fields__`` names ``POINTER(target)``;
    only ``_fields_`` (ctypes' storage, never a faithful list of C fields) shows the placeholder.
    """

    __slots__ = ("target",)

    def __init__(self, target: "Any") -> None:
        self.target = target  # a ctypes type, or a :class:`Later` one

    def pointee(self) -> "Any":
        """The type pointed at (a :class:`Later` one is made now)."""
        t = self.target
        if t.__class__ is Later:
            t = self.target = t.get()
        return t

    def resolve(self) -> "Any":
        return ctypes.POINTER(self.pointee())

    def __eq__(self, other: object) -> bool:
        return type(other) is PointerTo and other.pointee() is self.pointee()

    def __hash__(self) -> int:
        return hash(self.pointee())

    def __repr__(self) -> str:
        return f"ptr({getattr(self.target, '__name__', self.target)!r})"


class Later:
    """A definition of a lazy module that is not made yet, where only a pointer to it is
    declared (a record's pointer field, a function's pointer parameter): ``get()`` makes it.
    Following every such pointer while making a record would make every record a chain of
    pointers reaches, which is what the lazy module is there to avoid."""

    __slots__ = ("__name__", "lookup")

    def __init__(self, name: str, lookup: "Any") -> None:
        self.__name__ = name
        self.lookup = lookup  # (name) -> the definition, made on first call

    def get(self) -> "Any":
        return self.lookup(self.__name__)

    def __repr__(self) -> str:
        return f"<not yet made: {self.__name__}>"


def ptr(target: "Any") -> "Any":
    """A pointer to ``target``, made into ``POINTER(target)`` on first use (see
    :class:`PointerTo`): a record's field (``_layout_``) or a function's parameter or result
    (``Library.function``)."""
    return PointerTo(target)


_SLOT = ctypes.c_void_p  # what a PointerTo field is stored as until first use


class _PointerField:
    """A record's field of type ``PointerTo(target)`` until first used; then ctypes' own field
    of type ``POINTER(target)``, made at the same byte offset and with the same field index (the
    index keys what ctypes keeps alive for the field), replaces it on the record's class."""

    __slots__ = ("owner", "name", "index", "offset", "target")

    def __init__(self, owner: "Any", name: str, index: int, offset: int, target: "Any") -> None:
        self.owner, self.name, self.index = owner, name, index
        self.offset, self.target = offset, target

    # What a ctypes field tells about itself, before it is made.
    size = ctypes.sizeof(_SLOT)

    def real(self) -> "Any":
        target = self.target
        if target.__class__ is Later:
            target = target.get()
        field = _ctypes_field(ctypes.POINTER(target), self.index, self.offset)
        setattr(self.owner, self.name, field)
        if issubclass(self.owner, ctypes.Union):
            # ctypes' union classes set attributes without telling the type's attribute lookup
            # cache (its struct classes go through ``type``), which would keep answering with
            # this replaced, freed descriptor. ``type``'s own ``__doc__`` setter resets that
            # cache (the metaclass's docstring hides it from a plain assignment).
            _TYPE_DOC.__set__(self.owner, self.owner.__doc__)
        return field

    def __get__(self, obj: "Any", cls: "Any" = None) -> "Any":
        field = self.real()
        return field if obj is None else field.__get__(obj, cls)

    def __set__(self, obj: "Any", value: "Any") -> None:
        self.real().__set__(obj, value)


_TYPE_DOC: "Any" = type.__dict__["__doc__"]
_FIELDS: "dict[tuple, Any]" = {}  # (ctype, index, offset) -> ctypes field (a droppable cache)


def _ctypes_field(ctype: "Any", index: int, offset: int) -> "Any":
    """ctypes' own field of type ``ctype`` at byte ``offset``, numbered ``index``: the member of
    a helper record whose earlier members are empty but for the bytes before ``offset``. A ctypes
    field reads and writes any ctypes instance's memory at its offset, whatever its class."""
    key = (ctype, index, offset)
    field = _FIELDS.get(key)
    if field is None:
        if offset and not index:
            raise ValueError(f"a field at byte {offset} cannot be the first of its record")
        before = [(f"_{i}", ctypes.c_uint8 * 0) for i in range(index)]
        if offset:
            before[-1] = (f"_{index - 1}", ctypes.c_uint8 * offset)
        spec: "dict[str, Any]" = {"_fields_": [*before, ("f", ctype)]}
        if offset % alignment(ctype):
            spec["_pack_"] = 1  # a field of a packed record: no padding before it
            spec["_layout_"] = "ms"  # what ``_pack_`` implies (see ``set_fields``)
        helper: "Any" = type("_field_at", (ctypes.Structure,), spec)
        field = _FIELDS[key] = helper.__dict__["f"]
    return field


def _lazy_pointers(cls: "Any", pointers: "Sequence[tuple]") -> None:
    """Puts a ``_PointerField`` in place of each placeholder field: (index, name, target), at the
    offset where ctypes placed the placeholder."""
    for index, name, target in pointers:
        offset = cls.__dict__[name].offset
        setattr(cls, name, _PointerField(cls, name, index, offset, target))


def _natural(kind: str, size: int, align: int, fields: "Sequence[Any]") -> "tuple | None":
    """``(_fields_, anonymous members, pointers, 128-bit integers)`` where ctypes' own layout (no
    ``_pack_``, no padding fields) puts every field where clang did, else None. Most records are
    like this, and every generated module lays out all of its records on import: this check is
    the whole cost of their layout, so it walks the fields once and no more (a bitfield takes the
    general path); the fields that need more than ctypes' own (pointers made on first use,
    128-bit integers read as ints) are picked out in the same walk."""
    out: "list[tuple[str, Any]]" = []
    anonymous = []
    pointers = None
    wide = None
    end = top = 0
    union = kind == "union"
    for f in fields:
        if len(f) == 3:
            name, t, bit_offset = f
            if t.__class__ is PointerTo:
                if pointers is None:
                    pointers = []
                pointers.append((len(out), name, t.target))
                t = _SLOT
            elif t is c_int128 or t is c_uint128:
                if wide is None:
                    wide = []
                wide.append(_Int128Field(name, bit_offset // 8, t is c_int128))
        elif f[3] is None and len(f) > 5 and f[5]:  # (name, type, offset, None, False, True)
            name, t, bit_offset = f[0], f[1], f[2]
            anonymous.append((name, t))
        else:
            return None
        al = alignment(t)
        if not al:
            return None  # an incomplete record: the general path says so
        at = 0 if union else -(-end // al) * al
        if at * 8 != bit_offset:
            return None
        out.append((name, t))
        n = at + sizeof(t)
        if n > end:
            end = n
        if al > top:
            top = al
    if top != align or -(-end // align) * align != size:
        return None
    return out, anonymous, pointers, wide


def _layout(
    cls: "Any", kind: str, size: int, align: int, fields: "Iterable[Any]", pointee: bool = False
) -> None:
    fields = tuple(fields)
    layout = (size, align, fields)
    if "__bindgen_layout__" in cls.__dict__:
        # Laid out already: the same layout again is a no-op (a lazy module that runs its whole
        # definitions module after some names were made), any other is an error.
        if cls.__bindgen_layout__ == layout:
            return
        raise ValueError(f"{cls.__name__} is laid out already, differently")
    if pointee:
        ctypes.POINTER(cls)  # while the class is incomplete: see ``_RecordMixin._layout_``
    natural = _natural(kind, size, align, fields)
    if natural is None:
        _placed(cls, kind, size, align, fields, layout)
        return
    fields_, anonymous, pointers, wide = natural
    set_fields(cls, fields_, packed=False)
    cls.__bindgen_layout__ = layout  # the rest of the bookkeeping follows on first use
    if pointers is not None:
        _lazy_pointers(cls, pointers)
    if wide is not None:
        for w in wide:
            setattr(cls, w.name, w)
    for outer, t in anonymous:
        for inner in getattr(t, "__bindgen_names__", ()):
            setattr(cls, inner, _Forward(outer, inner))
    if not anonymous and cls.__dictoffset__ == 0:
        # Every ctypes field is a C field, in order, and the class has no __dict__ (generated
        # classes declare ``__slots__ = ()``): ctypes' own constructor means the same thing, and
        # a misspelt keyword still fails (AttributeError), at C speed.
        cls.__init__ = cls._ctypes_init_


# Python 3.14's ctypes reads the class attribute ``_layout_`` when ``_fields_`` is set: "ms" or
# "gcc-sysv", or none for the platform's default, which it deprecates together with ``_pack_``
# ("ms" is what ``_pack_`` meant before, on every platform). A record class finds the
# ``_layout_`` classmethod there, which no ctypes takes for a layout name.
_NAMES_LAYOUT = sys.version_info >= (3, 14)


def set_fields(cls: "Any", fields: "Sequence[Any]", packed: bool) -> None:
    """``cls._fields_ = fields``, with ctypes' layout named where ctypes reads it: "ms" for a
    record with ``_pack_`` (as ctypes before 3.14 laid those out), else "gcc-sysv" (its default
    elsewhere than Windows). The name is set only while ctypes lays the fields out, so the
    record's ``_layout_`` stays the classmethod."""
    if not _NAMES_LAYOUT:
        cls._fields_ = fields
        return
    cls._layout_ = "ms" if packed else "gcc-sysv"
    _seen(cls)
    try:
        cls._fields_ = fields
    finally:
        del cls._layout_
        _seen(cls)


def _seen(cls: "Any") -> None:
    """Makes attribute lookups on a union class see what was just set on it (see ``real``)."""
    if issubclass(cls, ctypes.Union):
        _TYPE_DOC.__set__(cls, cls.__doc__)


def _placed(cls: "Any", kind: str, size: int, align: int, fields: tuple, layout: tuple) -> None:
    """The general path (``bindgen_rt.placement``), with pointers made on first use as well."""
    from .placement import _Misaligned, lay_out

    norm = [_norm(f, resolve=False) for f in fields]
    lazy = {f[0]: f[1] for f in norm if f[1].__class__ is PointerTo}
    if lazy:
        norm = [(f[0], _SLOT, *f[2:]) if f[0] in lazy else f for f in norm]
    lay_out(cls, kind, size, align, norm, layout)
    _int128_fields(cls, fields)
    if not lazy:
        return
    del cls.__bindgen_fields__  # derived from the layout on first use, with the real pointers
    stored = [f[0] for f in cls._fields_]
    pointers = []
    for name, p in lazy.items():
        if name in stored:
            pointers.append((stored.index(name), name, p.target))
        else:  # kept as bytes off its alignment: read through a typed descriptor
            setattr(cls, name, _Misaligned(p.resolve(), cls.__dict__[name].offset))
    _lazy_pointers(cls, pointers)


class _FromLayout:
    """A class attribute of a record laid out on the fast path (``_natural``), derived from
    ``__bindgen_layout__`` on first use and then stored on that class: most records of a module
    are never constructed with positional values nor printed, so import does not pay for it."""

    __slots__ = ("name", "default")

    def __init__(self, name: str, default: "Any") -> None:
        self.name, self.default = name, default

    def __get__(self, obj: "Any", cls: "Any" = None) -> "Any":
        cls = type(obj) if cls is None else cls
        owner = next((c for c in cls.__mro__ if "__bindgen_layout__" in c.__dict__), None)
        if owner is None:  # not laid out (yet)
            if self.default is _FromLayout:
                raise AttributeError(f"{cls.__name__} has no layout yet: {self.name}")
            return self.default
        size, align, fields = owner.__dict__["__bindgen_layout__"]
        names: list[str] = []
        for f in fields:  # three-item specs, or anonymous members (``_natural``)
            if len(f) > 3:
                names += getattr(f[1], "__bindgen_names__", ())
            else:
                names.append(f[0])
        derived = {
            "__bindgen_size__": size,
            "__bindgen_align__": align,
            "__bindgen_fields__": tuple(_norm(f) for f in fields),
            "__bindgen_names__": tuple(names),
            "__bindgen_nameset__": frozenset(names),
        }
        for k, v in derived.items():
            if k not in owner.__dict__:
                setattr(owner, k, v)
        return derived[self.name]


class _RecordMixin:
    """Keyword construction and a readable repr over the C-visible field names."""

    __slots__ = ()

    # What a record's layout determines (``_layout``): set when it is laid out, or derived on
    # first use for records on the fast path.
    __bindgen_layout__: "tuple[int, int, tuple]"  # (size, align, fields) as given to _layout_
    __bindgen_names__: "tuple[str, ...]" = _FromLayout("__bindgen_names__", ())  # type: ignore
    __bindgen_nameset__: "frozenset[str]" = _FromLayout(  # type: ignore[assignment]
        "__bindgen_nameset__", frozenset()
    )
    __bindgen_fields__: "tuple[FieldSpec, ...]" = _FromLayout(  # type: ignore[assignment]
        "__bindgen_fields__", _FromLayout
    )
    __bindgen_size__: int = _FromLayout("__bindgen_size__", _FromLayout)  # type: ignore
    __bindgen_align__: int = _FromLayout("__bindgen_align__", _FromLayout)  # type: ignore
    _ctypes_init_: "Any"  # ctypes.Structure.__init__ or ctypes.Union.__init__ (set by the bases)
    _kind_: str  # "struct" or "union" (set by the bases)

    def __init__(self, *args: "Any", **kwargs: "Any") -> None:
        if args or not kwargs.keys() <= self.__bindgen_nameset__:
            self._init_checked(args, kwargs)
        else:
            # ctypes sets each keyword (through the descriptors of bitfields and promoted members)
            self._ctypes_init_(**kwargs)

    def _init_checked(self, args: tuple, kwargs: "dict[str, Any]") -> None:
        if args:
            names = self.__bindgen_names__
            if len(args) > len(names):
                raise TypeError(
                    f"{type(self).__name__} takes at most {len(names)} positional values"
                )
            for name, value in zip(names, args):
                if name in kwargs:
                    raise TypeError(f"{type(self).__name__} got {name!r} twice")
                kwargs[name] = value
        if not kwargs.keys() <= self.__bindgen_nameset__:
            bad = sorted(set(kwargs) - self.__bindgen_nameset__)
            raise TypeError(f"{type(self).__name__} has no field {bad[0]!r}")
        self._ctypes_init_(**kwargs)

    def __repr__(self) -> str:
        parts = []
        for n in self.__bindgen_names__:
            v = getattr(self, n)
            parts.append(f"{n}={v!r}" if isinstance(v, (int, float, bytes)) else f"{n}=…")
        return f"{type(self).__name__}({', '.join(parts)})"

    @classmethod
    def _flexible_field(cls, name: str) -> "tuple[Any, int]":
        """(element type, byte offset) of the flexible array member ``name``."""
        for f in cls.__bindgen_fields__:
            if f[0] == name:
                ctype = f[1]
                if not (issubclass(ctype, ctypes.Array) and ctype._length_ == 0):
                    raise TypeError(f"{cls.__name__}.{name} is not a flexible array member")
                return ctype._type_, f[2] // 8
        raise AttributeError(f"{cls.__name__} has no field {name!r}")

    def flexible(self, name: str, count: int) -> "Any":
        """The flexible array member ``name`` (``T name[];``) as an array of ``count`` elements,
        sharing the record's memory: the record must sit at the start of memory with room for
        them, as C's ``malloc(sizeof(struct s) + n * sizeof(T))`` gives (a record a C function
        returned, or one made by :meth:`with_room`). ctypes cannot check that room; the array
        keeps the record alive."""
        if count < 0:
            raise ValueError(f"count must be 0 or more, got {count}")
        rec: "Any" = self  # a ctypes record (the mixin is only ever mixed into one)
        elem, offset = type(self)._flexible_field(name)
        arr = (elem * count).from_address(ctypes.addressof(rec) + offset)
        arr._bindgen_record = rec  # the memory is the record's
        return arr

    @classmethod
    def with_room(cls, name: str, count: int) -> "Any":
        """A zeroed record with room for ``count`` elements of its flexible array member
        ``name`` (C's ``calloc(1, sizeof(struct s) + count * sizeof(T))``); reach them with
        :meth:`flexible`."""
        if count < 0:
            raise ValueError(f"count must be 0 or more, got {count}")
        elem, offset = cls._flexible_field(name)
        rec: "Any" = cls  # a ctypes record class (the mixin is only ever mixed into one)
        size = max(ctypes.sizeof(rec), offset + count * ctypes.sizeof(elem))
        align = ctypes.alignment(rec)
        buf = (ctypes.c_uint8 * (size + align))()
        skip = -ctypes.addressof(buf) % align
        return rec.from_buffer(buf, skip)

    @classmethod
    def _layout_(
        cls, size: int, align: int, fields: "Iterable[FieldSpec]", pointee: bool = False
    ) -> None:
        """Gives the class its fields, each at the bit offset clang reported, once.

        ``fields``: ``(name, C type, bit offset[, bit width or None, signed[, anonymous]])``.
        ``pointee``: make ``POINTER(cls)`` first, while the class is still incomplete. ctypes
        copies the pointee's PEP 3118 format into a pointer type when it makes one: made after
        the layout, ``POINTER(s1)`` would embed all of ``s1``, whose own pointer field embeds
        ``s0``, and so on: a chain of n records pointing at each other would hold O(n²) format
        text (24 GB for 50,000). Made first, every pointer's format is ``&B``. bindgen passes
        it for every record its module refers to through a pointer made on import (a typedef, an
        array of pointers, a function's parameter); a record's own pointer fields are
        ``ptr(T)``, made on first use (:class:`PointerTo`), and need none.
        """
        _layout(cls, cls._kind_, size, align, fields, pointee)


def _norm(f: "Sequence[Any]", resolve: bool = True) -> "FieldSpec":
    name, ctype, bit_offset = f[0], f[1], f[2]
    if resolve and ctype.__class__ is PointerTo:
        ctype = ctype.resolve()
    width = f[3] if len(f) > 3 else None
    signed = bool(f[4]) if len(f) > 4 else False
    anonymous = bool(f[5]) if len(f) > 5 else False
    return (name, ctype, bit_offset, width, signed, anonymous)


class Struct(_RecordMixin, ctypes.Structure):
    """Base of generated structs; call ``_layout_(size, align, fields)`` once, after creation."""

    __slots__ = ()
    _ctypes_init_ = ctypes.Structure.__init__
    _kind_ = "struct"


class Union(_RecordMixin, ctypes.Union):
    """Base of generated unions; call ``_layout_(size, align, fields)`` once, after creation."""

    __slots__ = ()
    _ctypes_init_ = ctypes.Union.__init__
    _kind_ = "union"


class Opaque(ctypes.Structure):
    """Base of forward-declared records: usable only behind pointers."""


def func_ptr(ret: "Any", *params: "Any", variadic: bool = False) -> "Any":
    """A C function-pointer type (variadic prototypes keep only their fixed parameters)."""
    return ctypes.CFUNCTYPE(ret, *params)
