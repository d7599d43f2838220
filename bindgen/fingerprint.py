"""The generator's own hash: part of every target's fingerprint (and of ``bindgen --version``).

Kept apart from ``bindgen.generate`` so that computing it imports neither libclang nor Mako.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def generator_hash() -> str:
    """Hash of the generator itself (its Python sources and templates), content only."""
    h = hashlib.sha256()
    files = sorted(PACKAGE.rglob("*.py")) + sorted((PACKAGE / "templates").glob("*.mako"))
    for f in files:
        if "__pycache__" in f.parts:
            continue
        h.update(f.relative_to(PACKAGE).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()
