"""`mypy runtime` is clean, and the public API is typed for type checkers and IDEs: the lazily
imported driver classes, their compilers and `compile()` resolve to real types, not Any.

Runs mypy in-process with its incremental cache (.mypy_cache), a few seconds once warm."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

USAGE = '''
from runtime.hcq import AMDDevice, NVDevice, open_device
amd = AMDDevice("mock-amd:0")
reveal_type(amd.compiler)
reveal_type(amd.compiler.compile("src"))
reveal_type(NVDevice("mock-nv:0").compiler)
reveal_type(open_device().compile("src"))
reveal_type(open_device().compiler)
reveal_type(amd.pool_stats().hit_rate)
'''


def _mypy(*args: str) -> tuple[str, int]:
    api = pytest.importorskip("mypy.api", reason="mypy is in the test extra: pip install .[test]")
    cwd = os.getcwd()
    os.chdir(REPO)  # pyproject.toml's [tool.mypy] and the cache live there
    try:
        out, err, status = api.run(list(args))
    finally:
        os.chdir(cwd)
    return out + err, status


def test_mypy_runtime_is_clean() -> None:
    out, status = _mypy("runtime")
    assert status == 0, out


def test_mypy_bindgen_is_clean() -> None:
    """The generator and its support runtime type-check too (they had errors that hid behind
    methods named like builtins and untyped third-party imports)."""
    out, status = _mypy("bindgen", "bindgen_rt")
    assert status == 0, out


def test_mypy_scripts_and_tools_are_clean() -> None:
    """The benchmarks and probes (scripts/) and tools/ type-check too: they had errors, one a
    variable reused for two types, others attributes only NVIDIA's subclasses have. scripts/ is
    no package: mypy puts it on its search path, where its files import each other
    (`from bench_graphs import SRC`), as they do at run time from beside one another. Optional
    third-party modules (Triton) are Any whether installed or not: pyproject's [tool.mypy]."""
    out, status = _mypy("scripts", "tools")
    assert status == 0, out


def test_public_api_types_resolve() -> None:
    out, status = _mypy("-c", USAGE)
    assert status == 0, out
    revealed = [ln.split("Revealed type is ")[1].strip('"') for ln in out.splitlines()
                if "Revealed type is" in ln]
    assert revealed == ["runtime.drivers.amd.compiler.AMDCompiler", "bytes",
                        "runtime.drivers.nv.compiler.NVCompiler", "bytes",
                        "runtime.hcq.compiler.Compiler", "float"], revealed


TIMED = '''
from runtime.hcq import AMDDevice, Launch
dev = AMDDevice("mock-amd:0")
prg = dev.program(b"", "k")
reveal_type(prg(wait=True))
reveal_type(prg())
reveal_type(dev.graph([Launch(prg, ())]).replay(wait=True))
reveal_type(dev.graph([Launch(prg, ())]).replay({0: {0: 1}}, True))
reveal_type(dev.record(timing=True).elapsed_time(dev.record()))
us: float = prg(wait=True) * 1e6
'''


def test_waiting_launches_are_typed_float() -> None:
    out, status = _mypy("-c", TIMED)
    assert status == 0, out
    revealed = [ln.split("Revealed type is ")[1].strip('"') for ln in out.splitlines()
                if "Revealed type is" in ln]
    assert revealed == ["float", "None", "float", "float", "float"], revealed


# mypy on the installed wheel: tests/install/test_wheel.py (it shares that file's wheel build).
