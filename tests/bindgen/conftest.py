"""Helpers for the bindgen tests: specs in temporary folders, the real pipeline, and gcc-built
probes.

* ``write_spec`` writes a spec whose ``corpus`` source is a ``system`` folder (tests/bindgen/corpus
by default) and ``load_target`` loads one of its targets.
* ``generate_target`` runs ``bindgen.generate.generate`` for a project whose specs are the
  temporary specs folder (``inputs_hash`` reads the spec file from there).
* ``compile_c`` builds a program or a shared library with gcc; ``layout_checks`` writes one C probe
  program per header from the generated classes' ``__bindgen_fields__`` and compares every size,
  alignment, offset, bitfield position and integer sign with what gcc says.
"""

from __future__ import annotations

import ctypes
import hashlib
import keyword
import re
import shutil
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from bindgen.gcc_probe import (  # shared with scripts/uapi_sweep.py
    PROBE_PRELUDE,
    Check,
    RecordWalker,
    c_ident,
    compare,
    is_array,
    is_int,
    is_record,
    max_ctypes_align,
    py_ident,
)

__all__ = [
    "Check",
    "c_ident",
    "compare",
    "is_array",
    "is_int",
    "is_record",
    "max_ctypes_align",
    "py_ident",
]

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
REPO = HERE.parents[1]
SPECS = REPO / "bindgen" / "specs"  # this repository's own specs

GCC = shutil.which("gcc")

requires_gcc = pytest.mark.skipif(GCC is None, reason="gcc is not installed (shutil.which('gcc'))")


# ---------------------------------------------------------------- specs


def corpus_source(path: Path = CORPUS) -> dict[str, Any]:
    return {"kind": "system", "path": str(path), "package": "bindgen-test-corpus"}


def write_spec(
    specs_dir: Path,
    targets: dict[str, dict[str, Any]],
    *,
    group: str = "testgrp",
    sources: dict[str, dict[str, Any]] | None = None,
    file: str | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Writes ``<specs_dir>/<file or group>.yaml`` and returns its path."""
    specs_dir.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {
        "group": group,
        "sources": sources if sources is not None else {"corpus": corpus_source()},
        "targets": targets,
    }
    doc.update(extra or {})
    path = specs_dir / f"{file or group}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def load_target(spec_path: Path, name: str | None = None):
    from bindgen.spec import load_spec

    sf = load_spec(spec_path, spec_path.parent, spec_path.parent.name)
    if name is None:
        assert len(sf.targets) == 1, [t.name for t in sf.targets]
        return sf.targets[0]
    return next(t for t in sf.targets if t.name == name)


def generate_target(target, specs_dir: Path, cache: Path, overrides: dict[str, Path] | None = None,
                    sources=None):
    """Runs the real pipeline for ``target`` whose spec lives in ``specs_dir``. Pass ``sources``
    (a ``bindgen.sources.Sources``) to keep using the folders it resolved afterwards: unpinned
    sources are unpacked into a scratch folder that lives as long as that object."""
    from bindgen.generate import generate
    from bindgen.project import Project
    from bindgen.sources import Sources

    root = specs_dir.parent
    project = Project(root=root, specs=specs_dir, out=root / "generated", package="generated")
    return generate(target, sources or Sources(cache, overrides), project)


def load_generated(g, name: str | None = None) -> types.ModuleType:
    from bindgen.layout import load_module_text

    defs = getattr(g, "defs", None)  # lazy modules keep their definitions beside the module
    args = (defs,) if defs is not None else ()
    return load_module_text(g.text, name or f"bindgen_test_{g.target.name}", *args)


def generate_headers(
    tmp: Path,
    headers: list[str],
    *,
    name: str = "probe_target",
    source_dir: Path = CORPUS,
    **target_opts: Any,
):
    """A spec with one target reading ``headers`` (under ``source_dir``) → (Generated, module)."""
    specs = tmp / "specs"
    tdef = {"headers": [f"corpus:{h}" for h in headers], **target_opts}
    path = write_spec(specs, {name: tdef}, sources={"corpus": corpus_source(source_dir)}, file=name)
    g = generate_target(load_target(path, name), specs, tmp / "cache")
    return g, load_generated(g)


# ---------------------------------------------------------------- gcc


def compile_c(
    source: str, out: Path, include_dirs: list[Path] = (), shared: bool = False, opt: str = "-O0"
) -> Path:
    """Compiles ``source`` with gcc into ``out`` (an executable, or a shared library)."""
    assert GCC, "gcc missing"
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_suffix(".c")
    src.write_text(source)
    cmd = [
        GCC,
        "-std=gnu11",
        opt,
        "-w",
        *(f"-I{d}" for d in include_dirs),
        str(src),
        "-o",
        str(out),
    ]
    if shared:
        cmd[1:1] = ["-shared", "-fPIC"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise AssertionError(f"gcc failed on {src}:\n{r.stderr}")
    return out


def run_program(exe: Path) -> str:
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, f"{exe} exited {r.returncode}: {r.stderr}"
    return r.stdout


# ---------------------------------------------------------------- layout probes

def probe_directives(header: Path) -> tuple[list[str], list[str], set[str]]:
    """``// probe: struct a, union b, typedef_t``, ``// probe-const: NAME ...`` and
    ``// probe-scalar: member ...`` (C scalars that Python holds as arrays, e.g. __int128) lines."""
    types_, consts, scalars = [], [], set()
    for line in header.read_text().splitlines():
        m = re.match(r"\s*//\s*probe-scalar:\s*(.+)", line)
        if m:
            scalars |= set(m.group(1).split())
        m = re.match(r"\s*//\s*probe:\s*(.+)", line)
        if m:
            types_ += [s.strip() for s in m.group(1).split(",") if s.strip()]
        m = re.match(r"\s*//\s*probe-const:\s*(.+)", line)
        if m:
            consts += m.group(1).split()
    return types_, consts, scalars


def py_name_of(c_type: str) -> str:
    return py_ident(c_type.split()[-1])


def layout_checks(header: Path, module: types.ModuleType) -> tuple[list[Check], str]:
    """Every check for the types a header names in its ``// probe:`` lines, and the C program."""
    c_types, consts, scalars = probe_directives(header)
    assert c_types, f"{header.name} has no '// probe:' line naming the types to compare"
    checks: list[Check] = []
    for c_type in c_types:
        cls = getattr(module, py_name_of(c_type), None)
        if not is_record(cls):  # a tag named like an ordinary identifier: `struct_NAME`
            cls = getattr(module, "_".join(c_type.split()), None)
        assert is_record(cls), f"{header.name}: {c_type} is not a generated record ({cls!r})"
        checks += RecordWalker(c_type, cls, frozenset(scalars)).run()
    for name in consts:
        checks.append(
            Check(
                "const",
                f"const {name}",
                f'\tIVAL("const {name}", {name});\n',
                lambda c, n=name: (int(c[f"const {n}"]), getattr(module, n, None)),
            )
        )
    body = "".join(ch.c_code for ch in checks)
    src = f'{PROBE_PRELUDE}#include "{header.name}"\nint main(void) {{\n{body}\treturn 0;\n}}\n'
    return checks, src


def run_layout_probe(
    header: Path, module: types.ModuleType, workdir: Path
) -> tuple[list[Check], dict[str, str]]:
    """Compiles and runs the probe for ``header``; returns the checks and gcc's answers."""
    checks, src = layout_checks(header, module)
    tag = hashlib.sha256(src.encode() + header.read_bytes()).hexdigest()[:12]
    exe = workdir / f"probe_{header.stem}_{tag}"
    if not exe.exists():  # the same program for the same classes: compile once
        compile_c(src, exe, [header.parent])
    out: dict[str, str] = {}
    for line in run_program(exe).splitlines():
        k, _, v = line.partition("\t")
        out[k] = v
    return checks, out


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def corpus_cases(tmp_path_factory):
    """Lazily generates each corpus header as its own target and runs its gcc probe (once each)."""
    root = tmp_path_factory.mktemp("corpus")
    cache: dict[str, Any] = {}

    def get(header: str, lazy: bool = False):
        key = (header, lazy)
        if key not in cache:
            stem = Path(header).stem + ("_lazy" if lazy else "")
            cache[key] = generate_headers(
                root / stem,
                [header],
                name=re.sub(r"\W", "_", stem),
                **({"lazy": True} if lazy else {}),
            )
        return cache[key]

    return get


@pytest.fixture(scope="session")
def corpus_probes(corpus_cases, tmp_path_factory):
    root = tmp_path_factory.mktemp("probes")
    cache: dict[str, Any] = {}

    def get(header: str, lazy: bool = False):
        key = (header, lazy)
        if key not in cache:
            _, mod = corpus_cases(header, lazy)
            cache[key] = run_layout_probe(CORPUS / header, mod, root)
        return cache[key]

    return get
