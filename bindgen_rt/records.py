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


def _natural(kind: str, size: int, align: int, fields: "Sequence[Any]") -> "tuple | None":
    """``(_fields_, anonymous members)`` where ctypes' own layout (no ``_pack_``, no padding
    fields) puts every field where clang did, else None. Most records are like this, and every
    generated module lays out all of its records on import: this check is the whole cost of
    their layout, so it walks the fields once and no more (a bitfield takes the general path)."""
    out = []
    anonymous = []
    end = top = 0
    union = kind == "union"
    for f in fields:
        if len(f) == 3:
            name, t, bit_offset = f
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
    return out, anonymous


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
        from .placement import lay_out

        lay_out(cls, kind, size, align, [_norm(f) for f in fields], layout)
        _int128_fields(cls, fields)
        return
    cls._fields_, anonymous = natural
    cls.__bindgen_layout__ = layout  # the rest of the bookkeeping follows on first use
    _int128_fields(cls, fields)
    for outer, t in anonymous:
        for inner in getattr(t, "__bindgen_names__", ()):
            setattr(cls, inner, _Forward(outer, inner))
    if not anonymous and cls.__dictoffset__ == 0:
        # Every ctypes field is a C field, in order, and the class has no __dict__ (generated
        # classes declare ``__slots__ = ()``): ctypes' own constructor means the same thing, and
        # a misspelt keyword still fails (AttributeError), at C speed.
        cls.__init__ = cls._ctypes_init_


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
        it for every record its module refers to through a pointer (and only those: a pointer
        type costs as much to make as the record's class).
        """
        _layout(cls, cls._kind_, size, align, fields, pointee)


def _norm(f: "Sequence[Any]") -> "FieldSpec":
    name, ctype, bit_offset = f[0], f[1], f[2]
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
