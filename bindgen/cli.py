"""``bindgen list | regen | check | pin | build-static | show``. Exit codes: 0 ok, 1 drift or failure, 2 bad usage."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import hashlib
import os
import re
import sys
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from .errors import BindgenError, SourceError
from .project import Project, ProjectError, load_project

if TYPE_CHECKING:
    from concurrent.futures import Future

    from .generate import Generated
    from .pins import SourcePin
    from .sources import Sources
    from .spec import Source, Target

_Say = Callable[[str], None]

# Installed without the `bindgen` extra, the generator cannot run (the bindings and bindgen_rt can).
_GENERATOR_DEPS = {"yaml": "pyyaml", "mako": "mako", "clang": "libclang"}


def _targets(selector: list[str], all_targets: list[Target]) -> list[Target]:
    """Targets named by TARGET, GROUP or a spec file (``nv_classes`` or ``nv_classes.yaml``)."""
    if not selector or selector == ["all"]:
        return all_targets
    out: list[Target] = []
    for sel in selector:
        stem = sel[: -len(".yaml")] if sel.endswith(".yaml") else sel
        hit = [
            t
            for t in all_targets
            if sel in (t.name, t.group) or t.spec_file[: -len(".yaml")] == stem
        ]
        if not hit:
            names = sorted({t.name for t in all_targets} | {t.group for t in all_targets})
            files = sorted({t.spec_file for t in all_targets})
            raise _Usage(
                f"no target, group or spec file named {sel!r} (targets and groups: "
                f"{', '.join(names)}; spec files: {', '.join(files)})"
            )
        out += [t for t in hit if t not in out]
    return out


class _Usage(Exception):
    pass


def _overrides(pairs: list[str], targets: list[Target]) -> dict[str, Path]:
    known = sorted({s.name for t in targets for s in t.sources})
    out = {}
    for p in pairs:
        name, sep, path = p.partition("=")
        if not sep or not name or not path:
            raise _Usage(f"--source expects NAME=DIR, got {p!r}")
        if name not in known:
            raise _Usage(f"--source {name}: no spec declares a source named {name!r} "
                         f"(known: {', '.join(known)})")
        out[name] = Path(path).expanduser().resolve()
    return out


def _worker(args: tuple[Target, Project, Sources]) -> tuple[Generated | None, str | None]:
    from .generate import generate

    t, project, srcs = args
    try:
        return generate(t, srcs, project), None
    except BindgenError as e:
        return None, str(e)
    except MemoryError:
        # What the target held is garbage now; the other targets and the summary can go on.
        return None, (
            f"target {t.name}: out of memory while generating it (its headers declare more than "
            f"this machine can hold; narrow it with `keep`, or give the run more memory)"
        )
    except Exception as e:  # noqa: BLE001 -- a generator bug fails this target, not the run
        return None, _internal_error(t, e)


def _internal_error(t: Target, e: Exception) -> str:
    """The message for an exception the generator did not expect: the target, the exception
    and where it was raised (the innermost bindgen frame), so the rest of the run goes on and
    the failure can be reported."""
    import traceback

    frames = [f for f in traceback.extract_tb(e.__traceback__) if "bindgen" in f.filename]
    where = ""
    if frames:
        f = frames[-1]
        where = f" at {Path(f.filename).parent.name}/{Path(f.filename).name}:{f.lineno}"
    return (
        f"target {t.name}: internal error in the generator{where}: {type(e).__name__}: {e} "
        "(a bindgen bug: please report it with the header that caused it; the other targets "
        "were generated)"
    )


def _pooled(args: tuple[Target, Project, Sources]) -> tuple[Generated | None, str | None]:
    """:func:`_worker` in a worker process: the IR stays behind (pickling it back would cost a
    large target tens of milliseconds, and nothing here reads it)."""
    g, err = _worker(args)
    return (dataclasses.replace(g, module=None) if g is not None else None), err


def _die_with_parent(parent: int) -> None:
    """Pool initializer: a worker gets SIGKILL when the process that started it dies (Linux
    prctl PR_SET_PDEATHSIG), so a killed regen leaves no orphans holding its stdout."""
    import ctypes
    import signal

    # Ctrl-C reaches the whole process group: the parent reports it once and shuts the pool
    # down; a worker printing its own KeyboardInterrupt traceback would only add noise.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: workers still end when the pool's pipe closes
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def _expected_cost(t: Target, srcs: Sources) -> int:
    """Bytes of the headers ``t`` names (not what they include): a rough measure of how long it
    takes, good enough to hand the big ones out first. Whatever cannot be read counts nothing
    (generating the target says what is wrong)."""
    by_name = {s.name: s for s in t.sources}
    total = 0
    for h in t.headers:
        try:
            root = srcs.resolve(by_name[h.source]).root
            paths = sorted(root.glob(h.path)) if "*" in h.path else [root / h.path]
            total += sum(p.stat().st_size for p in paths if p.is_file())
        except (KeyError, OSError, SourceError):
            pass
    return total


# Workers only for a target this big (bytes of the headers it names): a forked worker and the
# copy-on-write faults it causes on both sides cost more CPU than the targets of a group of small
# ones could save (scripts/bench_bindgen.py measures both ways).
_POOL_MIN_BYTES = 256 * 1024


def _run(
    targets: list[Target], project: Project, srcs: Sources, jobs: int
) -> Iterator[tuple[Target, Generated | None, str | None]]:
    """Generates targets; yields (target, generated, error) in the order given, each as soon as
    it and those before it are done. ``srcs`` has resolved every source already: workers only
    read the verified cache.

    With ``jobs`` > 1 and a target big enough to be worth a worker (``_POOL_MIN_BYTES``), this
    process is one of the ``jobs`` generators: ``jobs - 1`` worker processes take the targets
    expected to cost most, biggest first (each a thread here feeds and waits on), while this
    process takes the cheapest, so a large target starts at once and small ones never wait for
    a worker. On Linux the workers are forked after the generator is imported here, so they
    start without importing libclang, Mako or bindgen again. Each target's output depends only
    on the target, never on who generated it or when."""
    cost = {t.name: _expected_cost(t, srcs) for t in targets} if jobs > 1 else {}
    if jobs <= 1 or len(targets) <= 1 or max(cost.values()) < _POOL_MIN_BYTES:
        for t in targets:
            yield (t, *_worker((t, project, srcs)))
        return
    # Imported here: `check` of an unchanged tree and `list` start without them.
    import multiprocessing
    import threading
    from concurrent.futures import ProcessPoolExecutor

    from .generate import prepare

    prepare(targets)  # before the fork: the workers inherit the generator and what it prepared
    todo = deque(sorted(targets, key=lambda t: -cost[t.name]))  # ties keep the given order
    workers = min(jobs, len(targets)) - 1
    done: dict[str, tuple[Generated | None, str | None]] = {}
    failure: list[BaseException] = []
    lock = threading.Condition()
    ctx = multiprocessing.get_context("fork") if sys.platform.startswith("linux") else None
    ex = ProcessPoolExecutor(
        max_workers=workers, mp_context=ctx, initializer=_die_with_parent,
        initargs=(os.getpid(),),
    )

    def fail(e: BaseException) -> None:  # a worker that died, or a bug: the main thread raises it
        with lock:
            failure.append(e)
            todo.clear()
            lock.notify_all()

    def feed(fut: Future[tuple[Generated | None, str | None]], t: Target) -> None:
        while True:
            try:
                res = fut.result()
            except BaseException as e:
                return fail(e)
            with lock:
                done[t.name] = res
                lock.notify_all()
                if not todo:
                    return
                t = todo.popleft()
            try:
                fut = ex.submit(_pooled, (t, project, srcs))
            except BaseException as e:  # the pool broke or was shut down meanwhile
                return fail(e)

    try:
        # Submitted from this thread, so the workers fork before any feeding thread exists.
        first = [todo.popleft() for _ in range(workers)]
        futures = [ex.submit(_pooled, (t, project, srcs)) for t in first]
        feeders = [
            threading.Thread(target=feed, args=(f, t), daemon=True)
            for f, t in zip(futures, first)
        ]
        for th in feeders:
            th.start()
        for t in targets:
            while True:
                with lock:
                    if failure:
                        raise failure[0]
                    if t.name in done:
                        res = done.pop(t.name)
                        break
                    mine = todo.pop() if todo else None  # the cheapest left
                    if mine is None:
                        lock.wait()
                        continue
                r = _worker((mine, project, srcs))
                with lock:
                    done[mine.name] = r
            yield (t, *res)
    except BaseException:
        # Ctrl-C or a failure here: the workers (which ignore SIGINT) are stopped rather than
        # waited for, so the run ends now, not when the largest target is done.
        for proc in list((getattr(ex, "_processes", None) or {}).values()):
            proc.kill()
        raise
    finally:
        with lock:
            todo.clear()
        ex.shutdown(wait=True, cancel_futures=True)


def _resolve_all(
    targets: list[Target],
    srcs: Sources,
    overrides: dict[str, Path],
    required: bool,
    say: _Say = print,
) -> dict[str, list[str]]:
    """Resolves every source once, before any worker starts (one download and unpack each).
    Returns {target: [sources it cannot have]}; with ``required``, the first failure raises. A
    cache entry that differs from its pins always raises: it is damage, not absence."""
    from .errors import CacheError

    failed: dict[str, str] = {}
    for src in {s.name: s for t in targets for s in t.sources}.values():
        try:
            srcs.resolve(src)
        except CacheError:
            raise
        except SourceError as e:
            if required or src.name in overrides:  # asked for explicitly: not having it is an error
                raise
            failed[src.name] = str(e)
    for name, why in sorted(failed.items()):
        say(f"  unavailable source {name}: {why}")
    return {t.name: [s.name for s in t.sources if s.name in failed] for t in targets}


def _sources_summary(srcs: Sources) -> None:
    from .fetch import mb
    from .sources import cache_size

    line = f"sources: {mb(srcs.downloaded)} downloaded in this run; cache {srcs.cache}"
    if srcs.downloaded:  # it grew: how big it is now (walking a warm cache is not free)
        line += f" holds {mb(cache_size(srcs.cache))}"
    print(line)


def cmd_list(targets: list[Target], project: Project) -> int:
    width = max(len(t.name) for t in targets)
    for t in targets:
        srcs = ", ".join(f"{s.name}({s.kind})" for s in t.sources)
        print(
            f"{t.name:<{width}}  group={t.group:<6} -> {project.shown(project.output(t.output))}"
            f"  sources: {srcs}"
        )
    return 0


def cmd_show(t: Target, project: Project) -> int:
    print(f"target {t.name} (group {t.group}, spec {t.spec_shown})")
    print(f"  output: {project.shown(project.output(t.output))}")
    lazy = "auto" if t.lazy is None else str(t.lazy).lower()
    args = " ".join(t.clang_args) or "-"
    print(f"  language: {t.language}   lazy: {lazy}   clang args: {args}")
    for label, items in (("header", t.headers), ("include dir", t.include_dirs),
                         ("preinclude", t.preinclude)):
        for item in items:
            print(f"  {label}: {item}")
    if tuple(t.keep_files) != tuple(str(h) for h in t.headers):
        for g in t.keep_files:
            print(f"  keep file: {g}")
    if t.keep_names or t.exclude_names:
        print(f"  keep names: {t.keep_names}  exclude: {t.exclude_names}")
    for s in t.sources:
        pin = {
            "system": s.path,
            "debian": f"{s.package}={s.version}",
            "pypi": f"{s.package}=={s.version}",
            "archive": f"{s.url} sha256 {s.sha256[:12]}",
            "git": f"{s.url}@{s.ref}",
        }[s.kind]
        print(f"  source {s.name}: {s.kind} {pin}")
    for p in t.patches:
        print(f"  patch {p.op} {dict(p.args)}: {p.why}")
    rp = project.report_path(t.output)
    if rp.exists():
        print("  report: " + project.shown(rp))
        text = rp.read_text()
        m = re.search(r"## emitted\n(.*?)\n\n", text, re.S)
        if m:
            print("  " + m.group(1).replace("\n", "\n  "))
    return 0


def shadowing_warnings(targets: list[Target], project: Project) -> list[str]:
    """A warning for each top-level name under the output root that is also a standard Python
    module (a group `zlib`): where the output root is on sys.path, `import zlib` finds the
    bindings instead."""
    tops = sorted({t.output.split("/", 1)[0].removesuffix(".py") for t in targets})
    return [
        f"  warning: {project.shown(project.out / top)} is named like Python's standard module "
        f"{top}: wherever {project.shown(project.out)} is on sys.path, `import {top}` finds the "
        "bindings instead; rename the group (or give its targets another `output`)"
        for top in tops
        if top in sys.stdlib_module_names
    ]


def cmd_regen(
    targets: list[Target],
    project: Project,
    overrides: dict[str, Path],
    cache: str | None,
    jobs: int,
    skip_unavailable: bool,
    quiet: bool = False,
    verbose: bool = False,
) -> int:
    from .errors import OutputError
    from .outputs import load_manifest, owned, write_target
    from .sources import Sources

    failed = 0
    total = time.perf_counter()
    for line in shadowing_warnings(targets, project):
        print(line, file=sys.stderr, flush=True)
    srcs = Sources(Path(cache) if cache else None, overrides)
    unavailable = _resolve_all(targets, srcs, overrides, required=not skip_unavailable)
    if skip_unavailable:
        keep = []
        for t in targets:
            missing = unavailable[t.name]
            if missing:
                print(
                    f"  skip  {t.name}: sources unavailable here ({', '.join(missing)}); "
                    f"committed bindings kept",
                    flush=True,
                )
            else:
                keep.append(t)
        targets = keep
    manifest = load_manifest(project.out)
    for t, g, err in _run(targets, project, srcs, jobs):
        if g is None:  # (err says why)
            failed += 1
            print(f"  FAIL  {t.name}: {err}", file=sys.stderr, flush=True)
            continue
        def stale(rel: str, t: Target = t) -> bool:  # a file this target no longer writes
            return owned(rel, [t.output]) and not rel.endswith("__init__.py")

        try:
            # The manifest is written with the files, as one set: all or nothing.
            changed, _ = write_target(project.out, g.files(), manifest, stale)
        except OSError as e:  # an output root that is a file, a full or read-only disk
            failed += 1
            print(f"  FAIL  {t.name}: cannot write {project.shown(g.output)}: {e.strerror} "
                  f"({e.filename}); nothing of this target was replaced", file=sys.stderr,
                  flush=True)
            continue
        except OutputError as e:
            failed += 1
            print(f"  FAIL  {t.name}: {e}; nothing of this target was written", file=sys.stderr,
                  flush=True)
            continue
        if g.wrappers is not None:  # static inline functions: compile their wrappers here
            from .wrappers import build

            try:
                build(g.wrappers, *g.wrappers_paths)
            except BindgenError as e:
                failed += 1
                print(f"  FAIL  {t.name}: {e}", file=sys.stderr, flush=True)
                continue
        if not quiet:
            print(
                f"  {'wrote' if changed else 'same '} {t.name:<16} {g.seconds * 1000:7.0f} ms  "
                f"{project.shown(g.output)}: {g.counts}; {g.checks} layout checks passed",
                flush=True,
            )
        if verbose:
            skipped = g.report.split("## not emitted", 1)[1].splitlines()[1:]
            for line in skipped[:20]:
                print(f"        not emitted: {line}")
            if len(skipped) > 20:
                print(f"        ... {len(skipped) - 20} more in {project.shown(g.report_path)}")
    print(
        f"regen: {len(targets) - failed} ok, {failed} failed in {time.perf_counter() - total:.2f} s"
    )
    _sources_summary(srcs)
    return 1 if failed else 0


def cmd_pin(
    targets: list[Target], project: Project, cache: str | None, overrides: dict[str, Path]
) -> int:
    """Records in the specs' lock file the sha256 of every file ``targets`` take from debian,
    pypi and git sources: debian and pypi archives are downloaded whole and verified against
    their index (later fetches read only those files), git sources are exported from the
    repository given with ``--source`` and verified against its blob ids. Cache entries are
    then checked against these pins on every use."""
    from .fetch import mb
    from .pins import load_lock, save_lock
    from .sources import Sources
    from .spec import load_all

    srcs = Sources(Path(cache) if cache else None, overrides)
    todo = {s.identity(): s for t in targets for s in t.sources
            if s.kind in ("debian", "pypi", "git")}
    pins = load_lock(project.specs)
    for ident, s in sorted(todo.items()):
        if s.kind == "git":
            pin = _pin_git(srcs, s)
        else:
            with srcs.scratch() as tmp:
                got = srcs.fetch_whole(s, tmp / "x")
            assert got.pin is not None
            pin = got.pin
        pins[ident] = pin
        what = (f"commit {pin.archive_sha256[:16]}..." if s.kind == "git" else
                f"{mb(pin.archive_size)}, sha256 {pin.archive_sha256[:16]}...")
        print(f"  pinned {s.name}: {pin.archive} ({what}): {len(pin.files)} files")
    # Pins of sources no spec declares any more are dropped.
    declared = {s.identity() for t in load_all(project.specs, "") for s in t.sources}
    path = save_lock(project.specs, {k: v for k, v in pins.items() if k in declared})
    print(f"pin: {len(todo)} source(s) pinned in {project.shown(path)}")
    _sources_summary(srcs)
    return 0


def _pin_git(srcs: Sources, s: Source) -> SourcePin:
    """Pins the files of a git source, exported from the repository ``--source`` names (each
    checked against the repository's blob id before its sha256 is recorded)."""
    import dataclasses

    from .pins import Member, SourcePin
    from .sources import _git_blob, env_var, git_commit

    repo = srcs.overrides.get(s.name) or os.environ.get(env_var(s.name))
    if not repo:
        raise _Usage(f"pinning git source {s.name} needs its repository: --source {s.name}=DIR "
                     f"(a checkout or a bare mirror of {s.url})")
    res = srcs.resolve(dataclasses.replace(s, pin=None))  # checked against the repository
    assert res.pins is not None and res.git_blobs
    files = []
    for rel, blob in sorted(res.pins.items()):
        path = res.root / rel
        if _git_blob(path) != blob:
            raise SourceError(f"source {s.name}: {rel} in {res.root} is not git's blob {blob}; "
                              f"delete {res.root} and pin again")
        data = path.read_bytes()
        files.append(Member(rel, hashlib.sha256(data).hexdigest(), len(data), -1))
    commit = git_commit(s, Path(repo))
    return SourcePin(s.identity(), f"git {s.ref}", s.url, commit, 0, -1, 0, tuple(files))


@dataclasses.dataclass
class _Verdict:
    """What ``check`` established about one target (one entry of ``--json``)."""

    target: str
    status: str  # "clean", "drift", "failed", "stale" (a built .static.so), "unverified"
    checked: list[str] = dataclasses.field(default_factory=list)
    not_checked: list[str] = dataclasses.field(default_factory=list)
    unavailable_sources: list[str] = dataclasses.field(default_factory=list)
    detail: str = ""


_FILES_MATCH = "its files hash as bindgen.manifest lists"
_REGENERATED = "regenerated from its spec and headers; output identical"


def cmd_check(
    targets: list[Target],
    all_targets: list[Target],
    project: Project,
    overrides: dict[str, Path],
    cache: str | None,
    jobs: int,
    fast: bool = False,
    allow_unavailable: bool = False,
    as_json: bool = False,
    quiet: bool = False,
    verbose: bool = False,
) -> int:
    """Verifies the committed bindings: every target whose sources are available is
    regenerated and compared byte for byte (``fast``: only where its fingerprint changed). A
    target that cannot be verified (sources unavailable) fails the check unless
    ``allow_unavailable``; ``as_json`` prints what was and was not checked as JSON on stdout."""
    import json

    from .errors import CacheError
    from .fingerprint import inputs_hash
    from .outputs import audit, owned
    from .sources import Sources

    def say(line: str) -> None:  # with --json, stdout carries only the JSON document
        print(line, file=sys.stderr if as_json else sys.stdout, flush=True)

    srcs = Sources(Path(cache) if cache else None, overrides)
    verdicts: dict[str, _Verdict] = {}
    try:
        unavailable = _resolve_all(targets, srcs, overrides, required=False, say=say)
    except CacheError as e:
        say(f"  FAIL  {e}")
        if as_json:
            print(json.dumps({"ok": False, "error": str(e), "targets": []}, indent=1))
        say("check: a cache entry differs from its pins (above); nothing was checked")
        return 1
    problems = audit(project.out, [t.output for t in all_targets])
    for p in problems:
        say(f"  DRIFT {project.shown(project.out)}/{p}")

    def tampered(t: Target) -> bool:
        return any(owned(p.split(":", 1)[0], [t.output]) for p in problems)

    regen = []
    for t in targets:
        missing = unavailable[t.name]
        v = verdicts[t.name] = _Verdict(t.name, "clean", unavailable_sources=missing)
        if tampered(t):
            v.status, v.detail = "drift", "files differ from bindgen.manifest (listed above)"
        else:
            v.checked.append(_FILES_MATCH)
        if missing:
            _check_unavailable(t, project, inputs_hash(t), v, say)
            continue
        why = None if tampered(t) or not fast else _unchanged(t, project, srcs, inputs_hash(t))
        if why is None:
            regen.append(t)
            if verbose:
                say(f"  ..    {t.name}: regenerating")
        else:
            v.checked.append(why)
            v.not_checked.append("module bytes against a regeneration (--fast: the fingerprint "
                                 "is unchanged, so bindgen.manifest vouches for them)")
            if not quiet:
                say(f"  ok    {t.name}: {why}; not regenerated (--fast)")
    for t, g, err in _run(regen, project, srcs, jobs):
        v = verdicts[t.name]
        if g is None:  # (err says why)
            v.status, v.detail = "failed", err or ""
            say(f"  FAIL  {t.name}: {err}")
            continue
        diffs = _diffs(g, project)
        if diffs:
            v.status, v.detail = "drift", "regenerated output differs:\n" + "\n".join(diffs)
            say(f"  DRIFT {t.name}:")
            for d in diffs:
                lines = d.splitlines()
                say(
                    "\n".join(lines[:200])
                    + (f"\n  ... {len(lines) - 200} more diff lines" if len(lines) > 200 else "")
                )
            continue
        v.checked.append(_REGENERATED)
        if not quiet and v.status == "clean":
            say(f"  ok    {t.name}: regenerated output identical ({g.seconds * 1000:.0f} ms)")
    for t in targets:
        if t.wrap_static_fns:
            _check_static(t, project, verdicts[t.name], say)
    stale = [v.target for v in verdicts.values() if v.status == "stale"]
    bad = [v.target for v in verdicts.values() if v.status in ("drift", "failed")]
    blind = [v.target for v in verdicts.values() if v.status == "unverified"]
    ok = not bad and not stale and not problems and (allow_unavailable or not blind)
    if as_json:
        print(json.dumps({
            "ok": ok,
            "allow_unavailable": allow_unavailable,
            "manifest_problems": problems,
            "targets": [dataclasses.asdict(verdicts[t.name]) for t in targets],
        }, indent=1))
    if problems:
        say(f"check: {len(problems)} file(s) under {project.shown(project.out)} differ from "
            "what bindgen wrote (listed above)")
    if bad:
        say(f"check: drift in {len(bad)} target(s): {', '.join(bad)}; run `bindgen regen "
            f"{' '.join(bad)}` and commit the result")
    if stale:
        say(f"check: stale static inline wrappers in {len(stale)} target(s): {', '.join(stale)}; "
            f"run `bindgen build-static {' '.join(stale)}`")
    if blind:
        names = sorted({s for v in verdicts.values() for s in v.unavailable_sources})
        head = "check: NOT verified" if not allow_unavailable else "check: allowed unverified"
        say(f"{head}: {len(blind)} target(s) ({', '.join(blind)}): sources unavailable here "
            f"({', '.join(names)}); only their manifest hashes and fingerprint inputs were "
            "checked" + ("" if allow_unavailable else
                         ". Give the sources (--source NAME=DIR), or pass --allow-unavailable "
                         "where they cannot be had"))
    if ok:
        regenerated = sum(_REGENERATED in v.checked for v in verdicts.values())
        quick = len(targets) - len(blind) - regenerated
        print(f"check: {len(targets)} target(s) clean ({regenerated} verified by regeneration"
              + (f", {quick} by fingerprint only (--fast)" if quick else "")
              + (f", {len(blind)} unverified: sources unavailable" if blind else "") + ")",
              file=sys.stderr if as_json else sys.stdout)
    return 0 if ok else 1


def _check_static(t: Target, project: Project, v: _Verdict, say: _Say) -> None:
    """A built ``.static.so`` beside the module must carry the build id of the committed
    ``.static.c`` for the committed module (``bindgen.wrappers``); none built is no problem."""
    from .wrappers import file_names, stale

    out = project.output(t.output)
    c_name, so_name = file_names(t.output)
    c_path, so_path = out.with_name(c_name), out.with_name(so_name)
    if not c_path.is_file():
        return  # no inline function kept: nothing to build
    if not so_path.exists():
        v.not_checked.append(f"{so_name}: not built here (`bindgen build-static {t.name}`)")
        return
    why = stale(c_path, so_path, out)
    if why is None:
        v.checked.append(f"{so_name} built from {c_name} for this module (build id)")
        return
    if v.status in ("clean", "unverified"):
        v.status, v.detail = "stale", why
    say(f"  STALE {t.name}: {why}")


def cmd_build_static(
    targets: list[Target], project: Project, overrides: dict[str, Path], cache: str | None,
    quiet: bool = False,
) -> int:
    """Compiles the committed ``.static.c`` of each target with ``wrap_static_fns`` into the
    ``.static.so`` beside its module (nothing is regenerated: the headers the C file includes are
    resolved as ``regen`` resolves them). What a wheel build runs before packaging."""
    from .generate import build_inputs
    from .sources import Sources
    from .wrappers import Wrappers, build, build_id, file_names

    wrap = [t for t in targets if t.wrap_static_fns]
    if not wrap:
        print("build-static: no target among these has wrap_static_fns: nothing to build")
        return 0
    srcs = Sources(Path(cache) if cache else None, overrides)
    failed = built = 0
    for t in wrap:
        out = project.output(t.output)
        c_name, so_name = file_names(t.output)
        c_path, so_path = out.with_name(c_name), out.with_name(so_name)
        try:
            if not out.is_file():
                raise BindgenError(f"target {t.name}: {project.shown(out)} is missing: run "
                                   f"`bindgen regen {t.name}` first")
            if not c_path.is_file():
                if not quiet:
                    print(f"  none  {t.name}: keeps no static inline function")
                continue
            m = re.search(r"^# fingerprint: (\w+)", out.read_text()[:4096], re.M)
            if m is None:
                raise BindgenError(f"target {t.name}: {project.shown(out)} records no "
                                   f"fingerprint: run `bindgen regen {t.name}`")
            roots = {s.name: srcs.resolve(s).root for s in t.sources}
            _, dirs, defines, pre = build_inputs(t, roots)
            text = c_path.read_text()
            build(Wrappers(t.name, text, dirs, defines, pre, build_id(text, m.group(1))),
                  c_path, so_path)
        except (BindgenError, SourceError) as e:
            failed += 1
            print(f"  FAIL  {t.name}: {e}", file=sys.stderr, flush=True)
            continue
        built += 1
        if not quiet:
            print(f"  built {t.name}: {project.shown(so_path)}", flush=True)
    print(f"build-static: {built} built, {failed} failed")
    return 1 if failed else 0


def _check_unavailable(t: Target, project: Project, want: str, v: _Verdict, say: _Say) -> None:
    """What can be checked of ``t`` without its sources: the module's recorded inputs hash."""
    out = project.output(t.output)
    v.not_checked += ["headers (sources unavailable)", "module bytes against a regeneration"]
    if not out.exists():
        v.status, v.detail = "drift", f"{project.shown(out)} is missing"
        say(f"  DRIFT {t.name}: {v.detail}")
        return
    m = re.search(r"^# inputs: (\w+)", out.read_text(), re.M)
    if not m or m.group(1) != want:
        v.status = "drift"
        v.detail = (f"spec, templates or generator changed since {project.shown(out)} was "
                    f"written (recorded {m.group(1) if m else 'nothing'}, now {want}); "
                    "regenerate it where its sources are available")
        say(f"  DRIFT {t.name}: {v.detail}")
        return
    v.checked.append("inputs fingerprint (spec entry, templates, generator) as recorded")
    if v.status == "clean":
        v.status = "unverified"
    say(f"  NOT VERIFIED {t.name}: fingerprint of spec+templates+generator and the files' hashes "
        f"match; header drift NOT checked and not regenerated (sources unavailable here: "
        f"{', '.join(v.unavailable_sources)})")


def _diffs(g: Generated, project: Project) -> list[str]:
    diffs = []
    for path, text in g.files():
        old = path.read_text() if path.exists() else ""
        if old != text:
            rel = project.shown(path)
            diffs.append("".join(difflib.unified_diff(
                old.splitlines(True), text.splitlines(True),
                f"a/{rel} (committed)", f"b/{rel} (regenerated)", n=2,
            )))
    return diffs


def _unchanged(t: Target, project: Project, srcs: Sources, inputs: str) -> str | None:
    """Why regenerating ``t`` cannot give other output, or None: the committed module records the
    same inputs hash (spec entry, generator) and its report's headers still hash the same. (A
    header that newly shadows one on the include path is not seen: ``check --full`` regenerates.)
    """
    out, report = project.output(t.output), project.report_path(t.output)
    if not out.is_file() or not report.is_file():
        return None
    m = re.search(r"^# inputs: (\w+)  headers: (\w+)", out.read_text(), re.M)
    if m is None or m.group(1) != inputs:
        return None
    sect = re.search(r"^## headers read \(sha256\)\n(.*?)\n\n", report.read_text(), re.M | re.S)
    if sect is None:
        return None
    roots = {s.name: srcs.resolve(s).root for s in t.sources}
    lines = []
    for row in sect.group(1).splitlines():
        _, _, shown = row.partition("  ")
        name, _, rel = shown.partition(":")
        path = roots[name] / rel if name in roots else None
        if path is None or not path.is_file():
            return None
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        srcs.verify_read(name, rel, digest)
        lines.append(f"{digest} {shown}")
    if hashlib.sha256("\n".join(lines).encode()).hexdigest()[:32] != m.group(2):
        return None
    return (
        f"fingerprint unchanged (spec entry, generator and {len(lines)} headers hash as "
        f"recorded; files as written)"
    )


class _Version(argparse.Action):
    """``--version``, computed only when asked for (importing importlib.metadata is not free)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        print(_version())
        parser.exit()


def _version() -> str:
    """``bindgen VERSION (generator HASH)``: the distribution's version and the hash that goes
    into every fingerprint."""
    from importlib.metadata import PackageNotFoundError, version

    from .fingerprint import generator_hash

    try:
        v = version("gpu-hcq-toolkit")
    except PackageNotFoundError:
        v = "unknown (not installed)"
    return f"bindgen {v} (generator {generator_hash()[:12]})"


def main(argv: list[str] | None = None) -> int:
    """The ``bindgen`` command; returns its exit status."""
    try:
        rc = _main(argv)
        sys.stdout.flush()  # a reader that went away shows here at the latest
        return rc
    except BrokenPipeError:
        # The reader went away (`bindgen list | head`): stop quietly, as cat and ls do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        # Every write is a set renamed into place at the end, and downloads unpack into a
        # scratch folder the next run removes: nothing half-written is left to report.
        print("\nbindgen: interrupted; targets not yet written keep their previous files",
              file=sys.stderr, flush=True)
        return 130


def _main(argv: list[str] | None) -> int:
    ap = argparse.ArgumentParser(prog="bindgen", description=__doc__)
    ap.add_argument("--version", action=_Version, nargs=0, help="print the version and exit")
    ap.add_argument(
        "-q", "--quiet", action="store_true", help="print only problems and each command's summary"
    )
    ap.add_argument(
        "-v", "--verbose", action="store_true", help="also print what each target did not emit"
    )
    ap.add_argument(
        "--specs", default=None, help="specs folder (default: [tool.bindgen] specs of pyproject.toml)"
    )
    ap.add_argument(
        "--out", default=None, help="output root (default: [tool.bindgen] out in pyproject.toml)"
    )
    ap.add_argument(
        "--package",
        default=None,
        help="import name of the output root (default: [tool.bindgen] package, else the folder's)",
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="list targets")
    for name in ("regen", "check"):
        p = sub.add_parser(name, help=f"{name} TARGET|GROUP|all")
        p.add_argument("targets", nargs="*", default=["all"])
        p.add_argument("--jobs", "-j", type=int, default=min(2, os.cpu_count() or 1))
        p.add_argument("--source", action="append", default=[], metavar="NAME=DIR")
        p.add_argument(
            "--cache",
            default=None,
            help="source cache (default ~/.cache/bindgen or $BINDGEN_CACHE)",
        )
        if name == "check":
            p.add_argument(
                "--fast",
                action="store_true",
                help="regenerate only targets whose fingerprint changed (the others' module "
                "bytes are then vouched for by bindgen.manifest alone)",
            )
            p.add_argument(
                "--full", action="store_true",
                help="regenerate every target whose sources are available (the default)",
            )
            p.add_argument(
                "--allow-unavailable",
                action="store_true",
                help="exit 0 even if targets could not be verified because their sources are "
                "unavailable here (they are still listed; their manifest hashes and fingerprint "
                "inputs are checked)",
            )
            p.add_argument(
                "--json", action="store_true",
                help="print what was and was not checked, per target, as JSON on stdout",
            )
        if name == "regen":
            p.add_argument(
                "--skip-unavailable",
                action="store_true",
                help="keep committed bindings of targets whose sources are unavailable",
            )
    p = sub.add_parser(
        "pin", help="pin TARGET|GROUP|all: record the files of debian/pypi/git sources (lock file)"
    )
    p.add_argument("targets", nargs="*", default=["all"])
    p.add_argument("--cache", default=None, help="source cache (default as for regen)")
    p.add_argument("--source", action="append", default=[], metavar="NAME=DIR",
                   help="a git source's repository (checkout or bare mirror) to pin it from")
    p = sub.add_parser(
        "build-static",
        help="build-static TARGET|GROUP|all: compile the committed .static.c of targets with "
        "wrap_static_fns into the .static.so beside the module (before packaging a wheel)",
    )
    p.add_argument("targets", nargs="*", default=["all"])
    p.add_argument("--cache", default=None, help="source cache (default as for regen)")
    p.add_argument("--source", action="append", default=[], metavar="NAME=DIR")
    p = sub.add_parser("show", help="show a target's spec and last report summary")
    p.add_argument("target")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    try:
        from .spec import load_all
    except ModuleNotFoundError as e:
        if e.name not in _GENERATOR_DEPS:
            raise
        print(
            f"bindgen: the generator needs {_GENERATOR_DEPS[e.name]}, which is not installed: "
            f"pip install 'gpu-hcq-toolkit[bindgen]'",
            file=sys.stderr,
        )
        return 2
    try:
        project = load_project(args.specs, args.out, args.package)
        all_targets = load_all(project.specs, project.shown(project.specs))
        if not all_targets:
            print(f"bindgen: no specs (*.yaml) in {project.specs}", file=sys.stderr)
            return 2
        if args.cmd == "list":
            return cmd_list(all_targets, project)
        if args.cmd == "show":
            shown = _targets([args.target], all_targets)
            if len(shown) > 1:
                print(f"{args.target}: {len(shown)} targets")
            for i, t in enumerate(shown):
                if i:
                    print()
                cmd_show(t, project)
            return 0
        targets = _targets(args.targets, all_targets)
        if args.cmd == "pin":
            return cmd_pin(targets, project, args.cache, _overrides(args.source, all_targets))
        overrides = _overrides(args.source, all_targets)
        if args.cmd == "build-static":
            return cmd_build_static(targets, project, overrides, args.cache, args.quiet)
        if args.jobs < 1:
            raise _Usage("--jobs must be at least 1")
        if args.cmd == "regen":
            return cmd_regen(
                targets, project, overrides, args.cache, args.jobs, args.skip_unavailable,
                args.quiet, args.verbose,
            )
        if args.fast and args.full:
            raise _Usage("--fast and --full contradict each other")
        return cmd_check(
            targets, all_targets, project, overrides, args.cache, args.jobs, args.fast,
            args.allow_unavailable, args.json, args.quiet, args.verbose,
        )
    except (_Usage, ProjectError) as e:
        print(f"bindgen: {e}", file=sys.stderr)
        return 2
    except SourceError as e:
        print(f"bindgen: {e}", file=sys.stderr)
        return 1
    except BindgenError as e:
        print(f"bindgen: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
