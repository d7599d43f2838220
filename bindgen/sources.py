"""Resolves a spec's header sources into local folders, pinned, verified and cached.

Kinds: ``system`` (a folder on this machine, named with the Debian package that provides it),
``debian`` (an exact version from the apt mirror), ``pypi`` (an exact version's wheel),
``archive`` (url + sha256) and ``git`` (url + ref, read from a local checkout or bare mirror).
Any source can be overridden with ``--source NAME=DIR`` or ``BINDGEN_SOURCE_<NAME>=DIR``.

What is downloaded: where a source is pinned (``bindgen pin``, see ``pins``), only the byte ranges
holding its members: a wheel's central directory and members, a .deb's xz blocks that hold them
(through the inner tarball's own blocks for linux-source). Otherwise the whole archive is
downloaded once, checked against the spec's sha256 or its index's hash, and kept.

Nothing in the cache vouches for itself. A cache entry of unpacked files exists only for sources
``bindgen.lock`` pins file by file (and git exports, checked against their repository when it is
given): the entry's folders and files must be plain (no links) and exactly the pinned set, and
every file the generator reads is checked against its pinned sha256 (``verify_read``). An unpinned
source's kept archive is hashed again on every use and unpacked afresh into the run's scratch
folder. Scratch folders of runs that were killed are removed by the next run.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import weakref
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable, Iterator, Mapping

from .archives import (
    ArStream,
    Extractor,
    XzView,
    ar_members,
    decompressor_stream,
    extract_tar_stream,
    extract_zip,
    member_path,
    selected,
)
from .errors import CacheError, SourceError
from .fetch import Counted, Log, Net, RangeFile, mb
from .pins import Member, SourcePin
from .spec import Source

MANIFEST = ".bindgen-manifest.json"
PYPI_INDEX = "https://pypi.org/simple"


def env_var(name: str) -> str:
    return "BINDGEN_SOURCE_" + re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def default_cache() -> Path:
    base = os.environ.get("BINDGEN_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "bindgen"
    )
    return Path(base)


def log_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Resolved:
    source: Source
    root: Path
    how: str  # "override DIR", "cache", "fetched" — for progress output only, never rendered
    # What each file under ``root`` must hash to, by relative path (None: ``root`` holds nothing
    # that could have changed since it was verified: a system folder, a folder the user gave, an
    # archive unpacked in this run). Digests are sha256, or git's blob ids with ``git_blobs``.
    pins: Mapping[str, str] | None = None
    git_blobs: bool = False


@dataclass
class Fetched:
    """What one fetch produced (before it is published into the cache)."""

    files: dict[str, Member]
    archive_sha256: str = ""
    pin: SourcePin | None = None  # set by whole-archive fetches: what `bindgen pin` records
    extra: dict[str, str] = field(default_factory=dict)


class Sources:
    """Finds or fetches each source once per run. Resolve every source in the parent process
    before starting workers: they then only read the verified cache. Unpinned archives are
    unpacked into this run's scratch folder, which is removed when this object is: keep it for
    as long as the resolved folders are used."""

    def __init__(
        self,
        cache: Path | None = None,
        overrides: dict[str, Path] | None = None,
        offline: bool = False,
        log: Log = log_stderr,
    ) -> None:
        self.cache = cache or default_cache()
        self.overrides = dict(overrides or {})
        self.offline = offline
        self.net = Net(log)
        self.log = log
        self._done: dict[str, Resolved] = {}
        self.whole = False  # `bindgen pin`: fetch whole archives even where pins exist
        self._run: Path | None = None  # this run's scratch folder for unpacked archives
        self._cleaned = False

    def __getstate__(self) -> dict[str, object]:
        # A worker gets the resolved roots, not the ownership of the run's scratch folder.
        state = dict(self.__dict__)
        state.pop("_finalizer", None)
        return state

    def resolve(self, src: Source) -> Resolved:
        if src.name in self._done:
            return self._done[src.name]
        if src.pin is not None and src.sha256 and src.sha256 != src.pin.archive_sha256:
            raise SourceError(
                f"source {src.name}: the spec gives sha256 {src.sha256}, bindgen.lock pins "
                f"{src.pin.archive} with {src.pin.archive_sha256}; correct one of them"
            )
        override = self.overrides.get(src.name) or os.environ.get(env_var(src.name))
        if override:
            res = self._override(src, Path(override))
        elif src.kind == "system":
            res = self._system(src)
        else:
            res = self._cached(src)
        self._done[src.name] = res
        return res

    def available(self, src: Source) -> bool:
        try:
            self.resolve(src)
            return True
        except SourceError:
            return False

    @property
    def downloaded(self) -> int:
        return self.net.downloaded

    def verify_read(self, name: str, rel: str, sha256: str) -> None:
        """Refuses a file the generator read from a cache entry (source ``name``, path ``rel``
        in it, its bytes hashing to ``sha256``) unless it is what the pins say."""
        res = self._done.get(name)
        if res is None or res.pins is None:
            return
        want = res.pins.get(rel)
        path = res.root / rel
        got = _git_blob(path) if res.git_blobs else sha256
        if want is None or got != want:
            pinned = "bindgen.lock" if not res.git_blobs else f"git {res.source.ref}"
            raise CacheError(
                f"source {name}: {rel} in the cache entry {res.root} is not what {pinned} pins "
                f"({'not pinned' if want is None else f'{got[:16]}..., pinned {want[:16]}...'}); "
                f"delete {res.root} and run again to fetch it afresh"
            )

    def scratch(self) -> "_Scratch":
        """A folder under the cache for one download or unpack, removed when done (and by a
        later run if this one is killed first)."""
        self._clean_once()
        return _Scratch(_mk(self.cache / "tmp"))

    def _clean_once(self) -> None:
        if not self._cleaned:
            self._cleaned = True
            clean_scratch(self.cache / "tmp")

    def _run_dir(self) -> Path:
        """This run's folder for archives unpacked afresh (removed when the run ends)."""
        if self._run is None:
            sc = self.scratch()
            self._run = sc.path
            self._finalizer = weakref.finalize(self, sc.close, os.getpid())
        return self._run

    # -- helpers
    def _how_to(self, src: Source) -> str:
        return (
            f"supply it with --source {src.name}=DIR or {env_var(src.name)}=DIR "
            f"(a folder holding the files the spec names)"
        )

    def entry(self, src: Source) -> Path:
        """The cache folder of a source: named for people, keyed by everything that shapes it."""
        label = {
            "debian": f"{src.package}_{src.version}_{src.arch}",
            "pypi": f"{src.package}_{src.version}",
            "archive": src.sha256[:16],
            "git": f"{src.name}_{src.ref}",
        }[src.kind]
        key = _sha256_text(src.identity())[:12]
        return self.cache / "v2" / src.kind / _safe(f"{label}_{key}")

    def _override(self, src: Source, path: Path) -> Resolved:
        if not path.exists():
            raise SourceError(f"source {src.name}: override {path} does not exist")
        if src.kind == "git" and _is_git(path):
            return self._git_export(src, path)
        if src.tarball and (path / src.tarball).is_file():
            root = self._run_dir() / _safe(src.name)
            with (path / src.tarball).open("rb") as f:
                self._unpack_stream(src, f, root, src.tarball)
            return Resolved(src, root, f"override {path}")
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

    def _cached(self, src: Source) -> Resolved:
        if src.kind == "git":
            return self._git_cached(src)
        if src.pin is None or src.kind not in ("debian", "pypi"):
            # Nothing pins its files one by one: the kept archive, checked against its hash on
            # every use, is unpacked afresh for this run.
            out = self._run_dir() / _safe(src.name)
            fetched = getattr(self, f"_fetch_{src.kind}")(src, out)
            size = sum(m.size for m in fetched.files.values())
            self.log(f"  unpacked {src.name}: {len(fetched.files)} files ({mb(size)}) for this "
                     "run from its kept archive")
            return Resolved(src, out, "unpacked")
        root = self.entry(src)
        pins = {m.path: m.sha256 for m in src.pin.files}
        if self._entry_present(src, root):
            _verify_entry(src, root, pins)
            return Resolved(src, root, "cache", pins)
        if self.offline:
            raise SourceError(
                f"source {src.name}: {src.kind} {src.package or src.url} is not cached and the run "
                "is offline; " + self._how_to(src)
            )
        before, start = self.net.downloaded, time.monotonic()
        with self.scratch() as tmp:
            out = tmp / "x"
            fetched = getattr(self, f"_fetch_{src.kind}")(src, out)
            _publish_files(out, root, fetched, src)
        size = sum(m.size for m in fetched.files.values())
        got, secs = self.net.downloaded - before, max(time.monotonic() - start, 1e-6)
        self.log(
            f"  cached {src.name}: {len(fetched.files)} files ({mb(size)}) from {mb(got)} "
            f"downloaded in {secs:.1f} s ({mb(got / secs)}/s)"
        )
        _verify_entry(src, root, pins)
        return Resolved(src, root, "fetched", pins)

    def _entry_present(self, src: Source, root: Path) -> bool:
        """Whether the cache entry ``root`` exists; refuses one that is, or lies below, a link
        (a link may point at a forged entry) or is not a folder."""
        fix = f"delete {root} and run again to fetch it afresh"
        p = root
        while p != self.cache and self.cache in p.parents:
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                p = p.parent
                continue
            except OSError as e:
                raise CacheError(f"source {src.name}: cannot read the cache entry {p}: "
                                 f"{e.strerror}; {fix}") from None
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(p)
                raise CacheError(f"source {src.name}: the cache entry {p} is a symbolic link (to "
                                 f"{target or 'nothing'}); bindgen makes only folders there: {fix}")
            if not stat.S_ISDIR(st.st_mode):
                raise CacheError(f"source {src.name}: the cache entry {p} is not a folder; {fix}")
            p = p.parent
        if not root.is_dir():
            return False
        if not (root / MANIFEST).is_file():
            raise CacheError(f"source {src.name}: the cache entry {root} is incomplete (no "
                             f"{MANIFEST}); {fix}")
        return True

    def _kept_archive(
        self, src: Source, url: str, name: str, size: int, sha: str, origin: str
    ) -> Path:
        """The archive ``name`` (sha256 ``sha``, from the spec or the index), downloaded once
        and kept; hashed again on every use, so a changed copy is refused, never used."""
        path = self.cache / "v2" / "archives" / _safe(f"{sha}_{name}")
        self._entry_present_file(src, path)
        if path.is_file():
            got = _sha256(path)
            if got != sha:
                raise CacheError(
                    f"source {src.name}: the kept archive {path} has sha256 {got}, {origin} "
                    f"{sha}; "
                    f"delete it and run again to download it afresh"
                )
            return path
        if self.offline:
            raise SourceError(
                f"source {src.name}: {name} is not cached and the run is offline; "
                + self._how_to(src)
            )
        with self.scratch() as tmp:
            part = tmp / "archive"
            h = _Hashing(self.net.stream(url, f"{src.name} ({name})", size))
            with part.open("wb") as f:
                for chunk in iter(lambda: h.read(1 << 20), b""):
                    f.write(chunk)
            self.log(h.raw.line("downloaded"))
            if h.hexdigest() != sha:
                raise SourceError(f"source {src.name}: {name} has sha256 {h.hexdigest()}, "
                                  f"{origin} {sha}")
            _mk(path.parent)
            os.replace(part, path)
        return path

    def _entry_present_file(self, src: Source, path: Path) -> None:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        if not stat.S_ISREG(st.st_mode):
            raise CacheError(f"source {src.name}: the kept archive {path} is not a plain file; "
                             f"delete it and run again")

    def _git_cached(self, src: Source) -> Resolved:
        root = self.entry(src)
        if src.pin is not None and self._entry_present(src, root):
            pins = {m.path: m.sha256 for m in src.pin.files}
            _verify_entry(src, root, pins)
            return Resolved(src, root, "cache", pins)
        if root.is_dir() and src.pin is None:
            raise SourceError(
                f"source {src.name}: its cached export of {src.ref} cannot be verified here: "
                f"bindgen.lock pins none of its files. Give the repository (--source "
                f"{src.name}=DIR or {env_var(src.name)}=DIR: the export is checked against it), "
                f"or pin it once: `bindgen pin TARGET --source {src.name}=DIR`"
            )
        raise SourceError(
            f"source {src.name}: {src.url} at {src.ref} is not in the cache. Give a checkout or"
            f" a bare mirror: --source {src.name}=DIR or {env_var(src.name)}=DIR (a bare git "
            f"directory is exported at {src.ref}; for example `git clone --bare {src.url} DIR`)"
        )

    def fetch_whole(self, src: Source, out: Path) -> Fetched:
        """Downloads the whole archive, verified against its index; ``Fetched.pin`` records it."""
        self.whole = True
        try:
            return getattr(self, f"_fetch_{src.kind}")(src, out)  # type: ignore[no-any-return]
        finally:
            self.whole = False

    # -- debian
    def _apt_uri(self, src: Source) -> tuple[str, str, int, str]:
        """(url, file name, size, sha256) from apt's signed index, without downloading."""
        if not shutil.which("apt-get"):
            raise SourceError(
                f"source {src.name}: needs apt-get to find {src.package}={src.version}; "
                + self._how_to(src)
            )
        spec = f"{src.package}:{src.arch}={src.version}" if src.arch != "all" else (
            f"{src.package}={src.version}"
        )
        r = subprocess.run(
            ["apt-get", "--print-uris", "download", "--", spec], capture_output=True, text=True
        )
        m = re.search(r"^'([^']+)' (\S+) (\d+) SHA256:([0-9a-f]{64})", r.stdout, re.M)
        if r.returncode or not m:
            last = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no .deb"]
            raise SourceError(
                f"source {src.name}: `apt-get --print-uris download {spec}` failed: {last[0]}; "
                f"run `apt-get update`, or " + self._how_to(src)
            )
        url, name, size, sha = m.group(1), m.group(2), int(m.group(3)), m.group(4)
        if src.sha256 and sha != src.sha256:
            raise SourceError(
                f"source {src.name}: apt's index gives {name} sha256 {sha}, the spec pins "
                f"{src.sha256}"
            )
        return url, name, size, sha

    def _pin_for(self, src: Source, index: str, name: str, sha: str) -> SourcePin | None:
        """The pins to fetch `src` by ranges with (None: fetch the whole archive), refusing pins
        made from another archive than the one `index` now names."""
        pin = src.pin
        if pin is None or self.whole:
            return None
        if pin.archive_sha256 != sha:
            raise SourceError(
                f"source {src.name}: {index} gives {name} sha256 {sha}, the pins in the lock file "
                f"were made from {pin.archive_sha256}; run `bindgen pin` again"
            )
        return pin

    def _fetch_debian(self, src: Source, out: Path) -> Fetched:
        url, name, size, sha = self._apt_uri(src)
        pin = self._pin_for(src, "apt's index", name, sha)
        if pin:
            files = self._debian_ranges(src, url, name, size, pin, out)
            return Fetched(files, sha)
        archive = self._kept_archive(src, url, name, size, sha, "apt's index gives")
        inner = [-1, 0]
        with archive.open("rb") as raw:
            data = ArStream(raw, "data.tar", name)  # type: ignore[arg-type]  # reads only
            stream = decompressor_stream(data, data.name)  # type: ignore[arg-type]
            if src.tarball:
                import tarfile

                try:
                    with tarfile.open(fileobj=stream, mode="r|") as tf:
                        for m in tf:
                            if member_path(m.name, 0, name) == src.tarball and m.isfile():
                                inner = [m.offset_data, m.size]
                                f = tf.extractfile(m)
                                assert f is not None
                                files = self._unpack_stream(src, f, out, f"{name}:{src.tarball}")
                                break
                        else:
                            raise SourceError(f"source {src.name}: {src.tarball} is not in {name}")
                except tarfile.TarError as e:
                    raise SourceError(f"source {src.name}: cannot read {name}: {e}") from None
            else:
                files = self._unpack_stream(src, stream, out, name, strip=0)
        self.log(
            f"  hint: `bindgen pin` records {src.name}'s {len(files)} files so later fetches read "
            "only their byte ranges"
        ) if not self.whole else None
        pin_rec = SourcePin(
            src.identity(), name, url, sha, size, inner[0], inner[1],
            tuple(sorted(files.values(), key=lambda m: m.path)),
        )
        return Fetched(files, sha, pin_rec)

    def _debian_ranges(
        self, src: Source, url: str, name: str, size: int, pin: SourcePin, out: Path
    ) -> dict[str, Member]:
        """Reads only the pinned members: ar header, the xz index, and the blocks holding them."""
        what = f"{src.name} ({name}, ranges)"
        rf = RangeFile(self.net, url, size, what)
        data = next((m for m in ar_members(rf.read_at, size, name) if m.name.startswith("data.tar")),
                    None)
        if data is None or not data.name.endswith(".xz"):
            raise SourceError(f"source {src.name}: {name} has no data.tar.xz")
        outer = XzView(lambda o, n: rf.read_at(data.offset + o, n), data.size, f"{name}:{data.name}")
        view = outer
        if src.tarball:
            view = XzView(
                lambda o, n: outer.read(pin.inner_offset + o, n),
                pin.inner_size,
                f"{name}:{src.tarball}",
            )
        return self._read_pinned(src, view.read, pin, out, what)

    def _read_pinned(
        self, src: Source, read: Callable[[int, int], bytes], pin: SourcePin, out: Path, what: str
    ) -> dict[str, Member]:
        ex = Extractor(out, what)
        start = last = time.monotonic()
        for i, m in enumerate(sorted(pin.files, key=lambda m: m.offset)):
            got = ex.write(m.path, io.BytesIO(read(m.offset, m.size)), m.offset)
            if got.sha256 != m.sha256:
                raise SourceError(
                    f"source {src.name}: {m.path} has sha256 {got.sha256}, its pin is {m.sha256}; "
                    "the archive changed under the same version: run `bindgen pin` and review"
                )
            now = time.monotonic()
            if now - last >= 1.0:
                last = now
                self.log(
                    f"  fetching {what}: {i + 1}/{len(pin.files)} files, "
                    f"{mb(self.net.downloaded)} downloaded in {now - start:.1f} s"
                )
        return ex.finish()

    # -- pypi
    def _wheel(self, src: Source) -> tuple[str, str, int, str]:
        """(url, file name, size, sha256) of the x86-64 Linux (or pure) wheel from PyPI's index."""
        index = os.environ.get("BINDGEN_PYPI_INDEX", PYPI_INDEX).rstrip("/")
        proj = re.sub(r"[-_.]+", "-", src.package).lower()
        what = f"{src.name} (PyPI index)"
        doc = json.loads(self.net.get(
            f"{index}/{proj}/", what, {"Accept": "application/vnd.pypi.simple.v1+json"}
        ))
        want_ver = src.version.replace("-", "_")  # wheel names escape - as _
        cands = []
        for f in doc.get("files", []):
            fn = f.get("filename", "")
            parts = fn[:-4].split("-") if fn.endswith(".whl") else []
            if len(parts) >= 5 and parts[1] == want_ver and (
                parts[-1] == "any" or ("manylinux" in parts[-1] and "x86_64" in parts[-1])
            ):
                cands.append((fn, f["url"], int(f.get("size") or 0), f["hashes"]["sha256"]))
        if src.pin:
            cands = [c for c in cands if c[0] == src.pin.archive] or cands
        if not cands:
            raise SourceError(
                f"source {src.name}: PyPI has no x86-64 Linux wheel of {src.package}=={src.version};"
                " " + self._how_to(src)
            )
        fn, url, size, sha = sorted(cands)[0]
        if src.sha256 and sha != src.sha256:
            raise SourceError(
                f"source {src.name}: PyPI gives {fn} sha256 {sha}, the spec pins {src.sha256}"
            )
        return url, fn, size, sha

    def _fetch_pypi(self, src: Source, out: Path) -> Fetched:
        url, fn, size, sha = self._wheel(src)
        pin = self._pin_for(src, "PyPI", fn, sha)
        if pin:
            what = f"{src.name} ({fn}, ranges)"
            before = self.net.downloaded
            rf = RangeFile(self.net, url, size, what)
            with zipfile.ZipFile(rf) as zf:  # type: ignore[arg-type]
                def read(offset: int, n: int, zf: zipfile.ZipFile = zf) -> bytes:
                    return zf.read(by_offset[offset])

                by_offset = {m.offset: m.path for m in pin.files}
                files = self._read_pinned(src, read, pin, out, what)
            self.log(f"  fetched {what}: {len(files)} files, {mb(self.net.downloaded - before)} of "
                     f"{mb(size)}")
            return Fetched(files, sha)
        whl = self._kept_archive(src, url, fn, size, sha, "PyPI gives")
        try:
            with zipfile.ZipFile(whl) as zf:
                files = extract_zip(zf, out, src.members, fn)
                # Positions are irrelevant for a zip: the pin keys members by an index.
                files = {k: Member(m.path, m.sha256, m.size, i)
                         for i, (k, m) in enumerate(sorted(files.items()))}
        except zipfile.BadZipFile as e:
            raise SourceError(f"source {src.name}: {fn} is not a valid wheel: {e}") from None
        if src.members and not files:
            raise SourceError(f"source {src.name}: no file in {fn} matches {list(src.members)}")
        pin_rec = SourcePin(src.identity(), fn, url, sha, size, -1, 0,
                            tuple(sorted(files.values(), key=lambda m: m.path)))
        return Fetched(files, sha, pin_rec)

    # -- archive
    def _fetch_archive(self, src: Source, out: Path) -> Fetched:
        name = src.url.rsplit("/", 1)[-1] or src.url
        archive = self._kept_archive(src, src.url, name, 0, src.sha256, "the spec pins")
        with archive.open("rb") as f:
            files = self._unpack_stream(src, f, out, name)
        return Fetched(files, src.sha256)

    def _unpack_stream(
        self, src: Source, f: IO[bytes], out: Path, label: str, strip: int | None = None
    ) -> dict[str, Member]:
        files = extract_tar_stream(
            f, out, src.members, src.strip if strip is None else strip, f"source {src.name}: {label}"
        )
        if src.members and not files:
            raise SourceError(f"source {src.name}: no file in {label} matches {list(src.members)}")
        return files

    # -- git
    def _git_export(self, src: Source, repo: Path) -> Resolved:
        """The export of ``src.ref`` from the repository ``repo``, cached; its files are checked
        against bindgen.lock's pins, or without pins against the repository's own blob ids."""
        # A ref starting with '-' would be read as an option (`--output=FILE`): the spec loader
        # refuses such refs; this check keeps programmatic Sources honest too.
        if not src.ref or src.ref.startswith("-"):
            raise SourceError(f"source {src.name}: git ref {src.ref!r} is not a revision name")
        root = self.entry(src)
        if src.pin is not None:
            pins, blobs = {m.path: m.sha256 for m in src.pin.files}, False
        else:
            pins, blobs = _git_tree(src, repo), True
        if self._entry_present(src, root):
            _verify_entry(src, root, pins)
            return Resolved(src, root, f"git {repo}", pins, blobs)
        start = time.monotonic()
        with self.scratch() as tmp:
            out = tmp / "x"
            tar = tmp / "a.tar"
            # `members` are path prefixes: mirrors may lack blobs outside them (large files).
            with tar.open("wb") as f:
                arch = subprocess.run(
                    ["git", "-C", str(repo), "archive", "--format=tar", src.ref, "--",
                     *src.members],
                    stdout=f, stderr=subprocess.PIPE,
                )
            if arch.returncode:
                raise SourceError(
                    f"source {src.name}: git archive {src.ref} in {repo} failed: "
                    f"{arch.stderr.decode(errors='replace').strip()}"
                )
            with tar.open("rb") as f:
                files = extract_tar_stream(f, out, (), 0, f"source {src.name}: git {src.ref}")
            self.log(
                f"  unpacked {src.name} (git {src.ref}): {len(files)} files, "
                f"{mb(sum(m.size for m in files.values()))} in {time.monotonic() - start:.1f} s"
            )
            _publish_files(out, root, Fetched(files), src)
        _verify_entry(src, root, pins)
        return Resolved(src, root, f"git {repo}", pins, blobs)


def _git_tree(src: Source, repo: Path) -> dict[str, str]:
    """{path: blob id} of the files ``src`` takes from ``repo`` at ``src.ref``."""
    r = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "-r", "-z", "--full-tree", src.ref, "--",
         *src.members],
        capture_output=True,
    )
    if r.returncode:
        raise SourceError(f"source {src.name}: git ls-tree {src.ref} in {repo} failed: "
                          f"{r.stderr.decode(errors='replace').strip()}")
    out = {}
    for rec in r.stdout.split(b"\0"):
        if rec:
            meta, _, path = rec.partition(b"\t")
            mode, kind, oid = meta.split()
            if kind == b"blob" and mode != b"120000":  # links are unpacked as copies: unpinned
                out[path.decode("utf-8", "surrogateescape")] = oid.decode()
    return out


def git_commit(src: Source, repo: Path) -> str:
    """The commit ``src.ref`` names in ``repo``."""
    r = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--end-of-options",
                        f"{src.ref}^{{commit}}"], capture_output=True, text=True)
    if r.returncode:
        raise SourceError(f"source {src.name}: {src.ref} is not a commit in {repo}: "
                          f"{r.stderr.strip()}")
    return r.stdout.strip()


def _git_blob(path: Path) -> str:
    """Git's id of a file's bytes as a blob (sha1 of a header and the bytes)."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class _Hashing:
    """Hashes every byte read through it (the whole archive, even what unpacking skips)."""

    def __init__(self, raw: Counted) -> None:
        self.raw, self._h = raw, hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        self._h.update(data)
        return data

    def readable(self) -> bool:
        return True

    def drain(self) -> None:
        for _ in iter(lambda: self.read(1 << 20), b""):
            pass

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def _is_git(path: Path) -> bool:
    return (path / "HEAD").is_file() and (path / "objects").is_dir() or (path / ".git").exists()


def _publish_files(tmp_dir: Path, root: Path, fetched: Fetched, src: Source) -> None:
    """Moves a finished unpack into place atomically, with a manifest saying what it is for
    (for people and for refusing an entry made for another source; never trusted for content)."""
    tmp_dir.mkdir(parents=True, exist_ok=True)
    files = {rel: [m.sha256, m.size] for rel, m in sorted(fetched.files.items())}
    manifest = {"identity": src.identity(), "archive_sha256": fetched.archive_sha256,
                "files": files}
    (tmp_dir / MANIFEST).write_text(json.dumps(manifest, indent=0, sort_keys=True))
    root.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(tmp_dir, root)
    except OSError:
        if not (root / MANIFEST).exists():  # a concurrent run may have won the race
            shutil.rmtree(root, ignore_errors=True)
            os.rename(tmp_dir, root)


def _verify_entry(src: Source, root: Path, pins: Mapping[str, str]) -> None:
    """Refuses a cache entry that is not made of plain folders and files, exactly those
    ``pins`` names (one lstat per file; the bytes of each file are checked when it is read,
    see ``Sources.verify_read``)."""
    fix = f"delete {root} and run again to fetch it afresh"
    try:
        manifest = json.loads((root / MANIFEST).read_text())
    except (OSError, ValueError) as e:
        raise CacheError(f"source {src.name}: cache entry {root} has no readable manifest "
                         f"({e}); {fix}") from None
    if not isinstance(manifest, dict) or manifest.get("identity") != src.identity():
        raise CacheError(f"source {src.name}: cache entry {root} was made for another source; "
                         + fix)
    seen = set()
    folders = [("", str(root))]
    while folders:
        prefix, folder = folders.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue  # unreadable: its files are reported missing below
        for entry in entries:
            rel = prefix + entry.name
            if entry.is_symlink():
                raise CacheError(f"source {src.name}: {root} holds a link {rel}; {fix}")
            if entry.is_dir(follow_symlinks=False):
                folders.append((rel + "/", entry.path))
                continue
            if rel == MANIFEST:
                continue
            if not entry.is_file(follow_symlinks=False):
                raise CacheError(f"source {src.name}: {rel} in {root} is not a plain file; {fix}")
            if rel not in pins:
                raise CacheError(f"source {src.name}: {rel} in the cache entry {root} is not "
                                 f"pinned (added after it was made); {fix}")
            seen.add(rel)
    missing = set(pins) - seen
    if missing:
        raise CacheError(f"source {src.name}: {sorted(missing)[0]} is missing from the cache "
                         f"entry {root}; {fix}")


class _Scratch:
    """A folder below ``parent`` held with an exclusive lock on the folder itself while in use:
    a later run removes the folders of killed runs (unlocked) and leaves live ones alone."""

    def __init__(self, parent: Path) -> None:
        self.path = Path(tempfile.mkdtemp(dir=parent, prefix="run-"))
        self._fd: int | None = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self, owner: int | None = None) -> None:
        if owner is not None and owner != os.getpid():
            return  # a forked child exiting: the folder is its parent's
        if self._fd is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            os.close(self._fd)
            self._fd = None


# A scratch folder is locked right after it is made; one younger than this may be in that gap.
_SCRATCH_GRACE_S = 10.0


def clean_scratch(parent: Path) -> list[str]:
    """Removes what killed runs left in ``parent`` (a scratch folder nobody holds the lock of,
    a partial download); returns the names removed."""
    removed: list[str] = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
            if now - st.st_mtime < _SCRATCH_GRACE_S:
                continue
            if not stat.S_ISDIR(st.st_mode):
                os.unlink(entry.path)
                removed.append(entry.name)
                continue
            fd = os.open(entry.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a live run holds it
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.name)
        finally:
            os.close(fd)
    return removed


def cache_size(cache: Path) -> int:
    total = 0
    for dirpath, _, filenames in os.walk(cache):
        for fn in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, fn)).st_size
            except OSError:
                pass
    return total


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
