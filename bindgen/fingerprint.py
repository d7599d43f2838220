"""What a target's fingerprint is made of, apart from its headers: the generator's own hash and
the target's spec entry (also ``bindgen --version``'s hash).

Kept apart from ``bindgen.generate`` so that ``bindgen check`` on an unchanged tree imports neither
libclang nor Mako.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .spec import Target

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


def inputs_hash(t: Target) -> str:
    """Everything but the headers: the target's own spec entry (with the defaults, sources and
    pins it uses, as loaded), its name and the generator. Editing another target of the same spec
    file, or only a comment, changes nothing here."""
    h = hashlib.sha256()
    h.update(spec_entry(t).encode())
    h.update(b"\0" + t.name.encode() + b"\0" + generator_hash().encode())
    return h.hexdigest()[:32]


# Where something is written in a spec file: moving it (a line added above) changes no output.
_POSITIONS = frozenset({"line", "spec_shown"})


# Canonical forms of spec.Source objects, by identity (each kept alive beside its form): a source's
# pin lists every file it yields (2,000 for linux-source) and every target of a spec shares the same
# objects, so each is canonicalized once per process (once per target was most of a uapi sweep's
# generation time). A droppable cache; the class is named, not imported, to keep this
# module's imports small.
_SOURCE_CANON: dict[int, tuple[object, object]] = {}


def spec_entry(t: Target) -> str:
    """A canonical text of a loaded target: every field of it and of what it holds, recursively,
    except positions in the spec file."""

    def canon(v: object) -> object:
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            shared = type(v).__name__ == "Source"
            if shared:
                hit = _SOURCE_CANON.get(id(v))
                if hit is not None and hit[0] is v:
                    return hit[1]
            out = (
                type(v).__name__,
                tuple(
                    (f.name, canon(getattr(v, f.name)))
                    for f in dataclasses.fields(v)
                    if f.name not in _POSITIONS
                ),
            )
            if shared:
                _SOURCE_CANON[id(v)] = (v, out)
            return out
        if isinstance(v, (tuple, list)):
            return tuple(canon(x) for x in v)
        if isinstance(v, dict):
            return tuple(sorted((str(k), canon(x)) for k, x in v.items()))
        return v

    return repr(canon(t))
