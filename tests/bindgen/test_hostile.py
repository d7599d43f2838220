"""Bad input, careless or hostile: every spec key gets a bad value, every source kind a tampered
cache and a hostile name, and each failure found by trying ~250 such cases has its
regression test here. Grow this file with every new case.

Sources are exercised for real and offline: archives and wheels are built here, served from
``file://`` or from a local HTTP server that honours Range requests, and .debs are built with the
same layout as Debian's (``ar`` of ``debian-binary``, ``control.tar.xz``, multi-block
``data.tar.xz``); only the apt index lookup is replaced (it would need the network).
"""

from __future__ import annotations

import copy
import ctypes
import hashlib
import http.server
import io
import shutil
import os
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from bindgen.errors import BindgenError, PatchError, SourceError, SpecError
from bindgen.spec import load_all, load_spec

from .conftest import CORPUS, load_target, write_spec

# ---------------------------------------------------------------- every spec key, a bad value

BASE: dict[str, Any] = {
    "group": "tgrp",
    "description": "a test spec",
    "sources": {
        "corpus": {"kind": "system", "path": str(CORPUS), "package": "corpus-pkg"},
        "deb": {"kind": "debian", "package": "pkg", "version": "1.0-1", "arch": "amd64",
                "tarball": "usr/src/x.tar.xz", "members": ["include/*"], "strip": 1},
        "whl": {"kind": "pypi", "package": "pkg", "version": "1.0", "members": ["inc/*"]},
        "arc": {"kind": "archive", "url": "https://example.invalid/a.tar.gz",
                "sha256": "0" * 64},
        "repo": {"kind": "git", "url": "https://example.invalid/r.git", "ref": "v1.0"},
    },
    "defaults": {"clang_args": ["-DX=1"], "include_dirs": ["corpus:."]},
    "targets": {
        "one": {
            "description": "one target",
            "output": "tgrp/one.py",
            "headers": ["corpus:t01_packed_bitfields.h"],
            "include_dirs": ["corpus:."],
            "preinclude": [],
            "clang_args": [],
            "language": "c",
            "lazy": False,
            "keep": {"files": ["corpus:*"], "names": ["^t01"], "exclude": ["^x$"]},
            "macros": {
                "enabled": True,
                "bit_ranges": False,
                "range_wrappers": [],
                "predefined": {"A": "1"},
                "skip": [{"pattern": "^Q$", "why": "w"}],
                "records": [{"anchor": "(?P<rec>R)_A", "fields": "(?P<dword>\\d)(?P<field>F)"
                             "(?P<kind>K)", "why": "w"}],
                "tables": [{"invocation": "X", "name": "T", "files": ["corpus:*"], "why": "w"}],
            },
            "libraries": [{"name": "lib", "candidates": ["libx.so"], "env": "LIBX"}],
            "patches": [
                {"rename": {"from": "a", "to": "b"}, "why": "w"},
                {"alias": {"name": "a", "to": "c"}, "why": "w"},
                {"type": {"record": "r", "field": "f", "to": "c_uint8"}, "why": "w"},
                {"drop": "^x$", "why": "w"},
                {"extra": "Y = 1\n", "why": "w"},
            ],
        }
    },
}


def _set(doc: dict, path: str, value: Any) -> dict:
    doc = copy.deepcopy(doc)
    node: Any = doc
    keys = path.split("/")
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node[k]
    last = keys[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return doc


# (key path, bad value, what the error must name)
BAD_VALUES = [
    ("group", "all", "group"),
    ("group", "my-group", "group"),
    ("group", "class", "group"),
    ("description", "two\nlines", "description"),
    ("matrix", [], "matrix"),
    ("matrix", ["x"], "matrix"),
    ("sources/corpus/kind", "ftp", "sources.corpus.kind"),
    ("sources/corpus/path", "relative/dir", "sources.corpus.path"),
    ("sources/corpus/package", ["x"], "sources.corpus.package"),
    ("sources/deb/version", "1\n; rm -rf /", "sources.deb.version"),
    ("sources/deb/arch", {"x": 1}, "sources.deb.arch"),
    ("sources/deb/tarball", "../../etc/x.tar.xz", "sources.deb.tarball"),
    ("sources/deb/members", "include/*", "sources.deb.members"),
    ("sources/deb/strip", -1, "sources.deb.strip"),
    ("sources/deb/sha256", "abc", "sources.deb.sha256"),
    ("sources/whl/package", True, "sources.whl.package"),
    ("sources/whl/sha256", "Z" * 64, "sources.whl.sha256"),
    ("sources/arc/url", None, "sources.arc.url"),
    ("sources/arc/sha256", "0" * 63, "sources.arc.sha256"),
    ("sources/repo/ref", "--output=/tmp/pwned", "sources.repo.ref"),
    ("sources/repo/ref", "a..b", "sources.repo.ref"),
    ("sources/repo/url", "x\ny", "sources.repo.url"),
    ("defaults/clang_args", "-DX", "defaults.clang_args"),
    ("defaults/include_dirs", ["nosuch:."], "defaults.include_dirs"),
    ("targets/one/description", "x\n\"\"\"\nimport os", "targets.one.description"),
    ("targets/one/output", "tgrp/../../../x.py", "targets.one.output"),
    ("targets/one/output", "__init__.py", "targets.one.output"),
    ("targets/one/output", "tgrp/__init__.py", "targets.one.output"),
    ("targets/one/output", "tgrp/my-mod.py", "targets.one.output"),
    ("targets/one/output", "tgrp/class.py", "targets.one.output"),
    ("targets/one/output", "/abs/x.py", "targets.one.output"),
    ("targets/one/output", "tgrp/x.txt", "targets.one.output"),
    ("targets/one/headers", [], "targets.one.headers"),
    ("targets/one/headers", ["corpus:../../etc/passwd"], "targets.one.headers"),
    ("targets/one/include_dirs", ["corpus"], "targets.one.include_dirs"),
    ("targets/one/preinclude", ["other:x.h"], "targets.one.preinclude"),
    ("targets/one/clang_args", [["-O2"]], "targets.one.clang_args"),
    ("targets/one/language", "rust", "targets.one.language"),
    ("targets/one/lazy", "yes", "targets.one.lazy"),
    ("targets/one/keep/files", "corpus:*", "targets.one.keep.files"),
    ("targets/one/keep/names", ["^(a+)+$"], "targets.one.keep.names"),
    ("targets/one/keep/exclude", ["("], "targets.one.keep.exclude"),
    ("targets/one/macros/enabled", 1, "targets.one.macros.enabled"),
    ("targets/one/macros/bit_ranges", "no", "targets.one.macros.bit_ranges"),
    ("targets/one/macros/range_wrappers", 3, "targets.one.macros.range_wrappers"),
    ("targets/one/macros/predefined", ["A"], "targets.one.macros.predefined"),
    ("targets/one/macros/skip/0/pattern", "(", "targets.one.macros.skip[0].pattern"),
    ("targets/one/macros/skip/0/why", "a\nb", "targets.one.macros.skip[0].why"),
    ("targets/one/macros/records/0/anchor", "R_A", "targets.one.macros.records[0].anchor"),
    ("targets/one/macros/records/0/fields", "x", "targets.one.macros.records[0].fields"),
    ("targets/one/macros/records/0/why", "a\rb", "targets.one.macros.records[0].why"),
    ("targets/one/macros/tables/0/invocation", "X()", "targets.one.macros.tables[0].invocation"),
    ("targets/one/macros/tables/0/name", "1T", "targets.one.macros.tables[0].name"),
    ("targets/one/macros/tables/0/files", [], "targets.one.macros.tables[0].files"),
    ("targets/one/macros/tables/0/why", "a\x00b", "targets.one.macros.tables[0].why"),
    ("targets/one/libraries/0/name", None, "targets.one.libraries[0].name"),
    ("targets/one/libraries/0/candidates", [], "targets.one.libraries[0].candidates"),
    ("targets/one/libraries/0/env", ["X"], "targets.one.libraries[0].env"),
    ("targets/one/patches/0/rename/to", "b; import os", "targets.one.patches[0].rename.to"),
    ("targets/one/patches/0/rename/from", {}, "targets.one.patches[0].rename.from"),
    ("targets/one/patches/1/alias/to", "os = __import__('os')\nx", "patches[1].alias.to"),
    ("targets/one/patches/1/alias/name", "None", "targets.one.patches[1].alias.name"),
    ("targets/one/patches/2/type/to", "c_int; import os", "targets.one.patches[2].type.to"),
    ("targets/one/patches/3/drop", "(", "targets.one.patches[3].drop"),
    ("targets/one/patches/4/extra", ["x"], "targets.one.patches[4].extra"),
    ("targets/one/patches/4/why", "w\nimport os", "targets.one.patches[4].why"),
    ("targets/one/patches/0", {"replace": {"pattern": "x", "with": "\\9"}, "why": "w"},
     "targets.one.patches[0].replace"),
]


@pytest.mark.parametrize(
    "path,value,names", BAD_VALUES, ids=[f"{p}={v!r}"[:60] for p, v, _ in BAD_VALUES]
)
def test_every_spec_key_refuses_a_bad_value(tmp_path, path, value, names):
    specs = tmp_path / "specs"
    specs.mkdir()
    load_spec(_write(specs, BASE), specs)  # the base spec itself is fine
    with pytest.raises(SpecError) as ei:
        load_spec(_write(specs, _set(BASE, path, value)), specs)
    msg = str(ei.value)
    assert names in msg, msg
    assert msg.startswith("x.yaml:"), msg  # file:line first


def _write(specs: Path, doc: dict, name: str = "x.yaml") -> Path:
    p = specs / name
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


def test_a_spec_that_is_not_utf8_is_a_spec_error_with_its_line(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_bytes(b"group: g\n# caf\xe9\ntargets: {}\n")
    with pytest.raises(SpecError, match=r"x.yaml:2: not UTF-8 text \(byte 0xe9\)"):
        load_spec(p, tmp_path)


def test_an_undefined_matrix_parameter_names_its_line(tmp_path):
    doc = _set(BASE, "targets/one/headers", ["corpus:${nope}.h"])
    doc["matrix"] = [{"ver": "1"}]
    specs = tmp_path / "specs"
    specs.mkdir()
    text = yaml.safe_dump(doc, sort_keys=False)
    (specs / "x.yaml").write_text(text)
    line = next(i for i, s in enumerate(text.splitlines(), 1) if "${nope}" in s)
    with pytest.raises(SpecError, match=rf"x.yaml:{line}: targets.one.headers: \$\{{nope\}} used"):
        load_spec(specs / "x.yaml", specs)


def _two_specs(tmp_path: Path, a: dict, b: dict) -> Path:
    specs = tmp_path / "specs"
    specs.mkdir()
    _write(specs, a, "a.yaml")
    _write(specs, b, "b.yaml")
    return specs


def _one_target(group: str, name: str, **extra: Any) -> dict:
    return {
        "group": group,
        "sources": {"corpus": BASE["sources"]["corpus"]},
        "targets": {name: {"headers": ["corpus:t01_packed_bitfields.h"], **extra}},
    }


def test_two_specs_writing_one_output_are_refused(tmp_path):
    specs = _two_specs(
        tmp_path, _one_target("ga", "x", output="shared/m.py"),
        _one_target("gb", "y", output="shared/m.py"),
    )
    with pytest.raises(SpecError, match=r"b.yaml:\d+: targets.y.output: shared/m.py is also the "
                                        r"output of target x \(.*a.yaml:\d+\)"):
        load_all(specs, "specs")


def test_two_targets_of_one_spec_writing_one_output_are_refused(tmp_path):
    doc = _one_target("ga", "x", output="ga/m.py")
    doc["targets"]["y"] = {"headers": ["corpus:t01_packed_bitfields.h"], "output": "ga/M.py"}
    specs = tmp_path / "specs"
    specs.mkdir()
    _write(specs, doc, "a.yaml")
    with pytest.raises(SpecError, match=r"is also the output of target x"):
        load_all(specs, "specs")


def test_a_target_named_like_another_group_is_refused(tmp_path):
    specs = _two_specs(tmp_path, _one_target("ga", "gb"), _one_target("gb", "y"))
    with pytest.raises(SpecError, match=r"targets.gb: has the name of the group in .*b.yaml; "
                                        r"`bindgen regen gb` would be ambiguous"):
        load_all(specs, "specs")


def test_spec_text_reaches_generated_code_only_as_comments(tmp_path):
    """Quotes, hashes and backslashes in one-line texts stay inside comments: the module compiles
    and defines nothing the headers did not."""
    from .conftest import generate_headers

    nasty = "x\"\"\" ''' # \\ __import__('os').system('id')"
    g, m = generate_headers(
        tmp_path, ["t11_pack_keywords.h"], description=nasty,
        patches=[{"alias": {"name": "t11_kw", "to": "Kw"}, "why": nasty}],
    )
    import tokenize

    names = {tok.string for tok in tokenize.generate_tokens(io.StringIO(g.text).readline)
             if tok.type == tokenize.NAME}
    assert "__import__" not in names and "system" not in names
    assert m.Kw is m.t11_kw


# ---------------------------------------------------------------- archives: hostile member names


def _tar(path: Any, members: list[tuple[str, bytes | str]], mode: str = "w:gz") -> Any:
    """A tarball (at a path or into a file object); a member whose data is a str starting with
    '->' is a symlink to the rest, '=>' a hard link."""
    opened = (tarfile.open(path, mode) if isinstance(path, Path)
              else tarfile.open(fileobj=path, mode=mode))
    with opened as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if isinstance(data, str) and data.startswith("->"):
                info.type, info.linkname = tarfile.SYMTYPE, data[2:]
                tf.addfile(info)
            elif isinstance(data, str) and data.startswith("=>"):
                info.type, info.linkname = tarfile.LNKTYPE, data[2:]
                tf.addfile(info)
            else:
                raw = data.encode() if isinstance(data, str) else data
                info.size = len(raw)
                tf.addfile(info, io.BytesIO(raw))
    return path


HOSTILE_MEMBERS = [
    ("top/../../x.h", "climbs out with '..'"),
    ("/abs/x.h", "absolute"),
    ("top/..\\..\\x.h", "non-POSIX"),
]


def _archive_spec(tmp_path: Path, url: str, sha: str, **extra: Any) -> Path:
    src = {"up": {"kind": "archive", "url": url, "sha256": sha, "strip": 1, **extra}}
    return write_spec(tmp_path / "specs", {"arc": {"headers": ["up:include/a.h"]}}, sources=src,
                      file="arc")


def _sources(cache: Path, **kw: Any):
    from bindgen.sources import Sources

    lines: list[str] = []
    return Sources(cache, log=lines.append, **kw), lines


@pytest.mark.parametrize("name,why", HOSTILE_MEMBERS)
def test_archive_member_names_cannot_escape_the_cache(tmp_path, name, why):
    tb = _tar(tmp_path / "a.tar.gz", [("top/include/a.h", "struct a { int x; };\n"),
                                      (name, "pwned\n")])
    sha = hashlib.sha256(tb.read_bytes()).hexdigest()
    t = load_target(_archive_spec(tmp_path, tb.as_uri(), sha))
    srcs, _ = _sources(tmp_path / "cache")
    with pytest.raises(SourceError, match=why):
        srcs.resolve(t.sources[0])
    assert not list(tmp_path.rglob("x.h")) and not Path("/abs/x.h").exists()
    assert not (tmp_path / "cache" / "v2" / "archive").exists()  # nothing half-written


@pytest.mark.parametrize("link", ["->../../../../etc/passwd", "->/etc/passwd", "=>../etc/passwd"])
def test_archive_links_pointing_out_are_refused(tmp_path, link):
    tb = _tar(tmp_path / "a.tar.gz", [("top/include/a.h", "struct a { int x; };\n"),
                                      ("top/include/evil.h", link)])
    sha = hashlib.sha256(tb.read_bytes()).hexdigest()
    t = load_target(_archive_spec(tmp_path, tb.as_uri(), sha))
    srcs, _ = _sources(tmp_path / "cache")
    with pytest.raises(SourceError, match="refused"):
        srcs.resolve(t.sources[0])


def test_archive_links_inside_become_copies_and_nothing_is_written_through_them(tmp_path):
    tb = _tar(tmp_path / "a.tar.gz", [("top/include/real.h", "struct a { int x; };\n"),
                                      ("top/include/a.h", "->real.h")])
    sha = hashlib.sha256(tb.read_bytes()).hexdigest()
    t = load_target(_archive_spec(tmp_path, tb.as_uri(), sha))
    srcs, _ = _sources(tmp_path / "cache")
    root = srcs.resolve(t.sources[0]).root
    a = root / "include" / "a.h"
    assert not a.is_symlink() and a.read_text() == "struct a { int x; };\n"


# ---------------------------------------------------------------- tampered caches, every kind


def _archive_source(tmp_path: Path):
    tb = _tar(tmp_path / "a.tar.gz", [("top/include/a.h", "struct a { int x; };\n")])
    sha = hashlib.sha256(tb.read_bytes()).hexdigest()
    return load_target(_archive_spec(tmp_path, tb.as_uri(), sha)).sources[0]


def test_an_unpinned_archive_is_unpacked_afresh_and_its_kept_copy_rehashed(tmp_path):
    """Nothing pins an archive source's files one by one: no unpacked copy outlives a run (so
    none can be tampered with), and the kept archive is hashed against the spec on every use."""
    src = _archive_source(tmp_path)
    srcs, _ = _sources(tmp_path / "cache")
    root = srcs.resolve(src).root
    (root / "include/a.h").write_text("struct a { long x; };\n")  # this run's copy only
    srcs2, _ = _sources(tmp_path / "cache")
    root2 = srcs2.resolve(src).root
    assert (root2 / "include/a.h").read_text() == "struct a { int x; };\n"
    kept = next((tmp_path / "cache" / "v2" / "archives").iterdir())
    data = kept.read_bytes()
    kept.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(SourceError, match=f"the kept archive {kept} has sha256 \\w+, the spec "
                                          f"pins {src.sha256}; delete it"):
        _sources(tmp_path / "cache")[0].resolve(src)


def test_archive_cached_under_another_pin_is_refused(tmp_path):
    """The kept archive is found by its sha256: a spec whose sha256 changed never gets it."""
    import dataclasses

    src = _archive_source(tmp_path)
    _sources(tmp_path / "cache")[0].resolve(src)
    other = dataclasses.replace(src, sha256=src.sha256[:16] + "1" * 48)
    with pytest.raises(SourceError, match=f"has sha256 {src.sha256}, the spec pins 1*"):
        _sources(tmp_path / "cache")[0].resolve(other)


# ---------------------------------------------------------------- git: hostile refs, tampering


def _git_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "inc").mkdir(parents=True)
    (repo / "inc" / "g.h").write_text("struct g { int x; };\n")

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                       env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                            "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})

    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "x")
    git("tag", "v1")
    return repo


def test_git_ref_that_looks_like_an_option_never_reaches_git(tmp_path):
    import dataclasses

    from bindgen.spec import Source

    repo = _git_repo(tmp_path)
    victim = tmp_path / "pwned"
    src = Source("g", "git", url="https://example.invalid/r.git", ref=f"--output={victim}")
    srcs, _ = _sources(tmp_path / "cache", overrides={"g": repo})
    with pytest.raises(SourceError, match="is not a revision name"):
        srcs.resolve(src)
    assert not victim.exists()
    ok = dataclasses.replace(src, ref="v1", members=("inc",))
    assert (_sources(tmp_path / "cache", overrides={"g": repo})[0].resolve(ok).root
            / "inc/g.h").is_file()


def test_a_tampered_git_cache_entry_is_refused(tmp_path):
    """Checked against the repository's blob ids when it is given; without it and without
    pins in bindgen.lock, a cached export cannot be verified and is not used."""
    from bindgen.errors import CacheError
    from bindgen.spec import Source

    repo = _git_repo(tmp_path)
    src = Source("g", "git", url="https://example.invalid/r.git", ref="v1", members=("inc",))
    srcs = _sources(tmp_path / "cache", overrides={"g": repo})[0]
    root = srcs.resolve(src).root
    srcs.verify_read("g", "inc/g.h", "")  # as read by the generator: git's blob id matches
    (root / "inc" / "g.h").write_text("struct g { long x; };\n")
    srcs = _sources(tmp_path / "cache", overrides={"g": repo})[0]
    srcs.resolve(src)
    with pytest.raises(CacheError, match="inc/g.h in the cache entry .* is not what git v1 pins"):
        srcs.verify_read("g", "inc/g.h", "")
    with pytest.raises(SourceError, match="its cached export of v1 cannot be verified here"):
        _sources(tmp_path / "cache")[0].resolve(src)  # from the cache, without the mirror


# ---------------------------------------------------------------- system sources


def test_system_source_hostile_name_and_escape(tmp_path):
    """System folders are read in place (there is no cache entry to tamper with); what a spec can
    do wrong is a name or a header path that escapes the folder."""
    doc = _one_target("ga", "x")
    doc["sources"] = {"../up": BASE["sources"]["corpus"]}
    specs = tmp_path / "specs"
    specs.mkdir()
    _write(specs, doc, "a.yaml")
    with pytest.raises(SpecError, match="sources.../up: expected a simple name"):
        load_all(specs, "specs")
    doc = _one_target("ga", "x")
    doc["targets"]["x"]["headers"] = ["corpus:sub/../../t01_packed_bitfields.h"]
    _write(specs, doc, "a.yaml")
    with pytest.raises(SpecError, match="climbs out of source 'corpus'"):
        load_all(specs, "specs")


# ---------------------------------------------------------------- debian and pypi, served locally


class _RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Serves a folder with single-range support (what deb.debian.org and PyPI's host do)."""

    requests: list[str] = []

    def log_message(self, *a: Any) -> None:
        pass

    def do_GET(self) -> None:
        path = Path(self.translate_path(self.path))
        data = path.read_bytes() if path.is_file() else None
        type(self).requests.append(self.headers.get("Range") or "whole")
        if data is None:
            self.send_error(404)
            return
        rng = self.headers.get("Range")
        if rng:
            a, b = rng.removeprefix("bytes=").split("-")
            lo, hi = int(a), min(int(b), len(data) - 1)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {lo}-{hi}/{len(data)}")
            body = data[lo : hi + 1]
        else:
            self.send_response(200)
            body = data
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    handler = lambda *a, **kw: _RangeHandler(*a, directory=str(root), **kw)  # noqa: E731
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    _RangeHandler.requests = []
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def _xz_multiblock(data: bytes, block: int = 4096) -> bytes:
    r = subprocess.run(["xz", "-z", "-c", "-T1", f"--block-size={block}", "--check=crc64"],
                       input=data, capture_output=True, check=True)
    return r.stdout


def _deb(path: Path, members: list[tuple[str, bytes | str]], inner: str | None = None) -> Path:
    """A .deb laid out as Debian's: ar of debian-binary, control.tar.xz, multi-block data.tar.xz.
    With ``inner``, ``members`` go into a multi-block usr/src/``inner``.tar.xz inside it."""
    def tar_bytes(ms: list[tuple[str, bytes | str]]) -> bytes:
        buf = io.BytesIO()
        _tar(buf, ms, "w")  # type: ignore[arg-type]
        return buf.getvalue()

    filler = [(f"./usr/share/doc/pkg/f{i}", os.urandom(20_000)) for i in range(40)]
    if inner:
        payload = _xz_multiblock(tar_bytes(members + filler))
        data = tar_bytes(filler[:3] + [(f"./usr/src/{inner}.tar.xz", payload)])
    else:
        data = tar_bytes(members + filler)
    parts = [("debian-binary", b"2.0\n"), ("control.tar.xz", _xz_multiblock(tar_bytes([]))),
             ("data.tar.xz", _xz_multiblock(data))]
    out = bytearray(b"!<arch>\n")
    for name, blob in parts:
        out += f"{name:<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(blob):<10}`\n".encode()
        out += blob + (b"\n" if len(blob) % 2 else b"")
    path.write_bytes(bytes(out))
    return path


def _deb_source(tmp_path, server, files, inner=None, monkeypatch=None, **extra):
    from bindgen.sources import Sources
    from bindgen.spec import Source

    root, base = server
    deb = _deb(root / "pkg_1.0-1_all.deb", files, inner)
    sha = hashlib.sha256(deb.read_bytes()).hexdigest()
    src = Source("deb", "debian", package="pkg", version="1.0-1", arch="all",
                 tarball=f"usr/src/{inner}.tar.xz" if inner else "",
                 strip=1 if inner else 0, **extra)
    monkeypatch.setattr(Sources, "_apt_uri",
                        lambda self, s: (f"{base}/{deb.name}", deb.name, deb.stat().st_size, sha))
    return src, deb, sha


DEB_FILES = [("./usr/include/pkg/a.h", "struct a { int x; };\n"),
             ("./usr/include/pkg/b.h", "#define B 2\n")]


def test_debian_whole_then_pinned_ranges_give_the_same_files_for_fewer_bytes(
    tmp_path, server, monkeypatch
):
    import dataclasses

    src, deb, _ = _deb_source(tmp_path, server, DEB_FILES, monkeypatch=monkeypatch,
                              members=("usr/include/*",))
    whole, lines = _sources(tmp_path / "c1")
    fetched = whole.fetch_whole(src, tmp_path / "w")
    assert whole.downloaded == deb.stat().st_size
    assert any("downloaded deb" in ln and "MB/s" in ln for ln in lines)  # progress with a rate
    pinned = dataclasses.replace(src, pin=fetched.pin)
    ranged, _ = _sources(tmp_path / "c2")
    root = ranged.resolve(pinned).root
    assert (root / "usr/include/pkg/a.h").read_text() == "struct a { int x; };\n"
    assert sorted(p.name for p in root.rglob("*.h")) == ["a.h", "b.h"]
    assert 0 < ranged.downloaded < deb.stat().st_size / 2
    assert all(r != "whole" for r in _RangeHandler.requests[-3:])


def test_debian_inner_tarball_through_both_xz_indexes(tmp_path, server, monkeypatch):
    import dataclasses

    files = [("linux-1/include/uapi/u.h", "#define U 1\n"),
             ("linux-1/drivers/d.h", "struct d { char c; };\n"),
             ("linux-1/big.bin", os.urandom(1_000_000))]
    src, deb, _ = _deb_source(tmp_path, server, files, inner="linux-1", monkeypatch=monkeypatch,
                              members=("include/uapi/*", "drivers/*.h"))
    whole, _ = _sources(tmp_path / "c1")
    fetched = whole.fetch_whole(src, tmp_path / "w")
    assert sorted(fetched.files) == ["drivers/d.h", "include/uapi/u.h"]
    ranged, _ = _sources(tmp_path / "c2")
    root = ranged.resolve(dataclasses.replace(src, pin=fetched.pin)).root
    assert (root / "drivers/d.h").read_text() == "struct d { char c; };\n"
    assert ranged.downloaded < deb.stat().st_size / 2


def test_debian_member_that_differs_from_its_pin_is_refused(tmp_path, server, monkeypatch):
    import dataclasses

    from bindgen.pins import Member

    src, _, _ = _deb_source(tmp_path, server, DEB_FILES, monkeypatch=monkeypatch,
                            members=("usr/include/*",))
    whole, _ = _sources(tmp_path / "c1")
    pin = whole.fetch_whole(src, tmp_path / "w").pin
    assert pin is not None
    bad = tuple(dataclasses.replace(m, sha256="0" * 64) if m.path.endswith("a.h") else m
                for m in pin.files)
    with pytest.raises(SourceError, match=r"usr/include/pkg/a.h has sha256 \w+, its pin is 0+"):
        _sources(tmp_path / "c2")[0].resolve(
            dataclasses.replace(src, pin=dataclasses.replace(pin, files=bad)))
    assert not (tmp_path / "c2" / "v2" / "debian").exists()


def test_debian_hostile_member_name_is_refused(tmp_path, server, monkeypatch):
    src, _, _ = _deb_source(tmp_path, server, DEB_FILES + [("./usr/../../../x.h", "pwned")],
                            monkeypatch=monkeypatch)
    with pytest.raises(SourceError, match="climbs out"):
        _sources(tmp_path / "c")[0].resolve(src)
    assert not list(tmp_path.rglob("x.h"))


def test_debian_archive_that_differs_from_apts_index_is_refused(tmp_path, server, monkeypatch):
    from bindgen.sources import Sources

    src, deb, sha = _deb_source(tmp_path, server, DEB_FILES, monkeypatch=monkeypatch)
    url = f"{server[1]}/{deb.name}"
    monkeypatch.setattr(Sources, "_apt_uri",
                        lambda self, s: (url, deb.name, deb.stat().st_size, "f" * 64))
    with pytest.raises(SourceError, match=f"has sha256 {sha}, apt's index gives f+"):
        _sources(tmp_path / "c")[0].resolve(src)


def _wheel(path: Path, members: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in members.items():
            z.writestr(name, text)
        z.writestr("pkg/lib/big.so", os.urandom(300_000))
    return path


def _pypi_source(tmp_path, server, monkeypatch, members: dict[str, str]):
    from bindgen.sources import Sources
    from bindgen.spec import Source

    root, base = server
    whl = _wheel(root / "pkg-1.0-py3-none-manylinux_2_17_x86_64.whl", members)
    sha = hashlib.sha256(whl.read_bytes()).hexdigest()
    monkeypatch.setattr(Sources, "_wheel", lambda self, s: (f"{base}/{whl.name}", whl.name,
                                                            whl.stat().st_size, sha))
    return Source("whl", "pypi", package="pkg", version="1.0", members=("pkg/include/*",)), whl


def test_pypi_pinned_fetch_reads_only_the_central_directory_and_members(
    tmp_path, server, monkeypatch
):
    import dataclasses

    src, whl = _pypi_source(tmp_path, server, monkeypatch, {"pkg/include/p.h": "#define P 1\n"})
    whole, _ = _sources(tmp_path / "c1")
    pin = whole.fetch_whole(src, tmp_path / "w").pin
    ranged, _ = _sources(tmp_path / "c2")
    root = ranged.resolve(dataclasses.replace(src, pin=pin)).root
    assert (root / "pkg/include/p.h").read_text() == "#define P 1\n"
    assert not (root / "pkg/lib").exists()
    assert ranged.downloaded < whl.stat().st_size / 4


def test_pypi_hostile_member_name_is_refused(tmp_path, server, monkeypatch):
    src, _ = _pypi_source(tmp_path, server, monkeypatch,
                          {"pkg/include/p.h": "#define P 1\n", "pkg/include/../../../x.h": "x"})
    with pytest.raises(SourceError, match="climbs out"):
        _sources(tmp_path / "c")[0].resolve(src)


def test_no_network_fails_fast_once(tmp_path, monkeypatch):
    """The first unreachable host stops every later download in the run (was: 138 s of retries
    before `check` reported every target clean)."""
    from bindgen.sources import Sources
    from bindgen.spec import Source

    calls = []
    monkeypatch.setattr(Sources, "_apt_uri", lambda self, s: (
        calls.append(s.name) or ("http://127.0.0.1:9/x.deb", "x.deb", 10, "0" * 64)))
    srcs, _ = _sources(tmp_path / "c")
    t0 = time.monotonic()
    for i in range(5):
        with pytest.raises(SourceError):
            srcs.resolve(Source(f"s{i}", "debian", package=f"p{i}", version="1"))
    assert time.monotonic() - t0 < 5
    assert srcs.net.down


# ---------------------------------------------------------------- the CLI: outputs and check


@pytest.fixture
def proj(tmp_path, monkeypatch):
    from .test_cli import Project

    monkeypatch.delenv("BINDGEN_SOURCE_CORPUS", raising=False)
    return Project(tmp_path)


def _unavailable(proj) -> None:
    """Regenerated, then the headers vanish: `check` can only compare what it has."""
    assert proj.regen("--jobs", "1") == 0
    shutil.rmtree(proj.src)


@pytest.mark.parametrize("edit", [
    "cli/alpha.py", "cli/_delta.py", "cli/beta.report.txt",
])
def test_check_without_sources_sees_hand_edits_of_every_file(proj, capsys, edit):
    _unavailable(proj)
    path = proj.gen / edit
    path.write_text(path.read_text().replace("\n", "\n# x\n", 1))
    capsys.readouterr()
    assert proj.check("--jobs", "1") == 1
    assert f"DRIFT generated/{edit}: differs from what bindgen wrote" in capsys.readouterr().out


def test_check_sees_crlf_line_endings(proj, capsys):
    assert proj.regen("--jobs", "1") == 0
    path = proj.gen / "cli" / "beta.py"
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    capsys.readouterr()
    assert proj.check("--jobs", "1") == 1
    assert "cli/beta.py: differs" in capsys.readouterr().out
    assert proj.regen("--jobs", "1") == 0  # and regen repairs it (it compares bytes)
    assert b"\r\n" not in path.read_bytes()


@pytest.mark.parametrize("stray", ["cli/extra_mod.py", "other/pkg/__init__.py"])
def test_check_reports_stray_files_and_folders(proj, capsys, stray):
    assert proj.regen("--jobs", "1") == 0
    (proj.gen / stray).parent.mkdir(parents=True, exist_ok=True)
    (proj.gen / stray).write_text("X = 1\n")
    capsys.readouterr()
    assert proj.check("--jobs", "1") == 1
    assert f"{stray}: not written by bindgen (a stray file" in capsys.readouterr().out


def test_check_reports_a_deleted_package_init(proj, capsys):
    _unavailable(proj)
    (proj.gen / "cli" / "__init__.py").unlink()
    capsys.readouterr()
    assert proj.check("--jobs", "1") == 1
    assert "cli/__init__.py: missing" in capsys.readouterr().out


def test_a_failed_write_replaces_none_of_a_targets_files(tmp_path, monkeypatch):
    from bindgen import outputs

    out = tmp_path / "gen"
    a, b = out / "g" / "m.py", out / "g" / "m.defs"
    outputs.write_target(out, [(a, "old py\n"), (b, "old defs\n")])
    real = os.fdopen
    n = {"calls": 0}

    def failing(fd, *args, **kw):
        n["calls"] += 1
        if n["calls"] == 2:  # the second file: a full disk, or a kill, mid-set
            os.close(fd)
            raise OSError(28, "No space left on device")
        return real(fd, *args, **kw)

    monkeypatch.setattr(outputs.os, "fdopen", failing)
    with pytest.raises(OSError):
        outputs.write_target(out, [(a, "new py\n"), (b, "new defs\n")])
    assert (a.read_text(), b.read_text()) == ("old py\n", "old defs\n")
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]


def test_outputs_are_world_readable_under_umask_077(proj):
    old = os.umask(0o077)
    try:
        assert proj.regen("--jobs", "1") == 0
    finally:
        os.umask(old)
    modes = {p.relative_to(proj.gen).as_posix(): p.stat().st_mode & 0o777
             for p in proj.gen.rglob("*") if p.is_file()}
    assert set(modes.values()) == {0o644}, modes


def test_unknown_source_override_is_a_usage_error(proj, capsys):
    assert proj.regen("--source", f"corpsu={proj.src}") == 2
    err = capsys.readouterr().err
    assert "--source corpsu: no spec declares a source named 'corpsu' (known: corpus)" in err


def test_bad_clang_args_are_an_error_naming_the_target(tmp_path):
    from bindgen.errors import ClangError

    from .conftest import generate_headers

    with pytest.raises(ClangError, match=r"probe_target.yaml:\d+: target probe_target: clang "
                                         r"refused to parse .*-std=bogus.*check the target's "
                                         r"clang_args"):
        generate_headers(tmp_path, ["t01_packed_bitfields.h"], clang_args=["-std=bogus"])


def test_dropping_a_record_another_embeds_is_refused(tmp_path):
    from .conftest import generate_headers

    with pytest.raises(PatchError, match=r"drop patch: drops t11_inner, which t11_outer still "
                                         r"uses"):
        generate_headers(tmp_path, ["t11_pack_keywords.h"], lazy=True,
                         patches=[{"drop": "t11_inner", "why": "t"}])


def test_extra_code_that_does_not_compile_names_the_patch(tmp_path):
    from .conftest import generate_headers

    with pytest.raises(PatchError, match=r"probe_target.yaml:\d+: target probe_target: extra "
                                         r"patch: line 2 of its code: invalid syntax"):
        generate_headers(tmp_path, ["t11_pack_keywords.h"],
                         patches=[{"extra": "A = 1\nB = = 2\n", "why": "t"}])


@pytest.mark.parametrize("header,msg", [
    ("nope.h", "declared header corpus:nope.h does not exist"),
    ("nope*.h", "header pattern corpus:nope*.h matches no file"),
])
def test_missing_headers_name_the_spec_line(tmp_path, header, msg):
    from .conftest import generate_headers

    with pytest.raises(SourceError) as ei:
        generate_headers(tmp_path, [header])
    text = (tmp_path / "specs" / "probe_target.yaml").read_text()
    line = next(i for i, s in enumerate(text.splitlines(), 1) if header in s)
    assert str(ei.value).startswith(f"specs/probe_target.yaml:{line}: target probe_target: ")
    assert msg in str(ei.value)


def test_a_string_macro_with_a_byte_that_is_not_utf8_is_skipped_not_mangled(tmp_path):
    from .conftest import generate_headers

    d = tmp_path / "hdr"
    d.mkdir()
    (d / "s.h").write_bytes(b'#define GOOD "caf\xc3\xa9"\n#define BAD "caf\xe9"\n')
    g, m = generate_headers(tmp_path, ["s.h"], source_dir=d)
    assert m.GOOD == "caf\u00e9" and not hasattr(m, "BAD")
    assert "\ufffd" not in g.text
    assert "BAD" in g.report and "0xe9, which is not UTF-8" in g.report


def test_killed_parallel_regen_leaves_no_workers(tmp_path):
    """kill -9 of `regen --jobs 3` takes its workers with it (they held its stdout for minutes).
    The parent generates too: three jobs are two worker processes."""
    big = tmp_path / "src"
    big.mkdir()
    for i in range(3):  # headers slow enough to be mid-generation when the parent dies
        (big / f"h{i}.h").write_text("".join(f"#define M{i}_{k} ({k} << 2)\n"
                                             for k in range(60_000)))
    specs = tmp_path / "specs"
    write_spec(specs, {f"t{i}": {"headers": [f"corpus:h{i}.h"]} for i in range(3)},
               sources={"corpus": {"kind": "system", "path": str(big), "package": "p"}})
    proc = subprocess.Popen(
        [sys.executable, "-m", "bindgen", "--specs", str(specs), "--out", str(tmp_path / "gen"),
         "regen", "--jobs", "3", "--cache", str(tmp_path / "cache")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=tmp_path,
    )
    children: list[int] = []
    deadline = time.monotonic() + 30
    while len(children) < 2 and time.monotonic() < deadline:
        children = _children(proc.pid)
        time.sleep(0.1)
    assert len(children) >= 2, "the workers never started"
    time.sleep(0.5)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while any(_alive(c) for c in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [c for c in children if _alive(c)]
    assert proc.stdout is not None
    proc.stdout.read()  # EOF: nobody holds the pipe any more
    proc.stdout.close()


def _children(pid: int) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(p.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


# ---------------------------------------------------------------- memory linear in header size


@pytest.mark.parametrize("lazy", [False, True])
def test_pointer_chains_do_not_nest_their_formats(tmp_path, lazy):
    """ctypes copies a pointee's PEP 3118 format into a pointer type made after the pointee is
    complete; along a chain of n records that is O(n²) text (50,000 records: 24 GB, OOM). Every
    record's pointer type is made with the class, so each format stays a few characters.
    scripts/bench_bindgen_size.py measures the whole run."""
    from .conftest import generate_headers

    d = tmp_path / "hdr"
    d.mkdir()
    n = 250  # lazy modules recurse once per link, which bounds how long a chain may be
    (d / "chain.h").write_text("struct s0 { int v; };\n" + "".join(
        f"struct s{i} {{ struct s{i - 1} *prev; int v; }};\n" for i in range(1, n)))
    _, m = generate_headers(tmp_path, ["chain.h"], source_dir=d, lazy=lazy)
    last = getattr(m, f"s{n - 1}")  # lazy: compiled from the far end of the chain
    assert len(memoryview(last()).format) < 40, memoryview(last()).format[:200]
    obj, prev = last(), getattr(m, f"s{n - 2}")(v=7)
    obj.prev = ctypes.pointer(prev)
    assert obj.prev.contents.v == 7


def test_an_output_root_that_cannot_be_written_is_an_error_not_a_traceback(proj, capsys):
    from bindgen.cli import main

    blocker = proj.root / "file"
    blocker.write_text("not a folder\n")
    rc = main(["--specs", str(proj.specs), "--out", str(blocker), "regen", "beta", "--jobs", "1",
               "--cache", str(proj.root / "cache")])
    err = capsys.readouterr().err
    assert rc == 1 and "FAIL  beta: cannot write" in err and "Not a directory" in err
    assert blocker.read_text() == "not a folder\n"


@pytest.mark.parametrize("specs", ["missing", "a-file"])
def test_a_bad_specs_folder_is_a_usage_error(tmp_path, capsys, specs):
    from bindgen.cli import main

    (tmp_path / "a-file").write_text("x\n")
    assert main(["--specs", str(tmp_path / specs), "--out", str(tmp_path / "o"), "list"]) == 2
    assert f"specs folder {tmp_path / specs} does not exist" in capsys.readouterr().err


def test_parallel_regen_fetches_each_source_once_before_the_workers(tmp_path, capsys):
    """Two targets share an archive; with --jobs 2 and an empty cache it is downloaded and
    unpacked once, by the parent (two workers used to fetch and unpack it at the same time)."""
    from bindgen.cli import main

    tb = _tar(tmp_path / "a.tar.gz", [("top/include/a.h", "struct a { int x; };\n"),
                                      ("top/include/b.h", "struct b { char c; };\n")])
    sha = hashlib.sha256(tb.read_bytes()).hexdigest()
    specs = tmp_path / "specs"
    write_spec(specs, {"ta": {"headers": ["up:include/a.h"]}, "tb": {"headers": ["up:include/b.h"]}},
               sources={"up": {"kind": "archive", "url": tb.as_uri(), "sha256": sha, "strip": 1}})
    rc = main(["--specs", str(specs), "--out", str(tmp_path / "gen"), "regen", "--jobs", "2",
               "--cache", str(tmp_path / "cache")])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert cap.err.count("  unpacked up: 2 files") == 1 and cap.err.count("downloaded up") == 1
    assert "MB/s" in cap.err
    assert "downloaded in this run; cache" in cap.out  # and the cache's size after regen


def test_pin_then_regen_reads_only_ranges_through_the_lock_file(tmp_path, server, monkeypatch,
                                                                 capsys):
    """`bindgen pin` writes specs/bindgen.lock; a regen with an empty cache then fetches the
    wheel's central directory and the one header, not the wheel."""
    from bindgen.cli import main

    src, whl = _pypi_source(tmp_path, server, monkeypatch,
                            {"pkg/include/p.h": "struct p { int x; };\n"})
    specs = tmp_path / "specs"
    write_spec(specs, {"wp": {"headers": ["whl:pkg/include/p.h"]}},
               sources={"whl": {"kind": "pypi", "package": "pkg", "version": "1.0",
                                "members": ["pkg/include/*"]}})
    base = ["--specs", str(specs), "--out", str(tmp_path / "gen")]
    assert main([*base, "pin", "--cache", str(tmp_path / "c0")]) == 0
    lock = (specs / "bindgen.lock").read_text()
    assert whl.name in lock and "pkg/include/p.h" in lock
    capsys.readouterr()
    assert main([*base, "regen", "--cache", str(tmp_path / "c1"), "-j", "1"]) == 0
    err = capsys.readouterr().err
    assert "ranges" in err and f"of {whl.stat().st_size / 1e6:.1f} MB" in err
    assert (tmp_path / "gen" / "testgrp" / "wp.py").is_file()
    assert all(r != "whole" for r in _RangeHandler.requests[-3:])


def test_a_lazy_module_refuses_definitions_from_another_generation(tmp_path, monkeypatch):
    """Writing a target's files as a set leaves a window between two renames; a stub beside
    definitions from another run (that window, or a partial copy) refuses to serve them."""
    import importlib

    from bindgen.cli import main

    from .test_cli import Project

    proj = Project(tmp_path)
    args = ["--specs", str(proj.specs), "--package", "hostile_lazy"]
    assert main([*args, "--out", str(tmp_path / "hostile_lazy"), "regen", "delta", "-j", "1",
                 "--cache", str(tmp_path / "cache")]) == 0
    proj.write(delta={"description": "another generation"})
    assert main([*args, "--out", str(tmp_path / "other"), "regen", "delta", "-j", "1",
                 "--cache", str(tmp_path / "cache")]) == 0
    defs = [p.name for p in (tmp_path / "other" / "cli").glob("_delta*.py")]
    assert defs, sorted(p.name for p in (tmp_path / "other" / "cli").iterdir())
    for name in defs:
        shutil.copy(tmp_path / "other" / "cli" / name, tmp_path / "hostile_lazy" / "cli" / name)
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("hostile_lazy.cli.delta")
    with pytest.raises(ImportError, match=r"_delta.py is not from the same generation as the "
                                          r"module hostile_lazy.cli.delta"):
        mod.t9  # noqa: B018 - first use reads the definitions


def test_check_without_network_is_quick_and_says_what_it_could_not_check(tmp_path, monkeypatch,
                                                                         capsys):
    """No network, empty cache: `check` used to spend 138 s and then call every target clean."""
    from bindgen.cli import main
    from bindgen.sources import Sources

    monkeypatch.setattr(Sources, "_apt_uri",
                        lambda self, s: ("http://127.0.0.1:9/x.deb", "x.deb", 10, "0" * 64))
    specs = tmp_path / "specs"
    sources = {"corpus": {"kind": "system", "path": str(CORPUS), "package": "p"},
               **{f"deb{i}": {"kind": "debian", "package": f"p{i}", "version": "1"}
                  for i in range(3)}}
    write_spec(specs, {f"t{i}": {"headers": ["corpus:t07_enums.h"], "include_dirs": [f"deb{i}:."]}
                       for i in range(3)}, sources=sources)
    base = ["--specs", str(specs), "--out", str(tmp_path / "gen")]
    monkeypatch.setenv("BINDGEN_SOURCE_DEB0", str(CORPUS))
    monkeypatch.setenv("BINDGEN_SOURCE_DEB1", str(CORPUS))
    monkeypatch.setenv("BINDGEN_SOURCE_DEB2", str(CORPUS))
    assert main([*base, "regen", "-j", "1", "--cache", str(tmp_path / "c")]) == 0
    for i in range(3):
        monkeypatch.delenv(f"BINDGEN_SOURCE_DEB{i}")
    capsys.readouterr()
    t0 = time.monotonic()
    assert main([*base, "check", "-j", "1", "--cache", str(tmp_path / "empty")]) == 1
    assert time.monotonic() - t0 < 10
    out = capsys.readouterr().out
    assert out.count("unavailable source deb") == 3 and "cannot reach" in out
    assert "not tried, the network failed earlier in this run" in out
    assert "check: NOT verified: 3 target(s) (t0, t1, t2): sources unavailable here" in out
    assert main([*base, "check", "-j", "1", "--cache", str(tmp_path / "empty"),
                 "--allow-unavailable"]) == 0
    out = capsys.readouterr().out
    assert "check: 3 target(s) clean (0 verified by regeneration, 3 unverified: sources unavailable)" in out
