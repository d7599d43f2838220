"""Resolves a spec's header sources into local folders, pinned and cached.

Kinds: ``system`` (a folder on this machine, named with the Debian package that provides it),
``debian`` (``apt-get download`` of an exact version, unpacked with ``dpkg-deb -x``; an inner
tarball such as
linux-source's is unpacked selectively), ``pypi`` (``pip download --no-deps`` of an exact version),
``archive`` (url + sha256) and ``git`` (url + ref, read from a local checkout or bare mirror).
Any source can be overridden with ``--source NAME=DIR`` or ``BINDGEN_SOURCE_<NAME>=DIR``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .errors import SourceError
from .spec import Source


def env_var(name: str) -> str:
    return "BINDGEN_SOURCE_" + re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def default_cache() -> Path:
    base = os.environ.get("BINDGEN_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "bindgen"
    )
    return Path(base)


@dataclass(frozen=True)
class Resolved:
    source: Source
    root: Path
    how: str  # "override DIR", "cache", "fetched" — for progress output only, never rendered


class Sources:
    """Finds or fetches each source once per run; thread-safe enough for per-target workers."""

    def __init__(
        self,
        cache: Path | None = None,
        overrides: dict[str, Path] | None = None,
        offline: bool = False,
    ) -> None:
        self.cache = cache or default_cache()
        self.overrides = dict(overrides or {})
        self.offline = offline
        self._done: dict[str, Resolved] = {}

    def resolve(self, src: Source) -> Resolved:
        if src.name in self._done:
            return self._done[src.name]
        override = self.overrides.get(src.name) or os.environ.get(env_var(src.name))
        if override:
            res = self._override(src, Path(override))
        else:
            res = getattr(self, f"_{src.kind}")(src)
        self._done[src.name] = res
        return res

    def available(self, src: Source) -> bool:
        try:
            self.resolve(src)
            return True
        except SourceError:
            return False

    # -- helpers
    def _how_to(self, src: Source) -> str:
        return (
            f"supply it with --source {src.name}=DIR or {env_var(src.name)}=DIR "
            f"(a folder holding the files the spec names)"
        )

    def _override(self, src: Source, path: Path) -> Resolved:
        if not path.exists():
            raise SourceError(f"source {src.name}: override {path} does not exist")
        if src.kind == "git" and _is_git(path):
            return Resolved(src, self._git_export(src, path), f"git {path}")
        if src.tarball and (path / src.tarball).is_file():
            return Resolved(
                src, self._unpack_inner(src, path, path / src.tarball), f"override {path}"
            )
        return Resolved(src, path, f"override {path}")

    def _system(self, src: Source) -> Resolved:
        path = Path(src.path)
        if not path.is_dir():
            fix = (
                f"install the Debian package {src.package} (apt-get install {src.package}) or "
                if src.package
                else "create it or "
            )
            raise SourceError(f"source {src.name}: {path} is missing; " + fix + self._how_to(src))
        return Resolved(src, path, "system")

    def _debian(self, src: Source) -> Resolved:
        key = _safe(f"{src.package}_{src.version}_{src.arch}")
        if src.tarball:  # selective unpacks of one package differ by what they take
            key += "_" + _sha256_text(repr((src.tarball, src.members, src.strip)))[:12]
        root = self.cache / "debian" / key
        if not (root / ".complete").exists():
            if self.offline:
                raise SourceError(
                    f"source {src.name}: {src.package}={src.version} is not cached and "
                    f"the run is offline; " + self._how_to(src)
                )
            if not shutil.which("apt-get") or not shutil.which("dpkg-deb"):
                raise SourceError(
                    f"source {src.name}: needs apt-get and dpkg-deb to fetch "
                    f"{src.package}={src.version}; " + self._how_to(src)
                )
            with tempfile.TemporaryDirectory(dir=_mk(self.cache / "tmp")) as tmp:
                r = subprocess.run(
                    ["apt-get", "download", f"{src.package}={src.version}"],
                    cwd=tmp,
                    capture_output=True,
                    text=True,
                )
                debs = list(Path(tmp).glob("*.deb"))
                if r.returncode or not debs:
                    raise SourceError(
                        f"source {src.name}: `apt-get download {src.package}={src.version}` "
                        "failed: "
                        f"{(r.stderr or r.stdout).strip().splitlines()[-1:] or ['no .deb']}; "
                        f"run `apt-get update`, or " + self._how_to(src)
                    )
                deb = debs[0]
                if src.sha256 and _sha256(deb) != src.sha256:
                    raise SourceError(
                        f"source {src.name}: {deb.name} has sha256 {_sha256(deb)}, "
                        f"the spec pins {src.sha256}"
                    )
                out = Path(tmp) / "x"
                r = subprocess.run(
                    ["dpkg-deb", "-x", str(deb), str(out)], capture_output=True, text=True
                )
                if r.returncode:
                    raise SourceError(f"source {src.name}: dpkg-deb -x failed: {r.stderr.strip()}")
                if src.tarball:
                    inner = out / src.tarball
                    if not inner.is_file():
                        raise SourceError(f"source {src.name}: {src.tarball} is not in {deb.name}")
                    final = Path(tmp) / "y"
                    _extract_members(inner, final, src.members, src.strip, src.name)
                    out = final
                _publish(out, root)
        return Resolved(src, root, "cache")

    def _unpack_inner(self, src: Source, base: Path, tarball: Path) -> Path:
        root = self.cache / "inner" / _safe(f"{src.name}_{_sha256_text(str(tarball))[:12]}")
        if not (root / ".complete").exists():
            with tempfile.TemporaryDirectory(dir=_mk(self.cache / "tmp")) as tmp:
                _extract_members(tarball, Path(tmp) / "y", src.members, src.strip, src.name)
                _publish(Path(tmp) / "y", root)
        return root

    def _pypi(self, src: Source) -> Resolved:
        root = self.cache / "pypi" / _safe(f"{src.package}_{src.version}")
        if not (root / ".complete").exists():
            if self.offline:
                raise SourceError(
                    f"source {src.name}: {src.package}=={src.version} is not cached "
                    "and the run is offline; " + self._how_to(src)
                )
            with tempfile.TemporaryDirectory(dir=_mk(self.cache / "tmp")) as tmp:
                r = subprocess.run(
                    [
                        "python3",
                        "-m",
                        "pip",
                        "download",
                        "--no-deps",
                        "--only-binary=:all:",
                        "--platform",
                        "manylinux2014_x86_64",
                        "--platform",
                        "manylinux_2_17_x86_64",
                        "-d",
                        tmp,
                        f"{src.package}=={src.version}",
                    ],
                    capture_output=True,
                    text=True,
                )
                files = sorted(Path(tmp).iterdir())
                if r.returncode or not files:
                    raise SourceError(
                        f"source {src.name}: pip download {src.package}=={src.version}"
                        f" failed: {r.stderr.strip().splitlines()[-1:]}; " + self._how_to(src)
                    )
                out = Path(tmp) / "x"
                with zipfile.ZipFile(files[0]) as z:
                    z.extractall(out)
                _publish(out, root)
        return Resolved(src, root, "cache")

    def _archive(self, src: Source) -> Resolved:
        root = self.cache / "archive" / src.sha256[:16]
        if not (root / ".complete").exists():
            if self.offline:
                raise SourceError(
                    f"source {src.name}: {src.url} is not cached and the run is "
                    "offline; " + self._how_to(src)
                )
            with tempfile.TemporaryDirectory(dir=_mk(self.cache / "tmp")) as tmp:
                dl = Path(tmp) / "download"
                try:
                    with urllib.request.urlopen(src.url, timeout=60) as resp, dl.open("wb") as f:
                        shutil.copyfileobj(resp, f)
                except OSError as e:
                    raise SourceError(
                        f"source {src.name}: cannot download {src.url}: {e}; " + self._how_to(src)
                    )
                if _sha256(dl) != src.sha256:
                    raise SourceError(
                        f"source {src.name}: {src.url} has sha256 {_sha256(dl)}, the "
                        f"spec pins {src.sha256}"
                    )
                _extract_members(dl, Path(tmp) / "x", src.members, src.strip, src.name)
                _publish(Path(tmp) / "x", root)
        return Resolved(src, root, "cache")

    def _git(self, src: Source) -> Resolved:
        root = self._git_root(src)
        if (root / ".complete").exists():
            return Resolved(src, root, "cache")
        raise SourceError(
            f"source {src.name}: {src.url} at {src.ref} is not in the cache. Give a checkout or a "
            f"bare mirror: --source {src.name}=DIR or {env_var(src.name)}=DIR (a bare git "
            f"directory is exported at {src.ref}; for example `git clone --bare {src.url} DIR`)"
        )

    def _git_root(self, src: Source) -> Path:
        key = f"{src.name}_{src.ref}"
        if src.members:
            key += "_" + _sha256_text(repr(src.members))[:12]
        return self.cache / "git" / _safe(key)

    def _git_export(self, src: Source, repo: Path) -> Path:
        root = self._git_root(src)
        if (root / ".complete").exists():
            return root
        with tempfile.TemporaryDirectory(dir=_mk(self.cache / "tmp")) as tmp:
            out = Path(tmp) / "x"
            out.mkdir()
            # `members` are path prefixes: mirrors may lack blobs outside them (large files).
            arch = subprocess.run(
                ["git", "-C", str(repo), "archive", "--format=tar", src.ref, "--", *src.members],
                capture_output=True,
            )
            if arch.returncode:
                raise SourceError(
                    f"source {src.name}: git archive {src.ref} in {repo} failed: "
                    f"{arch.stderr.decode(errors='replace').strip()}"
                )
            tar = Path(tmp) / "a.tar"
            tar.write_bytes(arch.stdout)
            # Not extractall(filter=...): Debian 12's Python 3.11.2 predates extraction filters.
            _extract_members(tar, out, (), 0, src.name)
            _publish(out, root)
        return root


def _is_git(path: Path) -> bool:
    return (path / "HEAD").is_file() and (path / "objects").is_dir() or (path / ".git").exists()


def _extract_members(
    archive: Path, out: Path, members: tuple[str, ...], strip: int, name: str
) -> None:
    """Unpacks members matching the ``members`` globs (all when empty), dropping ``strip`` parts."""
    out.mkdir(parents=True, exist_ok=True)
    found = 0
    try:
        with tarfile.open(archive) as tf:
            for m in tf:
                if not (m.isfile() or m.isdir()):
                    continue
                parts = m.name.split("/")[strip:]
                rel = "/".join(parts)
                if not rel or (members and not any(fnmatch.fnmatch(rel, g) for g in members)):
                    continue
                if m.isdir():
                    continue
                dest = out / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                src = tf.extractfile(m)
                assert src is not None
                with dest.open("wb") as f:
                    shutil.copyfileobj(src, f)
                found += 1
    except tarfile.TarError as e:
        raise SourceError(f"source {name}: cannot read {archive.name}: {e}")
    if members and not found:
        raise SourceError(f"source {name}: no file in {archive.name} matches {list(members)}")


def _publish(tmp_dir: Path, root: Path) -> None:
    """Moves a finished unpack into place atomically and marks it complete."""
    (tmp_dir / ".complete").write_text("")
    root.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(tmp_dir, root)
    except OSError:
        if not (root / ".complete").exists():  # a concurrent run may have won the race
            shutil.rmtree(root, ignore_errors=True)
            os.rename(tmp_dir, root)


def _mk(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def _safe(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]", "_", s)


def _sha256(p: Path) -> str:
    h = hashlib.sha256()
    with p.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _sha256_text(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()
