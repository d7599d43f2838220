"""What generation compiles to check a lazy module: ``layout.left_to_compile`` leaves out only
statements checked otherwise (records the lazy loader compiled, integer assignments valid by their
form) and keeps every line where it was, so an error anywhere else is still found, at its line."""

from __future__ import annotations

import pytest

from bindgen import ir
from bindgen.layout import left_to_compile
from bindgen_rt.lazy import INDEX_MARK, LAYOUTS_MARK

HEAD = "# a definitions module\nimport ctypes\n\n"


def _defs(statements: list[tuple[str, str]], layouts: list[tuple[str, str]] = ()) -> str:
    """A definitions module in the renderer's format: statements, then the byte-offset index."""
    text, entries = HEAD, []
    for name, stmt in [*statements, *layouts]:
        entries.append((name, text.count("\n") + 1, len(text.encode()), len(stmt.encode())))
        text += stmt + "\n\n"
    n = len(statements)
    index = [INDEX_MARK + "title\n"] + [f"#@ {a} {b} {c} {d}\n" for a, b, c, d in entries[:n]]
    index += [LAYOUTS_MARK] + [f"#@ {a} {b} {c} {d}\n" for a, b, c, d in entries[n:]]
    return text + "".join(index)[1:]


def _module(*records: str) -> ir.Module:
    m = ir.Module("t")
    m.records = [ir.Record(name=r, c_name=r, kind="struct", size=4, align=4) for r in records]
    return m


def test_records_and_integer_assignments_become_pass_on_the_same_lines() -> None:
    defs = _defs(
        [("S", "class S(ctypes.Structure):\n    'doc'\n    x: int"), ("A", "A = 0x1_0  # a: é"),
         ("B", "B = (1 << 3)"), ("C", "C = 0o7"), ("D", "D = 00")],
        [("S", "S._fields_ = [\n    ('x', ctypes.c_int),\n]")],
    )
    left = left_to_compile(defs, _module("S")).decode()
    assert left.count("\n") == defs.count("\n")
    lines = left.splitlines()
    assert "class S" not in left and "_fields_" not in left and "A = " not in left
    assert "D = " not in left  # 00 is a valid integer
    assert "B = (1 << 3)" in lines and "C = 0o7" in lines  # not of the trivial form: compiled
    assert lines[defs.splitlines().index("B = (1 << 3)")] == "B = (1 << 3)"  # same line
    compile(left, "x", "exec")


@pytest.mark.parametrize(
    "bad",
    [
        [("class", "class = 1")],  # a keyword: not valid by its form
        [("__debug__", "__debug__ = 1")],
        [("A", "A = 0123")],  # no leading zeros in Python
        [("A", "A = 1_")],
        [("A", "A = 1  # c\rB = ")],  # \r ends a line for Python
        [("L", "L = ["), ("A", "A = 1"), ("R", "]")],  # a neighbour left open still fails
    ],
)
def test_what_is_not_valid_by_its_form_is_still_compiled(bad: list[tuple[str, str]]) -> None:
    defs = _defs(bad)
    with pytest.raises(SyntaxError):
        compile(defs, "x", "exec")
    with pytest.raises(SyntaxError):
        compile(left_to_compile(defs, _module()), "x", "exec")


@pytest.mark.parametrize("broken", ["._layout_(", "\nMC_IOC = "])
def test_a_lazy_statement_that_does_not_compile_fails_generation_at_its_line(
    tmp_path, monkeypatch, broken: str
) -> None:
    """A record's layout (compiled by the lazy loader while verifying) or an ioctl (compiled with
    the rest): either way generation fails naming the definitions file and the line."""
    from bindgen import generate
    from bindgen.errors import BindgenError
    from bindgen.render import Rendered

    from .conftest import generate_headers

    real = generate.render_module
    where: list[int] = []

    def corrupt(*args, **kwargs):  # one statement made invalid, every byte offset kept
        r = real(*args, **kwargs)
        at = r.defs.index(broken)
        where.append(r.defs.count("\n", 0, at + 1) + 1)
        bad = broken[:-1] + ("[" if broken.endswith("(") else ")")
        return Rendered(r.text, r.defs[:at] + bad + r.defs[at + len(broken) :])

    monkeypatch.setattr(generate, "render_module", corrupt)
    with pytest.raises(BindgenError) as ei:
        generate_headers(tmp_path, ["t11_pack_keywords.h", "macro_conversions.h"], lazy=True)
    msg = str(ei.value)  # the line of the statement (a multi-line one may be reported at its end)
    assert "rendered _probe_target.py does not compile: line " in msg and f"line {where[0]}" in msg
