"""``static const`` records and arrays are module constants: a record is an instance of its class,
an array a ctypes array, each byte for byte the object gcc compiles from the same header (a
library built here hands out each object's address). Layouts are compared with gcc too."""

from __future__ import annotations

import ctypes
import re

import pytest

from .conftest import CORPUS, compare, compile_c, generate_headers, requires_gcc, run_layout_probe

pytestmark = [requires_gcc]

HEADER = CORPUS / "c_static.h"
BOUND = re.findall(r"^static const [^=]*?\b(\w+)(?:\[[^\]]*\])* = ", HEADER.read_text().split(
    "/* Not constants")[0], re.M)
REFUSED = {
    "NAMES": "holds a pointer",
    "WITH_PTR": "holds a pointer",
    "RANGE": "GNU range designator",
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cstatic")
    impl = '#include "c_static.h"\n' + "".join(
        f"const void *addr_{n}(void) {{ return &{n}; }}\n"
        f"unsigned long size_{n}(void) {{ return sizeof {n}; }}\n"
        for n in BOUND
    )
    lib = compile_c(impl, tmp / "lib" / "libcstatic.so", [CORPUS], shared=True)
    g, mod = generate_headers(tmp, ["c_static.h"], name="c_static")
    return g, mod, ctypes.CDLL(str(lib))


def test_layouts_match_gcc(built, tmp_path):
    checks, answers = run_layout_probe(HEADER, built[1], tmp_path)
    assert checks and compare(checks, answers) == []


@pytest.mark.parametrize("name", BOUND)
def test_value_is_the_object_gcc_compiles(built, name):
    _, mod, lib = built
    addr = getattr(lib, f"addr_{name}")
    addr.restype = ctypes.c_void_p
    size = getattr(lib, f"size_{name}")
    size.restype = ctypes.c_ulong
    value = getattr(mod, name)
    assert isinstance(value, ctypes.Structure | ctypes.Union | ctypes.Array), name
    assert ctypes.sizeof(value) == size()
    assert bytes(value) == ctypes.string_at(addr(), size())


def test_values_read_as_python(built):
    m = built[1]
    assert isinstance(m.ORIGIN, m.pt) and (m.ORIGIN.x, m.ORIGIN.y) == (1, -2)
    assert m.BOX.name == b"card" and m.BOX.b.y == 8 and list(m.BOX.tag) == [97, 98, 0, 0]
    assert list(m.PRIMES) == [2, 3, 5, 7] and list(m.TBL) == [0xFFFF, 0, 9, 1, 0, 0]
    assert [list(r) for r in m.FLAT] == [[1, 2], [3, 4]]
    assert (m.FLAGS.lo, m.FLAGS.mid, m.FLAGS.hi) == (5, -3, 511)
    assert m.ANON.ival == 2 and m.ANON.s2 == 4 and m.ANON_DESIG.dval == 0.5
    assert list(m.INT_FROM_FLOAT) == [2, -2] and list(m.SMALL) == [-1, 127, -56]
    assert list(m.COLS) == [4, 3, 0]


def test_constants_pass_to_c_by_pointer(built):
    m = built[1]
    p = ctypes.cast(ctypes.byref(m.PTS, ctypes.sizeof(m.pt) * 2), ctypes.POINTER(m.pt))
    assert (p[0].x, p[0].y) == (9, 0) and (p[1].x, p[1].y) == (4, 0)  # 4 starts PTS[3]


def test_lazy_modules_make_them_on_first_use(built, tmp_path):
    _, m = generate_headers(tmp_path, ["c_static.h"], name="c_static_lazy", lazy=True)
    eager = built[1]
    for name in ("BOX", "PTS", "ANON_DESIG", "FLAGS", "GRID"):
        assert bytes(getattr(m, name)) == bytes(getattr(eager, name)), name


def test_what_python_cannot_hold_is_reported(built):
    g, m, _ = built
    for name, reason in REFUSED.items():
        assert not hasattr(m, name)
        assert re.search(rf"variable {name}: .*{reason}", g.report), name
    assert m.WITH_NULL.n == 1 and m.WITH_NULL.s is None  # a null pointer is a constant
    assert "static const struct pt" in g.text  # the C type is in the comment above each
