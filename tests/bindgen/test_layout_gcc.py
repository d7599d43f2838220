"""Tricky layouts (T1–T13 of docs: bindgen_peers.md §4), generated through the real pipeline and
compared field by field with what gcc compiles from the same header.

For every type a corpus header names in a ``// probe:`` line, one C program per header prints
sizeof, _Alignof, the offsetof and sizeof of every member (nested and promoted ones too), and for
every bitfield and integer member the bytes of a zeroed object after setting it to -1 and the value
read back. The
Python side does the same through the generated classes. Adding a case is adding a header.
"""
from __future__ import annotations

import ctypes
import re
import sys

import pytest

from .conftest import (CORPUS, c_ident, compare, is_array, is_record, probe_directives,
                       py_name_of, requires_gcc, run_layout_probe)

pytestmark = [requires_gcc]

HEADERS = sorted(p.name for p in CORPUS.glob("t[0-9]*.h"))


def test_corpus_present():
    assert len(HEADERS) >= 13, HEADERS


@pytest.mark.parametrize("header", HEADERS)
def test_layout_matches_gcc(header, corpus_probes):
    checks, gcc = corpus_probes(header)
    bad = compare(checks, gcc)
    assert not bad, f"{header}: {len(bad)} of {len(checks)} checks differ from gcc:\n  " + \
        "\n  ".join(bad)


@pytest.mark.parametrize("header", HEADERS)
def test_lazy_module_layout_matches_gcc(header, corpus_probes):
    """The same comparison for the target generated with ``lazy: true`` (module __getattr__)."""
    checks, gcc = corpus_probes(header, lazy=True)
    bad = compare(checks, gcc)
    assert not bad, f"{header} (lazy): {len(bad)} of {len(checks)} checks differ from gcc:\n  " + \
        "\n  ".join(bad)


def test_lazy_and_eager_modules_define_the_same_names(corpus_cases):
    _, eager = corpus_cases("t07_enums.h")
    _, lazy = corpus_cases("t07_enums.h", lazy=True)
    # ctypes names an eager module imports for its own use are not part of its API, nor is the
    # __future__ feature ``annotations``
    names = {
        n for n in vars(eager)
        if not n.startswith("_") and not hasattr(ctypes, n) and n != "annotations"
    }
    assert names <= set(dir(lazy)), names - set(dir(lazy))
    assert (lazy.T7_NEG, lazy.T7_HUGE) == (-5, 0x100000000)
    assert ctypes.sizeof(lazy.t7) == ctypes.sizeof(eager.t7) == 24


@pytest.mark.parametrize("header", HEADERS)
def test_probe_covers_every_member(header, corpus_probes):
    """The probe really looked at fields: each header yields offset checks, and bitfield headers
    yield byte-level bitfield checks."""
    checks, _ = corpus_probes(header)
    kinds = {c.kind for c in checks}
    assert {"size", "align"} <= kinds and kinds & {"off", "bits"}, kinds
    if re.search(r":\s*[1-9]\d*\s*;", (CORPUS / header).read_text()):
        assert "bits" in kinds, f"{header} has bitfields but no bitfield check was generated"


def _c_members(t) -> dict:
    """C member names reachable with one ``.`` (anonymous members promoted) → canonical type."""
    out = {}
    for f in t.get_fields():
        ft = f.type.get_canonical()
        if not f.spelling or "(anonymous" in f.spelling or "(unnamed" in f.spelling:
            if not f.is_bitfield():
                out.update(_c_members(ft))
        else:
            out[f.spelling] = ft
    return out


def _py_members(cls) -> dict:
    out = {}
    for name, ctype, _off, width, _signed, anonymous in cls.__bindgen_fields__:
        if width is not None and re.fullmatch(r"_anon\d+", name):
            continue
        if anonymous:
            out.update(_py_members(ctype))
        else:
            out[c_ident(name)] = ctype
    return out


def _missing_members(c_type, cls, where: str, seen: set) -> list[str]:
    from clang.cindex import TypeKind
    if where in seen:
        return []
    seen.add(where)
    cm, pm = _c_members(c_type), _py_members(cls)
    bad = [f"{where}: C member {n!r} is missing in Python" for n in sorted(set(cm) - set(pm))]
    bad += [f"{where}: Python member {n!r} is not in C" for n in sorted(set(pm) - set(cm))]
    for n in sorted(set(cm) & set(pm)):
        ct, pt = cm[n], pm[n]
        while ct.kind in (TypeKind.CONSTANTARRAY, TypeKind.INCOMPLETEARRAY) and is_array(pt):
            ct, pt = ct.element_type.get_canonical(), pt._type_
        if ct.kind == TypeKind.RECORD:
            if not is_record(pt):
                bad.append(f"{where}.{n}: a record in C, {pt!r} in Python")
            else:
                bad += _missing_members(ct, pt, f"{where}.{n}", seen)
    return bad


@pytest.mark.parametrize("header", HEADERS)
def test_every_c_member_is_reachable(header, corpus_cases):
    """No member is silently lost: the names clang sees in each probed type (anonymous members
    promoted, recursively through named nested records) are exactly the generated class's."""
    import clang.cindex as ci
    _, mod = corpus_cases(header)
    tu = ci.Index.create().parse(str(CORPUS / header), args=["-x", "c", "-std=gnu11"])
    tags = {}
    for c in tu.cursor.get_children():
        if c.kind in (ci.CursorKind.STRUCT_DECL, ci.CursorKind.UNION_DECL) and c.is_definition():
            kw = "union" if c.kind == ci.CursorKind.UNION_DECL else "struct"
            tags[f"{kw} {c.spelling}"] = c.type.get_canonical()
        elif c.kind == ci.CursorKind.TYPEDEF_DECL:
            tags[c.spelling] = c.underlying_typedef_type.get_canonical()
    bad = []
    for c_type in probe_directives(CORPUS / header)[0]:
        bad += _missing_members(tags[c_type], getattr(mod, py_name_of(c_type)), c_type, set())
    assert not bad, "\n".join(bad)


def test_probe_detects_a_one_bit_error(corpus_cases, tmp_path):
    """The comparison itself can fail: move T1's ``b`` by one bit and the probe must say so."""
    g, _ = corpus_cases("t01_packed_bitfields.h")
    text, n = re.subn(r"\('b', c_uint32, 3, 20", "('b', c_uint32, 4, 20", g.text)
    assert n == 1, "the rendered layout of t1.b changed shape; update this test"
    from bindgen.layout import load_module_text
    bad_mod = load_module_text(text, "bindgen_test_t1_tampered")
    checks, gcc = run_layout_probe(CORPUS / "t01_packed_bitfields.h", bad_mod, tmp_path)
    bad = compare(checks, gcc)
    assert any("struct t1.b" in b for b in bad), bad


# ---------------------------------------------------------------- case-specific expectations


def _mod(corpus_cases, header):
    return corpus_cases(header)[1]


def _bits(cls, name, value):
    obj = cls()
    setattr(obj, name, value)
    return int.from_bytes(bytes(obj), "little")


def test_t1_packed_bitfields(corpus_cases):
    m = _mod(corpus_cases, "t01_packed_bitfields.h")
    assert ctypes.sizeof(m.t1) == 10 and ctypes.alignment(m.t1) == 1
    for name, off, width in (("a", 0, 3), ("b", 3, 20), ("c", 23, 9), ("d", 32, 40)):
        assert _bits(m.t1, name, (1 << width) - 1) == ((1 << width) - 1) << off, name
    assert m.t1.e.offset == 9
    o = m.t1(a=5, b=0xABCDE, c=0x1FF, d=(1 << 40) - 2, e=b"z")
    assert (o.a, o.b, o.c, o.d, o.e) == (5, 0xABCDE, 0x1FF, (1 << 40) - 2, b"z")


def test_t2_next_unit(corpus_cases):
    m = _mod(corpus_cases, "t02_next_unit.h")
    assert ctypes.sizeof(m.t2) == 24
    for name, off, width in (("y", 32, 30), ("z", 64, 12), ("w", 76, 20), ("v", 128, 40)):
        assert _bits(m.t2, name, (1 << width) - 1) == ((1 << width) - 1) << off, name


def test_t3_shared_unit(corpus_cases):
    m = _mod(corpus_cases, "t03_shared_unit.h")
    assert ctypes.sizeof(m.t3) == 4 and ctypes.alignment(m.t3) == 4


def test_t4_signed_bitfields_read_back_negative(corpus_cases):
    m = _mod(corpus_cases, "t04_signed_zero_unnamed_bool.h")
    o = m.t4()
    for name in ("s1", "s2", "s3", "s4", "s5"):
        setattr(o, name, -1)
        assert getattr(o, name) == -1, name
    o.s3 = -(1 << 32)
    assert o.s3 == -(1 << 32)
    o.s1 = 3
    assert o.s1 == 3
    o.b = True
    assert o.b in (1, True)
    o.u = 3
    assert o.u == 3


def test_t5_anonymous_members_promoted(corpus_cases):
    m = _mod(corpus_cases, "t05_anonymous.h")
    o = m.t5(tag=1, u1=0x00020001)
    assert o.u1 == 0x00020001 and (o.lo, o.hi) == (1, 2)
    o.hi = 7
    assert o.u1 == 0x00070001
    o.f1 = 1.0
    assert o.u1 == 0x3F800000
    assert {"tag", "u1", "f1", "lo", "hi", "after"} <= set(m.t5.__bindgen_names__)


def test_t6_flexible_array(corpus_cases):
    m = _mod(corpus_cases, "t06_flexible_array.h")
    assert ctypes.sizeof(m.t6) == 8 and m.t6.data.offset == 8
    assert ctypes.sizeof(m.t6b) == 8 and m.t6b.items.offset == 8


def test_t7_enum_values_and_sizes(corpus_cases):
    m = _mod(corpus_cases, "t07_enums.h")
    assert (m.T7_NEG, m.T7_POS, m.T7_BIG, m.T7_HUGE) == (-5, 1, 0x80000000, 0x100000000)
    assert ctypes.sizeof(m.t7) == 24
    assert [getattr(m.t7, f).size for f in ("a", "b", "c", "after")] == [4, 4, 8, 4]
    assert [getattr(m.t7, f).offset for f in ("a", "b", "c", "after")] == [0, 4, 8, 16]
    o = m.t7(a=m.T7_NEG, b=m.T7_BIG, c=m.T7_HUGE)
    assert (o.a, o.b, o.c) == (-5, 0x80000000, 0x100000000)


def test_t8_alignment_capped_but_offsets_exact(corpus_cases):
    m = _mod(corpus_cases, "t08_aligned.h")
    cap = 16 if sys.version_info < (3, 13) else 1 << 30
    assert ctypes.sizeof(m.t8) == 32 and ctypes.alignment(m.t8) == 16
    assert [getattr(m.t8, f).offset for f in ("c", "m", "t", "after")] == [0, 8, 16, 20]
    assert ctypes.sizeof(m.t8_s32) == 32 and ctypes.alignment(m.t8_s32) == min(32, cap)
    assert ctypes.sizeof(m.t8_holder) == 96 and m.t8_holder.s.offset == 32
    assert m.t8_holder.tail.offset == 64
    assert ctypes.alignment(m.t8_holder) == min(32, cap)


def test_t9_nested(corpus_cases):
    m = _mod(corpus_cases, "t09_nested.h")
    o = m.t9(a=1, b=2, c=b"c", d=4, g=5)
    o.named.e = 6
    assert (o.a, o.b, o.c, o.d, o.g, o.h & 0xFFFFFFFF, o.named.e) == (1, 2, b"c", 4, 5, 5, 6)
    assert hasattr(m, "t9_inner")


def test_t10_function_pointers(corpus_cases):
    m = _mod(corpus_cases, "t10_function_pointers.h")
    assert ctypes.sizeof(m.t10) == 80
    o = m.t10()
    cb_type = type(o.cb)
    calls = []
    cb = cb_type(lambda ctx, n: calls.append(n) or n * 2)
    o.cb = cb
    assert o.cb(None, 21) == 42 and calls == [21]
    assert len(o.arr) == 4


def test_t11_pack_and_keywords(corpus_cases):
    m = _mod(corpus_cases, "t11_pack_keywords.h")
    assert ctypes.sizeof(m.t11_p1) == 15
    assert [getattr(m.t11_p1, f).offset for f in ("c", "i", "s", "l")] == [0, 1, 5, 7]
    assert ctypes.sizeof(m.t11_outer) == 11 and m.t11_outer.in_.offset == 1
    assert ctypes.sizeof(m.t11_inner) == 8 and ctypes.alignment(m.t11_inner) == 4
    o = m.t11_kw(in_=1, from_=2, lambda_=3, None_=4)
    assert (o.in_, o.from_, o.lambda_, o.None_) == (1, 2, 3, 4)


def test_t12_union_of_bitfields(corpus_cases):
    m = _mod(corpus_cases, "t12_union_of_bitfields.h")
    assert ctypes.sizeof(m.t12_u) == 4 and ctypes.alignment(m.t12_u) == 4
    u = m.t12_u()
    u.c = -1
    assert bytes(u) == b"\xff\xff\x0f\x00" and u.a == 7 and u.b == 31 and u.c == -1


def test_t12b_2d_arrays(corpus_cases):
    m = _mod(corpus_cases, "t12b_arrays_2d.h")
    o = m.t12()
    o.m[1][2] = 7
    o.grid[2][1][4] = 9
    assert ctypes.sizeof(o.m) == 24 and ctypes.sizeof(o.n) == 8 and o.m[1][2] == 7
    assert bytes(o)[m.t12.grid.offset + 29] == 9
    o.w.parts.hi = 0xABCD
    assert o.w.all == 0xABCD0000


def test_t13_declare_flex_array(corpus_cases):
    m = _mod(corpus_cases, "t13_declare_flex_array.h")
    assert ctypes.sizeof(m.t13) == 4 and ctypes.alignment(m.t13) == 4
    # both flexible arrays exist, each behind its own empty struct
    assert {"bytes", "words", "__empty_bytes", "__empty_words"} <= set(m.t13.__bindgen_names__)


def test_t13b_structs_pointers_doubles(corpus_cases):
    m = _mod(corpus_cases, "t13b_structs_pointers_doubles.h")
    assert ctypes.sizeof(m.t13_pt) == 24 and ctypes.alignment(m.t13_pt) == 8
    o = m.t13_list()
    o.pts[2].z = 2.5
    assert o.pts[2].z == 2.5 and m.t13_list.pts.offset == 0 and m.t13_list.next.offset == 72
    o.self = ctypes.pointer(o)
    assert ctypes.addressof(o.self.contents) == ctypes.addressof(o)
    assert ctypes.sizeof(m.t13_list) == 128


def test_t14_sibling_anonymous_structs_are_distinct(corpus_cases):
    m = _mod(corpus_cases, "t14_sibling_anonymous.h")
    assert {"kind", "a", "b", "c", "d", "e"} <= set(m.t14.__bindgen_names__)
    assert ctypes.sizeof(m.t14) == 24
    o = m.t14(c=-2, d=b"x")
    assert (o.c, o.d, o.a) == (-2, b"x", -2)
    o.b = 5
    assert o.c & 0xFFFF_0000_0000 == 5 << 32


def test_t16_typedef_anonymous_struct_embedded_by_value(corpus_cases):
    m = _mod(corpus_cases, "t16_typedef_order.h")
    assert ctypes.sizeof(m.t16_z_t) == 16
    assert ctypes.sizeof(m.t16_a) == 56 and m.t16_a.z.offset == 8 and m.t16_a.zs.offset == 24


def test_member_check_detects_a_lost_member(corpus_cases):
    """``_missing_members`` can fail: a class lacking one of T5's promoted members is reported."""
    import clang.cindex as ci
    import bindgen_rt as cabi
    _, mod = corpus_cases("t05_anonymous.h")

    class Partial(cabi.Struct):
        pass
    Partial._layout_(12, 4, [f for f in mod.t5.__bindgen_fields__ if f[0] != "after"])
    tu = ci.Index.create().parse(str(CORPUS / "t05_anonymous.h"), args=["-x", "c"])
    t5 = next(c for c in tu.cursor.get_children() if c.spelling == "t5").type.get_canonical()
    assert _missing_members(t5, Partial, "struct t5", set()) == \
        ["struct t5: C member 'after' is missing in Python"]
    assert _missing_members(t5, mod.t5, "struct t5", set()) == []
