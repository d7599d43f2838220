"""``bindgen_rt.records``: how a record is laid out when its module is imported.

Most records take the fast path: ctypes' own placement of a plain ``_fields_`` list is checked
against clang's offsets and used as is, and the bookkeeping (``__bindgen_fields__``, names) is
derived on first use. Anything else (a gap, a bitfield, packing) goes through
``bindgen_rt.placement``. Both must give the same classes to everything that reads them.
"""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys

import pytest

import bindgen_rt as rt

from .conftest import REPO

u8, u16, u32, u64 = ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint64


def _struct(name: str = "S") -> type:
    return type(name, (rt.Struct,), {"__slots__": ()})


def test_a_natural_record_is_a_plain_fields_list_and_derives_its_bookkeeping():
    S = _struct()
    S._layout_(16, 8, [("a", u32, 0), ("b", u16, 32), ("c", u64, 64)])
    assert S._fields_ == [("a", u32), ("b", u16), ("c", u64)]
    assert S.__init__ is ctypes.Structure.__init__  # ctypes' constructor, at C speed
    assert "__bindgen_names__" not in S.__dict__  # not computed at import
    assert S.__bindgen_fields__ == (
        ("a", u32, 0, None, False, False),
        ("b", u16, 32, None, False, False),
        ("c", u64, 64, None, False, False),
    )
    assert (S.__bindgen_size__, S.__bindgen_align__) == (16, 8)
    assert "__bindgen_names__" in S.__dict__  # derived once, then stored on the class
    s = S(a=1, c=3)
    assert (s.a, s.b, s.c) == (1, 0, 3)
    assert repr(s) == "S(a=1, b=0, c=3)"
    with pytest.raises(AttributeError):
        S(d=1)  # a misspelt field is refused, as by any record
    assert S(1, 2).b == 2  # positional values go through the derived names


def test_a_field_where_ctypes_would_not_put_it_takes_the_general_path():
    S = _struct()
    # b at byte 8 (an aligned(8) member in C), where ctypes alone would put it at 4
    S._layout_(12, 4, [("a", u32, 0), ("b", u32, 64)])
    assert [n for n, _ in S._fields_] == ["a", "_pad_4", "b"]
    assert S.b.offset == 8 and ctypes.sizeof(S) == 12
    assert S.__bindgen_names__ == ("a", "b")


def test_a_size_ctypes_would_not_give_takes_the_general_path():
    S = _struct()
    S._layout_(12, 4, [("a", u32, 0), ("b", u32, 32)])  # a trailing 4 bytes clang reports
    assert ctypes.sizeof(S) == 12 and S.b.offset == 4
    assert S.__bindgen_size__ == 12


def test_an_anonymous_member_on_the_fast_path_promotes_its_fields():
    Inner = type("Inner", (rt.Union,), {"__slots__": ()})
    Inner._layout_(8, 8, [("x", u64, 0), ("y", u32, 0)])
    Outer = _struct("Outer")
    Outer._layout_(16, 8, [("_anon0", Inner, 0, None, False, True), ("z", u32, 64)])
    assert [n for n, _ in Outer._fields_] == ["_anon0", "z"]  # no padding: the fast path
    o = Outer(x=5, z=2)
    assert (o.x, o.y, o.z) == (5, 5, 2)
    o.y = 7
    assert o._anon0.x == 7
    assert Outer.__bindgen_names__ == ("x", "y", "z")
    with pytest.raises(TypeError, match="has no field 'w'"):
        Outer(w=1)


def test_a_field_of_an_incomplete_record_is_a_clear_error():
    Later = _struct("Later")
    S = _struct()
    with pytest.raises(ValueError, match="S: field 'l' has an incomplete type"):
        S._layout_(8, 8, [("l", Later, 0)])


def test_laying_out_twice_is_a_no_op_only_when_the_layout_is_the_same():
    S = _struct()
    S._layout_(8, 4, [("a", u32, 0), ("b", u32, 32)])
    S._layout_(8, 4, [("a", u32, 0), ("b", u32, 32)])
    with pytest.raises(ValueError, match="laid out already, differently"):
        S._layout_(8, 4, [("a", u32, 0), ("b", u16, 32)])


@pytest.mark.parametrize("pointee", [False, True])
def test_pointee_makes_the_pointer_type_before_the_layout(pointee):
    """ctypes copies a complete record's format into a pointer type made after it; ``pointee``
    (which bindgen passes for every record its module points at) keeps it ``&B``."""
    S = _struct()
    S._layout_(16, 8, [("a", u64, 0), ("b", u64, 64)], pointee=pointee)
    fmt = memoryview(ctypes.POINTER(S)()).format
    assert (fmt == "&B") is pointee, fmt


# ---------------------------------------------------------------- pointers made on first use


def _union(name: str = "U") -> type:
    return type(name, (rt.Union,), {"__slots__": ()})


def _plain_twin(spec: list) -> type:
    """The same fields as a plain ctypes struct with real pointer types: what ctypes does."""
    return type("Plain", (ctypes.Structure,), {"_fields_": spec})


def test_a_pointer_field_is_made_on_first_use_and_is_then_ctypes_own():
    T, S = _struct("T"), _struct("S")
    T._layout_(4, 4, [("v", u32, 0)])
    S._layout_(16, 8, [("v", u32, 0), ("p", rt.ptr(T), 64)])
    assert T not in ctypes._pointer_type_cache  # laying S out made no pointer type
    assert ctypes.sizeof(S) == 16 and S._fields_[1] == ("p", ctypes.c_void_p)
    assert S.__dict__["p"].offset == 8 and S.__dict__["p"].size == 8  # as a ctypes field says
    s, t = S(v=1), T(v=7)
    s.p = ctypes.pointer(t)
    assert type(S.__dict__["p"]).__name__ == "CField" and S.p is S.__dict__["p"]
    assert S.__bindgen_fields__[1][1] is ctypes.POINTER(T)
    assert type(s.p) is ctypes.POINTER(T) and s.p.contents.v == 7 and s.p._b_base_ is s
    with pytest.raises(TypeError, match="incompatible types"):
        s.p = ctypes.pointer(s)
    twin, plain = S(), _plain_twin([("v", u32), ("p", ctypes.POINTER(T))])()
    for rec in (twin, plain):
        rec.p = ctypes.pointer(t)
    assert twin._objects.keys() == plain._objects.keys()  # the pointee kept alive alike
    s.p = None
    assert not s.p
    assert S(2, ctypes.pointer(t)).p.contents.v == 7  # positional, through ctypes' constructor
    # a C function declared with POINTER(T) (argtypes) takes the field's value as it is
    read = ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.POINTER(T))(lambda p: p.contents.v)
    s.p = ctypes.pointer(t)
    assert read(s.p) == 7
    with pytest.raises(ctypes.ArgumentError):
        read(ctypes.pointer(s))


@pytest.mark.parametrize("first", ["class", "instance", "write"])
def test_a_pointer_field_of_a_union_reads_the_real_field_every_time(first):
    """ctypes' union classes set attributes without telling the type's attribute cache: the
    replaced descriptor was freed and still served (a garbage object, or a crash)."""
    T, U = _struct("T"), _union()
    T._layout_(4, 4, [("v", u32, 0)])
    U._layout_(8, 8, [("a", rt.ptr(T), 0), ("b", rt.ptr(T), 0), ("c", u64, 0)])
    u = U()
    for _ in range(3):
        for name in ("a", "b"):
            if first == "class":
                getattr(U, name)
            elif first == "instance":
                getattr(u, name)
            else:
                setattr(u, name, ctypes.pointer(T(v=5)))
            assert getattr(U, name) is U.__dict__[name]
            assert type(getattr(u, name)) is ctypes.POINTER(T)


def test_pointer_fields_of_records_on_the_general_path_are_made_on_first_use_too():
    T = _struct("T")
    T._layout_(4, 4, [("v", u32, 0)])
    packed = _struct("Packed")
    packed._layout_(9, 1, [("c", u8, 0), ("p", rt.ptr(T), 8)])  # off its alignment
    bits = _struct("Bits")
    bits._layout_(16, 8, [("f", u32, 0, 3, False), ("p", rt.ptr(T), 64)])
    pack4 = _struct("Pack4")  # ctypes places it with _pack_ 4: a pointer at byte 4
    pack4._layout_(12, 4, [("c", u32, 0), ("p", rt.ptr(T), 32)])
    assert T not in ctypes._pointer_type_cache
    for cls in (packed, bits, pack4):
        rec, t = cls(), T(v=9)
        rec.p = ctypes.pointer(t)
        assert rec.p.contents.v == 9 and type(rec.p) is ctypes.POINTER(T)
        assert dict((f[0], f[1]) for f in cls.__bindgen_fields__)["p"] is ctypes.POINTER(T)
    assert bytes(packed())[1:] == bytes(8) and pack4.p.offset == 4


@pytest.mark.parametrize("base", [rt.Struct, rt.Union])
def test_ctypes_sees_a_layout_name_while_a_record_is_laid_out(monkeypatch, base):
    """Python 3.14's ctypes reads the class attribute ``_layout_`` when ``_fields_`` is set: it
    takes "ms" or "gcc-sysv" (none: the default, deprecated together with ``_pack_``), and would
    find a record's ``_layout_`` classmethod, a bad value. Simulated here with a metaclass that
    reads it as that ctypes does: a record with ``_pack_`` names "ms", as ctypes laid those out
    before 3.14 on every platform, others "gcc-sysv"; the classmethod is back afterwards."""
    from bindgen_rt import records

    monkeypatch.setattr(records, "_NAMES_LAYOUT", True)
    seen: list[tuple[object, object]] = []

    class Meta(type(base)):  # type: ignore[misc]
        def __setattr__(cls, name: str, value: object) -> None:
            if name == "_fields_":
                seen.append((getattr(cls, "_layout_", None), getattr(cls, "_pack_", None)))
            super().__setattr__(name, value)

    def record(name: str) -> type:
        return Meta(name, (base,), {"__slots__": ()})

    plain, packed, bits = record("Plain"), record("Packed"), record("Bits")
    plain._layout_(8, 4, [("a", u32, 0), ("b", u32, 32 if base is rt.Struct else 0)])
    packed._layout_(5, 1, [("c", u8, 0), ("d", u32, 8 if base is rt.Struct else 0)])
    bits._layout_(4, 4, [("f", u32, 0, 3, False), ("g", u32, 3, 5, True)])
    assert seen[0] == ("gcc-sysv", None)
    assert seen[1][0] == "ms" and len(seen) == 3
    assert all(isinstance(layout, str) and (layout == "ms") == bool(pack) for layout, pack in seen)
    for cls in (plain, packed, bits):
        assert "_layout_" not in cls.__dict__ and callable(cls._layout_)
        cls._layout_(*cls.__bindgen_layout__)  # the same layout again: still a no-op
    assert ctypes.sizeof(packed) == 5 and ctypes.alignment(packed) == 1


def test_128_bit_fields_are_found_by_the_walk_that_lays_the_record_out():
    S = _struct()
    S._layout_(32, 16, [("a", rt.c_int128, 0), ("b", rt.c_uint128, 128)])
    s = S()
    s.a, s.b = -1, (1 << 128) - 1
    assert (s.a, s.b) == (-1, (1 << 128) - 1)


BARE_IMPORT = """
import json, sys
before = set(sys.modules)
sys.path.insert(0, sys.argv[1])
import generated.linux.kfd_ioctl
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def test_importing_an_eager_module_loads_only_ctypes_and_the_runtime():
    """In a bare interpreter (no site: nothing preloaded), an eager generated module loads ctypes,
    ``bindgen_rt`` and its records, and nothing that would cost it time: no ``__future__`` (a
    ``from __future__ import`` is a real import), no ``typing``, no ``importlib`` package (and
    its ``warnings``), and not ``bindgen_rt.placement`` (kfd_ioctl's records, the one with an
    anonymous member included, all take the fast path)."""
    r = subprocess.run(
        [sys.executable, "-S", "-c", BARE_IMPORT, str(REPO)],
        capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 0, r.stderr
    loaded = json.loads(r.stdout)
    assert {"ctypes", "bindgen_rt", "bindgen_rt.records"} <= set(loaded)
    unwanted = {"__future__", "typing", "importlib", "warnings", "bindgen_rt.placement", "re",
                "bindgen_rt.lazy"}
    assert unwanted.isdisjoint(loaded), sorted(unwanted & set(loaded))
