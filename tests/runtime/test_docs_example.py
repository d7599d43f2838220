"""Every Python example of docs/runtime.md runs as written, each in a fresh interpreter whose
working directory is outside the checkout (so no example can lean on the checkout's files).
tests/install/test_wheel.py runs them again from the installed wheel."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def doc_examples() -> list[str]:
    """The ```python blocks of docs/runtime.md, in order."""
    text = (REPO / "docs" / "runtime.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def run_example(python: str, code: str, cwd: Path, env: dict[str, str]) -> str:
    """Runs one example; returns its output, or fails with it."""
    r = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd=cwd, env=env,
                       timeout=300)
    assert r.returncode == 0, f"example failed:\n{code}\n--- output:\n{r.stdout}\n{r.stderr}"
    return r.stdout


def clean_env(tmp: Path) -> dict[str, str]:
    """The environment an example runs in: no device or debug selection of the caller's, a
    compile cache of its own."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("HCQ_DEVICE", "HCQ_DEBUG", "HCQ_PROFILE", "PYTHONPATH")}
    env["HCQ_COMPILE_CACHE"] = str(tmp / "compile-cache")
    return env


def test_the_page_has_its_examples() -> None:
    blocks = doc_examples()
    assert len(blocks) >= 5 and any("load_example" in b for b in blocks)
    assert not any("tests/" in b for b in blocks), "an example reads the checkout's tests"


@pytest.mark.parametrize("index", range(len(doc_examples())))
def test_each_example_runs_outside_the_checkout(index: int, tmp_path: Path) -> None:
    from runtime.drivers.amd.compiler import AMDCompiler
    if AMDCompiler().available():
        pytest.skip(AMDCompiler().available() or "")
    code = doc_examples()[index]
    out = run_example(sys.executable, code, tmp_path, clean_env(tmp_path))
    if "profile()" in code:
        assert (tmp_path / "trace.json").is_file() and "vector_add" in out


def test_the_shipped_example_kernels_are_the_built_ones() -> None:
    """runtime/hcq/examples/triton holds copies of scripts/build_triton_kernels.py's output."""
    from runtime.hcq.triton import EXAMPLES
    shipped = sorted(EXAMPLES.glob("*/*.*"))
    assert len(shipped) == 10  # vector_add and softmax: gfx1100 hsaco, sm90 cubin and PTX
    for f in shipped:
        built = REPO / "tests" / "runtime" / "data" / "triton" / f.parent.name / f.name
        assert f.read_bytes() == built.read_bytes(), f"{f} differs from {built}"
