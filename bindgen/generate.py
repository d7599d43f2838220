"""One generator run: (spec target, header bytes, templates, generator source) → module text +
report.

Pure apart from reading the resolved headers; where they live, the cache and the job count stay
outside.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import BindgenError
from .fingerprint import generator_hash
from .layout import load_module_text, verify_module
from .parse import parse_target
from .passes import Context, run_all
from .render import RenderInfo, render_module, render_report
from .project import Project
from .sources import Sources
from .spec import Source, Target



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


# Canonical forms of sources, by identity (the object is kept alive beside its form): a source's
# pin lists every file it yields (2,000 for linux-source), and every target of a spec shares the
# same objects, so each is canonicalized once per process (it cost 0.17 s per target). Droppable.
_SOURCE_CANON: dict[int, tuple[object, object]] = {}


def spec_entry(t: Target) -> str:
    """A canonical text of a loaded target: every field of it and of what it holds, recursively,
    except positions in the spec file."""

    def canon(v: object) -> object:
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            cached = isinstance(v, Source)
            if cached:
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
            if cached:
                _SOURCE_CANON[id(v)] = (v, out)
            return out
        if isinstance(v, (tuple, list)):
            return tuple(canon(x) for x in v)
        if isinstance(v, dict):
            return tuple(sorted((str(k), canon(x)) for k, x in v.items()))
        return v

    return repr(canon(t))


@dataclass
class Generated:
    target: Target
    project: Project
    text: str
    report: str
    counts: str
    seconds: float
    checks: int
    defs: str | None = None  # lazy modules: the definitions module's text
    module: ir.Module | None = None  # the IR it was rendered from (for reports and probes)

    def files(self) -> list[tuple[Path, str]]:
        """Every file this target writes, with its text."""
        out = [(self.output, self.text), (self.report_path, self.report)]
        if self.defs is not None:
            out.append((defs_path(self.target, self.project), self.defs))
        return out

    @property
    def output(self) -> Path:
        return self.project.output(self.target.output)

    @property
    def report_path(self) -> Path:
        return report_path(self.target, self.project)


def report_path(t: Target, project: Project) -> Path:
    return project.output(re.sub(r"\.py$", ".report.txt", t.output))


def defs_module(t: Target) -> str:
    """The definitions module of a lazy target: ``nv/rm_580.py`` → ``_rm_580``."""
    return "_" + Path(t.output).stem


def defs_path(t: Target, project: Project) -> Path:
    return project.output(t.output).with_name(defs_module(t) + ".py")


def generate(t: Target, sources: Sources, project: Project) -> Generated:
    """Generates ``t`` (its headers resolved through ``sources``) as a module of ``project``."""
    start = time.perf_counter()
    roots = {s.name: sources.resolve(s).root for s in t.sources}
    pr = parse_target(t, roots)
    m = pr.module
    run_all(Context(t, pr))

    headers = [(h.shown, h.sha256) for h in pr.headers]
    hh = hashlib.sha256("\n".join(f"{s} {n}" for n, s in headers).encode()).hexdigest()[:32]
    ih = inputs_hash(t)
    fp = hashlib.sha256(f"{ih}{hh}".encode()).hexdigest()[:32]
    info = RenderInfo(
        project.spec_shown(t.spec_file),
        t.description or f"bindings for {t.name}",
        fp,
        ih,
        hh,
        {lib.name: lib.env for lib in t.libraries},
        defs_module(t) if t.lazy else "",
    )
    rendered = render_module(m, info, lazy=t.lazy)
    text, defs = rendered.text, rendered.defs
    for label, src in ((t.output, text), (defs_path(t, project).name, defs)):
        if src is None:
            continue
        try:
            compile(src, label, "exec")
        except SyntaxError as e:
            raise ir_error(t, f"rendered {label} does not compile: line {e.lineno}: {e.msg}")
    try:
        mod = load_module_text(text, project.module_name(t.output), defs)
    except Exception as e:  # the rendered module must import; anything else is a generator failure
        raise ir_error(t, f"rendered module fails to load: {type(e).__name__}: {e}") from None
    checks = verify_module(mod, m)
    counts = (
        f"{len(m.records)} records, {len(m.enums)} enums, {len(m.typedefs)} typedefs, "
        f"{len(m.constants)} constants, {len(m.macro_functions)} macro fns, "
        f"{len(m.ioctls)} ioctls, {len(m.functions)} functions, {len(m.skipped)} skipped"
    )
    report = render_report(m, info, headers)
    return Generated(
        t, project, text, report, counts, time.perf_counter() - start, checks, defs, m
    )


def ir_error(t: Target, msg: str) -> BindgenError:
    return BindgenError(f"target {t.name}: {msg}")
