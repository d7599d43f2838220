"""Compiled kernels by module text: parsing and compiling a module happens once per process
(a droppable cache keyed by the module's bytes)."""
from __future__ import annotations

from functools import lru_cache

from runtime.drivers.mock.ptx.execute import Kernel
from runtime.drivers.mock.ptx.parse import parse_body
from runtime.drivers.nv.ptx import PtxModule, parse_module


@lru_cache(maxsize=64)
def module_for(text: bytes) -> PtxModule:
    """The parsed declarations of a module."""
    return parse_module(text.decode())


@lru_cache(maxsize=256)
def kernel_for(text: bytes, entry: str) -> Kernel:
    """Kernel `entry` of the module `text`, compiled."""
    mod = module_for(text)
    if entry not in mod.entries:
        raise KeyError(f"the module has no kernel {entry!r} (has {sorted(mod.entries)})")
    return Kernel(mod, parse_body(mod, entry))
