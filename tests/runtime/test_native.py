"""runtime.hcq.native: building, caching and refusing native helpers."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from runtime.hcq import native

GOOD = r"""
#include <Python.h>
static PyObject *twice(PyObject *m, PyObject *o) { return PyNumber_Add(o, o); }
static PyMethodDef methods[] = {{"twice", twice, METH_O, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "NAME", NULL, -1, methods};
PyMODINIT_FUNC PyInit_NAME(void) { return PyModule_Create(&def); }
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HCQ_NATIVE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("HCQ_NATIVE", raising=False)
    return tmp_path / "cache"


def _compiler_or_skip() -> None:
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler on PATH")


def test_builds_once_and_caches(tmp_path: Path, cache: Path) -> None:
    _compiler_or_skip()
    src = tmp_path / "m.c"
    src.write_text(GOOD.replace("NAME", "_hcq_test_good"))
    mod = native.load("_hcq_test_good", src)
    if mod is None:
        pytest.skip(f"cannot build native modules here: {native.unavailable['_hcq_test_good']}")
    assert mod.twice(21) == 42
    built = list(cache.iterdir())
    assert len(built) == 1 and built[0].name.startswith("_hcq_test_good-")  # no temporary left
    assert native.load("_hcq_test_good", src) is mod  # loaded once per process


def test_a_broken_source_gives_none_and_the_reason(tmp_path: Path, cache: Path) -> None:
    _compiler_or_skip()
    src = tmp_path / "bad.c"
    src.write_text("#include <Python.h>\nthis is not C;\n")
    assert native.load("_hcq_test_bad", src) is None
    assert "_hcq_test_bad" in native.unavailable
    assert "bad.c" in native.unavailable["_hcq_test_bad"] or "error" in \
        native.unavailable["_hcq_test_bad"]
    assert not cache.exists() or not any(cache.iterdir())  # nothing half-written


def test_disabled_by_environment(tmp_path: Path, cache: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HCQ_NATIVE", "0")
    src = tmp_path / "m.c"
    src.write_text(GOOD.replace("NAME", "_hcq_test_off"))
    assert native.load("_hcq_test_off", src) is None
    assert native.unavailable["_hcq_test_off"] == "disabled by HCQ_NATIVE=0"
