"""Record types of the bindings support runtime: exact-offset structs, unions and bitfields.

Part of ``bindgen_rt`` (which loads it on first use, so that importing a lazy generated module
does not compile it). See the ``bindgen_rt`` docstring for why records are built this way.
"""

from __future__ import annotations

# typing costs more to import than this whole module: its names are for checkers only
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable, Sequence

import ctypes
import sys

FieldSpec = tuple  # (name, ctype, bit_offset, bit_width or None, signed, anonymous)


class _BitField:
    """Descriptor for one bitfield: ``width`` bits at ``bit_offset`` from the record's start."""

    __slots__ = ("name", "lo", "nbytes", "shift", "mask", "signed")

    def __init__(self, name: str, bit_offset: int, width: int, signed: bool) -> None:
        self.name = name
        self.lo = bit_offset // 8
        self.shift = bit_offset % 8
        self.nbytes = (self.shift + width + 7) // 8
        self.mask = (1 << width) - 1
        self.signed = signed

    def __get__(self, obj: Any, cls: Any = None) -> Any:
        if obj is None:
            return self
        raw = int.from_bytes(
            ctypes.string_at(ctypes.addressof(obj) + self.lo, self.nbytes), "little"
        )
        v = (raw >> self.shift) & self.mask
        if self.signed and v > (self.mask >> 1):
            v -= self.mask + 1
        return v

    def __set__(self, obj: Any, value: int) -> None:
        addr = ctypes.addressof(obj) + self.lo
        raw = int.from_bytes(ctypes.string_at(addr, self.nbytes), "little")
        raw = (raw & ~(self.mask << self.shift)) | ((int(value) & self.mask) << self.shift)
        ctypes.memmove(addr, raw.to_bytes(self.nbytes, "little"), self.nbytes)


class _Forward:
    """Descriptor promoting ``inner`` of the anonymous member ``outer`` to the enclosing record."""

    __slots__ = ("outer", "inner")

    def __init__(self, outer: str, inner: str) -> None:
        self.outer, self.inner = outer, inner

    def __get__(self, obj: Any, cls: Any = None) -> Any:
        if obj is None:
            return self
        return getattr(getattr(obj, self.outer), self.inner)

    def __set__(self, obj: Any, value: Any) -> None:
        setattr(getattr(obj, self.outer), self.inner, value)


_INT_BY_SIZE = {1: ctypes.c_uint8, 2: ctypes.c_uint16, 4: ctypes.c_uint32, 8: ctypes.c_uint64}
# Zero-length members that raise a record's alignment to what clang says (``aligned(N)``
# attributes).
_ALIGNERS = {2: ctypes.c_uint16, 4: ctypes.c_uint32, 8: ctypes.c_uint64, 16: ctypes.c_longdouble}


def _fill(offset: int, nbytes: int, cap: int, prefix: str) -> list[tuple[str, Any]]:
    """Integer fields covering [offset, offset+nbytes), naturally aligned, each at most cap B."""
    out = []
    end = offset + nbytes
    while offset < end:
        for size in (8, 4, 2, 1):
            if size <= cap and offset % size == 0 and offset + size <= end:
                break
        out.append((f"{prefix}{offset}", _INT_BY_SIZE[size]))
        offset += size
    return out


def _storage_cap(ctype: Any) -> int:
    """Largest storage unit a bitfield of this type may be covered with (its own size)."""
    return max(1, min(8, ctypes.sizeof(ctype)))


def _plan(kind: str, size: int, align: int, fields: Sequence[FieldSpec]) -> tuple[int | None, list]:
    """Chooses ``_pack_`` and the ctypes ``_fields_`` list that put every field where clang did."""
    regular = [(f[0], f[1], f[2] // 8) for f in fields if f[3] is None]
    for n, t, _ in regular:
        if ctypes.alignment(t) == 0:
            raise ValueError(
                f"field {n!r} has an incomplete type (laid out before its own record?)"
            )
    if kind == "union":
        return _plan_union(size, align, regular, [f for f in fields if f[3]])

    # Bytes holding bitfields become integer storage fields: the declared storage unit where it
    # overlaps no other field (natural alignment, as C has), else just the bytes the bits touch
    # (packed records).
    taken = [(off, off + ctypes.sizeof(t)) for _, t, off in regular]
    spans: list[list[int]] = []  # [lo, hi, cap]
    for f in sorted((f for f in fields if f[3]), key=lambda f: f[2]):
        lo, hi = f[2] // 8, (f[2] + f[3] + 7) // 8
        cap = _storage_cap(f[1])
        ulo = lo // cap * cap
        if (
            hi <= ulo + cap
            and ulo + cap <= size
            and not any(a < ulo + cap and ulo < b for a, b in taken)
        ):
            lo, hi = ulo, ulo + cap
        if spans and lo < spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], hi)
            spans[-1][2] = max(spans[-1][2], cap)
        else:
            spans.append([lo, hi, cap])

    for pack in (None, 8, 4, 2, 1):
        items: list[tuple[int, str, Any]] = [(off, n, t) for n, t, off in regular]
        for lo, hi, cap in spans:
            for name, t in _fill(lo, hi - lo, min(cap, pack or 8), "_bf_"):
                items.append((int(name[4:]), name, t))
        items.sort(key=lambda it: it[0])
        out: list[tuple[str, Any]] = []
        cur, max_al, ok = 0, 1, True
        for off, name, t in items:
            al = ctypes.alignment(t) if pack is None else min(ctypes.alignment(t), pack)
            natural = -(-cur // al) * al
            if natural > off:
                ok = False
                break
            if natural < off:
                out.append((f"_pad_{cur}", ctypes.c_uint8 * (off - cur)))
            out.append((name, t))
            cur = off + ctypes.sizeof(t)
            max_al = max(max_al, al)
        if not ok or max_al > align or (pack is not None and max_al < align):
            continue
        if align > max_al and pack is None:
            # Above 16 B CPython < 3.13 has no way to say it: size and offsets still match.
            eff = min(align, 16)
            out.insert(0, ("_aligner_", _ALIGNERS[eff] * 0))
            max_al = eff
        if -(-cur // max_al) * max_al != size:
            if cur > size:
                continue
            out.append((f"_pad_{cur}", ctypes.c_uint8 * (size - cur)))
            if -(-size // max_al) * max_al != size:
                continue
        return pack, out
    # ctypes cannot combine _pack_ with a larger alignment (packed + aligned(N)): keep natural
    # alignment and store the fields that sit off their alignment as bytes behind typed descriptors.
    misaligned = [(n, t, off) for n, t, off in regular if off % ctypes.alignment(t)]
    if misaligned:
        names = {n for n, _, _ in misaligned}
        rest = [f for f in fields if f[0] not in names]
        pack, out = _plan(
            kind,
            size,
            align,
            list(rest)
            + [
                (f"_mis_{n}", ctypes.c_uint8 * ctypes.sizeof(t), off * 8, None, False, False)
                for n, t, off in misaligned
            ],
        )
        if pack is None:
            return None, out
    raise ValueError("no ctypes layout reproduces clang's offsets")


def _plan_union(
    size: int, align: int, regular: list, bitfields: list
) -> tuple[int | None, list]:
    """Union members all start at 0: bitfields share one integer array, size and alignment are
    forced with overlapping members (harmless in a union); a packed union (alignment below its
    members') gets that alignment as ``_pack_``."""
    out = [(n, t) for n, t, _ in regular]
    if bitfields:
        cap = max(_storage_cap(f[1]) for f in bitfields)
        hi = max((f[2] + f[3] + 7) // 8 for f in bitfields)
        out.append(("_bf_0", _INT_BY_SIZE[cap] * (-(-hi // cap))))
    have = max([ctypes.alignment(t) for _, t in out] or [1])
    pack = None
    if align < have:
        pack = align  # union __attribute__((packed)), or a packed member of a packed record
    elif align > have:
        eff = min(align, 16)
        aligner = _INT_BY_SIZE.get(eff, ctypes.c_longdouble)
        if ctypes.sizeof(aligner) <= size:
            out.append(("_aligner_", aligner))
    if size and max([ctypes.sizeof(t) for _, t in out] or [0]) < size:
        out.append(("_size_", ctypes.c_uint8 * size))
    return pack, out


class _Misaligned:
    """Descriptor for a field stored as bytes because it sits off its natural alignment."""

    __slots__ = ("ctype", "offset", "simple")

    def __init__(self, ctype: Any, offset: int) -> None:
        self.ctype, self.offset = ctype, offset
        self.simple = issubclass(ctype, ctypes._SimpleCData)  # type: ignore[attr-defined]

    def __get__(self, obj: Any, cls: Any = None) -> Any:
        if obj is None:
            return self
        v = self.ctype.from_buffer(obj, self.offset)
        return v.value if self.simple else v

    def __set__(self, obj: Any, value: Any) -> None:
        if self.simple:
            self.ctype.from_buffer(obj, self.offset).value = value
        else:
            ctypes.memmove(
                ctypes.addressof(obj) + self.offset,
                ctypes.addressof(value),
                ctypes.sizeof(self.ctype),
            )


_SIGNED_BY_SIZE = {1: ctypes.c_int8, 2: ctypes.c_int16, 4: ctypes.c_int32, 8: ctypes.c_int64}


def _bit_position(cf: Any) -> tuple[int, int]:
    """(bit offset from the record's start, width) of a ctypes bitfield member."""
    if hasattr(cf, "bit_offset"):  # CPython 3.14
        return cf.byte_offset * 8 + cf.bit_offset, cf.bit_size
    return cf.offset * 8 + (cf.size & 0xFFFF), cf.size >> 16


def _native(kind: str, size: int, align: int, fields: Sequence[FieldSpec]) -> list | None:
    """ctypes' own bitfields, where they land exactly where clang put every field (the common,
    unpacked case); None where they do not, and descriptors must do. Native bitfields are read
    and written at C speed."""
    if kind != "struct" or any(f[3] == 0 for f in fields):
        return None
    ct: list[tuple] = []
    for name, t, _off, width, signed, _anon in sorted(fields, key=lambda f: f[2]):
        if width is None:
            ct.append((name, t))
            continue
        n = ctypes.sizeof(t)
        if n not in _INT_BY_SIZE or width > n * 8:
            return None
        ct.append((name, (_SIGNED_BY_SIZE if signed else _INT_BY_SIZE)[n], width))
    try:
        probe: Any = type("_probe", (ctypes.Structure,), {"_fields_": ct})
    except (TypeError, ValueError):
        return None
    if ctypes.sizeof(probe) != size or ctypes.alignment(probe) != min(align, 16):
        return None
    for name, _t, off, width, _s, _a in fields:
        cf = probe.__dict__[name]
        if (width is None and cf.offset * 8 != off) or (
            width is not None and _bit_position(cf) != (off, width)
        ):
            return None
    return ct


def _layout(cls: Any, kind: str, size: int, align: int, fields: Sequence[FieldSpec]) -> None:
    if "__bindgen_fields__" in cls.__dict__:
        # Laid out already: the same layout again is a no-op (a lazy module that runs its whole
        # definitions module after some names were made), any other is an error.
        if (cls.__bindgen_size__, cls.__bindgen_align__, cls.__bindgen_fields__) == (
            size, align, tuple(fields)
        ):
            return
        raise ValueError(f"{cls.__name__} is laid out already, differently")
    native = _native(kind, size, align, fields) if any(f[3] for f in fields) else None
    try:
        pack, ctfields = (None, native) if native is not None else _plan(kind, size, align, fields)
    except ValueError as e:
        raise ValueError(f"{cls.__name__}: {e}") from None
    if pack is not None:
        cls._pack_ = pack
    if align > 16 and sys.version_info >= (3, 13):
        cls._align_ = align  # before 3.13 ctypes cannot express it: capped at 16, in the report
    cls._fields_ = ctfields
    cls.__bindgen_size__ = size
    cls.__bindgen_align__ = align
    cls.__bindgen_fields__ = tuple(fields)
    names = []
    stored = {f[0] for f in ctfields}
    for name, ctype, bit_offset, width, signed, anonymous in fields:
        if width is None and name not in stored and f"_mis_{name}" in stored:
            setattr(cls, name, _Misaligned(ctype, bit_offset // 8))
            names.append(name)
        elif width is not None:
            if width:
                if native is None:
                    setattr(cls, name, _BitField(name, bit_offset, width, signed))
                names.append(name)
        elif anonymous:
            for inner in getattr(ctype, "__bindgen_names__", ()):
                setattr(cls, inner, _Forward(name, inner))
                names.append(inner)
        else:
            names.append(name)
    cls.__bindgen_names__ = tuple(names)
    cls.__bindgen_nameset__ = frozenset(names)
    if cls.__dictoffset__ == 0 and tuple(f[0] for f in ctfields) == cls.__bindgen_names__:
        # Every ctypes field is a C field, in order, and the class has no __dict__ (generated
        # classes declare ``__slots__ = ()``): ctypes' own constructor means the same thing, and
        # a misspelt keyword still fails (AttributeError), at C speed.
        cls.__init__ = cls._ctypes_init_

class _RecordMixin:
    """Keyword construction and a readable repr over the C-visible field names."""

    __slots__ = ()

    __bindgen_names__: tuple[str, ...] = ()
    __bindgen_nameset__: frozenset[str] = frozenset()
    _ctypes_init_: Any  # ctypes.Structure.__init__ or ctypes.Union.__init__ (set by the bases)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args or not kwargs.keys() <= self.__bindgen_nameset__:
            self._init_checked(args, kwargs)
        else:
            # ctypes sets each keyword (through the descriptors of bitfields and promoted members)
            self._ctypes_init_(**kwargs)

    def _init_checked(self, args: tuple, kwargs: dict[str, Any]) -> None:
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
    def _layout_(cls, size: int, align: int, fields: Iterable[FieldSpec]) -> None:
        _layout(
            cls,
            "union" if issubclass(cls, ctypes.Union) else "struct",
            size,
            align,
            [_norm(f) for f in fields],
        )


def _norm(f: Sequence[Any]) -> FieldSpec:
    name, ctype, bit_offset = f[0], f[1], f[2]
    width = f[3] if len(f) > 3 else None
    signed = bool(f[4]) if len(f) > 4 else False
    anonymous = bool(f[5]) if len(f) > 5 else False
    return (name, ctype, bit_offset, width, signed, anonymous)


class _PointerFirst(type(ctypes.Structure)):  # type: ignore[misc]
    """Creates ``POINTER(cls)`` with the class, while it is still incomplete.

    ctypes copies the pointee's PEP 3118 format into a pointer type when the pointer type is
    created. Made after the pointee's layout, ``POINTER(s1)`` would embed all of ``s1``, whose own
    pointer field embeds ``s0``, and so on: a chain of n records pointing at each other would hold
    O(n²) format text (24 GB for 50,000). Made first, every pointer's format is ``&B``."""

    def __init__(cls, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        ctypes.POINTER(cls)


class _UnionPointerFirst(type(ctypes.Union)):  # type: ignore[misc]
    """``_PointerFirst`` for unions (ctypes gives them their own metaclass)."""

    def __init__(cls, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        ctypes.POINTER(cls)


class Struct(_RecordMixin, ctypes.Structure, metaclass=_PointerFirst):
    """Base of generated structs; call ``_layout_(size, align, fields)`` once, after creation."""

    __slots__ = ()
    _ctypes_init_ = ctypes.Structure.__init__


class Union(_RecordMixin, ctypes.Union, metaclass=_UnionPointerFirst):
    """Base of generated unions; call ``_layout_(size, align, fields)`` once, after creation."""

    __slots__ = ()
    _ctypes_init_ = ctypes.Union.__init__


class Opaque(ctypes.Structure):
    """Base of forward-declared records: usable only behind pointers."""


def func_ptr(ret: Any, *params: Any, variadic: bool = False) -> Any:
    """A C function-pointer type (variadic prototypes keep only their fixed parameters)."""
    return ctypes.CFUNCTYPE(ret, *params)
