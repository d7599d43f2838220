"""Compilers as the core sees them, and a disk cache of what they produce.

A driver's compiler (clang for AMD, NVRTC for NVIDIA) turns source into a code object; `identity()`
names everything besides the source that decides the output (tool versions, target, fixed flags),
so `CompileCache` can key its files by identity, source and per-call options. An engine that
compiles the same kernels at every start then pays for each once per machine.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Protocol

#: environment variable naming the cache directory ("off" disables the cache)
CACHE_ENV = "HCQ_COMPILE_CACHE"
# identity_stamp() -> identity() of the compilers seen in this process (a droppable cache)
_IDENTITIES: dict[str, str] = {}


class Compiler(Protocol):
    """A device compiler: `compile(src, **options)` returns a code object for `arch`."""

    arch: str

    def compile(self, src: str) -> bytes:
        """Source to code object bytes; raises a ProgramError (CompileError) on failure."""
        ...

    def identity(self) -> str:
        """What besides the source and the call's options decides the output (tool and version,
        target, fixed flags): part of every cache key."""
        ...

    # Optional: `identity_stamp() -> str`, cheap to compute (no subprocess: the tools' resolved
    # paths, sizes and modification times plus the settings `identity` names); the cache then
    # reuses the identity it computed for an unchanged stamp.


def default_cache_dir() -> Path | None:
    """$HCQ_COMPILE_CACHE, else ~/.cache/hcq-compile; None when the variable says "off"."""
    env = os.environ.get(CACHE_ENV)
    if env is not None:
        return None if env.strip().lower() in ("off", "0", "") else Path(env)
    return Path(os.path.expanduser("~")) / ".cache" / "hcq-compile"


class CompileCache:
    """Code objects on disk, keyed by sha256 of (compiler identity, source, options). Files are
    written whole (a temporary file renamed into place), so concurrent processes never read a
    partial one. `hits` and `misses` count this object's lookups."""

    def __init__(self, compiler: Compiler, directory: Path | str | None = None) -> None:
        self.compiler = compiler
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.hits = self.misses = 0
        self._identity: str | None = None

    def key(self, src: str, options: dict[str, Any]) -> str:
        """The cache key of one compilation."""
        if self._identity is None:
            self._identity = self._lookup_identity()
        blob = json.dumps([self._identity, src, sorted((k, repr(v)) for k, v in options.items())])
        return hashlib.sha256(blob.encode()).hexdigest()

    def compile(self, src: str, **options: Any) -> bytes:
        """The cached code object of `src`, compiling (and storing) it on a miss."""
        comp: Any = self.compiler  # options are the driver compiler's own keywords
        if self.directory is None:
            self.misses += 1
            return comp.compile(src, **options)  # type: ignore[no-any-return]
        key = self.key(src, options)
        path = self.directory / key[:2] / f"{key}.bin"
        try:
            lib = path.read_bytes()
        except OSError:
            pass
        else:
            if lib:
                self.hits += 1
                note = getattr(comp, "note_output", None)
                if note is not None:  # what the compiler learns from a compilation (names)
                    note(src, lib)
                return lib
        self.misses += 1
        out: bytes = comp.compile(src, **options)
        self._store(path, out)
        return out

    def _lookup_identity(self) -> str:
        """The compiler's identity, without running it when it can say cheaply that nothing
        changed: a compiler with `identity_stamp()` (its tools' paths, sizes and modification
        times, and its settings) has the identity it computed for that stamp remembered, in this
        process and in the cache directory, so a new process reads a small file instead of
        asking the tools for their versions."""
        stamp_fn = getattr(self.compiler, "identity_stamp", None)
        if stamp_fn is None:
            return self.compiler.identity()
        stamp: str = stamp_fn()
        path = None
        if self.directory is not None:
            digest = hashlib.sha256(stamp.encode()).hexdigest()
            path = self.directory / "identity" / f"{digest}.txt"
            try:
                text = path.read_text()
            except (OSError, UnicodeDecodeError):
                pass
            else:
                stored_stamp, _, ident = text.partition("\n")
                if stored_stamp == stamp and ident:
                    _IDENTITIES[stamp] = ident
                    return ident
        ident = _IDENTITIES.get(stamp) or self.compiler.identity()
        _IDENTITIES[stamp] = ident
        if path is not None:
            self._store(path, f"{stamp}\n{ident}".encode())
        return ident

    @staticmethod
    def _store(path: Path, lib: bytes) -> None:
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as f:
                f.write(lib)
            os.replace(tmp, path)
            tmp = None
        except OSError:
            pass  # a read-only or full cache directory only costs the next compile
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
