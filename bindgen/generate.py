"""One generator run: (spec target, header bytes, templates, generator source) → module text +
report.

Pure apart from reading the resolved headers; where they live, the cache and the job count stay
outside.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from . import ir
from .cexpr import MacroContext, MacroOptions, translate_macros
from .errors import BindgenError
from .layout import load_module_text, verify_module
from .macro_records import build_macro_records
from .parse import parse_target
from .patches import apply_ir_patches
from .render import RenderInfo, render_module, render_report
from .project import Project
from .sources import Sources
from .spec import Target

PACKAGE = Path(__file__).resolve().parent


def generator_hash() -> str:
    """Hash of the generator itself (its Python sources and templates), content only."""
    h = hashlib.sha256()
    files = sorted(PACKAGE.rglob("*.py")) + sorted((PACKAGE / "templates").glob("*.mako"))
    for f in files:
        if "__pycache__" in f.parts:
            continue
        h.update(f.relative_to(PACKAGE).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def inputs_hash(t: Target, project: Project) -> str:
    """Everything but the headers: the spec file, the target's name and the generator."""
    h = hashlib.sha256()
    h.update((project.specs / t.spec_file).read_bytes())
    h.update(b"\0" + t.name.encode() + b"\0" + generator_hash().encode())
    return h.hexdigest()[:32]


@dataclass
class Generated:
    target: Target
    project: Project
    text: str
    report: str
    counts: str
    seconds: float
    checks: int
    defs: str | None = None  # lazy modules: the definitions file
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


def defs_path(t: Target, project: Project) -> Path:
    return project.output(re.sub(r"\.py$", ".defs", t.output))


def generate(t: Target, sources: Sources, project: Project) -> Generated:
    """Generates ``t`` (its headers resolved through ``sources``) as a module of ``project``."""
    start = time.perf_counter()
    roots = {s.name: sources.resolve(s).root for s in t.sources}
    pr = parse_target(t, roots)
    m = pr.module
    if t.macros.enabled:
        opts = MacroOptions(
            bit_ranges=t.macros.bit_ranges,
            range_wrappers=t.macros.range_wrappers,
            predefined=dict(t.macros.predefined),
            skip=t.macros.skip,
        )
        ctx = MacroContext(
            types=pr.macro_ctx_types, enum_constants=pr.enum_constants, record_names=pr.record_names
        )
        res = translate_macros(pr.macros, ctx, opts, pr.emit_macro.__contains__)
        emitted_types = {r.name for r in m.records}
        m.constants = list(res.constants)
        m.macro_functions = list(res.functions)
        m.ioctls = [
            io if io.arg is None or io.arg in emitted_types else _ioctl_with_missing_arg(io)
            for io in res.ioctls
        ]
        m.skipped += list(res.skipped)
        if t.macros.records:
            build_macro_records(t, m)
    for rule, rows in pr.tables:
        m.constants.append(ir.Constant(rule.name, repr(tuple(rows)), tuple(rows)))
    apply_ir_patches(t, m)
    _check_duplicates(t, m)

    headers = [(h.shown, h.sha256) for h in pr.headers]
    hh = hashlib.sha256("\n".join(f"{s} {n}" for n, s in headers).encode()).hexdigest()[:32]
    ih = inputs_hash(t, project)
    fp = hashlib.sha256(f"{ih}{hh}".encode()).hexdigest()[:32]
    info = RenderInfo(
        project.spec_shown(t.spec_file),
        t.description or f"bindings for {t.name}",
        fp,
        ih,
        hh,
        {lib.name: lib.env for lib in t.libraries},
        defs_path(t, project).name,
    )
    text, defs = render_module(m, info, lazy=t.lazy)
    try:
        compile(text, t.output, "exec")
    except SyntaxError as e:
        raise ir_error(t, f"rendered module does not compile: line {e.lineno}: {e.msg}")
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
    return Generated(
        t,
        project,
        text,
        render_report(m, info, headers),
        counts,
        time.perf_counter() - start,
        checks,
        defs,
        m,
    )


def ir_error(t: Target, msg: str) -> BindgenError:
    return BindgenError(f"target {t.name}: {msg}")


def _ioctl_with_missing_arg(io: ir.Ioctl) -> ir.Ioctl:
    # The argument record is outside the kept set: the request number is still exact.
    return ir.Ioctl(io.name, io.direction, io.type_, io.nr, None, io.arg_size, io.request, io.loc)


def _check_duplicates(t: Target, m: ir.Module) -> None:
    """Python has one namespace where C has several: a clash would silently shadow, so it fails."""
    seen: dict[str, str] = {}
    for _, kind, items in m.declaration_lists():
        for it in items:
            if it.name in seen and not (kind == "constant" and seen[it.name] == "enum"):
                raise ir_error(
                    t,
                    f"name {it.name!r} is both a {seen[it.name]} and a {kind}; add a "
                    f"rename patch to the spec",
                )
            seen.setdefault(it.name, kind)
    enum_values = {k for e in m.enums for k, _ in e.values}
    m.constants = [c for c in m.constants if c.name not in enum_values]

