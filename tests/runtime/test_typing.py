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


def test_mypy_is_clean_on_an_installed_copy(tmp_path: Path) -> None:
    """`mypy -p runtime` against an installed copy (runtime, hcq_bindings and bindgen_rt in the
    site-packages of a fresh environment, no checkout and no pyproject.toml in reach): what a
    user's type checker sees."""
    import shutil
    import subprocess
    import sys
    import sysconfig
    pytest.importorskip("mypy.api", reason="mypy is in the test extra: pip install .[test]")
    venv = tmp_path / "venv"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv",
                    "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; "
                                "print(sysconfig.get_paths()['purelib'])"], check=True,
                               capture_output=True, text=True).stdout.strip())
    for pkg, src in (("runtime", REPO / "runtime"), ("hcq_bindings", REPO / "generated"),
                     ("bindgen_rt", REPO / "bindgen_rt")):
        shutil.copytree(src, site / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # numpy
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    r = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--python-executable",
                        str(py), "-p", "runtime"], cwd=work, capture_output=True, text=True,
                       env=env, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
