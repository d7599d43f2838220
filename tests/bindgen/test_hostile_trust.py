"""Hostile input, second battery: bounded work on hostile specs and headers, a source cache that
trusts only the pins, a `check` that fails closed, and outputs that stay inside the output root.
Each test failed before the fix it guards (the first battery is test_hostile.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from bindgen import ir
from bindgen.cexpr import CType, MacroContext, MacroDef, MacroOptions, tokenize, translate_macros
from bindgen.errors import SpecError
from bindgen.spec import load_spec

# ---------------------------------------------------------------- bounded work: spec YAML


def _spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    return path


def test_yaml_aliases_that_expand_exponentially_are_refused_at_their_line(tmp_path):
    """A 351-byte "billion laughs" spec (9^9 values) ran for minutes and died of MemoryError."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(8):
        prev, cur = chr(97 + i), chr(98 + i)
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    path = _spec(tmp_path, "\n".join(lines) + "\ngroup: x\n")
    t0 = time.monotonic()
    with pytest.raises(SpecError, match=r"^hostile.yaml:6: the spec stands for more than "
                                        r"200,000 values with its aliases expanded"):
        load_spec(path, tmp_path)
    assert time.monotonic() - t0 < 30  # was: minutes, then MemoryError


def test_a_few_aliases_still_work(tmp_path):
    from .conftest import CORPUS

    path = _spec(tmp_path, f"""\
group: g
sources:
  corpus: {{kind: system, path: {CORPUS}, package: p}}
defaults: &d {{clang_args: [-DX=1]}}
targets:
  t: {{output: g/t.py, headers: ["corpus:t07_enums.h"], clang_args: [-DY=2]}}
""")
    assert [t.name for t in load_spec(path, tmp_path).targets] == ["t"]


@pytest.mark.parametrize("text,line", [
    ("group: " + "[" * 50_000 + "]" * 50_000 + "\n", 1),
    ("group: x\ntargets:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(100)), 65),
    ("a: &a " + "[" * 40 + "1" + "]" * 40 + "\nb: &b " + "[" * 30 + "*a" + "]" * 30 + "\n", 2),
])
def test_deep_nesting_is_a_spec_error_not_a_recursion_error(tmp_path, text, line):
    with pytest.raises(SpecError, match=rf"^hostile.yaml:{line}: .*more than 64 levels deep"):
        load_spec(_spec(tmp_path, text), tmp_path)


# ---------------------------------------------------------------- bounded work: macros

_CTX = MacroContext(types={"int": CType(4, True)}, enum_constants={}, record_names={})


def _translate(src: str):
    macros = []
    for i, line in enumerate(src.strip().splitlines(), 1):
        head, _, body = line.removeprefix("#define ").partition(" ")
        name, _, params = head.partition("(")
        macros.append(MacroDef(name, tuple(p for p in params.rstrip(")").split(",") if p)
                               if params else None, tuple(tokenize(body)),
                               ir.Location("h.h", i)))
    return translate_macros(macros, _CTX, MacroOptions(), lambda n: True)


def _doubling(depth: int) -> str:
    return ("#define F0(x) ((x)+1)\n"
            + "".join(f"#define F{i}(x) F{i - 1}(F{i - 1}(x))\n" for i in range(1, depth + 1))
            + f"#define V F{depth}(1)\n")


def test_macros_passing_their_own_calls_as_arguments_stop_at_a_bound_naming_the_macro():
    """F_i(x) = F_{i-1}(F_{i-1}(x)) cost four times more per level: 22 s at depth 12, depth 40
    never finished. Now a bounded amount of work, then a reason naming where it stopped."""
    t0 = time.monotonic()
    res = _translate(_doubling(40))
    assert time.monotonic() - t0 < 30
    skipped = {s.name: s.reason for s in res.skipped}
    assert "macro expansion scans more than 200,000 tokens (stopped in F" in skipped["V"]
    assert len(res.functions) == 41  # every F_i itself is still a function


def test_a_shallow_doubling_macro_still_evaluates():
    res = _translate(_doubling(4))
    assert {c.name: c.expr for c in res.constants}["V"] == "17"


def test_arguments_nested_too_deep_are_a_reason_not_a_recursion_error():
    res = _translate("#define G(x) (x)\n#define V " + "G(" * 5000 + "1" + ")" * 5000 + "\n"
                     "#define W " + "G(" * 30 + "1" + ")" * 30 + "\n")
    assert {s.name: s.reason for s in res.skipped}["V"] == "macro arguments nested more than 64 deep"
    assert {c.name: c.expr for c in res.constants}["W"] == "1"


# ---------------------------------------------------------------- header bytes and sysfs text


def test_a_header_comment_that_is_not_utf8_is_kept_with_replacement_characters(tmp_path):
    """libclang's binding decodes comments as strict UTF-8: a Latin-1 byte in a doc comment
    was a UnicodeDecodeError traceback."""
    from .conftest import generate_headers

    d = tmp_path / "hdr"
    d.mkdir()
    (d / "h.h").write_bytes(b"/** the count, caf\xe9 */\nstruct t { int b; /* x\xff */ int c; };\n"
                            b"#define X 1 /* \xff */\n")
    g, m = generate_headers(tmp_path, ["h.h"], source_dir=d)
    assert m.X == 1 and m.t(b=2).b == 2
    assert "the count, caf\ufffd" in g.text and "# x\ufffd" in g.text


@pytest.mark.parametrize("resource", [
    "garbage\n", "0x1000 0x1fff\n", "0x2000 0x1000 0x200\n", "\xff\xfe\x00\n",
])
def test_pci_list_on_a_garbage_resource_file_says_what_is_wrong(tmp_path, capsys, resource):
    from runtime.drivers.pci import main
    from runtime.hcq.seam import RealOS

    fn = tmp_path / "0000:00:01.0"
    fn.mkdir()
    cfg = bytearray(64)
    cfg[0:4] = bytes([0x86, 0x80, 0x34, 0x12])  # vendor 8086, device 1234, header type 0
    (fn / "config").write_bytes(bytes(cfg))
    (fn / "resource").write_text(resource, encoding="latin-1")
    lines: list[str] = []
    assert main(["list", "--root", str(tmp_path)], seam=RealOS(), out=lines.append) == 0
    text = "\n".join(lines)
    assert "0000:00:01.0" in text and "[8086:1234]" in text
    assert "\tBARs: 0000:00:01.0: line 1 of " in text and "is not 'START END FLAGS'" in text


# ---------------------------------------------------------------- outputs


@pytest.fixture
def proj(tmp_path, monkeypatch):
    from .test_cli import Project

    monkeypatch.delenv("BINDGEN_SOURCE_CORPUS", raising=False)
    return Project(tmp_path)


def test_a_linked_group_folder_is_refused_and_nothing_is_written_through_it(proj, capsys):
    outside = proj.root / "outside"
    outside.mkdir()
    (proj.gen / "cli").symlink_to(outside)
    assert proj.regen("--jobs", "1") == 1
    err = capsys.readouterr().err
    assert "FAIL  alpha: " in err and "generated/cli is a symbolic link (to " in err
    assert "bindgen writes only inside the output root" in err
    assert list(outside.iterdir()) == []


def test_a_full_disk_on_the_manifest_replaces_nothing_and_says_so(proj, capsys, monkeypatch):
    """The manifest used to be written after the target's files: a full disk then left every
    file replaced while the message said nothing was."""
    from bindgen import outputs

    assert proj.regen("--jobs", "1", "alpha") == 0
    proj.write(alpha={"description": "changed"})
    before = proj.snapshot()
    real = outputs.tempfile.mkstemp

    def full(*args, **kw):
        if kw.get("prefix", "").startswith(".bindgen.manifest."):
            raise OSError(28, "No space left on device", "bindgen.manifest")
        return real(*args, **kw)

    monkeypatch.setattr(outputs.tempfile, "mkstemp", full)
    capsys.readouterr()
    assert proj.regen("--jobs", "1", "alpha") == 1
    err = capsys.readouterr().err
    assert "No space left on device" in err and "nothing of this target was replaced" in err
    assert proj.snapshot() == before


def test_a_manifest_write_failure_between_targets_keeps_the_earlier_ones(proj, monkeypatch):
    from bindgen import outputs
    from bindgen.outputs import audit

    real = outputs.tempfile.mkstemp

    def second_target_fails(*args, **kw):
        if kw.get("prefix", "").startswith(".beta.py."):
            raise OSError(28, "No space left on device", "beta.py")
        return real(*args, **kw)

    monkeypatch.setattr(outputs.tempfile, "mkstemp", second_target_fails)
    assert proj.regen("--jobs", "1") == 1
    monkeypatch.undo()
    problems = audit(proj.gen, [f"cli/{n}.py" for n in ("alpha", "beta", "gamma", "delta")])
    assert problems == [], problems  # what was written is in the manifest, and only that
    assert not (proj.gen / "cli" / "beta.py").exists()


def test_a_wrong_spec_sha256_for_a_package_the_lock_pins_is_an_error(tmp_path):
    from bindgen.pins import Member, SourcePin, save_lock
    from bindgen.spec import Source

    from .conftest import write_spec

    specs = tmp_path / "specs"
    deb = {"kind": "debian", "package": "pkg", "version": "1.0-1"}
    path = write_spec(specs, {"t": {"headers": ["deb:x.h"]}}, sources={"deb": deb})
    ident = Source("deb", "debian", package="pkg", version="1.0-1").identity()
    save_lock(specs, {ident: SourcePin(ident, "pkg_1.0-1_amd64.deb", "http://x/pkg.deb", "a" * 64,
                                       10, -1, 0, (Member("x.h", "b" * 64, 1, 0),))})
    assert load_spec(path, specs).targets[0].sources[0].pin is not None
    write_spec(specs, {"t": {"headers": ["deb:x.h"]}}, sources={"deb": {**deb, "sha256": "c" * 64}})
    with pytest.raises(SpecError, match=r"testgrp.yaml:\d+: sources.deb.sha256: c{64} is not the "
                                        r"sha256 of pkg_1.0-1_amd64.deb that bindgen.lock pins"):
        load_spec(path, specs)
    write_spec(specs, {"t": {"headers": ["deb:x.h"]}}, sources={"deb": {**deb, "sha256": "a" * 64}})
    assert load_spec(path, specs).targets[0].sources[0].pin is not None


def test_sigint_is_one_line_and_exit_130(tmp_path):
    import signal
    import subprocess
    import sys

    from .conftest import write_spec

    big = tmp_path / "src"
    big.mkdir()
    (big / "h.h").write_text("".join(f"#define M_{k} ({k} << 2)\n" for k in range(200_000)))
    specs = tmp_path / "specs"
    write_spec(specs, {"t": {"headers": ["corpus:h.h"]}},
               sources={"corpus": {"kind": "system", "path": str(big), "package": "p"}})
    proc = subprocess.Popen(
        [sys.executable, "-m", "bindgen", "--specs", str(specs), "--out", str(tmp_path / "gen"),
         "regen", "--jobs", "1", "--cache", str(tmp_path / "cache")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )
    # Wait until the run is busy in the generator (clang has its translation unit open).
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _opened(proc.pid, "h.h"):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert err.strip().splitlines()[-1] == (
        "bindgen: interrupted; targets not yet written keep their previous files")
    assert not (tmp_path / "gen" / "testgrp" / "t.py").exists()


def _opened(pid: int, name: str) -> bool:
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(fd).endswith(name):
                return True
        except OSError:
            continue
    return False
