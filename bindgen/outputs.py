"""Writing a target's files as a set, and auditing the output root against what bindgen wrote.

``MANIFEST`` (in the output root, committed with the bindings) lists the sha256 of every file
bindgen writes: modules, their companions and the group packages' ``__init__.py``. ``audit``
compares the tree with it, so a hand edit, a changed line ending, a deleted ``__init__.py`` or a
stray module is found even where the headers are not available to regenerate from.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Callable

from .errors import OutputError

MANIFEST = "bindgen.manifest"
# The output root's own package files belong to the project, not to a target.
_PROJECT_FILES = ("__init__.py", "py.typed", MANIFEST)
# What regen builds beside a module rather than writes: static inline functions' wrappers.
BUILT_SUFFIX = ".static.so"
_HEADER = "# sha256 and path of every file bindgen wrote here; `bindgen check` compares them\n"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def load_manifest(out: Path) -> dict[str, str]:
    path = out / MANIFEST
    if not path.exists():
        return {}
    entries = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            sha, _, rel = line.partition("  ")
            entries[rel] = sha
    return entries


def _manifest_text(entries: dict[str, str]) -> bytes:
    return (_HEADER + "".join(f"{entries[k]}  {k}\n" for k in sorted(entries))).encode()


def write_target(
    out: Path,
    files: list[tuple[Path, str]],
    manifest: dict[str, str] | None = None,
    stale: Callable[[str], bool] = lambda rel: False,
) -> tuple[bool, dict[str, str]]:
    """Writes one target's files (and any missing package ``__init__.py``) as a set: every new
    text goes to a temporary file first, and only when all are written are they renamed into
    place. With ``manifest`` (the output root's, as loaded), the manifest updated for these files
    is part of the set, less the entries ``stale`` names (files the target no longer writes), so
    a failure leaves both the files and the manifest as they were.

    Returns (whether anything changed, {path relative to ``out``: sha256}). A folder between
    ``out`` and a file that is a symbolic link is refused: writing through it would put the
    file outside the output root."""
    writes: list[tuple[Path, bytes]] = []
    hashes: dict[str, str] = {}
    for path, _ in files:
        _refuse_links(out, path)
    for path, text in files:
        for parent in _packages_between(out, path):
            init = parent / "__init__.py"
            hashes[init.relative_to(out).as_posix()] = _sha(b"")
            if not init.exists():
                writes.append((init, b""))
        data = text.encode()
        hashes[path.relative_to(out).as_posix()] = _sha(data)
        if not path.is_file() or path.read_bytes() != data:
            writes.append((path, data))
    changed = bool(writes)
    entries: dict[str, str] = {}
    if manifest is not None:
        entries = {k: v for k, v in manifest.items() if k in hashes or not stale(k)}
        entries.update(hashes)
        listing = _manifest_text(entries)
        mpath = out / MANIFEST
        if changed or not mpath.is_file() or mpath.read_bytes() != listing:
            writes.append((mpath, listing))
    _replace_all(writes)
    if manifest is not None:  # in place: the caller's copy follows the file
        manifest.clear()
        manifest.update(entries)
    return changed, hashes


def _refuse_links(out: Path, path: Path) -> None:
    folder = out
    for part in path.parent.relative_to(out).parts:
        folder = folder / part
        if folder.is_symlink():
            raise OutputError(
                f"{folder} is a symbolic link (to {os.readlink(folder)}); bindgen writes only "
                f"inside the output root {out}: replace the link with a folder"
            )


def _packages_between(out: Path, path: Path) -> list[Path]:
    rel = path.parent.relative_to(out)
    return [out / Path(*rel.parts[: i + 1]) for i in range(len(rel.parts))]


def _replace_all(writes: list[tuple[Path, bytes]]) -> None:
    tmps: list[tuple[str, Path]] = []
    try:
        for path, data in writes:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            tmps.append((tmp, path))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o644)  # whatever the umask: the bindings are read by everyone
        for tmp, path in tmps:
            os.replace(tmp, path)
        tmps = []
    finally:
        for tmp, _ in tmps:
            if os.path.exists(tmp):
                os.unlink(tmp)


def owned(rel: str, outputs: list[str]) -> bool:
    """Whether ``rel`` (under the output root) belongs to one of the targets' ``outputs``: the
    module, a companion sharing its stem (``.report.txt``...), a lazy module's definitions module
    (``_STEM.py`` beside it), or a package init."""
    for o in outputs:
        stem = o[: -len(".py")]
        folder, _, name = stem.rpartition("/")
        if rel == o or rel.startswith(stem + ".") or rel == f"{folder}/_{name}.py".lstrip("/"):
            return True
        if rel.endswith("/__init__.py") and o.startswith(rel[: -len("__init__.py")]):
            return True
    return False


def audit(out: Path, outputs: list[str]) -> list[str]:
    """What differs between the output root and its manifest: one line per problem. Entries of
    targets no spec declares any more (``outputs`` lists the current ones) are strays too."""
    want = {k: v for k, v in load_manifest(out).items() if owned(k, outputs)}
    if not want:
        return [f"{MANIFEST} is missing: run `bindgen regen all` to write it"]
    problems = []
    seen = set()
    for dirpath, dirnames, filenames in os.walk(out):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in sorted(filenames):
            rel = Path(dirpath, fn).relative_to(out).as_posix()
            if rel in _PROJECT_FILES:
                continue
            if rel.endswith(BUILT_SUFFIX) and owned(rel, outputs):
                continue  # compiled by regen from a file that is compared (bindgen.wrappers)
            seen.add(rel)
            if rel not in want:
                problems.append(f"{rel}: not written by bindgen (a stray file: delete it, or add "
                                "a target that writes it)")
            elif _sha(Path(dirpath, fn).read_bytes()) != want[rel]:
                problems.append(f"{rel}: differs from what bindgen wrote (edited by hand, or its "
                                "line endings changed)")
    for rel in sorted(set(want) - seen):
        problems.append(f"{rel}: missing")
    return problems
