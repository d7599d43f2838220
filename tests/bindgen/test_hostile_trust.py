"""Hostile input, second battery: bounded work on hostile specs and headers, a source cache that
trusts only the pins, a `check` that fails closed, and outputs that stay inside the output root.
Each test failed before the fix it guards (the first battery is test_hostile.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bindgen import ir
from bindgen.cexpr import CType, MacroContext, MacroDef, MacroOptions, tokenize, translate_macros
from bindgen.errors import SpecError
from bindgen.spec import load_spec

# ---------------------------------------------------------------- bounded work: spec YAML


def _spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    return path


def test_yaml_aliases_that_expand_exponentially_are_refused_at_their_line(tmp_path):
    """A 351-byte "billion laughs" spec (9^9 values) ran for minutes and died of MemoryError."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(8):
        prev, cur = chr(97 + i), chr(98 + i)
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    path = _spec(tmp_path, "\n".join(lines) + "\ngroup: x\n")
    t0 = time.monotonic()
    with pytest.raises(SpecError, match=r"^hostile.yaml:6: the spec stands for more than "
                                        r"200,000 values with its aliases expanded"):
        load_spec(path, tmp_path)
    assert time.monotonic() - t0 < 30  # was: minutes, then MemoryError


def test_a_few_aliases_still_work(tmp_path):
    from .conftest import CORPUS

    path = _spec(tmp_path, f"""\
group: g
sources:
  corpus: {{kind: system, path: {CORPUS}, package: p}}
defaults: &d {{clang_args: [-DX=1]}}
targets:
  t: {{output: g/t.py, headers: ["corpus:t07_enums.h"], clang_args: [-DY=2]}}
""")
    assert [t.name for t in load_spec(path, tmp_path).targets] == ["t"]


@pytest.mark.parametrize("text,line", [
    ("group: " + "[" * 50_000 + "]" * 50_000 + "\n", 1),
    ("group: x\ntargets:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(100)), 65),
    ("a: &a " + "[" * 40 + "1" + "]" * 40 + "\nb: &b " + "[" * 30 + "*a" + "]" * 30 + "\n", 2),
])
def test_deep_nesting_is_a_spec_error_not_a_recursion_error(tmp_path, text, line):
    with pytest.raises(SpecError, match=rf"^hostile.yaml:{line}: .*more than 64 levels deep"):
        load_spec(_spec(tmp_path, text), tmp_path)


# ---------------------------------------------------------------- bounded work: macros

_CTX = MacroContext(types={"int": CType(4, True)}, enum_constants={}, record_names={})


def _translate(src: str):
    macros = []
    for i, line in enumerate(src.strip().splitlines(), 1):
        head, _, body = line.removeprefix("#define ").partition(" ")
        name, _, params = head.partition("(")
        macros.append(MacroDef(name, tuple(p for p in params.rstrip(")").split(",") if p)
                               if params else None, tuple(tokenize(body)),
                               ir.Location("h.h", i)))
    return translate_macros(macros, _CTX, MacroOptions(), lambda n: True)


def _doubling(depth: int) -> str:
    return ("#define F0(x) ((x)+1)\n"
            + "".join(f"#define F{i}(x) F{i - 1}(F{i - 1}(x))\n" for i in range(1, depth + 1))
            + f"#define V F{depth}(1)\n")


def test_macros_passing_their_own_calls_as_arguments_stop_at_a_bound_naming_the_macro():
    """F_i(x) = F_{i-1}(F_{i-1}(x)) cost four times more per level: 22 s at depth 12, depth 40
    never finished. Now a bounded amount of work, then a reason naming where it stopped."""
    t0 = time.monotonic()
    res = _translate(_doubling(40))
    assert time.monotonic() - t0 < 30
    skipped = {s.name: s.reason for s in res.skipped}
    assert "macro expansion scans more than 200,000 tokens (stopped in F" in skipped["V"]
    assert len(res.functions) == 41  # every F_i itself is still a function


def test_a_shallow_doubling_macro_still_evaluates():
    res = _translate(_doubling(4))
    assert {c.name: c.expr for c in res.constants}["V"] == "17"


def test_arguments_nested_too_deep_are_a_reason_not_a_recursion_error():
    res = _translate("#define G(x) (x)\n#define V " + "G(" * 5000 + "1" + ")" * 5000 + "\n"
                     "#define W " + "G(" * 30 + "1" + ")" * 30 + "\n")
    assert {s.name: s.reason for s in res.skipped}["V"] == "macro arguments nested more than 64 deep"
    assert {c.name: c.expr for c in res.constants}["W"] == "1"
