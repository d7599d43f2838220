"""Property: a ``static const`` record or array bound by bindgen is, byte for byte, the object gcc
compiles from the same initializer, for initializers drawn at random over C's forms (positional
lists, elided braces, designators, nested designators, a designator overriding part of an earlier
initializer, unions, bitfields, values out of their type's range)."""

from __future__ import annotations

import ctypes
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from .conftest import compile_c, generate_headers, requires_gcc

pytestmark = [requires_gcc]

TYPES = """
struct hp { int x; short y; };
union hu { int i; unsigned short s; signed char c[3]; };
struct hbox {
    struct hp a; unsigned char t[3]; union hu u; unsigned bf : 5; signed sb : 3;
    struct hp arr[2]; union { int ai; short as; }; double d;
};
"""


@dataclass(frozen=True)
class Scalar:
    float_: bool = False


@dataclass(frozen=True)
class Agg:
    members: tuple[tuple[str, object], ...]  # (name, type); arrays name members "[i]"
    union: bool = False


def _array(elem: object, n: int) -> Agg:
    return Agg(tuple((f"[{i}]", elem) for i in range(n)))


S, F = Scalar(), Scalar(True)
HP = Agg((("x", S), ("y", S)))
HU = Agg((("i", S), ("s", S), ("c", _array(S, 3))), union=True)
HBOX = Agg((("a", HP), ("t", _array(S, 3)), ("u", HU), ("bf", S), ("sb", S),
            ("arr", _array(HP, 2)), ("", Agg((("ai", S), ("as", S)), union=True)), ("d", F)))
VARS = (("struct hbox", "", HBOX), ("struct hp", "[3]", _array(HP, 3)),
        ("int", "[2][3]", _array(_array(S, 3), 2)), ("union hu", "", HU))

_ints = st.integers(-(2**33), 2**33).map(str)
_floats = st.sampled_from(["0.5", "-2.25", "3", "1e3"])


def _leaves(t: object) -> list[Scalar]:
    if isinstance(t, Scalar):
        return [t]
    assert isinstance(t, Agg)
    members = t.members[:1] if t.union else t.members
    return [leaf for _, m in members for leaf in _leaves(m)]


def _scalar(t: Scalar) -> st.SearchStrategy[str]:
    return _floats if t.float_ else _ints


def _elided(t: object) -> st.SearchStrategy[str]:
    """Every scalar of ``t`` without braces, as brace elision reads them."""
    return st.tuples(*(_scalar(s) for s in _leaves(t))).map(", ".join)


def _init(t: object, depth: int = 0) -> st.SearchStrategy[str]:
    if isinstance(t, Scalar):
        return _scalar(t)
    assert isinstance(t, Agg)
    named = [(i, n, m) for i, (n, m) in enumerate(t.members) if n]
    n_pos = 1 if t.union else len(t.members)

    def item(m: object) -> st.SearchStrategy[str]:
        return st.one_of(_init(m, depth + 1), _elided(m)) if isinstance(m, Agg) else _init(m)

    positional = st.integers(0, n_pos).flatmap(
        lambda k: st.tuples(*(item(m) for _, m in t.members[:k]))
    ).map(lambda items: "{" + ", ".join(items) + "}")

    def designated_one(choice: tuple[int, str, object]) -> st.SearchStrategy[str]:
        _, name, m = choice
        head = name if name.startswith("[") else f".{name}"
        direct = _init(m, depth + 1).map(lambda v: f"{head} = {v}")
        if isinstance(m, Agg) and not m.union and depth < 2:  # `.a.y = 1`, `[1].x = 2`
            inner = [(n, mm) for n, mm in m.members if n and isinstance(mm, Scalar)]
            if inner:
                nested = st.sampled_from(inner).flatmap(
                    lambda nm: _scalar(nm[1]).map(
                        lambda v, nm=nm: f"{head}{nm[0] if nm[0].startswith('[') else '.' + nm[0]}"
                        f" = {v}"
                    )
                )
                return st.one_of(direct, nested)
        return direct

    designated = st.lists(st.sampled_from(named).flatmap(designated_one), max_size=4).map(
        lambda items: "{" + ", ".join(items) + "}"
    )
    return st.one_of(positional, designated)


# A designator reaching into a member an earlier initializer gave keeps the rest of that member.
@example(("{.a = {1, 2}, .a.y = 7, .u = {.c = {1, 2}}, .u.c[1] = 9}", "{[1] = {3, 4}, [1].x = 5}",
          "{[0] = {1}, [0][1] = 0}", "{.c = {1, 2, 3}, .c[0] = 4}"))
@settings(max_examples=12, deadline=None, derandomize=True)
@given(st.tuples(*(_init(t) for _, _, t in VARS)))
def test_static_const_values_match_gcc(inits):
    decls = "".join(
        f"static const {c_type} V{i}{dims} = {init};\n"
        for i, ((c_type, dims, _), init) in enumerate(zip(VARS, inits))
    )
    header = TYPES + decls
    impl = '#include "prop.h"\n' + "".join(
        f"const void *addr_V{i}(void) {{ return &V{i}; }}\n" for i in range(len(VARS))
    )
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        src = tmp / "src"
        src.mkdir()
        (src / "prop.h").write_text(header)
        lib = ctypes.CDLL(str(compile_c(impl, tmp / "lib" / "libprop.so", [src], shared=True)))
        g, mod = generate_headers(tmp, ["prop.h"], name="prop", source_dir=src)
        for i in range(len(VARS)):
            assert hasattr(mod, f"V{i}"), f"V{i} not bound:\n{header}\n{g.report}"
            value = getattr(mod, f"V{i}")
            addr = getattr(lib, f"addr_V{i}")
            addr.restype = ctypes.c_void_p
            want = ctypes.string_at(addr(), ctypes.sizeof(value))
            assert bytes(value) == want, f"V{i} differs from gcc's:\n{header}"
