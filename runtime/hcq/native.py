"""Optional native helpers: small C extension modules that speed up hot paths which also exist in
pure Python (the NVIDIA launch path).

A helper is found in one of two ways (`load`): the extension module built with the wheel
(setup.py builds it as an optional extension; it records the sha256 of the source it was built
from), used when no source is beside it or the source is the one it was built from; else it is
compiled on first use from the C source with the system's C compiler against this interpreter's
headers (a development checkout), cached by source hash. When neither works, or HCQ_NATIVE=0 is
set, `load` returns None with the reason in `unavailable`, warns once (except when disabled on
purpose), and callers use their Python path. Builds are atomic (compile to a temporary name, then
rename), so concurrent first uses never load a half-written library.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import warnings
from pathlib import Path
from types import ModuleType

#: why a module could not be loaded, by module name (for reports and test skips)
unavailable: dict[str, str] = {}
_loaded: dict[str, ModuleType | None] = {}


def cache_dir() -> Path:
    """Where built modules live: $HCQ_NATIVE_CACHE, else $XDG_CACHE_HOME/hcq-native, else
    ~/.cache/hcq-native."""
    env = os.environ.get("HCQ_NATIVE_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hcq-native"


def enabled() -> bool:
    """False when HCQ_NATIVE=0 (the pure-Python paths are then used everywhere)."""
    return os.environ.get("HCQ_NATIVE", "1") != "0"


class NativeFallbackWarning(RuntimeWarning):
    """A native helper could not be had: the pure-Python path is taken (slower)."""


def load(name: str, source: Path, fallback: str = "") -> ModuleType | None:
    """The extension module `name` (a dotted module name; the built file is named after its last
    part): the installed one when it was built from `source`'s content (or `source` is absent),
    else built from `source`; None when neither can be had (reason in `unavailable[name]`; a
    NativeFallbackWarning saying `fallback` is issued, once per process). Later calls are a dict
    lookup."""
    if name in _loaded:
        return _loaded[name]
    mod = None
    if not enabled():
        unavailable[name] = "disabled by HCQ_NATIVE=0"
    else:
        try:
            mod = _installed(name, source)
            if mod is None:
                mod = _build_and_import(name.rpartition(".")[2], source)
        except (OSError, subprocess.SubprocessError, ImportError) as e:
            unavailable[name] = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
        if mod is None:
            warnings.warn(f"native helper {name} unavailable ({unavailable[name]}): "
                          f"{fallback or 'the pure-Python path is taken'}",
                          NativeFallbackWarning, stacklevel=3)
    _loaded[name] = mod
    return mod


def _installed(name: str, source: Path) -> ModuleType | None:
    """The extension module built with the package, when there is one and `source` (if present)
    is what it was built from."""
    if "." not in name:
        return None
    try:
        mod = importlib.import_module(name)
    except ImportError:
        if not source.exists():
            raise ImportError(f"{name} was not built with the package and its source "
                              f"{source.name} is not installed") from None
        return None
    if not source.exists() or getattr(mod, "SOURCE_SHA256", "") == source_sha256(source):
        return mod
    return None  # built from another version of the source: build this one


def source_sha256(source: Path) -> str:
    """The hex sha256 of a C source (what setup.py records in the module it builds)."""
    return hashlib.sha256(source.read_bytes()).hexdigest()


def _build_and_import(name: str, source: Path) -> ModuleType:
    include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(include, "Python.h")):
        raise ImportError(f"no Python.h in {include} (install the Python development headers)")
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise ImportError("no C compiler (cc or gcc) on PATH")
    src = source.read_bytes()
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    key = hashlib.sha256(src + sys.version.encode() + cc.encode()).hexdigest()[:16]
    out = cache_dir() / f"{name}-{key}{suffix}"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=suffix, dir=out.parent)
        os.close(fd)
        try:
            r = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-fvisibility=hidden",
                                f"-I{include}", str(source), "-o", tmp],
                               capture_output=True, text=True, timeout=120)
            if r.returncode != 0:
                errors = [ln for ln in r.stderr.splitlines() if "error" in ln]
                raise ImportError(f"{cc} failed on {source.name}: "
                                  f"{(errors or r.stderr.splitlines() or ['?'])[0].strip()}")
            os.replace(tmp, out)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    loader = importlib.machinery.ExtensionFileLoader(name, str(out))
    spec = importlib.util.spec_from_file_location(name, str(out), loader=loader)
    if spec is None:
        raise ImportError(f"cannot load {out}")
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod
