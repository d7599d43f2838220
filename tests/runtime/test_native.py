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
    with pytest.warns(native.NativeFallbackWarning, match="_hcq_test_bad unavailable.*slow path"):
        assert native.load("_hcq_test_bad", src, fallback="the slow path") is None
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


def test_the_installed_module_is_used_when_built_from_this_source(
        tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module built with the package (setup.py records its source's sha256) is preferred; one
    built from another source is not, and the source beside it is built instead."""
    _compiler_or_skip()
    src = tmp_path / "_hcq_inst.c"
    src.write_text(GOOD.replace("NAME", "_hcq_inst"))
    pkg = tmp_path / "hcq_test_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "_hcq_inst.py").write_text(f"SOURCE_SHA256 = {native.source_sha256(src)!r}\n")
    (pkg / "_hcq_old.py").write_text("SOURCE_SHA256 = 'an older source'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = native.load("hcq_test_pkg._hcq_inst", src)
    assert mod is not None and mod.__name__ == "hcq_test_pkg._hcq_inst"
    assert not cache.exists()  # nothing was built
    old = tmp_path / "_hcq_old.c"
    old.write_text(GOOD.replace("NAME", "_hcq_old"))
    built = native.load("hcq_test_pkg._hcq_old", old)
    if built is None:
        pytest.skip(f"cannot build native modules here: {native.unavailable}")
    assert built.twice(2) == 4 and built.__name__ == "_hcq_old"


def test_nvlaunch_with_another_state_layout_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The launch helper shares state words with gpfifo.py: a build with another layout (or ABI)
    is not used, and the reason is recorded."""
    from runtime.drivers.nv import launcher
    if launcher.native_helper() is None:
        pytest.skip(f"no launch helper here: {native.unavailable}")
    monkeypatch.setattr(launcher, "CHANNEL_WORDS", launcher.CHANNEL_WORDS[::-1])
    assert launcher.native_helper() is None
    assert "layout" in native.unavailable["runtime.drivers.nv._nvlaunch"]


def test_launches_take_the_python_path_with_one_warning_when_no_helper_can_be_had(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No built module and no compiler: launches still work (the Python path), and the fallback
    is announced once, not per launch or per program."""
    import warnings

    import numpy as np

    from runtime.drivers.mock.nv_rm import NvMockOS
    from runtime.drivers.nv.device import NVDevice
    name = "runtime.drivers.nv._nvlaunch"
    monkeypatch.setattr(native, "_loaded", {})  # forget this process's helper (a cache)
    monkeypatch.setattr(native, "unavailable", {})
    monkeypatch.setattr(native, "_installed", lambda n, s: None)
    monkeypatch.setenv("HCQ_NATIVE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("HCQ_NATIVE", raising=False)
    monkeypatch.setenv("CC", "/bin/false")
    cubin = (Path(__file__).parent / "data" / "nv_kernels_cuda13.cubin").read_bytes()
    d = NVDevice("nv:0", os=NvMockOS.with_nv_gpus(1))
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            x = d.alloc(4096)
            d.copyin(x, np.zeros(1024, np.uint32))
            for prg in (d.program(cubin, "inc"), d.program(cubin, "inc")):
                for _ in range(3):
                    prg(x, 1024, global_size=(4, 1, 1), local_size=(256, 1, 1))
            d.synchronize()
        fallbacks = [w for w in seen if issubclass(w.category, native.NativeFallbackWarning)]
        assert len(fallbacks) == 1 and "pure-Python path" in str(fallbacks[0].message)
        assert name in native.unavailable
        hot = prg._hot[(4, 1, 1), (256, 1, 1)]
        assert hot is not None and type(hot.fn).__name__ == "function"  # the Python launch
    finally:
        d.close()
