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


def test_stream_copy_is_exact_at_every_alignment() -> None:
    """The non-temporal staging copy (runtime/hcq/_hostcopy.c) against slicing, for lengths and
    offsets around its 16-byte alignment and 64-byte block boundaries."""
    from runtime.hcq.device import host_stream_copy
    copy = host_stream_copy()
    if copy is None:
        pytest.skip(f"native host copy unavailable: {native.unavailable.get('_hostcopy')}")
    rng = bytes(range(256)) * 5000
    for dst_off in (0, 1, 8, 15):
        for src_off in (0, 3, 16):
            for n in (0, 1, 15, 16, 17, 63, 64, 65, 127, 4097, (1 << 20) + 3):
                src = memoryview(rng)[src_off:src_off + n] if n < 4000 else \
                    memoryview(rng * 2)[src_off:src_off + n]
                dst = bytearray(n + dst_off + 7)
                copy(memoryview(dst)[dst_off:dst_off + n], src)
                assert dst[dst_off:dst_off + n] == src.tobytes()
                assert not any(dst[:dst_off]) and not any(dst[dst_off + n:])
    with pytest.raises(ValueError, match="stream_copy"):
        copy(bytearray(4), b"12345")
    with pytest.raises(BufferError):
        copy(b"read-only", b"123456789")
