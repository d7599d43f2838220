"""Pins for fetched sources: the sha256 of every file taken, kept beside the spec.

A partial fetch (byte ranges of a wheel or a .deb) never holds the whole archive, so the archive's
own hash cannot be checked. ``bindgen pin`` therefore downloads the whole archive once, checks it
against the hash its index publishes (apt's signed Packages file, PyPI's JSON index) and against
the spec's ``sha256`` where one is given, and records what it unpacked: each file's path, size,
sha256 and position in the decompressed tar stream. Later fetches read only those positions and
refuse any file whose bytes differ from its pin (docs/decisions.md: the trust chain).

Git sources are pinned the same way from an export of their repository (each file checked against
the repository's blob id first), so a cached export can be verified where the repository is not.
Every cache entry of unpacked files is checked against these pins when it is read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .errors import SourceError


@dataclass(frozen=True)
class Member:
    """One regular file taken from an archive: where it went, what it held, where it was."""

    path: str  # relative to the unpack folder, after ``strip``
    sha256: str
    size: int
    offset: int = -1  # start of its data in the (decompressed) tar stream; -1 where unknown


@dataclass(frozen=True)
class SourcePin:
    identity: str  # what the pin is for (kind, package, version, members...); see identity()
    archive: str  # the archive's file name (the .deb or wheel)
    url: str
    archive_sha256: str
    archive_size: int
    inner_offset: int  # of the inner tarball's data in the decompressed data tar; -1 if none
    inner_size: int
    files: tuple[Member, ...]


LOCK = "bindgen.lock"


def load_lock(specs: Path) -> dict[str, SourcePin]:
    """The pins recorded for a specs folder, keyed by source identity; none without a lock."""
    path = specs / LOCK
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return {
            ident: SourcePin(
                ident,
                p["archive"],
                p["url"],
                p["archive_sha256"],
                int(p["archive_size"]),
                int(p["inner_offset"]),
                int(p["inner_size"]),
                tuple(Member(f[0], f[1], int(f[2]), int(f[3])) for f in p["files"]),
            )
            for ident, p in doc["sources"].items()
        }
    except (ValueError, KeyError, TypeError, IndexError) as e:
        raise SourceError(
            f"{path}: damaged pin file ({type(e).__name__}: {e}); delete it and run `bindgen pin`"
        ) from None


def save_lock(specs: Path, pins: dict[str, SourcePin]) -> Path:
    """Writes the lock file (one file per line, so a changed header is a one-line diff)."""
    path = specs / LOCK
    out = [
        "{",
        '"about": "sha256 of every file bindgen takes from debian, pypi and git sources; '
        'cache entries are checked against them; written by `bindgen pin`, see '
        'docs/decisions.md",',
        '"sources": {',
    ]
    items = sorted(pins.items())
    for i, (ident, p) in enumerate(items):
        head = {k: v for k, v in p.__dict__.items() if k not in ("identity", "files")}
        out.append(f"{json.dumps(ident)}: {json.dumps(head)[:-1]}, \"files\": [")
        files = sorted(p.files, key=lambda m: m.path)
        for j, m in enumerate(files):
            sep = "," if j < len(files) - 1 else ""
            out.append(json.dumps([m.path, m.sha256, m.size, m.offset]) + sep)
        out.append("]}" + ("," if i < len(items) - 1 else ""))
    out += ["}", "}", ""]
    path.write_text("\n".join(out), encoding="utf-8")
    return path
