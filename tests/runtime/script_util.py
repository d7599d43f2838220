"""Loading a developer script of scripts/ as a module, for tests of its pure functions."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Iterator

ROOT = Path(__file__).resolve().parents[2]


def loaded_script(name: str) -> Iterator[ModuleType]:
    """Yields scripts/`name`.py run as a module under a name of its own (registered while the
    caller holds it, so its dataclasses and pickles resolve), then unregisters it."""
    spec = importlib.util.spec_from_file_location(f"{name}_under_test",
                                                  ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        del sys.modules[spec.name]
