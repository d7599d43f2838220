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


def generate_target(target, specs_dir: Path, cache: Path, overrides: dict[str, Path] | None = None):
    """Runs the real pipeline for ``target`` whose spec lives in ``specs_dir``."""
    from bindgen.generate import generate
    from bindgen.project import Project
    from bindgen.sources import Sources

    root = specs_dir.parent
    project = Project(root=root, specs=specs_dir, out=root / "generated", package="generated")
    return generate(target, Sources(cache, overrides), project)


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


def max_ctypes_align() -> int:
    from bindgen.layout import MAX_CTYPES_ALIGN

    return MAX_CTYPES_ALIGN if sys.version_info < (3, 13) else 1 << 30


def c_ident(py_name: str) -> str:
    """The C spelling of a generated field name (keywords got a trailing underscore)."""
    if py_name.endswith("_"):
        base = py_name[:-1]
        if keyword.iskeyword(base) or base in ("None", "True", "False"):
            return base
    return py_name


def py_ident(c_name: str) -> str:
    return (
        c_name + "_" if keyword.iskeyword(c_name) or c_name in ("None", "True", "False") else c_name
    )


_INT_CODES = set("bBhHiIlLqQ?")
_UNNAMED_BITFIELD = re.compile(r"_anon\d+$")


def is_record(t: Any) -> bool:
    return isinstance(t, type) and hasattr(t, "__bindgen_fields__")


def is_int(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, ctypes._SimpleCData) and t._type_ in _INT_CODES


def is_array(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, ctypes.Array)


@dataclass
class Check:
    kind: str  # size | align | off | fsize | falign | bits | val | const
    key: str  # also the line tag the C program prints
    c_code: str  # statements printing "key\tvalue"
    py: Callable[[dict[str, str]], tuple[Any, Any]]  # gcc's output → (gcc's value, python's value)


def _hexdump(obj: Any) -> str:
    return bytes(obj).hex()


def _get(obj: Any, path: tuple) -> Any:
    for p in path:
        obj = obj[p] if isinstance(p, int) else getattr(obj, p)
    return obj


def _set(obj: Any, path: tuple, value: Any) -> None:
    parent = _get(obj, path[:-1])
    if isinstance(path[-1], int):
        parent[path[-1]] = value
    else:
        setattr(parent, path[-1], value)


class _Walker:
    """Turns one generated record class (and what it contains) into checks against gcc."""

    def __init__(self, ctype_c: str, cls: Any, scalars: set[str] = frozenset()) -> None:
        self.T, self.cls, self.scalars = ctype_c, cls, scalars
        self.checks: list[Check] = []
        self.maxa = max_ctypes_align()

    def obj_block(self, body: str) -> str:
        return f"\t{{ {self.T} o; memset(&o, 0, sizeof o); {body} }}\n"

    def run(self) -> list[Check]:
        T, cls, maxa = self.T, self.cls, self.maxa
        self.checks.append(
            Check(
                "size",
                f"size {T}",
                f'\tOUT("size {T}", sizeof({T}));\n',
                lambda c: (int(c[f"size {T}"]), ctypes.sizeof(cls)),
            )
        )
        self.checks.append(
            Check(
                "align",
                f"align {T}",
                f'\tOUT("align {T}", _Alignof({T}));\n',
                lambda c: (min(int(c[f"align {T}"]), maxa), ctypes.alignment(cls)),
            )
        )
        self.walk(cls, "", (), 0)
        return self.checks

    def walk(self, cls: Any, cprefix: str, pypath: tuple, base: int) -> None:
        """``base``: python's byte offset of ``cls`` inside the top-level object."""
        for name, ctype, _bit_offset, width, signed, anonymous in cls.__bindgen_fields__:
            if width is not None:
                if width == 0 or _UNNAMED_BITFIELD.match(name):
                    continue  # zero-width and unnamed ones only move others: those are checked
                self.bitfield(
                    cprefix + "." + c_ident(name) if cprefix else c_ident(name),
                    pypath + (name,),
                    signed,
                    width,
                )
                continue
            actual = getattr(cls, name).offset  # where ctypes really put it
            if anonymous:
                # C promotes the members (and so do the generated classes): same prefixes.
                self.walk(ctype, cprefix, pypath, base + actual)
                continue
            cp = cprefix + "." + c_ident(name) if cprefix else c_ident(name)
            self.member(cp, pypath + (name,), ctype, base + actual)

    def member(self, cp: str, pypath: tuple, ctype: Any, off: int) -> None:
        """``off``: python's byte offset of this member inside the top-level object."""
        T, key = self.T, f"{self.T}.{cp}"
        self.checks.append(
            Check(
                "off",
                f"off {key}",
                f'\tOUT("off {key}", offsetof({T}, {cp}));\n',
                lambda c, k=f"off {key}", o=off: (int(c[k]), o),
            )
        )
        flexible = is_array(ctype) and ctype._length_ == 0
        if not flexible:
            self.checks.append(
                Check(
                    "fsize",
                    f"fsize {key}",
                    f'\tOUT("fsize {key}", sizeof((({T} *)0)->{cp}));\n',
                    lambda c, k=f"fsize {key}", t=ctype: (int(c[k]), ctypes.sizeof(t)),
                )
            )
        if is_record(ctype):
            maxa = self.maxa
            self.checks.append(
                Check(
                    "falign",
                    f"falign {key}",
                    f'\tOUT("falign {key}", _Alignof(__typeof__((({T} *)0)->{cp})));\n',
                    lambda c, k=f"falign {key}", t=ctype: (
                        min(int(c[k]), maxa),
                        ctypes.alignment(t),
                    ),
                )
            )
            self.walk(ctype, cp, pypath, off)
        elif is_array(ctype) and not flexible and cp.rpartition(".")[2] not in self.scalars:
            last = ctype._length_ - 1  # the last element checks the stride too
            elem = ctype._type_
            self.member(f"{cp}[{last}]", pypath + (last,), elem, off + last * ctypes.sizeof(elem))
        elif is_int(ctype):
            self.int_value(cp, pypath, ctype)

    def int_value(self, cp: str, pypath: tuple, ctype: Any) -> None:
        """Plain integer (or enum) member: all-ones from C must read back with C's sign."""
        key = f"{self.T}.{cp}"
        body = f'o.{cp} = -1; DUMP("set {key}", &o, sizeof o); IVAL("val {key}", o.{cp});'
        cls = self.cls

        def py(c: dict[str, str], key=key, path=pypath) -> tuple[Any, Any]:
            try:
                got = _get(cls.from_buffer_copy(bytes.fromhex(c[f"set {key}"])), path)
            except ValueError as e:
                got = f"cannot read gcc's bytes: {e}"
            return int(c[f"val {key}"]), int(got) if isinstance(got, (int, bool)) else got

        self.checks.append(Check("val", f"val {key}", self.obj_block(body), py))

    def bitfield(self, cp: str, pypath: tuple, signed: bool, width: int) -> None:
        key = f"{self.T}.{cp}"
        body = f'o.{cp} = -1; DUMP("bits {key}", &o, sizeof o); IVAL("val {key}", o.{cp});'
        cls = self.cls

        def py_bits(c: dict[str, str], key=key, path=pypath) -> tuple[Any, Any]:
            obj = cls()
            _set(obj, path, -1 if signed else (1 << width) - 1)
            return c[f"bits {key}"], _hexdump(obj)

        def py_val(c: dict[str, str], key=key, path=pypath) -> tuple[Any, Any]:
            try:
                got = _get(cls.from_buffer_copy(bytes.fromhex(c[f"bits {key}"])), path)
            except ValueError as e:
                got = f"cannot read gcc's bytes: {e}"
            return int(c[f"val {key}"]), got

        self.checks.append(Check("bits", f"bits {key}", self.obj_block(body), py_bits))
        self.checks.append(Check("val", f"val {key}", "", py_val))


PROBE_PRELUDE = r"""#include <stdio.h>
#include <stddef.h>
#include <string.h>
#define OUT(key, v) printf("%s\t%llu\n", key, (unsigned long long)(v))
#define IVAL(key, v) do { if ((v) < 0) printf("%s\t%lld\n", key, (long long)(v)); \
	else printf("%s\t%llu\n", key, (unsigned long long)(v)); } while (0)
static void DUMP(const char *key, const void *p, size_t n) {
	printf("%s\t", key);
	for (size_t i = 0; i < n; i++) printf("%02x", ((const unsigned char *)p)[i]);
	printf("\n");
}
"""


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
        assert is_record(cls), f"{header.name}: {c_type} is not a generated record ({cls!r})"
        checks += _Walker(c_type, cls, scalars).run()
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


def compare(checks: list[Check], gcc: dict[str, str], kinds: set[str] | None = None) -> list[str]:
    """Mismatches as readable lines (empty when python agrees with gcc everywhere)."""
    bad = []
    for ch in checks:
        if kinds and ch.kind not in kinds:
            continue
        try:
            want, got = ch.py(gcc)
        except KeyError as e:
            bad.append(f"{ch.key}: gcc printed no {e}")
            continue
        except Exception as e:  # a generated class that cannot even be used is a mismatch too
            bad.append(f"{ch.key}: python raised {type(e).__name__}: {e}")
            continue
        if want != got:
            bad.append(f"{ch.key}: gcc {want!r}, python {got!r}")
    return bad


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
