"""One generator run: (spec target, header bytes, templates, generator source) → module text +
report.

Pure apart from reading the resolved headers; where they live, the cache and the job count stay
outside.
"""

from __future__ import annotations

import gc
import hashlib
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import CodeType
from typing import Iterator

from . import ir
from .errors import BindgenError, LayoutError
from .fingerprint import inputs_hash
from .layout import compile_in_parts, load_module_text, left_to_compile, verify_module
from .parse import parse_target
from .passes import Context, run_all
from .render import RenderInfo, load_templates, render_module, render_report
from .project import Project
from .project import defs_module as project_defs_module
from .sources import Sources
from .spec import Target
from .wrappers import LIBRARY as WRAPPERS_LIBRARY
from .wrappers import Wrappers, build_id, c_source, env_var, file_names



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
    wrappers: Wrappers | None = None  # static inline functions' wrappers (wrap_static_fns)

    def files(self) -> list[tuple[Path, str]]:
        """Every file this target writes, with its text (not the wrappers' shared object: a
        build product of ``bindgen regen``, see ``bindgen.wrappers``)."""
        out = [(self.output, self.text), (self.report_path, self.report)]
        if self.defs is not None:
            out.append((defs_path(self.target, self.project), self.defs))
        if self.wrappers is not None:
            out.append((self.wrappers_paths[0], self.wrappers.c_text))
        return out

    @property
    def wrappers_paths(self) -> tuple[Path, Path]:
        """(C file, shared object) of the wrappers, beside the module."""
        c_name, so_name = file_names(self.target.output)
        return self.output.with_name(c_name), self.output.with_name(so_name)

    @property
    def output(self) -> Path:
        return self.project.output(self.target.output)

    @property
    def report_path(self) -> Path:
        return report_path(self.target, self.project)


def report_path(t: Target, project: Project) -> Path:
    return project.report_path(t.output)


# A target whose spec does not say ``lazy`` is written lazy when its module would be bigger than
# this (in characters). Importing a module compiles all of it where there is no bytecode yet
# (right after a regen, or where none may be written), and CPython holds the syntax tree of all
# of it meanwhile, many times the source's size: above this, a first import costs more time and
# memory than a lazy module's whole use typically does. The real groups' eager modules are far
# below it.
AUTO_LAZY_BYTES = 1 << 20


def defs_module(t: Target) -> str:
    """The definitions module of a lazy target: ``nv/rm_580.py`` → ``_rm_580``."""
    return project_defs_module(t.output)


def defs_path(t: Target, project: Project) -> Path:
    return project.defs_path(t.output)


def prepare(targets: list[Target]) -> None:
    """Does now, once, what generating any of ``targets`` starts with in a fresh process (Mako
    compiling the templates, the canonical form of each source's spec entry): before worker
    processes fork, so that they inherit it instead of each doing it again."""
    load_templates()
    for t in targets:
        inputs_hash(t)


def generate(t: Target, sources: Sources, project: Project) -> Generated:
    """Generates ``t`` (its headers resolved through ``sources``) as a module of ``project``."""
    with _collector_paused():
        return _generate(t, sources, project)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a target is generated: the IR, clang's cursors
    and the module text are hundreds of thousands of objects that all live until the end, and the
    collector's passes over them are a noticeable share of a large target's time, for no
    garbage. Whatever cycles a run leaves are collected after it, as usual."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _generate(t: Target, sources: Sources, project: Project) -> Generated:
    start = time.perf_counter()
    roots = {s.name: sources.resolve(s).root for s in t.sources}
    pr = parse_target(t, roots)
    for h in pr.headers:  # every file clang read from a cache entry must be what its pins say
        name, _, rel = h.shown.partition(":")
        sources.verify_read(name, rel, h.sha256)
    ctx = Context(t, pr)
    run_all(ctx)
    m = ctx.module
    headers = [(h.shown, h.sha256) for h in pr.headers]
    # The passes are done with clang: the parse result's index holds the translation unit (its
    # cursors), which rendering and verifying do not need.
    del ctx, pr

    hh = hashlib.sha256("\n".join(f"{s} {n}" for n, s in headers).encode()).hexdigest()[:32]
    ih = inputs_hash(t)
    fp = hashlib.sha256(f"{ih}{hh}".encode()).hexdigest()[:32]
    wrappers = _wrappers(t, m, roots, project.spec_shown(t.spec_file), fp)
    info = RenderInfo(
        project.spec_shown(t.spec_file),
        t.description or f"bindings for {t.name}",
        fp,
        ih,
        hh,
        {lib.name: lib.env for lib in t.libraries} | {WRAPPERS_LIBRARY: env_var(t.name)},
        defs_module(t) if t.lazy else "",
        wrappers.build_id if wrappers is not None else "",
    )
    rendered = render_module(m, info, lazy=bool(t.lazy))
    eager_size = len(rendered.text)
    if t.lazy is None and eager_size > AUTO_LAZY_BYTES:
        del rendered
        info.defs_module = defs_module(t)
        rendered = render_module(m, info, lazy=True)
    text, defs = rendered.text, rendered.defs
    del rendered
    if defs is not None:
        # What the verification below does not compile, compiled first: its copies of the text
        # and the module's objects are then never held at once.
        _compiled(t, defs_path(t, project).name, left_to_compile(defs, m))
    code = _compiled(t, t.output, text)
    try:
        mod = load_module_text(text, project.module_name(t.output), defs, code)
        del code  # the module's objects are made: its bytecode is garbage
        checks = verify_module(mod, m)
    except LayoutError:
        raise
    except Exception as e:  # the rendered module must import; anything else is a generator failure
        if defs is not None:  # a statement that does not compile: say where, in the whole file
            _compiled(t, defs_path(t, project).name, defs)
        raise ir_error(t, f"rendered module fails to load: {type(e).__name__}: {e}") from None
    counts = (
        f"{len(m.records)} records, {len(m.enums)} enums, {len(m.typedefs)} typedefs, "
        f"{len(m.constants)} constants, {len(m.macro_functions)} macro fns, "
        f"{len(m.ioctls)} ioctls, {len(m.functions)} functions, {len(m.skipped)} skipped"
    )
    report = render_report(m, info, headers)
    if t.lazy is None and defs is not None:
        counts += "; lazy (its module is over 1 MiB)"
        report += (
            f"\n## lazy\nwritten lazy: the module would be {eager_size} characters, over "
            f"{AUTO_LAZY_BYTES} (`lazy: false` in the spec keeps one eager module)\n"
        )
    if wrappers is not None:
        c_name, so_name = file_names(t.output)
        report += (
            f"\n## static inline functions\n{len(_wrapped(m))} bound "
            f"through {so_name}, which `bindgen regen` and `bindgen build-static` compile from "
            f"{c_name} (sha256 {wrappers.sha256}; build id {wrappers.build_id})\n"
        )
    return Generated(
        t, project, text, report, counts, time.perf_counter() - start, checks, defs, m, wrappers
    )


def _wrapped(m: ir.Module) -> list[ir.Function]:
    return [f for f in m.functions if f.library == WRAPPERS_LIBRARY]


def _wrappers(
    t: Target, m: ir.Module, roots: dict[str, Path], spec_shown: str, fingerprint: str
) -> Wrappers | None:
    """The C file of the target's static inline functions' wrappers and how to compile it here
    (None when it keeps none)."""
    fns = _wrapped(m)
    if not fns:
        return None
    includes, dirs, defines, pre = build_inputs(t, roots)
    text = c_source(t.name, spec_shown, includes, fns)
    return Wrappers(t.name, text, dirs, defines, pre, build_id(text, fingerprint))


def build_inputs(
    t: Target, roots: dict[str, Path]
) -> tuple[list[str], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(headers the C file includes, include folders, -D/-U arguments, preincludes) of a target's
    wrappers, with this machine's paths where it has them."""
    includes: list[str] = []
    dirs: list[str] = []
    for h in t.headers:
        root = roots[h.source]
        dirs.append(str(root))
        if "*" in h.path:
            includes += [p.relative_to(root).as_posix() for p in sorted(root.glob(h.path))
                         if p.is_file()]
        else:
            includes.append(h.path)
    dirs += [str(roots[i.source] / i.path) for i in t.include_dirs]
    defines = tuple(a for a in t.clang_args if a.startswith(("-D", "-U")) and len(a) > 2)
    pre = tuple(str(roots[p.source] / p.path) for p in t.preinclude)
    return includes, tuple(dict.fromkeys(dirs)), defines, pre


def _compiled(t: Target, label: str, src: str | bytes) -> list[CodeType]:
    try:
        return compile_in_parts(src, label)
    except SyntaxError as e:
        raise ir_error(t, f"rendered {label} does not compile: line {e.lineno}: {e.msg}") from None


def ir_error(t: Target, msg: str) -> BindgenError:
    return BindgenError(f"target {t.name}: {msg}")
