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


@needs_compiler
def test_bench_rounds_alternate_and_the_json_keeps_every_round(bench, tmp_path, capsys):
    out = tmp_path / "b.json"
    assert bench.main(["--quick", "--only", "dynlds", "--rounds", "2", "--json", str(out)]) == 0
    assert "2 round(s)" in capsys.readouterr().out
    import json
    rows = json.loads(out.read_text())["rows"]
    assert [r["case"] for r in rows] == ["dynlds", "dynlds"]
    for r in rows:
        rounds = r["extra"]["rounds_ours_ms"]
        assert len(rounds) == 2 and r["ours_cpu_ms"] == min(c for _, c in rounds)


def test_bench_refuses_bad_rounds_and_a_missing_peer(bench, tmp_path, capsys):
    for argv, said in ((["--rounds", "0"], "--rounds must be at least 1"),
                       (["--peer", str(tmp_path)], "no tinygrad checkout")):
        with pytest.raises(SystemExit) as e:
            bench.main(argv + ["--json", str(tmp_path / "b.json")])
        assert e.value.code == 2 and said in capsys.readouterr().err
    assert not (tmp_path / "b.json").exists()


def _fake_peer(root: Path, body: str) -> Path:
    emu = root / "test" / "mockgpu" / "amd"
    emu.mkdir(parents=True)
    for d in (root / "test", root / "test" / "mockgpu", emu):
        (d / "__init__.py").write_text("")
    (emu / "emu.py").write_text(f"def run_asm(*args):\n    {body}\n")
    return root


@needs_compiler
def test_peer_server_reports_a_failing_or_wrong_peer_and_keeps_serving(bench, tmp_path):
    c = next(c for c in bench.cases(True, {"dynlds"}))
    srv = bench.PeerServer(_fake_peer(tmp_path / "bad", "raise ValueError('no such op')"))
    try:
        assert srv.run(c) == "peer failed: ValueError: no such op"
        assert srv.run(c) == "peer failed: ValueError: no such op"   # still answering
    finally:
        srv.close()
    srv = bench.PeerServer(_fake_peer(tmp_path / "lazy", "pass"))   # writes nothing
    try:
        assert srv.run(c) == "peer computed a wrong result"
    finally:
        srv.close()


@pytest.mark.skipif(bool(__import__("shutil").which("valgrind") is None),
                    reason="valgrind is not installed")
def test_callgrind_region_counts_only_the_region(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import callgrind_region
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    if callgrind_region.available():
        pytest.skip(callgrind_region.available())
    import subprocess
    counts = []
    for n in (1000, 100000):
        log = tmp_path / f"cg{n}.log"
        prog = (f"import sys; sys.path.insert(0, {str(ROOT / 'scripts')!r}); "
                f"import callgrind_region as r\nwith r.region():\n    sum(range({n}))")
        res = subprocess.run(callgrind_region.command(log, ["-c", prog]), capture_output=True,
                             text=True, timeout=300)
        assert res.returncode == 0, res.stderr
        counts.append(callgrind_region.collected(log))
    # Python's start-up (tens of millions) is not counted; the loop's length is
    assert 0 < counts[0] < 2_000_000 < counts[1]
