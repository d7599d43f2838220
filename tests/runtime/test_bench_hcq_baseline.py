"""scripts/bench_hcq.py --baseline: this tree's sections beside another commit's, alternated."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench_hcq.py"


def _git_ok() -> bool:
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"],
                          capture_output=True).returncode == 0


needs_git = pytest.mark.skipif(not _git_ok(), reason="not a git checkout")


@needs_git
def test_an_unknown_ref_is_refused_with_its_name(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--sections", "mocklaunch", "--quick",
                           "--baseline", "no-such-ref-xyz", "--json", str(tmp_path / "o.json")],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert "--baseline no-such-ref-xyz: git archive failed" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "o.json").exists()


@needs_git
def test_both_trees_are_measured_one_after_the_other(tmp_path: Path) -> None:
    out = tmp_path / "o.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--sections", "mocklaunch", "--quick",
                           "--baseline", "HEAD", "--rounds", "1", "--json", str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.index("1/1 baseline: load") < done.stdout.index("1/1 this: load")
    got = json.loads(out.read_text())
    assert got["meta"]["baseline"] == "HEAD" and got["meta"]["rounds"] == 1
    rows = {r["name"]: r for r in got["compared"]}
    row = rows.get("mock-amd empty launch+wait, asynchronous")
    if row is None:     # no OpenCL compiler here: the section reports itself skipped
        pytest.skip("the mocklaunch section was skipped (compiler missing)")
    assert len(row["baseline"]) == 1 and len(row["this"]) == 1 and row["unit"] == "us"
    assert "mock-amd empty launch+wait, asynchronous, CPU" in rows


def test_rounds_below_one_are_refused() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--baseline", "HEAD", "--rounds", "0"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "--rounds must be at least 1" in done.stderr
