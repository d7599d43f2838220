"""``bindgen.pyfmt``: its tokenizer gives what :mod:`tokenize` gives, line for line, and wrapping
keeps a statement's meaning while bringing it within the width."""

from __future__ import annotations

import ast
import random

import pytest

from bindgen.pyfmt import WIDTH, _tokenize, _tokens, wrap

from .conftest import REPO

TRICKY = [
    "x = '''abc'''", "x = '''abc", "a \\", "f(a, b", "f(a))", "'abc", "$ x", " $", "x = 'a\\",
    "b'x' + rb\"y\" + f'{a}'", "0x1f + .5 + 1e3j + 1_000 + 0o7 + 0b1", "# c", "", "   ",
    "a # b (", 'x = """a""" + 1', "é = 1", "x\ty", "x\fy", "1 if a else 2", "... . ..", "a->b",
    "a:=1", "x = f'{a}'", "1if x else 2", "u'x' R'y' Br'z'", "a[1:2, ::3]", "x = 'a' 'b'",
    "lambda a, *b, **c: (a, b, c)", "~x << 2 >> 3 ** -4 // 5 @ m", "x ! y", "'\\''",
]


def _corpus() -> list[str]:
    lines = list(TRICKY)
    for name in ("linux/_amdgpu_drm.py", "linux/kfd_ioctl.py", "nv/classes.py"):
        lines += (REPO / "generated" / name).read_text(encoding="utf-8").splitlines()
    rnd = random.Random(13)
    pieces = []
    for line in lines:  # slices: unbalanced brackets, cut strings, stray characters
        if len(line) > 3:
            i = rnd.randrange(len(line))
            pieces.append(line[i : rnd.randrange(i, len(line) + 1)])
    return lines + pieces


def test_tokens_equal_what_tokenize_gives() -> None:
    corpus = _corpus()
    assert len(corpus) > 5000
    differ = [line for line in corpus if _tokens(line) != _tokenize(line)]
    assert not differ, differ[:5]


LONG = [
    "x = some_function(first_argument_value, (second + third) * fourth_value, "
    "[element_one, element_two, element_three], keyword=another_function(alpha, beta, gamma))",
    "    return (value & 0xFFFF0000) >> 16 | (other_value & 0x0000FFFF) << 16 | "
    "third_value_with_a_long_name ^ fourth_value_with_a_long_name",
    "TABLE = {'first_key': (1, 2, 3), 'second_key': (4, 5, 6), 'third_key': (7, 8, 9), "
    "'fourth_key': (10, 11, 12), 'fifth': -1}",
    "result = a_rather_long_name if a_condition_that_is_long and another_condition_here "
    "else the_alternative_value_that_is_also_long",
]


@pytest.mark.parametrize("line", LONG)
def test_wrap_keeps_the_meaning_within_the_width(line: str) -> None:
    assert len(line) > WIDTH
    out = wrap(line)
    assert all(len(x) <= WIDTH for x in out.splitlines()), out
    assert ast.dump(ast.parse(out.strip())) == ast.dump(ast.parse(line.strip()))
