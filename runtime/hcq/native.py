"""Optional native helpers: small C extension modules compiled on first use with the system's C
compiler against this interpreter's headers, cached by source hash, and loaded like any extension.

They only speed up hot paths that also exist in pure Python (the NVIDIA launch path); when no
compiler or no Python.h is available, or HCQ_NATIVE=0 is set, `load` returns None with the reason
in `unavailable`, and callers use their Python path. Builds are atomic (compile to a temporary name,
then rename), so concurrent first uses never load a half-written library.
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
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


def load(name: str, source: Path) -> ModuleType | None:
    """The extension module `name` built from the C file `source`, or None (reason in
    `unavailable[name]`). Built once per source content and interpreter; later calls are a dict
    lookup."""
    if name in _loaded:
        return _loaded[name]
    mod = None
    if not enabled():
        unavailable[name] = "disabled by HCQ_NATIVE=0"
    else:
        try:
            mod = _build_and_import(name, source)
        except (OSError, subprocess.SubprocessError, ImportError) as e:
            unavailable[name] = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
    _loaded[name] = mod
    return mod


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
