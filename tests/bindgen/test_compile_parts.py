"""The generator compiles rendered modules in parts (``bindgen.layout.compile_in_parts``, over
``bindgen_rt.lazy.compile_in_parts``, which a lazy module also uses to run its definitions without
bytecode): the parts must do what the whole does, keep every line number, and fail as the whole
fails."""

from __future__ import annotations

import traceback

import pytest

import bindgen_rt.lazy as lazy_rt
from bindgen.layout import compile_in_parts


def _module(n: int) -> str:
    """A module of ``n`` small classes, each with a method that fails on its own line."""
    out = ['"""The docstring."""\n', "import math\n"]
    for i in range(n):
        out.append(f"\n\nclass C{i}:\n    x = {i}\n\n    def f(self):\n"
                   f"        return 1 // (self.x - {i})\n")
    out.append("\nTOTAL = sum([" + ", ".join(f"C{i}.x" for i in range(0, n, 97)) + "])\n")
    return "".join(out)


def _run(parts) -> dict:
    g: dict = {}
    for p in parts:
        exec(p, g)
    return g


def test_parts_do_what_the_whole_does_at_the_same_lines(monkeypatch):
    monkeypatch.setattr(lazy_rt, "_PART_CHARS", 512)
    src = _module(300)
    parts = compile_in_parts(src, "m.py")
    assert len(parts) > 10
    whole, split = _run([compile(src, "m.py", "exec")]), _run(parts)
    assert split["TOTAL"] == whole["TOTAL"] and split["__doc__"] == "The docstring."
    for i in (0, 150, 299):
        lines = []
        for g in (whole, split):
            try:
                g[f"C{i}"]().f()
            except ZeroDivisionError as e:
                lines.append(traceback.extract_tb(e.__traceback__)[-1].lineno)
            assert g[f"C{i}"].f.__code__.co_firstlineno == whole[f"C{i}"].f.__code__.co_firstlineno
        assert lines[0] == lines[1] == src.splitlines().index(
            f"        return 1 // (self.x - {i})") + 1


@pytest.mark.parametrize("tail", [
    "x = (1,\n",  # unclosed at the end
    "def g():\n    pass\n  bad_indent = 1\n",
])
def test_a_syntax_error_is_the_one_compiling_the_whole_gives(monkeypatch, tail):
    monkeypatch.setattr(lazy_rt, "_PART_CHARS", 512)
    src = _module(100) + tail
    with pytest.raises(SyntaxError) as whole:
        compile(src, "m.py", "exec")
    with pytest.raises(SyntaxError) as split:
        compile_in_parts(src, "m.py")
    assert (split.value.msg, split.value.lineno) == (whole.value.msg, whole.value.lineno)


@pytest.mark.parametrize("src", [
    # a top-level line inside a string, a decorator, an else at column 0: no part may end there
    'X = """\nclass NotCode:\n"""\n' * 40,
    "def d(f):\n    return f\n\n\n@d\ndef g():\n    return 1\n" * 40,
    "if True:\n    A = 1\nelse:\n    A = 2\n" * 60,
    # a part that starts with a string would set the module's docstring
    '"""doc"""\nA = 1\n' + "'not a docstring'\nB = 2\n" * 60,
])
def test_statements_that_cannot_be_split_compile_as_the_whole(monkeypatch, src):
    monkeypatch.setattr(lazy_rt, "_PART_CHARS", 64)

    def seen(g: dict) -> dict:
        return {k: (v.__name__, v.__code__.co_firstlineno) if callable(v) else v
                for k, v in g.items() if k != "__builtins__"}

    assert seen(_run(compile_in_parts(src, "m.py"))) == seen(_run([compile(src, "m.py", "exec")]))


def test_a_future_import_keeps_the_text_whole(monkeypatch):
    monkeypatch.setattr(lazy_rt, "_PART_CHARS", 64)
    src = "from __future__ import annotations\n" + "def f(x: Undefined) -> None:\n    pass\n" * 40
    parts = compile_in_parts(src, "m.py")
    assert len(parts) == 1
    _run(parts)  # annotations stay unevaluated: Undefined is never looked up
