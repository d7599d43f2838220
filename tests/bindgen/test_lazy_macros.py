"""Lazy modules: function-like macros that refer to other definitions work on first call, records
refer to each other in any order, and the same header rendered eagerly gives the same values."""

from __future__ import annotations

from pathlib import Path

from .conftest import generate_headers

HEADER = """
#define FIELD_mask 0x3f
#define FIELD_shift 8
#define FIELD(x) (((x) & FIELD_mask) << FIELD_shift)
#define TWICE(x) (FIELD(x) * 2)
#define NEG (-7 / 2)
struct node { struct node *next; struct leaf *first; int v; };
struct leaf { unsigned a : 3; int b : 5; };
"""


def test_lazy_function_macros_resolve_their_references(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "lazy.h").write_text(HEADER)
    values = []
    for lazy in (True, False):
        _, mod = generate_headers(
            tmp_path / str(lazy), ["lazy.h"], name="lazy_t", source_dir=src, lazy=lazy
        )
        # The first touch is a function whose body names constants and another function.
        values.append((mod.TWICE(1), mod.FIELD(0x41), mod.NEG))
        leaf = mod.leaf(a=7, b=-3)
        assert (leaf.a, leaf.b) == (7, -3)
        assert mod.node().v == 0
    assert values[0] == values[1] == ((1 << 8) * 2, 1 << 8, -3)


def test_x_macro_table_rows(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "codes.def").write_text(
        '/* rows */\nCODE(OK, 0x0, "Success")\n#if 0\nCODE(GONE, 9, "x")\n'
        '#endif\nCODE(BAD_ARG, 31u, "Invalid " "argument")\n'
    )
    (src / "codes.h").write_text(
        '#define CODE(n, v, s) n = (v),\nenum codes {\n#include "codes.def"\n};\n#undef CODE\n'
    )
    tables = [
        {"invocation": "CODE", "name": "CODE_TABLE", "files": ["corpus:codes.def"], "why": "t"}
    ]
    _, mod = generate_headers(
        tmp_path, ["codes.h"], name="tbl", source_dir=src, macros={"tables": tables}
    )
    assert mod.CODE_TABLE == (("OK", 0, "Success"), ("BAD_ARG", 31, "Invalid argument"))
    assert mod.BAD_ARG == 31
