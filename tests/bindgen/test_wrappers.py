"""Static inline functions bound through compiled wrappers (``wrap_static_fns: true``): the C file
bindgen writes, its compilation, calls through it (records by pointer and by value, a call into
the target's own library), what cannot be wrapped, and a missing compiler."""

from __future__ import annotations

import ctypes
import subprocess
import sys
from pathlib import Path

import pytest

from bindgen.errors import BindgenError
from bindgen.wrappers import SUFFIX, Wrappers, build, env_var

from .conftest import (
    CORPUS,
    REPO,
    compare,
    compile_c,
    generate_headers,
    requires_gcc,
    run_layout_probe,
    write_spec,
)

pytestmark = [requires_gcc]

LIB = "int lib_scale(int x) { return 10 * x; }\n"


@pytest.fixture(scope="module")
def wrapped(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wrappers")
    lib = compile_c(LIB, tmp / "lib" / "libscale.so", shared=True)
    g, _ = generate_headers(
        tmp,
        ["inline_api.h"],
        name="inline_api",
        libraries=[{"name": "scale", "candidates": [str(lib)]}],
        wrap_static_fns=True,
    )
    c_path, so_path = tmp / "inline_api.static.c", tmp / "inline_api.static.so"
    c_path.write_text(g.wrappers.c_text)
    build(g.wrappers, c_path, so_path)
    return g, so_path


@pytest.fixture
def api(wrapped, monkeypatch):
    from .conftest import load_generated

    g, so = wrapped
    monkeypatch.setenv(env_var("inline_api"), str(so))
    return load_generated(g, "bindgen_test_inline_api")


def test_wrappers_are_c_text_naming_each_function(wrapped):
    g, _ = wrapped
    text = g.wrappers.c_text
    assert '#include "inline_api.h"' in text
    assert f"void prep_nop{SUFFIX}(struct sqe * __bindgen_a0)" in text
    assert "\treturn make_pair(__bindgen_a0, __bindgen_a1);" in text
    assert "/" not in text.split("#include", 1)[1].split("\n", 1)[1]  # no absolute paths


def test_calls_fill_records_through_pointers(api):
    s = api.sqe()
    buf = ctypes.create_string_buffer(16)
    api.prep_rw(7, ctypes.byref(s), 3, buf, 16, 4)
    assert (s.opcode, s.fd, s.len) == (7, 3, 16)
    assert s.addr == ctypes.addressof(buf) + 4
    api.prep_nop(ctypes.byref(s))
    assert (s.opcode, s.fd, s.addr, s.len) == (0, -1, 0, 0)
    api.sqe_set_data(ctypes.byref(s), 0x1234)
    assert api.sqe_get_data(ctypes.byref(s)) == 0x1234


def test_records_by_value_and_a_call_into_the_library(api):
    p = api.make_pair(40, 2)
    assert isinstance(p, api.pair) and (p.a, p.b) == (40, 2)
    assert api.pair_sum(api.pair(a=1, b=2)) == 3
    assert api.scaled(4) == 41  # lib_scale from the target's own library
    assert api.plain_inline(5) == 15


def test_layouts_match_gcc(api, tmp_path):
    checks, answers = run_layout_probe(CORPUS / "inline_api.h", api, tmp_path)
    assert checks and compare(checks, answers) == []


def test_what_cannot_be_wrapped_is_reported(wrapped):
    report = wrapped[0].report
    assert "function pick: static inline function with the type 'int (*)(int)'" in report
    assert "declared_only: static function declared but not defined" in report
    assert "sum_all: variadic static inline function" in report
    assert "bound through inline_api.static.so" in report


def test_without_the_option_inline_functions_are_reported(tmp_path):
    g, mod = generate_headers(tmp_path, ["inline_api.h"], name="inline_plain",
                              libraries=[{"name": "scale", "candidates": ["libscale.so"]}])
    assert g.wrappers is None and not hasattr(mod, "prep_nop")
    assert "`wrap_static_fns: true` binds it through a compiled wrapper" in g.report


def test_missing_library_says_how_to_build_it(wrapped, monkeypatch, tmp_path):
    from .conftest import load_generated

    monkeypatch.setenv(env_var("inline_api"), str(tmp_path / "absent.so"))
    mod = load_generated(wrapped[0], "bindgen_test_inline_absent")
    with pytest.raises(OSError, match="build it with `bindgen build-static`"):
        mod.prep_nop(None)


def test_missing_compiler_is_a_clear_error_naming_the_target(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    c = tmp_path / "x.static.c"
    c.write_text("int f(void) { return 1; }\n")
    w = Wrappers("mytarget", c.read_text(), (), (), ())
    with pytest.raises(BindgenError, match="target mytarget: wrap_static_fns needs a C compiler"):
        build(w, c, tmp_path / "x.static.so")
    assert not (tmp_path / "x.static.so").exists()


def test_compile_error_names_the_target_and_keeps_the_old_library(tmp_path):
    c = tmp_path / "x.static.c"
    c.write_text("int f(void) { return }\n")
    so = tmp_path / "x.static.so"
    so.write_bytes(b"old")
    with pytest.raises(BindgenError, match="target t: .* could not compile x.static.c"):
        build(Wrappers("t", c.read_text(), (), (), ()), c, so)
    assert so.read_bytes() == b"old"


def test_build_is_reproducible(wrapped, tmp_path):
    g, so = wrapped
    c = tmp_path / "inline_api.static.c"
    c.write_text(g.wrappers.c_text)
    build(g.wrappers, c, tmp_path / "again.so")
    assert (tmp_path / "again.so").read_bytes() == so.read_bytes()


def test_regen_builds_beside_the_module_and_check_stays_offline(tmp_path):
    """`bindgen regen` writes the C file (compared by check) and compiles the shared object
    beside the module (a build product: check neither compiles nor compares it), and the module
    imported from there finds it."""
    specs = tmp_path / "specs"
    out = tmp_path / "gen"
    lib = compile_c(LIB, tmp_path / "lib" / "libscale.so", shared=True)
    write_spec(specs, {"inl": {"headers": ["corpus:inline_api.h"],
                               "libraries": [{"name": "scale", "candidates": [str(lib)]}],
                               "wrap_static_fns": True}}, group="wr")
    base = [sys.executable, "-m", "bindgen", "--specs", str(specs), "--out", str(out)]
    cache = ["--cache", str(tmp_path / "cache")]
    r = subprocess.run([*base, "regen", "all", *cache], capture_output=True, text=True,
                       cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert (out / "wr" / "inl.static.c").is_file() and (out / "wr" / "inl.static.so").is_file()
    r = subprocess.run([*base, "check", "--full", *cache], capture_output=True, text=True,
                       cwd=REPO)
    assert r.returncode == 0, r.stdout + r.stderr
    code = (
        "import sys, ctypes; sys.path.insert(0, sys.argv[1]); import gen.wr.inl as m; "
        "s = m.sqe(); m.prep_rw(9, ctypes.byref(s), 5, None, 1, 0); print(s.opcode, s.fd)"
    )
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                       text=True, cwd=REPO)
    assert r.returncode == 0 and r.stdout.split() == ["9", "5"], r.stderr


def test_a_group_named_like_a_standard_module_is_warned_about(tmp_path, capsys):
    from bindgen.cli import main

    specs = tmp_path / "specs"
    write_spec(specs, {"zl": {"headers": ["corpus:t07_enums.h"]}}, group="zlib")
    rc = main(["--specs", str(specs), "--out", str(tmp_path / "gen"), "regen", "--cache",
               str(tmp_path / "cache")])
    err = capsys.readouterr().err
    assert rc == 0 and "is named like Python's standard module zlib" in err


def test_build_static_builds_from_the_committed_c_file_and_check_refuses_a_stale_build(
    tmp_path, capsys
):
    """`bindgen build-static` compiles the committed C file (what a wheel build runs); the shared
    object carries a build id that `bindgen check` and the module compare with the C file and the
    module beside it, so a build left from another generation is a clear error, not a crash or a
    silently wrong call."""
    from bindgen.cli import main

    specs, out = tmp_path / "specs", tmp_path / "gen"
    lib = compile_c(LIB, tmp_path / "lib" / "libscale.so", shared=True)
    target = {"headers": ["corpus:inline_api.h"],
              "libraries": [{"name": "scale", "candidates": [str(lib)]}],
              "wrap_static_fns": True}
    write_spec(specs, {"inl": target}, group="wr")
    base = ["--specs", str(specs), "--out", str(out)]
    cache = ["--cache", str(tmp_path / "cache")]
    so = out / "wr" / "inl.static.so"

    def run(*args: str) -> tuple[int, str]:
        rc = main([*base, *args])
        got = capsys.readouterr()
        return rc, got.out + got.err

    assert run("regen", "all", *cache)[0] == 0
    so.unlink()  # a fresh checkout: the C file is committed, the shared object is not
    rc, text = run("check", *cache)
    assert rc == 0, text
    rc, text = run("build-static", "wr", *cache)
    assert rc == 0 and "built inl" in text, text
    assert run("check", *cache)[0] == 0

    old = so.read_bytes()
    target["clang_args"] = ["-DINLINE_API_EXTRA=1"]  # another generation of the module
    write_spec(specs, {"inl": target}, group="wr")
    assert run("regen", "all", *cache)[0] == 0
    so.write_bytes(old)  # the build left over from before
    rc, text = run("check", *cache)
    assert rc == 1 and "STALE inl: inl.static.so is stale" in text, text
    assert "run `bindgen build-static inl`" in text
    code = (
        "import sys, ctypes; sys.path.insert(0, sys.argv[1]); import gen.wr.inl as m\n"
        "try:\n    m.prep_nop(None)\nexcept OSError as e:\n    print(e)\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                       text=True, cwd=REPO)
    assert "is stale" in r.stdout and "bindgen build-static" in r.stdout, r.stdout + r.stderr

    hand = compile_c("int x;\n", tmp_path / "hand" / "x.so", shared=True)
    so.write_bytes(hand.read_bytes())  # built by hand: no build id at all
    rc, text = run("check", *cache)
    assert rc == 1 and "carries build id none" in text, text
    assert run("build-static", "inl", *cache)[0] == 0
    assert run("check", *cache)[0] == 0


def test_build_static_without_wrapper_targets_builds_nothing(tmp_path, capsys):
    from bindgen.cli import main

    specs = tmp_path / "specs"
    write_spec(specs, {"plain": {"headers": ["corpus:t07_enums.h"]}}, group="pl")
    rc = main(["--specs", str(specs), "--out", str(tmp_path / "gen"), "build-static"])
    assert rc == 0 and "nothing to build" in capsys.readouterr().out
