"""scripts/bench_rdna3.py's cases run through the AMD runtime and check their results: the one
with dynamic LDS (a __local pointer argument, LDS sized at launch), the one-wave loops it adds,
and the table it prints."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from .rdna3_util import needs_compiler

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_rdna3_under_test",
                                                  ROOT / "scripts" / "bench_rdna3.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod   # dataclasses look their module up
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        del sys.modules[spec.name]


@needs_compiler
@pytest.mark.parametrize("name", ["dynlds", "scratch", "memloop"])
def test_bench_case_runs_and_is_correct(bench, name):
    c = next(c for c in bench.cases(True, {name}))
    c.repeats = 1
    wall, cpu, wave_instructions, ok = bench.bench_ours(c)
    assert ok and wall > 0 and cpu > 0 and wave_instructions > 0
    assert c.dynamic_lds_B == (1024 if name == "dynlds" else 0)


@needs_compiler
def test_bench_prints_wall_and_cpu_time_and_the_load(bench, tmp_path, capsys):
    out = tmp_path / "b.json"
    assert bench.main(["--quick", "--only", "dynlds,launch", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "cpu ms" in text and "load average" in text and "dynlds" in text
    assert "OURS WRONG" not in text and out.exists()
