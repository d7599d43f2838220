"""Records whose fields ctypes would not put where clang did by itself (part of ``bindgen_rt``).

``bindgen_rt.records`` lays most records out with a plain ``_fields_`` list; this module handles
the rest, and is imported only by a module that has such a record: bitfields (ctypes' own where
they land exactly, else integer storage plus a descriptor per bitfield), packed records (the
smallest ``_pack_`` that reproduces clang's offsets), explicit padding, alignment raised by an
attribute, fields off their natural alignment (and the promoted fields of anonymous members of
such records).
"""

# typing costs more to import than this whole module: its names are for checkers only
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Sequence

    from .records import FieldSpec

import ctypes
import sys

from .records import _Forward, set_fields


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

    def __get__(self, obj: "Any", cls: "Any" = None) -> "Any":
        if obj is None:
            return self
        raw = int.from_bytes(
            ctypes.string_at(ctypes.addressof(obj) + self.lo, self.nbytes), "little"
        )
        v = (raw >> self.shift) & self.mask
        if self.signed and v > (self.mask >> 1):
            v -= self.mask + 1
        return v

    def __set__(self, obj: "Any", value: int) -> None:
        addr = ctypes.addressof(obj) + self.lo
        raw = int.from_bytes(ctypes.string_at(addr, self.nbytes), "little")
        raw = (raw & ~(self.mask << self.shift)) | ((int(value) & self.mask) << self.shift)
        ctypes.memmove(addr, raw.to_bytes(self.nbytes, "little"), self.nbytes)


_INT_BY_SIZE = {1: ctypes.c_uint8, 2: ctypes.c_uint16, 4: ctypes.c_uint32, 8: ctypes.c_uint64}
# Zero-length members that raise a record's alignment to what clang says (``aligned(N)``
# attributes).
_ALIGNERS: "dict[int, Any]" = {
    2: ctypes.c_uint16,
    4: ctypes.c_uint32,
    8: ctypes.c_uint64,
    16: ctypes.c_longdouble,
}


def _fill(offset: int, nbytes: int, cap: int, prefix: str) -> "list[tuple[str, Any]]":
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


def _storage_cap(ctype: "Any") -> int:
    """Largest storage unit a bitfield of this type may be covered with (its own size)."""
    return max(1, min(8, ctypes.sizeof(ctype)))


def _plan(
    kind: str, size: int, align: int, fields: "Sequence[FieldSpec]"
) -> "tuple[int | None, list]":
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
) -> "tuple[int | None, list]":
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

    def __init__(self, ctype: "Any", offset: int) -> None:
        self.ctype, self.offset = ctype, offset
        self.simple = issubclass(ctype, ctypes._SimpleCData)  # type: ignore[attr-defined]

    def __get__(self, obj: "Any", cls: "Any" = None) -> "Any":
        if obj is None:
            return self
        v = self.ctype.from_buffer(obj, self.offset)
        return v.value if self.simple else v

    def __set__(self, obj: "Any", value: "Any") -> None:
        if self.simple:
            self.ctype.from_buffer(obj, self.offset).value = value
        else:
            ctypes.memmove(
                ctypes.addressof(obj) + self.offset,
                ctypes.addressof(value),
                ctypes.sizeof(self.ctype),
            )


_SIGNED_BY_SIZE = {1: ctypes.c_int8, 2: ctypes.c_int16, 4: ctypes.c_int32, 8: ctypes.c_int64}


def _bit_position(cf: "Any") -> "tuple[int, int]":
    """(bit offset from the record's start, width) of a ctypes bitfield member."""
    if hasattr(cf, "bit_offset"):  # CPython 3.14
        return cf.byte_offset * 8 + cf.bit_offset, cf.bit_size
    return cf.offset * 8 + (cf.size & 0xFFFF), cf.size >> 16


def _native(kind: str, size: int, align: int, fields: "Sequence[FieldSpec]") -> "list | None":
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


def lay_out(
    cls: "Any", kind: str, size: int, align: int, norm: "Sequence[FieldSpec]", layout: tuple
) -> None:
    """Gives ``cls`` (incomplete) ``_fields_`` and descriptors that put every field of ``norm``
    (normalised six-item specs) where clang did, and the bookkeeping ``bindgen_rt.records``
    reads (``__bindgen_layout__`` is ``(size, align, fields)`` as ``_layout_`` was given them)."""
    native = _native(kind, size, align, norm) if any(f[3] for f in norm) else None
    try:
        pack, ctfields = (None, native) if native is not None else _plan(kind, size, align, norm)
    except ValueError as e:
        raise ValueError(f"{cls.__name__}: {e}") from None
    if pack is not None:
        cls._pack_ = pack
    if align > 16 and sys.version_info >= (3, 13):
        cls._align_ = align  # before 3.13 ctypes cannot express it: capped at 16, in the report
    set_fields(cls, ctfields, packed=pack is not None)
    cls.__bindgen_layout__ = layout
    cls.__bindgen_size__ = size
    cls.__bindgen_align__ = align
    cls.__bindgen_fields__ = tuple(norm)
    names = []
    stored = {f[0] for f in ctfields}
    for name, ctype, bit_offset, width, signed, anonymous in norm:
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
