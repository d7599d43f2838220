"""Regressions from bindgen's sweep over the Linux uapi tree, each a small header in
corpus/ with gcc as the truth: anonymous bitfields and packed unions (t20, also compared member by
member in test_layout_gcc), function-like macro conversions, tag-renaming macros and command-line
definitions, calls libffi gets wrong, inline functions, over-aligned records, and what a layout
mismatch says."""

from __future__ import annotations

import ctypes
import dataclasses

import pytest

from bindgen.gcc_probe import compare, macro_fn_checks, module_checks, run_probe

from .conftest import CORPUS, compile_c, generate_headers, requires_gcc

pytestmark = [requires_gcc]


@pytest.fixture(scope="module")
def t20(tmp_path_factory):
    return generate_headers(
        tmp_path_factory.mktemp("t20"), ["t20_anonymous_bitfield_packed_union.h"], name="t20"
    )


def test_unnamed_bitfield_in_anonymous_union_keeps_the_parents_members(t20):
    _, m = t20
    o = m.t20_r1(a=1)
    o.x = 5  # raised AttributeError: the union's `_anon1` bitfield replaced t20_r1._anon1
    o.p = 0x1234
    assert (o.a, o.x, o.p) == (1, 5, 0x1234)
    assert set(m.t20_r1.__bindgen_names__) == {"a", "x", "p"}
    assert ctypes.sizeof(m.t20_r1) == 16 and m.t20_r1.__bindgen_fields__[2][2] == 64


def test_packed_unions_have_gccs_alignment(t20):
    _, m = t20
    assert (ctypes.sizeof(m.t20_r3), ctypes.alignment(m.t20_r3)) == (4, 1)
    assert ctypes.alignment(m.t20_r2) == 4 and ctypes.sizeof(m.t20_r2) == 8
    assert (ctypes.sizeof(m.t20_r4), m.t20_r4.d.offset) == (7, 5)
    o = m.t20_r4(c=b"c", d=b"d", hi=5, lo=3)
    o.u.y = 0x01020304
    assert bytes(o)[1:5] == bytes.fromhex("04030201") and o.all == (5 << 5) | 3


@pytest.fixture(scope="module")
def macros(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("macros")
    g, mod = generate_headers(
        tmp, ["macro_conversions.h"], name="macro_conv", clang_args=["-D__force="]
    )
    return tmp, g, mod


def test_function_like_macros_convert_as_c_does(macros):
    _, _, m = macros
    assert m.F_MUL2U(-1) == 4294967294  # was -2: (x) * 2u is unsigned int
    assert m.F_LTU(-1) == 0 and m.F_DIVU(-2) == 2147483647 and m.F_MODL(-7) == -1
    assert m.F_NEG(-(1 << 63)) == -(1 << 63) and m.F_NOT(4294967296) == -4294967297
    assert m.F_OUTER(-1, 0) == 4294967295  # the inner call's unsigned result stays unsigned
    assert m.F_OUTER(-1, -(1 << 40)) == 4294967295 - (1 << 40)
    assert m.F_ORFLAGS(-1, 0) == 4294967295  # int -1 | unsigned int: unsigned
    assert m.F_WIDE(-2) == (1 << 64) - 1 and m.F_BYTE(-1) == 256
    assert type(m.F_MUL2U(1)) is not bool and m.F_MUL2U(1) + 1 == 3


def test_function_like_macros_match_gcc(macros):
    """Every function-like macro at every probe input, and every constant and ioctl, against the
    values gcc computes from the same header."""
    tmp, g, mod = macros
    checks = module_checks(mod, g.module)
    assert sum(c.kind == "macro_fn" for c in checks) >= 40
    res = run_probe([str(CORPUS / "macro_conversions.h")], checks, tmp / "probe",
                    ["-D__force=", f"-I{CORPUS}"])
    assert res.error is None, res.error
    live = [c for i, c in enumerate(checks) if i not in res.unprobed]
    assert not compare(live, res.gcc)
    # Only inputs that are undefined behaviour in C are set aside (shifts by the width or of
    # negative values), never a whole macro.
    assert all("shift" in why for why in res.unprobed.values()), res.unprobed
    probed = {c.key.split("(")[0] for c in live if c.kind == "macro_fn"}
    assert probed == {f"macro {f.name}" for f in g.module.macro_functions}


def test_probe_catches_the_old_translation(macros):
    """The comparison can fail: the pre-fix body of F_MUL2U (plain Python arithmetic) differs
    from gcc at -1."""
    tmp, _, _ = macros
    checks = macro_fn_checks("F_MUL2U", 1, lambda x: x * 2)
    res = run_probe([str(CORPUS / "macro_conversions.h")], checks, tmp / "old", [f"-I{CORPUS}"])
    assert any("F_MUL2U(-1): gcc 4294967294, python -2" in b for b in compare(checks, res.gcc))


def test_tag_renaming_macro_and_command_line_definition(macros):
    _, g, m = macros
    # sound/asound.h's __SNDRV_PCM_IOCTL_SYNC_PTR was "references undefined snd_pcm_sync_ptr"
    assert int(m.MC_IOC) == (3 << 30) | (ctypes.sizeof(m.mc_tagged) << 16) | (0x41 << 8) | 0x23
    assert m.MC_IOC.arg_type is m.mc_tagged
    assert m.MC_FORCED == 0xFFFFFFFF  # __force is defined away by -D__force=
    assert "macro __mc_tagged: names the tag of struct mc_tagged (a type, not a value)" in g.report


IMPL = r"""
#include "byvalue_refused.h"
double bv_plain_sum(struct bv_plain s) { return s.x + s.y; }
double bv_by_pointer(const struct bv_packed *s) { return s->c + s->d; }
"""


def test_calls_libffi_gets_wrong_are_refused_with_a_reason(tmp_path):
    lib = compile_c(IMPL, tmp_path / "lib" / "libbv.so", [CORPUS], shared=True, opt="-O2")
    g, m = generate_headers(
        tmp_path,
        ["byvalue_refused.h"],
        name="bv",
        libraries=[{"name": "bv", "candidates": [str(lib)]}],
    )
    refused = {
        "bv_packed_sum": "struct bv_packed by value (packed)",
        "bv_packed_make": "struct bv_packed by value (packed)",
        "bv_ld_get": "long double by value",
        "bv_ld_arg": "long double by value",
        "bv_union_get": "union bv_union by value (a union: libffi has no union type)",
        "bv_outer_sum": "struct bv_outer by value (member p: struct bv_packed by value (packed))",
    }
    for name, why in refused.items():
        assert not hasattr(m, name), name
        line = next(ln for ln in g.report.splitlines() if ln.startswith(f"function {name}:"))
        assert why in line and "C wrapper that takes a pointer" in line, line
    assert m.bv_plain_sum(m.bv_plain(1.25, 2.5)) == 3.75
    assert m.bv_by_pointer(ctypes.byref(m.bv_packed(b"\x02", 0.5))) == 2.5
    assert ("inline function bv_inline: static inline function: its body is C code in the header "
            "and no library exports it") in g.report


def test_over_aligned_records_say_what_ctypes_cannot(corpus_cases):
    g, m = corpus_cases("t08_aligned.h")
    assert "## emitted with a limit" in g.report
    line = next(ln for ln in g.report.splitlines() if ln.startswith("record t8_s32:"))
    assert "aligned to 32" in line and "array strides are exact" in line
    assert ctypes.sizeof(m.t8_s32 * 3) == 96 and m.t8_holder.tail.offset == 64


def test_layout_mismatch_names_the_c_member_and_what_to_do(t20):
    from bindgen.errors import LayoutError
    from bindgen.layout import verify_module

    g, mod = t20
    ir_mod = g.module
    rec = next(r for r in ir_mod.records if r.name == "t20_r1")
    anon = next(f for f in rec.fields if f.anonymous and f.bit_offset == 64)
    moved = dataclasses.replace(
        rec, fields=tuple(dataclasses.replace(f, bit_offset=32) if f is anon else f
                          for f in rec.fields))
    broken = dataclasses.replace(ir_mod, records=[moved if r is rec else r
                                                  for r in ir_mod.records])
    with pytest.raises(LayoutError) as ei:
        verify_module(mod, broken)
    msg = str(ei.value)
    assert (f"t20_r1.{anon.name}: offset 8, clang says 4 (the anonymous struct/union member at "
            "corpus:t20_anonymous_bitfield_packed_union.h:6, in struct t20_r1)") in msg, msg
    assert "bindgen bug" in msg and "`drop` patch" in msg
