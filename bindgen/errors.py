"""bindgen's error hierarchy. Every error names the thing that is wrong and, where possible, the
fix."""

from __future__ import annotations


class BindgenError(Exception):
    """Base of every error bindgen raises on bad input or a failed generation."""


class SpecError(BindgenError):
    """A spec file is malformed: the message starts with ``file:line: key:``."""

    def __init__(self, file: str, line: int | None, key: str, message: str) -> None:
        self.file, self.line, self.key = file, line, key
        where = f"{file}:{line}" if line else file
        super().__init__(f"{where}: {key}: {message}" if key else f"{where}: {message}")


class SourceError(BindgenError):
    """A header source cannot be had; the message says how to supply it."""


class CacheError(SourceError):
    """A cache entry is not what the pins say (changed, added or missing files, a link): it was
    tampered with or damaged. Never a reason to skip a target; the message says what to delete."""


class ClangError(BindgenError):
    """Clang reported errors while parsing a target's headers (each shown with its location)."""


class LayoutError(BindgenError):
    """A rendered record's layout differs from clang's."""


class PatchError(BindgenError):
    """A declarative patch did not apply (no match, unknown name, ...)."""


class OutputError(BindgenError):
    """A target's files cannot be written where the output root says (a linked folder, ...)."""


class UnsupportedConstruct(BindgenError):
    """A C construct the generator cannot represent (listed in the target's report)."""
