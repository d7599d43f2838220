"""The wheel carries everything the runtime needs: built from a copy of the checkout, installed into a
fresh virtual environment outside it, and used from a directory that holds an unrelated `generated/`
package (the folder name a flat layout would have collided with)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# What a copy of the project for building holds: the sources, never environments or build output.
_IGNORE = shutil.ignore_patterns(".git", ".venv*", "build", "*.egg-info", "__pycache__", "*.pyc",
                                 ".pytest_cache", ".whl", ".cache", "bench_out")


def _run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)  # type: ignore[call-overload]
    assert r.returncode == 0, f"{cmd} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src") / "project"
    shutil.copytree(REPO, src, ignore=_IGNORE)
    out = tmp_path_factory.mktemp("dist")
    # No build isolation: the build needs only setuptools, which this environment has, and no network.
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
          "--disable-pip-version-check", "-w", str(out), str(src)])
    (whl,) = out.glob("gpu_hcq_toolkit-*.whl")
    return whl


def test_the_wheel_holds_what_the_runtime_reads_at_run_time(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for must in ("runtime/py.typed", "bindgen/py.typed", "hcq_bindings/py.typed", "bindgen_rt/py.typed",
                 "runtime/drivers/nv/_nvlaunch.c", "hcq_bindings/linux/kfd_ioctl.py",
                 "hcq_bindings/nv/rm_580.py", "bindgen/templates/module.py.mako",
                 "bindgen/specs/linux.yaml"):
        assert must in names, f"{must} is missing from {wheel.name}"
    # every lazy module's definitions module travels with it
    for py in (n for n in names if n.startswith("hcq_bindings/") and n.endswith(".py")):
        rel = py.removeprefix("hcq_bindings/")
        defs = (REPO / "generated" / rel).with_name("_" + rel.rpartition("/")[2])
        if defs.exists():
            assert str(Path(py).with_name(defs.name)) in names, f"{py}: {defs.name} is missing"
    assert not any(n.startswith("generated/") for n in names), "the wheel ships a top-level generated"
    # the launch helper, built with the wheel (an optional extension: a compiler is needed)
    if shutil.which("cc") or shutil.which("gcc"):
        assert any(n.startswith("runtime/drivers/nv/_nvlaunch.") and n.endswith(".so")
                   for n in names), "the launch helper was not built into the wheel"


def test_installed_wheel_runs_the_demo_from_a_directory_with_an_unrelated_generated(
        wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(venv)])
    py = venv / "bin" / "python"
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
                .stdout.strip())
    # Install the wheel alone into the fresh environment (this test's pip, no network); its
    # dependencies (numpy for the runtime) come from this environment's site-packages, appended
    # after the wheel's own packages, whose .pth files (the checkout's editable install) stay inert.
    _run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
          "--disable-pip-version-check", "--target", str(site), str(wheel)])
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    work = tmp_path / "work"
    (work / "generated").mkdir(parents=True)
    (work / "generated" / "__init__.py").write_text("raise ImportError('the unrelated generated')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    where = _run([str(py), "-c", "import runtime, hcq_bindings.linux.kfd_ioctl as k; "
                  "print(runtime.__file__); print(k.__file__); print(k.AMDKFD_IOC_CREATE_QUEUE)"],
                 cwd=work, env=env).stdout.split("\n")
    assert where[0].startswith(str(site)) and where[1].startswith(str(site)), where
    assert "0xc0584b02" in where[2]
    # the installed launch helper is the one built with the wheel: nothing is compiled at run time
    if shutil.which("cc") or shutil.which("gcc"):
        cache = tmp_path / "native-cache"
        helper = _run([str(py), "-W", "error", "-c", "from runtime.drivers.nv.launcher import "
                       "native_helper as h; m = h(); print(m.__name__); print(m.__file__)"],
                      cwd=work, env={**env, "HCQ_NATIVE_CACHE": str(cache)}).stdout.split("\n")
        assert helper[0] == "runtime.drivers.nv._nvlaunch" and helper[1].startswith(str(site))
        assert not cache.exists()
    demo = _run([str(py), "-m", "runtime.hcq.demo", "mock-amd:0", "--n", "4096"], cwd=work, env=env)
    assert demo.stdout.count(" ok  interpreter time") == 2 and "demo: passed" in demo.stdout, \
        demo.stdout
    assert "times are the emulator's" in demo.stdout
    # every example of docs/runtime.md, unmodified, from the installed wheel
    from tests.runtime.test_docs_example import clean_env, doc_examples, run_example
    for i, code in enumerate(doc_examples()):
        where = work / f"example{i}"
        where.mkdir()
        ex_env = clean_env(where)
        run_example(str(py), code, where, ex_env)
        if "profile()" in code:
            assert (where / "trace.json").is_file()


def test_mypy_is_clean_on_the_installed_wheel(wheel: Path, tmp_path: Path) -> None:
    """`mypy -p runtime` against the built wheel installed into a fresh environment (no checkout
    and no pyproject.toml in reach): what a user's type checker sees, package data and the
    bindings' package name included."""
    pytest.importorskip("mypy.api", reason="mypy is in the test extra: pip install .[test]")
    venv = tmp_path / "venv"
    _run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(venv)])
    py = venv / "bin" / "python"
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
                .stdout.strip())
    _run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
          "--disable-pip-version-check", "--target", str(site), str(wheel)])
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # numpy
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    r = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", os.devnull,
                        "--python-executable", str(py), "-p", "runtime"], cwd=work,
                       capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success" in r.stdout
    # and it was the wheel's copy that was checked, not the checkout's
    where = _run([str(py), "-c", "import runtime; print(runtime.__file__)"], cwd=work, env=env)
    assert where.stdout.startswith(str(site)), where.stdout
