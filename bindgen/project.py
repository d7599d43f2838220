"""Where a project keeps its specs and its generated package: command-line flags and/or the
``[tool.bindgen]`` table of the nearest ``pyproject.toml`` (searched from the working directory
upwards). Nothing in the generator knows a path of its own; every run gets a :class:`Project`.

```toml
[tool.bindgen]
specs = "bindgen/specs"     # folder of *.yaml specs, relative to this file
out = "generated"           # output root: TARGET.output paths are relative to it
package = "hcq_bindings"    # the import name of ``out`` (default: the folder's name)
```
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from .errors import BindgenError

CONFIG_FILE = "pyproject.toml"
_KEYS = ("specs", "out", "package")
_PACKAGE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


class ProjectError(BindgenError):
    """The project's paths are missing or wrong (a usage error: exit code 2)."""


@dataclass(frozen=True)
class Project:
    """One project's paths. ``root`` is the folder paths are shown relative to (the folder of the
    ``pyproject.toml`` that configured it when specs and output lie under it, else their common
    parent): generated files and messages never contain absolute paths, whatever the cwd."""

    root: Path
    specs: Path
    out: Path
    package: str

    def shown(self, path: Path) -> str:
        """``path`` as written into generated files and messages: relative to the root."""
        return Path(os.path.relpath(path, self.root)).as_posix()

    def spec_shown(self, spec_file: str) -> str:
        return f"{self.shown(self.specs)}/{spec_file}"

    def output(self, rel: str) -> Path:
        return self.out / rel

    def report_path(self, output: str) -> Path:
        """The report beside the module ``output`` (``a/b.py`` → ``a/b.report.txt``)."""
        return self.out / (output[: -len(".py")] + ".report.txt")

    def defs_path(self, output: str) -> Path:
        """A lazy module's definitions module (``a/b.py`` → ``a/_b.py``)."""
        return self.output(output).with_name(defs_module(output) + ".py")

    def module_name(self, output: str) -> str:
        """Import name of the module written to ``out/output`` (``a/b.py`` → ``PACKAGE.a.b``)."""
        return self.package + "." + output[: -len(".py")].replace("/", ".")


def defs_module(output: str) -> str:
    """The name of a lazy module's definitions module: ``nv/rm_580.py`` → ``_rm_580``."""
    return "_" + Path(output).stem


def find_config(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` with a ``[tool.bindgen]`` table, from ``start`` upwards."""
    for folder in (start, *start.parents):
        path = folder / CONFIG_FILE
        if path.is_file() and _table(path) is not None:
            return path
    return None


def _table(path: Path) -> dict | None:
    import tomllib  # only when a config is read: the CLI's start-up stays small

    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ProjectError(f"{path}: cannot read it as TOML: {e}") from None
    table = doc.get("tool", {}).get("bindgen")
    if table is not None and not isinstance(table, dict):
        raise ProjectError(f"{path}: [tool.bindgen] must be a table")
    return table


def load_project(
    specs: str | None = None,
    out: str | None = None,
    package: str | None = None,
    cwd: Path | None = None,
) -> Project:
    """Resolves a project from flags (relative to ``cwd``) over ``[tool.bindgen]`` (relative to its
    ``pyproject.toml``). Raises :class:`ProjectError` naming what is missing and how to give it."""
    cwd = (cwd or Path.cwd()).resolve()
    config = find_config(cwd)
    table: dict = {}
    root = cwd
    if config is not None:
        table = _table(config) or {}
        root = config.parent
        unknown = sorted(set(table) - set(_KEYS))
        if unknown:
            raise ProjectError(
                f"{config}: [tool.bindgen] has unknown key(s) {', '.join(unknown)} "
                f"(known: {', '.join(_KEYS)})"
            )
        for key in _KEYS:
            if key in table and not isinstance(table[key], str):
                raise ProjectError(f"{config}: [tool.bindgen] {key} must be a string")

    def path(flag: str | None, key: str) -> Path:
        if flag is not None:
            return (cwd / flag).resolve()
        if key in table:
            return (root / table[key]).resolve()
        where = f"{config}" if config else f"no {CONFIG_FILE} with [tool.bindgen] above {cwd}"
        raise ProjectError(
            f"no {key} folder: pass --{key} DIR or set `{key} = \"DIR\"` under [tool.bindgen] "
            f"in pyproject.toml ({where})"
        )

    specs_dir, out_dir = path(specs, "specs"), path(out, "out")
    if not specs_dir.is_dir():
        raise ProjectError(f"specs folder {specs_dir} does not exist")
    name = package or table.get("package") or out_dir.name
    if not _PACKAGE.match(name):
        raise ProjectError(
            f"package name {name!r} is not a Python module path: pass --package NAME or set "
            f"`package` under [tool.bindgen]"
        )
    if config is None or not all(p.is_relative_to(root) for p in (specs_dir, out_dir)):
        root = Path(os.path.commonpath([specs_dir, out_dir]))
    return Project(root=root, specs=specs_dir, out=out_dir, package=name)
