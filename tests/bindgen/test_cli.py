"""The CLI: determinism (jobs, caches, hash seeds), no absolute paths, drift detection by `check`,
targets whose sources are unavailable, usage errors, and the declarative patches.

Everything runs in a temporary project given on the command line (``--specs DIR --out DIR``): its
``corpus`` source is a copy of tests/bindgen/corpus (so a test may edit a header).
"""

from __future__ import annotations

import difflib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import CORPUS, REPO, generate_headers, write_spec

HEADERS = {
    "alpha": ["t01_packed_bitfields.h", "t05_anonymous.h"],
    "beta": ["t07_enums.h"],
    "gamma": ["t11_pack_keywords.h"],
    "delta": ["t09_nested.h", "t07_enums.h"],  # lazy: true (_delta.py beside the module)
}
LAZY = {"delta"}
FILES = (
    {"cli/__init__.py", "bindgen.manifest"}
    | {f"cli/{n}.{ext}" for n in HEADERS for ext in ("py", "report.txt")}
    | {f"cli/_{n}.py" for n in LAZY}
)


class Project:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.src = root / "src"
        shutil.copytree(CORPUS, self.src)
        self.specs = root / "specs"
        self.gen = root / "generated"
        self.gen.mkdir()
        self.spec_path = self.write()

    def write(self, source_path: Path | None = None, **per_target) -> Path:
        targets = {
            name: {
                "description": f"test target {name}",
                "headers": [f"corpus:{h}" for h in hs],
                **({"lazy": True} if name in LAZY else {}),
                **per_target.get(name, {}),
            }
            for name, hs in HEADERS.items()
        }
        return write_spec(
            self.specs,
            targets,
            group="cli",
            sources={
                "corpus": {
                    "kind": "system",
                    "path": str(source_path or self.src),
                    "package": "corpus-pkg",
                }
            },
        )

    def main(self, *argv: str) -> int:
        from bindgen.cli import main

        return main(["--specs", str(self.specs), "--out", str(self.gen), *argv])

    def regen(self, *argv: str) -> int:
        return self.main("regen", "--cache", str(self.root / "cache"), *argv)

    def check(self, *argv: str) -> int:
        return self.main("check", "--cache", str(self.root / "cache"), *argv)

    @staticmethod
    def assert_same(a: dict[str, bytes], b: dict[str, bytes]) -> None:
        assert sorted(a) == sorted(b)
        diff = [k for k in a if a[k] != b[k]]
        if diff:
            k = diff[0]
            lines = "".join(
                difflib.unified_diff(
                    a[k].decode().splitlines(True), b[k].decode().splitlines(True), n=1
                )
            )
            raise AssertionError(f"outputs differ in {diff}; first:\n{lines[:3000]}")

    def snapshot(self, gen: Path | None = None) -> dict[str, bytes]:
        gen = gen or self.gen
        return {
            str(p.relative_to(gen)): p.read_bytes() for p in sorted(gen.rglob("*")) if p.is_file()
        }


@pytest.fixture
def proj(tmp_path, monkeypatch):
    monkeypatch.delenv("BINDGEN_SOURCE_CORPUS", raising=False)
    return Project(tmp_path)


def test_regen_writes_modules_reports_and_package(proj, capsys):
    assert proj.regen("all", "--jobs", "1") == 0
    out = capsys.readouterr().out
    snap = proj.snapshot()
    assert set(snap) == FILES
    for name in HEADERS:
        assert f"wrote {name}" in out
    assert "regen: 4 ok, 0 failed" in out
    alpha = snap["cli/alpha.py"].decode()
    assert "do not edit" in alpha and "# spec: specs/cli.yaml  target: alpha" in alpha
    assert "# fingerprint: " in alpha
    report = snap["cli/alpha.report.txt"].decode()
    assert "corpus:t01_packed_bitfields.h" in report and "corpus:t05_anonymous.h" in report


def test_regen_twice_is_a_no_op(proj, capsys):
    assert proj.regen("--jobs", "1") == 0
    first = proj.snapshot()
    mtimes = {p: p.stat().st_mtime_ns for p in proj.gen.rglob("*.py")}
    capsys.readouterr()
    assert proj.regen("--jobs", "1") == 0
    assert proj.snapshot() == first
    assert "same  alpha" in capsys.readouterr().out
    assert {p: p.stat().st_mtime_ns for p in proj.gen.rglob("*.py")} == mtimes


def test_deterministic_across_jobs_and_caches(proj, monkeypatch):
    from bindgen import cli

    monkeypatch.setattr(cli, "_POOL_MIN_BYTES", 0)  # workers even for these small headers
    assert proj.main("regen", "--jobs", "1", "--cache", str(proj.root / "cacheA")) == 0
    first = proj.snapshot()
    shutil.rmtree(proj.gen)
    proj.gen.mkdir()
    assert proj.main("regen", "--jobs", "2", "--cache", str(proj.root / "cacheB")) == 0
    proj.assert_same(first, proj.snapshot())


def test_parallel_run_hands_big_targets_to_workers_and_keeps_the_order(proj, monkeypatch):
    """--jobs 3: two forked workers take the targets expected to cost most, biggest first, this
    process the cheapest; results come back in the order asked, a failure in its place."""
    from bindgen import cli
    from bindgen.project import load_project
    from bindgen.spec import load_all

    targets = load_all(proj.specs, "specs")
    order = [t.name for t in targets]
    big = cli._POOL_MIN_BYTES
    cost = {"alpha": 1, "beta": 40 * big, "gamma": 30 * big, "delta": 20 * big}
    monkeypatch.setattr(cli, "_expected_cost", lambda t, srcs: cost[t.name])

    def fake(args):  # inherited by the forked workers: each says who generated the target
        time.sleep(0.2)
        return None, f"{args[0].name} in {os.getpid()}"

    monkeypatch.setattr(cli, "_worker", fake)
    project = load_project(str(proj.specs), str(proj.gen), None)

    def who(jobs: int) -> dict[str, int]:
        got = list(cli._run(targets, project, None, jobs))  # type: ignore[arg-type]
        assert [t.name for t, _, _ in got] == order
        return {t.name: int(err.rsplit(" ", 1)[1]) for t, g, err in got if g is None}

    by = who(3)
    assert by["alpha"] == os.getpid()  # the cheapest: generated here
    assert by["beta"] != os.getpid() and by["gamma"] != os.getpid()  # the two biggest: workers
    assert by["beta"] != by["gamma"]
    # Only small targets: a worker would cost more than it saves, so none is started.
    cost.update(beta=big - 1, gamma=big - 1, delta=big - 1)
    assert set(who(3).values()) == {os.getpid()}


def test_deterministic_across_hash_seeds_in_subprocesses(proj):
    """``python -m bindgen`` in fresh interpreters with different PYTHONHASHSEEDs (the same
    __main__ entry point, the output root given with --out)."""
    snaps = []
    for seed, jobs in (("0", "1"), ("12345", "2"), ("random", "1")):
        out = proj.root / f"gen_{seed}"
        out.mkdir()
        env = dict(
            os.environ,
            PYTHONHASHSEED=seed,
            PYTHONPATH=os.pathsep.join(
                [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
            ),
        )
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "bindgen",
                "--specs",
                str(proj.specs),
                "--out",
                str(out),
                "--package",
                "generated",
                "regen",
                "--jobs",
                jobs,
                "--cache",
                str(proj.root / f"cache_{seed}"),
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=proj.root,
            timeout=120,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        snaps.append(proj.snapshot(out))
    assert proj.regen("--jobs", "1") == 0
    snaps.append(proj.snapshot())
    assert set(snaps[0]) == FILES
    for s in snaps[1:]:
        proj.assert_same(snaps[0], s)


def test_output_has_no_absolute_paths_or_timestamps(proj):
    assert proj.regen("--jobs", "1") == 0
    for rel, data in proj.snapshot().items():
        text = data.decode()
        for needle in (
            str(proj.root),
            str(proj.src),
            str(CORPUS),
            str(REPO),
            os.path.expanduser("~"),
        ):
            assert needle not in text, (rel, needle)
        assert "/tmp" not in text, rel


def test_check_clean(proj, capsys):
    assert proj.regen("--jobs", "1") == 0
    capsys.readouterr()
    assert proj.check("--jobs", "1") == 0
    out = capsys.readouterr().out
    # every target is regenerated: the manifest cannot vouch for the module bytes ...
    assert "ok    alpha: regenerated output identical" in out and "fingerprint" not in out
    assert "check: 4 target(s) clean (4 verified by regeneration)" in out
    # ... unless asked for the quick check
    assert proj.check("--jobs", "1", "--fast") == 0
    out = capsys.readouterr().out
    assert "ok    alpha: fingerprint unchanged (spec entry, generator and 2 headers" in out
    assert "not regenerated (--fast)" in out
    assert proj.check("--jobs", "1", "--full") == 0  # the default, kept for scripts


def test_quiet_and_verbose(proj, capsys):
    assert proj.main("-q", "regen", "--jobs", "1", "--cache", str(proj.root / "cache")) == 0
    out = capsys.readouterr().out
    assert "wrote" not in out and "regen: 4 ok, 0 failed" in out
    assert proj.main("-v", "regen", "gamma", "--cache", str(proj.root / "cache")) == 0
    assert "same  gamma" in capsys.readouterr().out
    assert proj.main("-q", "check", "--cache", str(proj.root / "cache")) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("check: 4 target(s) clean")


def test_check_detects_a_hand_edit_with_a_unified_diff(proj, capsys):
    assert proj.regen("--jobs", "1") == 0
    mod = proj.gen / "cli" / "beta.py"
    text = mod.read_text()
    assert "T7_NEG = -5\n" in text
    mod.write_text(text.replace("T7_NEG = -5\n", "T7_NEG = -6\n"))
    capsys.readouterr()
    assert proj.check("--jobs", "1") == 1
    out = capsys.readouterr().out
    assert "DRIFT beta" in out and "ok    alpha" in out and "ok    gamma" in out
    assert "--- a/generated/cli/beta.py (committed)" in out
    assert "+++ b/generated/cli/beta.py (regenerated)" in out
    assert "\n-T7_NEG = -6\n" in out and "\n+T7_NEG = -5\n" in out
    assert "drift in 1 target(s): beta" in out
    assert mod.read_text() != text, "check must not rewrite generated files"


def test_check_detects_an_edited_definitions_module(proj, capsys):
    assert proj.regen("--jobs", "1") == 0
    defs = proj.gen / "cli" / "_delta.py"
    text = defs.read_text()
    assert "T7_NEG = -5" in text
    defs.write_text(text.replace("T7_NEG = -5", "T7_NEG = -6"))
    capsys.readouterr()
    assert proj.check("--jobs", "1") == 1
    out = capsys.readouterr().out
    assert "DRIFT delta" in out and "generated/cli/_delta.py" in out


def test_lazy_module_imports_from_the_written_files(proj, monkeypatch):
    """The written lazy module finds its definitions module beside it when imported as a package
    module."""
    import importlib

    assert proj.regen("delta", "--jobs", "1") == 0
    (proj.gen / "__init__.py").write_text("")

    def ours() -> dict:
        return {
            k: v for k, v in sys.modules.items() if k == "generated" or k.startswith("generated.")
        }

    saved = ours()
    for k in saved:
        del sys.modules[k]
    monkeypatch.syspath_prepend(str(proj.root))
    try:
        mod = importlib.import_module("generated.cli.delta")
        assert mod.__file__.startswith(str(proj.gen))
        assert mod.T7_HUGE == 0x100000000 and mod.t9.named.offset == 16
        o = mod.t9(a=1, b=2, g=3)
        assert (o.a, o.b, o.g) == (1, 2, 3)
    finally:  # the repo's own generated package must be the one later tests import
        for k in ours():
            del sys.modules[k]
        sys.modules.update(saved)


def test_check_detects_a_missing_or_deleted_report(proj, capsys):
    assert proj.regen("--jobs", "1") == 0
    (proj.gen / "cli" / "gamma.report.txt").unlink()
    assert proj.check("gamma", "--jobs", "1") == 1
    assert "DRIFT gamma" in capsys.readouterr().out


def test_check_detects_a_spec_change(proj, capsys):
    assert proj.regen("--jobs", "1") == 0
    proj.write(gamma={"patches": [{"rename": {"from": "t11_kw", "to": "KW"}, "why": "test"}]})
    capsys.readouterr()
    assert proj.check("--jobs", "1") == 1
    out = capsys.readouterr().out
    assert "DRIFT gamma" in out and "+class KW(" in out


def test_check_detects_a_spec_change_that_does_not_change_output(proj, capsys):
    """The fingerprint covers the target's own spec entry: an edit that renders the same module
    is drift for that target (the committed header records the inputs hash), and only for it."""
    assert proj.regen("--jobs", "1") == 0
    proj.write(gamma={"keep": {"exclude": ["^NOTHING_HAS_THIS_NAME$"]}})
    capsys.readouterr()
    assert proj.check("--jobs", "1") == 1
    out = capsys.readouterr().out
    assert "DRIFT gamma" in out and "drift in 1 target(s): gamma" in out
    for other in ("alpha", "beta", "delta"):
        assert f"ok    {other}" in out


def test_comments_and_moves_in_a_spec_drift_nothing(proj, capsys):
    assert proj.regen("--jobs", "1") == 0
    text = proj.spec_path.read_text()
    proj.spec_path.write_text("# a comment on top moves every line\n\n" + text + "# and one below\n")
    capsys.readouterr()
    assert proj.check("--jobs", "1") == 0, capsys.readouterr().out


def test_check_detects_header_drift(proj, capsys):
    assert proj.regen("--jobs", "1") == 0
    h = proj.src / "t07_enums.h"
    h.write_text(h.read_text() + "\n/* upstream touched this */\n")
    capsys.readouterr()
    assert proj.check("--jobs", "1") == 1
    out = capsys.readouterr().out
    assert "DRIFT beta" in out and "DRIFT delta" in out and "ok    alpha" in out
    assert "beta.report.txt" in out and "corpus:t07_enums.h" in out


def test_check_selects_by_group_and_target(proj, capsys):
    assert proj.regen("beta", "--jobs", "1") == 0
    assert set(proj.snapshot()) == {
        "cli/__init__.py", "cli/beta.py", "cli/beta.report.txt", "bindgen.manifest"
    }
    assert proj.check("beta", "--jobs", "1") == 0
    capsys.readouterr()
    assert proj.check("cli", "--jobs", "1") == 1
    out = capsys.readouterr().out
    assert "DRIFT alpha" in out and "generated/cli/alpha.py" in out


def test_unavailable_system_source_checks_the_fingerprint_only(proj, capsys):
    missing = proj.root / "not-installed"
    proj.write(source_path=missing)
    assert proj.regen("--jobs", "1", "--source", f"corpus={proj.src}") == 0
    capsys.readouterr()
    assert proj.check("--jobs", "1") == 1  # fails closed ...
    out = capsys.readouterr().out
    assert "header drift NOT checked" in out and "corpus" in out
    assert out.count("NOT checked") == 4 and "check: NOT verified: 4 target(s)" in out
    assert proj.check("--jobs", "1", "--allow-unavailable") == 0  # ... unless allowed
    out = capsys.readouterr().out
    assert out.count("NOT VERIFIED") == 4 and "check: allowed unverified: 4 target(s)" in out

    # a spec edit is still caught without the headers (a comment is not an edit)
    proj.spec_path.write_text(proj.spec_path.read_text() + "# edited\n")
    assert proj.check("--jobs", "1", "--allow-unavailable") == 0
    proj.write(source_path=missing, alpha={"description": "edited"})
    assert proj.check("--jobs", "1") == 1
    out = capsys.readouterr().out
    assert "DRIFT alpha" in out and "spec, templates or generator changed" in out


def test_unavailable_source_with_a_hand_edited_module_is_drift(proj, capsys):
    assert proj.regen("--jobs", "1") == 0
    mod = proj.gen / "cli" / "alpha.py"
    text = mod.read_text()
    mod.write_text(text.replace("# inputs: ", "# inputs: 0", 1))
    shutil.rmtree(proj.src)
    capsys.readouterr()
    assert proj.check("--jobs", "1") == 1
    out = capsys.readouterr().out
    assert "DRIFT alpha" in out and "NOT checked" in out  # beta and gamma: fingerprint only


def test_override_env_var_pointing_nowhere(proj, capsys, monkeypatch):
    assert proj.regen("--jobs", "1") == 0
    monkeypatch.setenv("BINDGEN_SOURCE_CORPUS", str(proj.root / "nowhere"))
    capsys.readouterr()
    assert proj.check("--jobs", "1", "--allow-unavailable") == 0
    out = capsys.readouterr().out
    assert "header drift NOT checked" in out


def test_override_env_var_is_used(proj, capsys, monkeypatch):
    other = proj.root / "mirror"
    shutil.copytree(proj.src, other)
    (other / "t07_enums.h").write_text(
        (other / "t07_enums.h").read_text().replace("T7_NEG = -5", "T7_NEG = -9")
    )
    proj.write(source_path=proj.root / "not-installed")
    monkeypatch.setenv("BINDGEN_SOURCE_CORPUS", str(other))
    assert proj.regen("beta", "--jobs", "1") == 0
    assert "T7_NEG = -9\n" in (proj.gen / "cli" / "beta.py").read_text()
    assert str(other) not in (proj.gen / "cli" / "beta.py").read_text()


def test_regen_skip_unavailable_keeps_committed_bindings(proj, capsys):
    assert proj.regen("--jobs", "1") == 0
    before = proj.snapshot()
    shutil.rmtree(proj.src)
    capsys.readouterr()
    assert proj.regen("--jobs", "1", "--skip-unavailable") == 0
    assert "skip  alpha: sources unavailable here (corpus)" in capsys.readouterr().out
    assert proj.snapshot() == before


def test_regen_failure_exits_1_and_keeps_the_old_file(proj, capsys):
    assert proj.regen("--jobs", "1") == 0
    before = proj.snapshot()
    h = proj.src / "t07_enums.h"
    h.write_text(h.read_text() + "\nstruct broken { unknown_t x; };\n")
    capsys.readouterr()
    assert proj.regen("--jobs", "1") == 1
    cap = capsys.readouterr()
    assert "FAIL  beta" in cap.err and "unknown type name" in cap.err
    assert "regen: 2 ok, 2 failed" in cap.out  # beta and delta read t07_enums.h
    assert proj.snapshot() == before
    assert not [p for p in proj.gen.rglob("*") if p.name.endswith(".tmp")]


def test_a_generator_crash_fails_its_target_only(proj, capsys, monkeypatch):
    """An exception the generator did not expect (a bug) fails that target with a message naming
    it; the other targets are still written."""
    import bindgen.generate as generate_mod

    real = generate_mod.parse_target

    def crashing(target, roots):
        if target.name == "beta":
            raise KeyError((-1, True))
        return real(target, roots)

    monkeypatch.setattr(generate_mod, "parse_target", crashing)
    assert proj.regen("--jobs", "1") == 1
    cap = capsys.readouterr()
    assert "FAIL  beta: target beta: internal error in the generator" in cap.err
    assert "KeyError: (-1, True)" in cap.err and "Traceback" not in cap.err
    assert "regen: 3 ok, 1 failed" in cap.out
    written = proj.snapshot()
    assert "cli/alpha.py" in written and "cli/beta.py" not in written


def test_check_reports_a_failing_target_as_drift(proj, capsys):
    assert proj.regen("--jobs", "1") == 0
    h = proj.src / "t07_enums.h"
    h.write_text(h.read_text() + '\n#include "nope.h"\n')
    capsys.readouterr()
    assert proj.check("--jobs", "1") == 1
    out = capsys.readouterr().out
    assert "FAIL  beta" in out and "nope.h" in out


def test_list_and_show(proj, capsys):
    assert proj.main("list") == 0
    out = capsys.readouterr().out
    for name in HEADERS:
        assert f"{name}" in out and f"generated/cli/{name}.py" in out
    assert "corpus(system)" in out
    assert proj.regen("beta", "--jobs", "1") == 0
    capsys.readouterr()
    assert proj.main("show", "beta") == 0
    out = capsys.readouterr().out
    assert "target beta (group cli, spec specs/cli.yaml)" in out
    assert "header: corpus:t07_enums.h" in out and "report: generated/cli/beta.report.txt" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (("regen", "nosuch"), "no target, group or spec file named 'nosuch'"),
        (("check", "--source", "corpus"), "--source expects NAME=DIR"),
        (("regen", "--jobs", "0"), "--jobs must be at least 1"),
        (("show", "nosuch"), "no target, group or spec file named 'nosuch'"),
    ],
)
def test_usage_errors_exit_2(proj, capsys, argv, message):
    assert proj.main(*argv) == 2
    assert message in capsys.readouterr().err


def test_unknown_command_exits_2(proj, capsys):
    assert proj.main("frobnicate") == 2


def test_empty_specs_folder_exits_2(tmp_path, capsys):
    from bindgen.cli import main

    (tmp_path / "empty").mkdir()
    assert main(["--specs", str(tmp_path / "empty"), "--out", str(tmp_path), "list"]) == 2
    assert "no specs (*.yaml) in" in capsys.readouterr().err


def test_bad_spec_exits_1_with_location(proj, capsys):
    proj.spec_path.write_text(proj.spec_path.read_text() + "bogus: 1\n")
    assert proj.main("list") == 1
    err = capsys.readouterr().err
    assert "specs/cli.yaml:" in err and "bogus: unknown key" in err


# ---------------------------------------------------------------- patches


def _gen(tmp_path, patches, headers=("t11_pack_keywords.h",)):
    return generate_headers(tmp_path, list(headers), name="patched", patches=patches)


def test_patch_rename_record_follows_references(tmp_path):
    g, m = _gen(tmp_path, [{"rename": {"from": "t11_inner", "to": "Inner"}, "why": "nicer"}])
    assert hasattr(m, "Inner") and not hasattr(m, "t11_inner")
    assert m.t11_outer.in_.size == 8
    assert dict((f[0], f[1]) for f in m.t11_outer.__bindgen_fields__)["in_"] is m.Inner


def test_patch_rename_constant(tmp_path):
    d = tmp_path / "hdr"
    d.mkdir()
    (d / "c.h").write_text("#define OLD_NAME (1 << 4)\n#define USES_OLD (OLD_NAME + 1)\n")
    _, m = generate_headers(
        tmp_path,
        ["c.h"],
        source_dir=d,
        name="patched",
        patches=[{"rename": {"from": "OLD_NAME", "to": "NEW_NAME"}, "why": "t"}],
    )
    assert m.NEW_NAME == 16 and not hasattr(m, "OLD_NAME") and m.USES_OLD == 17


def test_patch_rename_unknown_name_is_an_error(tmp_path):
    from bindgen.errors import PatchError

    with pytest.raises(
        PatchError,
        match=r"specs/patched\.yaml:\d+: target patched: rename "
        r"patch: nothing named 'nosuch'",
    ):
        _gen(tmp_path, [{"rename": {"from": "nosuch", "to": "x"}, "why": "t"}])


def test_patch_rename_onto_an_existing_name_is_an_error(tmp_path):
    from bindgen.errors import PatchError

    with pytest.raises(PatchError, match="'t11_kw' already exists"):
        _gen(tmp_path, [{"rename": {"from": "t11_p1", "to": "t11_kw"}, "why": "t"}])


def test_patch_drop(tmp_path):
    g, m = _gen(tmp_path, [{"drop": "t11_p.*", "why": "unused"}])
    assert not hasattr(m, "t11_p1") and hasattr(m, "t11_kw")
    # one reason line per dropped declaration, naming the patch and where the C one was
    lines = [ln for ln in g.report.splitlines() if "dropped by patch" in ln]
    dropped = sorted(ln.split(":")[0] for ln in lines)
    assert dropped and all(d.startswith("record t11_p") for d in dropped), lines
    assert all("drop patch): unused  [corpus:t11_pack_keywords.h:" in ln for ln in lines), lines


def test_patch_drop_matching_nothing_is_an_error(tmp_path):
    from bindgen.errors import PatchError

    with pytest.raises(PatchError, match=r"drop patch: pattern 'zzz.*' matched nothing"):
        _gen(tmp_path, [{"drop": "zzz.*", "why": "t"}])


def test_patch_extra_code_runs_in_the_module(tmp_path):
    g, m = _gen(
        tmp_path,
        [
            {
                "extra": "def kw_total(k):\n    return k.in_ + k.from_\nEXTRA_OK = 1\n",
                "why": "helper",
            }
        ],
    )
    assert m.EXTRA_OK == 1 and m.kw_total(m.t11_kw(in_=2, from_=40)) == 42
    assert "# extra: helper" in g.text


def test_patch_alias(tmp_path):
    _, m = _gen(tmp_path, [{"alias": {"name": "t11_kw", "to": "Keywords"}, "why": "t"}])
    assert m.Keywords is m.t11_kw


def test_patch_type_override(tmp_path):
    _, m = _gen(
        tmp_path, [{"type": {"record": "t11_kw", "field": "from_", "to": "c_uint32"}, "why": "t"}]
    )
    o = m.t11_kw(from_=-1)
    assert o.from_ == 0xFFFFFFFF and o.in_ == 0


def test_patch_type_unknown_field_is_an_error(tmp_path):
    from bindgen.errors import PatchError

    with pytest.raises(PatchError, match="record t11_kw has no field 'nope'"):
        _gen(
            tmp_path,
            [{"type": {"record": "t11_kw", "field": "nope", "to": "c_uint32"}, "why": "t"}],
        )


def _gen_tampered(tmp_path, monkeypatch, pattern: str, repl: str):
    """Generates with the rendered text altered before verification: what a broken renderer
    would produce (spec text can no longer reach the code: `replace` patches are gone)."""
    import re

    import bindgen.generate as gen

    real = gen.render_module

    def tampered(*a, **kw):
        rendered = real(*a, **kw)
        new, n = re.subn(pattern, repl, rendered.text, flags=re.M)
        assert n, f"{pattern!r} not in the rendered module"
        rendered.text = new
        return rendered

    monkeypatch.setattr(gen, "render_module", tampered)
    return _gen(tmp_path, [])


def test_replace_patches_are_refused_with_the_alternatives(tmp_path):
    from bindgen.errors import SpecError

    with pytest.raises(SpecError, match=r"patches\[0\]\.replace: text patches on rendered code "
                                        r"were removed.*rename, alias, type or drop"):
        _gen(tmp_path, [{"replace": {"pattern": "x", "with": "import os"}, "why": "t"}])


def test_a_rendered_layout_that_differs_from_clang_fails_generation(tmp_path, monkeypatch):
    from bindgen.errors import LayoutError

    with pytest.raises(LayoutError, match=r"t11_kw: size 20, clang says 16"):
        _gen_tampered(
            tmp_path,
            monkeypatch,
            r"t11_kw\._layout_\(size=16, align=4,",
            "t11_kw._layout_(size=20, align=4,",
        )


def test_unrepresentable_layout_is_a_bindgen_error(tmp_path, monkeypatch):
    """A layout the support runtime cannot build (here: two fields forced onto one offset) must fail
    as a BindgenError naming the target, like any other generation failure."""
    from bindgen.errors import BindgenError

    with pytest.raises(BindgenError, match=r"patched|t11_kw"):
        _gen_tampered(
            tmp_path, monkeypatch, r"\('from_', c_int32, 32\)", "('from_', c_int32, 64)"
        )


def test_one_failing_target_does_not_stop_the_others(proj, capsys):
    """A target whose rendered module cannot be built fails alone: the others are still written and
    the run exits 1 with a FAIL line (not a traceback out of main)."""
    proj.write(gamma={"patches": [{"drop": "no_such_name", "why": "t"}]})
    rc = proj.regen("--jobs", "1")
    cap = capsys.readouterr()
    assert rc == 1
    assert "FAIL  gamma" in cap.err
    assert {"cli/alpha.py", "cli/beta.py"} <= set(proj.snapshot())


# ---------------------------------------------------------------- pinned sources (archive, git)


def _tarball(tmp_path: Path, files: dict[str, str]) -> tuple[Path, str]:
    import hashlib
    import tarfile

    root = tmp_path / "tar_src"
    for rel, text in files.items():
        (root / "pkg-1.0" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "pkg-1.0" / rel).write_text(text)
    tb = tmp_path / "pkg-1.0.tar.gz"
    with tarfile.open(tb, "w:gz") as tf:
        tf.add(root / "pkg-1.0", arcname="pkg-1.0")
    return tb, hashlib.sha256(tb.read_bytes()).hexdigest()


def test_archive_source_is_fetched_verified_and_cached(tmp_path):
    from .conftest import generate_target, load_target

    tb, sha = _tarball(
        tmp_path,
        {"include/a.h": "struct arc { int x; long y; };\n", "docs/readme.txt": "not a header\n"},
    )
    specs = tmp_path / "specs"
    src = {
        "up": {
            "kind": "archive",
            "url": tb.as_uri(),
            "sha256": sha,
            "strip": 1,
            "members": ["include/*"],
        }
    }
    path = write_spec(specs, {"arc": {"headers": ["up:include/a.h"]}}, sources=src, file="arc")
    g = generate_target(load_target(path), specs, tmp_path / "cache")
    assert "class arc(" in g.text and "up:include/a.h" in g.report
    kept = list((tmp_path / "cache" / "v2" / "archives").iterdir())
    assert [k.name[:64] for k in kept] == [sha]  # the archive is kept, by its sha256 ...
    assert not list((tmp_path / "cache" / "v2").rglob("a.h"))  # ... and unpacked for each run
    g2 = generate_target(load_target(path), specs, tmp_path / "other-cache")
    assert (g2.text, g2.report) == (g.text, g.report)  # the cache location never shows
    tb.unlink()  # a second run needs no network: the archive is kept
    assert generate_target(load_target(path), specs, tmp_path / "cache").text == g.text


def test_archive_with_a_wrong_sha256_is_refused(tmp_path):
    from bindgen.errors import SourceError

    from .conftest import generate_target, load_target

    tb, sha = _tarball(tmp_path, {"include/a.h": "struct arc { int x; };\n"})
    specs = tmp_path / "specs"
    bad = "0" * 64
    path = write_spec(
        specs,
        {"arc": {"headers": ["up:include/a.h"]}},
        file="arc",
        sources={"up": {"kind": "archive", "url": tb.as_uri(), "sha256": bad, "strip": 1}},
    )
    with pytest.raises(SourceError, match=f"has sha256 {sha}, the spec pins {bad}"):
        generate_target(load_target(path), specs, tmp_path / "cache")


def test_git_source_from_a_local_mirror_reads_the_pinned_ref(tmp_path, monkeypatch):
    from .conftest import generate_target, load_target

    repo = tmp_path / "repo"
    (repo / "inc").mkdir(parents=True)

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-C", str(repo), *args],
            check=True,
            capture_output=True,
            env=dict(
                os.environ,
                GIT_AUTHOR_NAME="t",
                GIT_AUTHOR_EMAIL="t@t",
                GIT_COMMITTER_NAME="t",
                GIT_COMMITTER_EMAIL="t@t",
            ),
        )

    git("init", "-q")
    (repo / "inc" / "g.h").write_text("struct pinned { int at_tag; };\n")
    git("add", ".")
    git("commit", "-qm", "v1")
    git("tag", "v1")
    (repo / "inc" / "g.h").write_text("struct pinned { int after_tag; };\n")
    git("commit", "-qam", "v2")
    specs = tmp_path / "specs"
    path = write_spec(
        specs,
        {"gitt": {"headers": ["up:inc/g.h"]}},
        file="gitt",
        sources={"up": {"kind": "git", "url": "https://example.invalid/repo.git", "ref": "v1"}},
    )
    t = load_target(path)
    from bindgen.errors import SourceError

    with pytest.raises(SourceError, match=r"--source up=DIR or BINDGEN_SOURCE_UP=DIR"):
        generate_target(t, specs, tmp_path / "cache")
    g = generate_target(t, specs, tmp_path / "cache", overrides={"up": repo})
    assert "at_tag" in g.text and "after_tag" not in g.text
    assert str(repo) not in g.text and str(tmp_path) not in g.report


def test_version_show_of_a_group_and_spec_file_selectors(proj, capsys):
    assert proj.main("--version") == 0
    out = capsys.readouterr().out
    assert out.startswith("bindgen ") and "(generator " in out
    assert proj.main("show", "cli") == 0  # the group: every target
    out = capsys.readouterr().out
    assert out.startswith("cli: 4 targets") and out.count("\ntarget ") == 4
    assert proj.main("show", "cli.yaml") == 0  # the spec file
    assert capsys.readouterr().out.startswith("cli.yaml: 4 targets")
    assert proj.main("regen", "cli.yaml", "--jobs", "1", "--cache", str(proj.root / "c")) == 0
    assert "regen: 4 ok" in capsys.readouterr().out
    assert proj.main("show", "nosuch.yaml") == 2
    assert "spec files: cli.yaml" in capsys.readouterr().err


def test_a_closed_pipe_ends_quietly(proj, monkeypatch, capsys):
    """`bindgen list | head`: the reader is gone before bindgen writes; no traceback, exit 0."""
    r, w = os.pipe()
    os.close(r)
    with open(w, "w") as closed:
        monkeypatch.setattr(sys, "stdout", closed)
        assert proj.main("list") == 0
    monkeypatch.undo()
    assert capsys.readouterr().err == ""
