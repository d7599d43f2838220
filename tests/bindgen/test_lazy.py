"""Lazy modules (``bindgen_rt.lazy``): a long chain of records needs no recursion, name-by-name
materialisation gives what importing the definitions module whole gives, and
``__materialize_all__`` after some names keeps the objects already handed out."""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
from pathlib import Path

from .conftest import generate_headers
from .test_generated import MODULES, REPO

CHAIN = 3000  # ~330 links were enough to exceed the recursion limit of the old loader


def test_a_long_chain_of_records_materialises_from_its_far_end(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    body = "struct s0 { int v; };\n" + "".join(
        f"struct s{i} {{ struct s{i - 1} prev; int v; struct s{i} *self; }};\n"
        for i in range(1, CHAIN)
    )
    (src / "chain.h").write_text(body)
    g, mod = generate_headers(tmp_path, ["chain.h"], name="chain", source_dir=src, lazy=True)
    far = getattr(mod, f"s{CHAIN - 1}")  # the whole chain, resolved with an explicit stack
    # s0 is 4 bytes; each link adds an int, padding and a pointer: 16 * i bytes (as gcc says)
    assert ctypes.sizeof(far) == 16 * (CHAIN - 1) and ctypes.sizeof(mod.s1) == 16
    assert far.prev.offset == 0 and far.v.offset == 16 * (CHAIN - 2)


PROBE = """
import ctypes, importlib, json, sys
name, whole = sys.argv[1], sys.argv[2] == "whole"
stub = importlib.import_module(name)
lazy = stub._LAZY
if whole:
    mod = importlib.import_module(lazy.name)
    values = vars(mod)
else:
    values = {n: getattr(stub, n) for n in lazy.names()}
out = {}
for n, v in values.items():
    if isinstance(v, int):
        out[n] = int(v)
    elif isinstance(v, type) and hasattr(v, "__bindgen_size__"):
        out[n] = ["record", ctypes.sizeof(v), [f[0] for f in v.__bindgen_fields__]]
    elif callable(v) and hasattr(v, "__code__"):
        out[n] = ["function", v.__code__.co_firstlineno, v.__code__.co_filename.rsplit("/", 1)[1]]
print(json.dumps(out, sort_keys=True))
"""


def _lazy_modules() -> list[str]:
    gen = REPO / "generated"
    return [m for m in MODULES
            if (gen / m.split(".", 1)[1].replace(".", "/")).with_name(
                "_" + m.rsplit(".", 1)[1] + ".py").exists()]


def test_name_by_name_equals_the_whole_module() -> None:
    lazy = _lazy_modules()
    assert "hcq_bindings.nv.rm_580" in lazy and "hcq_bindings.amd.gc_11_0_0" in lazy
    for name in ("hcq_bindings.nv.rm_580", "hcq_bindings.linux.amdgpu_drm"):
        got = []
        for how in ("lazy", "whole"):
            r = subprocess.run([sys.executable, "-c", PROBE, name, how], capture_output=True,
                               text=True, timeout=300)
            assert r.returncode == 0, r.stderr
            got.append(json.loads(r.stdout))
        assert got[0] == {k: v for k, v in got[1].items() if k in got[0]}, name
        assert len(got[0]) > 100


def test_materialize_all_keeps_what_was_handed_out(tmp_path: Path) -> None:
    code = (
        "import hcq_bindings.nv.rm_580 as r\n"
        "a = r.NVOS32_PARAMETERS\n"
        "r.__materialize_all__()\n"
        "assert r.NVOS32_PARAMETERS is a\n"
        "assert len([n for n in vars(r) if n.startswith('NV')]) > 9000\n"
        "import sys; print(sys.modules['hcq_bindings.nv._rm_580'].NVOS32_PARAMETERS is a)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True"


PARTS = """
import ctypes, importlib, json, sys
sys.path.insert(0, ".")
import bindgen_rt.lazy as L
in_parts = sys.argv[1] == "parts"
sys.dont_write_bytecode = in_parts  # else the whole file is compiled (and its bytecode written)
L._PART_CHARS = 2048
parts = []
real = L.compile_in_parts
def counting(text, filename):
    for code in real(text, filename):
        parts.append(code.co_firstlineno)
        yield code
L.compile_in_parts = counting
stub = importlib.import_module("gen.testgrp.parts")
early = stub.s5
stub.__materialize_all__()
assert stub.s5 is early  # what was handed out is kept
out = {}
for n in stub._LAZY.names():
    v = getattr(stub, n)
    if isinstance(v, int):
        out[n] = int(v)
    elif isinstance(v, type) and hasattr(v, "__bindgen_size__"):
        out[n] = [ctypes.sizeof(v), [(f[0], f[1].__name__) for f in v.__bindgen_fields__]]
    elif callable(v) and hasattr(v, "__code__"):
        out[n] = [v.__code__.co_firstlineno, v(3)]
print(json.dumps([len(parts), out], sort_keys=True))
"""


def test_materialize_all_without_bytecode_runs_the_definitions_in_parts(tmp_path: Path) -> None:
    """Where no bytecode would be kept, a lazy module's definitions run in parts (the whole
    file's syntax tree held at once took 28 KB a record): the same objects, at the same lines."""
    from .conftest import write_spec

    src = tmp_path / "src"
    src.mkdir()
    (src / "h.h").write_text("struct s0 { int v; };\n" + "".join(
        f"struct s{i} {{ struct s{i - 1} *prev; int v; }};\n#define M{i} ({i} << 2)\n"
        f"#define F{i}(x) ((x) + {i})\nenum e{i} {{ E{i}_A = {i} }};\n" for i in range(1, 60)))
    write_spec(tmp_path / "specs", {"parts": {"headers": ["src:h.h"], "lazy": True}},
               sources={"src": {"kind": "system", "path": str(src), "package": "p"}})
    from bindgen.cli import main

    assert main(["--specs", str(tmp_path / "specs"), "--out", str(tmp_path / "gen"),
                 "--package", "gen", "regen", "--jobs", "1", "--cache",
                 str(tmp_path / "cache")]) == 0
    got = {}
    for how in ("parts", "whole"):
        env = {k: v for k, v in __import__("os").environ.items()
               if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(tmp_path / "pyc")
        r = subprocess.run([sys.executable, "-c", PARTS, how], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        got[how] = json.loads(r.stdout)
    assert got["parts"][0] > 10 and got["whole"][0] == 0
    assert got["parts"][1] == got["whole"][1] and len(got["parts"][1]) > 200
