"""The disk compile cache: keyed by source, options and compiler identity; hits skip the
compiler; concurrent writers never leave a partial file."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

SRC = "__kernel void k(__global int *a) { a[get_global_id(0)] = 7; }"


@pytest.fixture
def clang_calls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    from runtime.drivers.amd.compiler import AMDCompiler
    if AMDCompiler().available():
        pytest.skip(AMDCompiler().available() or "")
    calls: list[list[str]] = []
    real = AMDCompiler._run

    def counting(tool: str, cmd: list[str], tmp: Path) -> None:
        calls.append(cmd)
        real(tool, cmd, tmp)
    monkeypatch.setattr(AMDCompiler, "_run", staticmethod(counting))
    return calls


def test_a_second_compile_is_read_from_disk(tmp_path: Path, clang_calls: list[Any]) -> None:
    from runtime.drivers.amd.compiler import AMDCompiler
    from runtime.hcq import CompileCache
    cache = CompileCache(AMDCompiler(), tmp_path)
    lib = cache.compile(SRC)
    assert lib[:4] == b"\x7fELF" and len(clang_calls) == 2  # clang, then ld.lld
    again = CompileCache(AMDCompiler(), tmp_path)  # another process, same directory
    assert again.compile(SRC) == lib and len(clang_calls) == 2
    assert (again.hits, again.misses) == (1, 0)
    # Other options, other source or another compiler version: compiled anew.
    again.compile(SRC, extra_args=("-DX=1",))
    again.compile(SRC + " ")
    assert len(clang_calls) == 6
    other = AMDCompiler(opt="-O1")
    assert other.identity() != AMDCompiler().identity() and "clang version" in other.identity()
    CompileCache(other, tmp_path).compile(SRC)
    assert len(clang_calls) == 8
    assert not [p for p in tmp_path.rglob(".tmp-*")]


def test_device_compile_uses_the_cache(tmp_path: Path, clang_calls: list[Any],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime.hcq import open_device
    monkeypatch.setenv("HCQ_COMPILE_CACHE", str(tmp_path))
    d = open_device("mock-amd:0")
    try:
        assert d.compile(SRC) == d.compile(SRC) and len(clang_calls) == 2
        assert d.compile_cache.directory == tmp_path and d.compile_cache.hits == 1
    finally:
        d.close()
    monkeypatch.setenv("HCQ_COMPILE_CACHE", "off")
    d = open_device("mock-amd:0")
    try:
        d.compile(SRC)
        d.compile(SRC)
        assert len(clang_calls) == 6 and d.compile_cache.directory is None
    finally:
        d.close()


def test_a_corrupt_or_unwritable_cache_only_costs_a_compile(tmp_path: Path,
                                                             clang_calls: list[Any]) -> None:
    from runtime.drivers.amd.compiler import AMDCompiler
    from runtime.hcq import CompileCache
    cache = CompileCache(AMDCompiler(), tmp_path)
    key = cache.key(SRC, {})
    (tmp_path / key[:2]).mkdir()
    (tmp_path / key[:2] / f"{key}.bin").write_bytes(b"")  # an empty file is no entry
    assert cache.compile(SRC)[:4] == b"\x7fELF"
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    assert CompileCache(AMDCompiler(), blocked).compile(SRC)[:4] == b"\x7fELF"


def test_a_cache_hit_runs_no_subprocess(tmp_path: Path, clang_calls: list[Any],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiler's identity (tool versions) is remembered for its stamp (tools' paths, sizes
    and modification times, settings): a new process with the kernel cached runs no tool."""
    import subprocess

    from runtime.drivers.amd.compiler import AMDCompiler
    from runtime.hcq import CompileCache
    from runtime.hcq import compiler as core
    lib = CompileCache(AMDCompiler(), tmp_path).compile(SRC)
    monkeypatch.setattr(core, "_IDENTITIES", {})  # as in a new process

    def no_subprocess(*a: object, **k: object) -> None:
        raise AssertionError(f"subprocess on a cache hit: {a}")
    monkeypatch.setattr(subprocess, "run", no_subprocess)
    again = CompileCache(AMDCompiler(), tmp_path)
    assert again.compile(SRC) == lib and again.hits == 1
    # A changed tool (another stamp) is asked for its version again.
    monkeypatch.undo()
    monkeypatch.setattr(core, "_IDENTITIES", {})
    other = AMDCompiler(clang=str(tmp_path / "no-such-clang"))
    assert other.identity_stamp() != AMDCompiler().identity_stamp()
    assert "no-such-clang: missing" in other.identity_stamp()


def test_the_first_cached_compile_of_a_new_process_is_fast(tmp_path: Path,
                                                           clang_calls: list[Any]) -> None:
    import os
    import subprocess
    import sys
    from runtime.drivers.amd.compiler import AMDCompiler
    from runtime.hcq import CompileCache
    CompileCache(AMDCompiler(), tmp_path).compile(SRC)
    code = ("import subprocess, time\nfrom runtime.drivers.amd.compiler import AMDCompiler\n"
            "from runtime.hcq import CompileCache\n"
            "def refuse(*a, **k):\n    raise SystemExit(f'a subprocess on a cache hit: {a}')\n"
            "subprocess.Popen = refuse\n"
            f"c = CompileCache(AMDCompiler(), {str(tmp_path)!r})\n"
            "t = time.process_time(); c.compile(" + repr(SRC) + ")\n"
            "print((time.process_time() - t) * 1e3, c.hits)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ), timeout=120, check=True).stdout.split()
    ms, hits = float(out[0]), int(out[1])
    # CPU time of this process (other processes' load does not count): under 1 ms on an idle
    # machine, where a subprocess (clang --version) alone would cost tens of ms.
    assert hits == 1 and ms < 5, f"{ms:.2f} ms"
