"""C enums as Python enum classes (a target's ``enums: IntEnum`` and ``flag_enums``), called
through a gcc-built library: the classes' values are C's, fields, parameters and returns stay C
integers, values without an enumerator convert without raising. Layouts are compared with gcc."""

from __future__ import annotations

import ctypes
import enum

import pytest

from bindgen.errors import SpecError

from .conftest import CORPUS, compare, compile_c, generate_headers, requires_gcc, run_layout_probe

pytestmark = [requires_gcc]

IMPL = r"""
#include "c_enums.h"
enum color next_color(enum color c) { return c == RED ? GREEN : c == GREEN ? BLUE : RED; }
int paint_sum(const struct paint *p) { return (int)p->c * 100 + (int)p->c2 * 10 + (int)p->access; }
color_t unknown_color(void) { return (color_t)42; }
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cenums")
    lib = compile_c(IMPL, tmp / "lib" / "libcenums.so", [CORPUS], shared=True)
    return tmp, lib


def _generate(tmp, lib, name, **opts):
    return generate_headers(
        tmp, ["c_enums.h"], name=name,
        libraries=[{"name": "cenums", "candidates": [str(lib)]}], **opts,
    )


@pytest.fixture(scope="module")
def classes(built):
    tmp, lib = built
    return _generate(tmp / "classes", lib, "c_enums_cls", enums="IntEnum",
                     flag_enums=["^access_"])


@pytest.fixture(scope="module")
def plain(built):
    tmp, lib = built
    return _generate(tmp / "plain", lib, "c_enums_int")


def test_layouts_match_gcc(classes, tmp_path):
    checks, answers = run_layout_probe(CORPUS / "c_enums.h", classes[1], tmp_path)
    assert checks and compare(checks, answers) == []


def test_enums_are_int_enum_classes(classes):
    m = classes[1]
    assert issubclass(m.color, enum.IntEnum) and not issubclass(m.color, enum.IntFlag)
    assert [(e.name, e.value) for e in m.color] == [("RED", 3), ("GREEN", 4), ("BLUE", -2)]
    assert m.RED is m.color.RED and m.RED == 3  # enumerators stay module names, as in C
    assert m.big.BIG_MAX == 0xFFFFFFFFFF
    assert m.ANON_A == 7 and isinstance(m.ANON_A, enum.IntEnum)
    assert m.__enums__["color"] == {"RED": 3, "GREEN": 4, "BLUE": -2}


def test_flag_enums_are_int_flags(classes):
    m = classes[1]
    assert issubclass(m.access_flags, enum.IntFlag)
    both = m.ACCESS_READ | m.ACCESS_WRITE
    assert isinstance(both, m.access_flags) and both == 3
    assert m.access_flags(0x13) == 0x13  # a bit no enumerator names is kept, not refused


def test_unknown_values_from_c_convert_without_raising(classes):
    m = classes[1]
    raw = m.unknown_color()
    assert type(raw) is int and raw == 42  # returns stay C integers
    c = m.color(raw)
    assert c == 42 and isinstance(c, m.color) and repr(c) == "<color: 42>"
    assert m.color(4) is m.color.GREEN


def test_fields_and_parameters_stay_c_integers(classes):
    m = classes[1]
    assert m.next_color(m.RED) == m.GREEN  # a member passes as its int
    assert m.next_color(4) == -2  # and so does a plain int
    p = m.paint(c=m.BLUE, c2=m.GREEN, access=m.ACCESS_READ | m.ACCESS_EXEC)
    assert m.paint_sum(ctypes.byref(p)) == -200 + 40 + 5
    p.c = 99  # a C enum object holds any value of its type
    assert type(p.c) is int and p.c == 99 and m.color(p.c) == 99
    assert m.next_color.argtypes == (ctypes.c_int32,)  # the ctypes type is the integer
    assert m.color_t is ctypes.c_int32  # a typedef of an enum class is its ctypes type
    assert issubclass(m.anon_t, enum.IntEnum)  # an anonymous enum named by its typedef


def test_names_an_enum_class_cannot_hold_stay_plain_constants(classes):
    m = classes[1]
    assert m.mro == 1 and m._hidden_ == 2 and m.__mangled == 3
    assert [e.name for e in m.odd_names] == ["plain"]
    assert m.plain is m.odd_names.plain


def test_default_stays_plain_integers(plain):
    m = plain[1]
    assert m.color is ctypes.c_int32 and type(m.RED) is int and m.RED == 3
    assert "CEnum" not in plain[0].text and "import enum" not in plain[0].text


def test_lazy_modules_make_enum_classes_on_first_use(built):
    tmp, lib = built
    _, m = _generate(tmp / "lazy", lib, "c_enums_lazy", enums="IntEnum", lazy=True)
    assert m.GREEN is m.color.GREEN and m.color(42) == 42
    assert m.next_color(m.RED) == m.GREEN


def test_flag_enums_need_enum_classes(built, tmp_path):
    with pytest.raises(SpecError, match="flag_enums.*enums: IntEnum"):
        _generate(tmp_path, built[1], "c_enums_bad", flag_enums=["^access_"])
