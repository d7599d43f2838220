#!/usr/bin/env python3
"""bindgen against the whole Linux uapi tree of the pinned kernel, with gcc as the truth.

For every header under the uapi tree of the kernel that bindgen/specs/linux.yaml pins
(linux-source-6.1 6.1.176-1: include/uapi/{linux/**, sound, drm, rdma, misc, mtd, scsi, video,
xen, asm-generic}, plus x86's asm/ from linux-libc-dev of the same release):

1. gcc compiles the header on its own (`-fsyntax-only`, the same include folders bindgen gets); a
   header gcc refuses is listed with gcc's first error and not counted further;
2. bindgen generates a module for it alone (a target whose kept file is that header);
3. one gcc probe program per header compares, through the generated module: size, alignment and
   offset of every record and field; bitfields by byte pattern (written through Python, compared
   with the bytes gcc holds after the same assignment, gcc's bytes read back, negatives included);
   every integer object-like macro and ioctl number (in its own C type); a few integer inputs of
   every translated function-like macro.

It prints per-header counts and a total (generation time included), writes a JSON report, and
counts everything not emitted by the kind of its reason. `--tinygrad DIR` runs tinygrad's autogen
on the same headers side by side (reference only, from a checkout made with the session's fetch
tool) and scores its output against the same gcc answers.

The raw uapi tree is what `make headers_install` reads; its sed rules (scripts/headers_install.sh)
are reproduced without copying the tree: `__user`, `__force`, `__iomem`, `__attribute_const__`
are defined away, `__packed` becomes `__attribute__((packed))`, and <linux/compiler.h> /
<linux/compiler_types.h> resolve to empty files.

    .venv/bin/python scripts/uapi_sweep.py --jobs 2            # the whole tree (~5 min on 2 cores)
    .venv/bin/python scripts/uapi_sweep.py --only 'linux/bpf*'  # a few headers
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import multiprocessing
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bindgen import ir  # noqa: E402
from bindgen.gcc_probe import compare, module_checks, run_probe  # noqa: E402
from bindgen.spec import MacroRules, Source, SourcePath, Target, load_spec  # noqa: E402

UAPI_DIRS = (
    "linux",
    "sound",
    "drm",
    "rdma",
    "misc",
    "mtd",
    "scsi",
    "video",
    "xen",
    "asm-generic",
)
UAPI = "include/uapi"
ASM = "usr/include/x86_64-linux-gnu"  # in libc-dev: x86's asm/ after headers_install

# scripts/headers_install.sh's rewrites, as definitions (the files themselves stay pinned bytes).
INSTALL_DEFINES = (
    "-D__user=",
    "-D__force=",
    "-D__iomem=",
    "-D__attribute_const__=",
    "-D__packed=__attribute__((packed))",
)
SHIM_FILES = ("linux/compiler.h", "linux/compiler_types.h")  # removed by headers_install
GCC_INCLUDE = "/usr/lib/gcc/x86_64-linux-gnu/12/include"  # stddef.h, stdint.h: libgcc-12-dev


@dataclass(frozen=True)
class Env:
    """Where the headers come from, and the include folders bindgen and gcc both get."""

    sources: tuple[Source, ...]
    include_dirs: tuple[SourcePath, ...]
    roots: dict[str, str]  # source name -> resolved folder

    def include_flags(self) -> list[str]:
        return [f"-I{Path(self.roots[i.source]) / i.path}" for i in self.include_dirs]

    def cflags(self) -> list[str]:
        return ["-nostdinc", *INSTALL_DEFINES, *self.include_flags()]


def make_env(workdir: Path, cache: Path | None = None) -> Env:
    """Resolves linux.yaml's two sources (cache or apt) and writes the headers_install shim."""
    from bindgen.project import load_project
    from bindgen.sources import Sources

    specs = load_project(cwd=REPO).specs
    spec = load_spec(specs / "linux.yaml", specs)
    by_name = {s.name: s for t in spec.targets for s in t.sources}
    shim = workdir / "headers_install_shim"
    for f in SHIM_FILES:
        (shim / f).parent.mkdir(parents=True, exist_ok=True)
        (shim / f).write_text("/* emptied by headers_install (scripts/headers_install.sh) */\n")
    sources = (
        by_name["linux-src"],
        by_name["libc-dev"],
        Source("shim", "system", path=str(shim), line=0),
        Source("gcc", "system", path=GCC_INCLUDE, package="libgcc-12-dev"),
        Source("glibc", "system", path="/usr/include", package="libc6-dev"),
    )
    res = Sources(cache)
    roots = {s.name: str(res.resolve(s).root) for s in sources}
    include_dirs = (
        SourcePath("shim", ""),
        SourcePath("linux-src", UAPI),
        SourcePath("libc-dev", ASM),
        SourcePath("gcc", ""),
        SourcePath("glibc", "x86_64-linux-gnu"),
        SourcePath("glibc", ""),
    )
    return Env(sources, include_dirs, roots)


def list_headers(env: Env) -> list[SourcePath]:
    """Every swept header, in name order: the uapi folders, then x86's asm/."""
    out = []
    uapi = Path(env.roots["linux-src"]) / UAPI
    for d in UAPI_DIRS:
        for p in sorted((uapi / d).rglob("*.h")):
            out.append(SourcePath("linux-src", str(p.relative_to(env.roots["linux-src"]))))
    asm = Path(env.roots["libc-dev"]) / ASM / "asm"
    for p in sorted(asm.glob("*.h")):
        out.append(SourcePath("libc-dev", str(p.relative_to(env.roots["libc-dev"]))))
    return out


def short(h: SourcePath) -> str:
    """linux/bpf.h, asm/kvm.h: the name a user includes."""
    return h.path.split(f"{UAPI}/", 1)[-1].split(f"{ASM}/", 1)[-1]


def target_for(env: Env, h: SourcePath) -> Target:
    name = "uapi_" + re.sub(r"\W", "_", short(h)[:-2])
    return Target(
        name=name,
        group="uapi",
        spec_file="linux.yaml",  # only hashed into the fingerprint; nothing is written
        output=f"uapi/{name}.py",
        headers=(h,),
        include_dirs=env.include_dirs,
        preinclude=(),
        clang_args=INSTALL_DEFINES,
        language="c",
        keep_files=(str(h),),
        keep_names=(),
        exclude_names=(),
        macros=MacroRules(),
        libraries=(),
        patches=(),
        lazy=False,
        sources=env.sources,
    )


# ---------------------------------------------------------------- one header


@dataclass
class HeaderResult:
    header: str
    status: str  # ok | mismatch | not-standalone | generate-failed | probe-error
    detail: str = ""
    gen_s: float = 0.0
    probe_s: float = 0.0
    emitted: dict[str, int] = field(default_factory=dict)
    checks: dict[str, int] = field(default_factory=dict)  # passing checks by kind
    mismatches: list[str] = field(default_factory=list)
    unprobed: list[tuple[str, str]] = field(default_factory=list)  # (check, gcc's reason)
    skipped: list[tuple[str, str, str, str]] = field(default_factory=list)  # what,name,kind,why
    hardness: int = 0
    truth: dict[str, Any] = field(default_factory=dict)  # for scoring peers: gcc's answers


def gcc_standalone(env: Env, h: SourcePath) -> str | None:
    """gcc's first error when the header does not compile on its own, else None."""
    path = Path(env.roots[h.source]) / h.path
    r = subprocess.run(
        ["gcc", "-fsyntax-only", "-std=gnu11", *env.cflags(), "-x", "c", "-include",
         str(path), "/dev/null"],
        capture_output=True,
        text=True,
    )
    if r.returncode == 0:
        return None
    first = next((ln for ln in r.stderr.splitlines() if "error" in ln), r.stderr.strip())
    for name, root in env.roots.items():
        first = first.replace(root.rstrip("/") + "/", f"{name}:")
    return first.strip()


def reason_kind(reason: str) -> str:
    """A skip reason without its particulars (names, numbers, locations), for counting."""
    r = re.sub(r"\S+\.h:\d+:?\s*", "", reason)
    r = re.sub(r"'[^']*'|\"[^\"]*\"|`[^`]*`", "'…'", r)
    r = re.sub(r"\b(?:field|record|macro|type|typedef|uses record|references undefined)"
               r"\s+[A-Za-z_][\w.]*", lambda m: m.group(0).split()[0] + " …", r)
    r = re.sub(r"\b0x[0-9a-fA-F]+\b|\b\d+\b", "N", r)
    r = re.sub(r"\b(struct|union|enum) [A-Za-z_]\w*", r"\1 …", r)
    r = re.sub(r"\b(?=\w*[_\d])[A-Za-z_]\w*\b", "…", r)  # identifiers: have _ or digits
    r = re.sub(r"…(\s*…)+", "…", r)
    return r.strip()[:120]


def hardness(m: ir.Module, checks: dict[str, int]) -> int:
    """How much of bindgen's hard ground a header covers: bitfields, anonymous members, packed
    and over-aligned records, function-like macros."""
    score = 0
    for rec in m.records:
        score += 1
        score += 10 * rec.packed + 5 * ((rec.align or 0) > 8)
        for f in rec.fields:
            score += 6 * (f.bit_width is not None) + 4 * f.anonymous
    return score + 2 * checks.get("macro_fn", 0) + len(m.constants) // 10


def sweep_header(env: Env, h: SourcePath, workdir: Path, probe: bool = True) -> HeaderResult:
    from bindgen.errors import BindgenError
    from bindgen.generate import generate
    from bindgen.layout import load_module_text
    from bindgen.project import load_project
    from bindgen.sources import Sources

    res = HeaderResult(short(h), "ok")
    err = gcc_standalone(env, h)
    if err is not None:
        res.status, res.detail = "not-standalone", err
        return res
    t = target_for(env, h)
    overrides = {s.name: Path(env.roots[s.name]) for s in env.sources}
    start = time.perf_counter()
    try:
        g = generate(t, Sources(overrides=overrides), load_project(cwd=REPO))
    except BindgenError as e:
        res.status, res.detail = "generate-failed", str(e)
        res.gen_s = time.perf_counter() - start
        return res
    res.gen_s = time.perf_counter() - start
    m = g.module
    assert m is not None  # generate() always attaches its IR
    res.emitted = {attr: len(items) for attr, _, items in m.declaration_lists() if items}
    res.skipped = [(s.what, s.name, reason_kind(s.reason), s.reason) for s in m.skipped]
    if not probe:
        return res
    mod = load_module_text(g.text, f"uapi_sweep.{t.name}")
    checks = module_checks(mod, m)
    start = time.perf_counter()
    result = run_probe(
        # Headers that use _IO() without including what defines it (sound/asound.h) give ioctl
        # numbers to users who include it as well, as C users do.
        # stddef.h: macros that name size_t compile for any C user who has it.
        [str(Path(env.roots[h.source]) / h.path), "<linux/ioctl.h>", "<stddef.h>"],
        checks,
        workdir / t.name,
        env.cflags(),
        stem=t.name,
    )
    res.probe_s = time.perf_counter() - start
    if result.error:
        res.status, res.detail = "probe-error", result.error
        return res
    res.unprobed = [(checks[i].key, why) for i, why in sorted(result.unprobed.items())]
    live = [c for i, c in enumerate(checks) if i not in result.unprobed]
    res.mismatches = compare(live, result.gcc)
    bad_keys = {b.split(": ", 1)[0] for b in res.mismatches}
    res.checks = dict(Counter(c.kind for c in live if c.key not in bad_keys))
    res.hardness = hardness(m, res.checks)
    res.truth = result.gcc
    if res.mismatches:
        res.status = "mismatch"
    return res


# ---------------------------------------------------------------- the run


_ENV: Env | None = None
_WORK: Path | None = None
_PROBE = True


def _init(env: Env, work: Path, probe: bool) -> None:
    global _ENV, _WORK, _PROBE  # one per worker process, set once by the pool
    _ENV, _WORK, _PROBE = env, work, probe


def _one(h: SourcePath) -> HeaderResult:
    assert _ENV is not None and _WORK is not None
    try:
        return sweep_header(_ENV, h, _WORK, _PROBE)
    except Exception as e:  # a crash of the sweep itself is reported per header, never hidden
        return HeaderResult(short(h), "generate-failed", f"{type(e).__name__}: {e}")


def run_sweep(
    env: Env, headers: list[SourcePath], jobs: int, work: Path, probe: bool = True
) -> list[HeaderResult]:
    """Every header through :func:`sweep_header`, in ``jobs`` worker processes."""
    if jobs <= 1:
        _init(env, work, probe)
        return [_one(h) for h in headers]
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(jobs, initializer=_init, initargs=(env, work, probe)) as pool:
        return list(pool.imap(_one, headers, chunksize=4))


def summarize(results: list[HeaderResult], wall: float) -> dict[str, Any]:
    status = Counter(r.status for r in results)
    standalone = [r for r in results if r.status != "not-standalone"]
    generated = [r for r in standalone if r.status not in ("generate-failed",)]
    checks: Counter[str] = Counter()
    for r in results:
        checks.update(r.checks)
    skip_kinds: Counter[str] = Counter()
    for r in results:
        skip_kinds.update(f"{what}: {kind}" for what, _, kind, _ in r.skipped)
    unprobed_kinds: Counter[str] = Counter()
    for r in results:
        unprobed_kinds.update(reason_kind(why) for _, why in r.unprobed)
    return {
        "headers": len(results),
        "standalone": len(standalone),
        "generated": len(generated),
        "status": dict(status),
        "mismatches": sum(len(r.mismatches) for r in results),
        "checks_passed": dict(checks),
        "checks_total": sum(checks.values()),
        "unprobed": sum(len(r.unprobed) for r in results),
        "unprobed_kinds": dict(unprobed_kinds.most_common()),
        "skipped": sum(len(r.skipped) for r in results),
        "skipped_kinds": dict(skip_kinds.most_common()),
        "generation_s": round(sum(r.gen_s for r in results), 2),
        "probe_s": round(sum(r.probe_s for r in results), 2),
        "wall_s": round(wall, 1),
        "gen_s_per_20_headers": round(20 * sum(r.gen_s for r in generated) / max(1, len(generated)), 3),
    }


def print_table(results: list[HeaderResult], total: dict[str, Any]) -> None:
    print(f"{'header':42} {'status':15} {'gen ms':>7} {'recs':>5} {'consts':>6} {'mfns':>5} "
          f"{'checks':>7} {'bad':>4} {'unprobed':>8} {'skipped':>7}")
    for r in results:
        print(
            f"{r.header:42} {r.status:15} {r.gen_s * 1000:7.0f} "
            f"{r.emitted.get('records', 0):5} {r.emitted.get('constants', 0):6} "
            f"{r.emitted.get('macro_functions', 0):5} {sum(r.checks.values()):7} "
            f"{len(r.mismatches):4} {len(r.unprobed):8} {len(r.skipped):7}"
        )
        for line in r.mismatches[:5]:
            print(f"    MISMATCH {line}")
        if r.detail and r.status != "ok":
            print(f"    {r.detail.splitlines()[0][:200]}")
    print()
    print(f"headers: {total['headers']}, gcc-standalone: {total['standalone']}, generated: "
          f"{total['generated']} ({100 * total['generated'] / max(1, total['standalone']):.1f}%)")
    print(f"checks passed: {total['checks_total']} {total['checks_passed']}")
    print(f"mismatches: {total['mismatches']}; set aside (gcc rejects the probe expression): "
          f"{total['unprobed']}")
    print(f"status: {total['status']}")
    print(f"not emitted: {total['skipped']}, by kind of reason:")
    for kind, n in total["skipped_kinds"].items():
        print(f"  {n:6}  {kind}")
    print("set aside, by gcc's reason:")
    for kind, n in list(total["unprobed_kinds"].items())[:15]:
        print(f"  {n:6}  {kind}")
    print(f"generation: {total['generation_s']} s in all ({total['gen_s_per_20_headers']} s per "
          f"20 headers, in-process, one core); probes {total['probe_s']} s; wall {total['wall_s']} s")


def print_peer(total: dict[str, Any], ours: dict[str, Any], tg: dict[str, Any]) -> None:
    def pct(a: int, b: int) -> str:
        return f"{a}/{b} ({100 * a / max(1, b):.1f}%)"

    print("\n| | bindgen | tinygrad autogen |")
    print("|---|---|---|")
    print(f"| headers generated (of {total['standalone']} gcc-standalone) | "
          f"{total['generated']} | {tg['generated']} of the {tg['headers']} bindgen generated |")
    print(f"| records matching gcc (size, offsets, bitfields) | "
          f"{pct(ours['records_ok'], ours['records'])} | "
          f"{pct(tg['records_ok'], tg['records'])} |")
    print(f"| record alignment as gcc's | (checked above) | {pct(tg['align_ok'], tg['records'])} |")
    print(f"| macros matching gcc (integer, ioctl, function-like at probe inputs) | "
          f"{pct(ours['macros_ok'], ours['macros'])} | {pct(tg['macros_ok'], tg['macros'])} |")
    print(f"| generation time, all headers (s, in-process) | {total['generation_s']} | "
          f"{tg['gen_s']} |")
    print(f"tinygrad errors by kind: {tg['errors_by_kind']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--only", action="append", default=[], help="glob over linux/bpf.h-style names")
    ap.add_argument("--out", type=Path, default=REPO / "bench_out" / "uapi_sweep.json")
    ap.add_argument("--cache", type=Path, default=None, help="bindgen source cache")
    ap.add_argument("--tinygrad", type=Path, default=None,
                    help="a tinygrad checkout: run its autogen on the same headers, side by side")
    ap.add_argument("--gen-only", action="store_true",
                    help="generate only (no gcc probes): for timing generation on its own")
    ap.add_argument("--sample", type=int, default=0,
                    help="print the N hardest fully passing headers (for the CI sample)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="uapi_sweep_") as tmp:
        work = Path(tmp)
        env = make_env(work, args.cache)
        headers = list_headers(env)
        if args.only:
            headers = [h for h in headers if any(fnmatch.fnmatch(short(h), g) for g in args.only)]
        start = time.perf_counter()
        results = run_sweep(env, headers, max(1, args.jobs), work, not args.gen_only)
        total = summarize(results, time.perf_counter() - start)
        print_table(results, total)
        report: dict[str, Any] = {"total": total, "headers": [
            {k: v for k, v in vars(r).items() if k != "truth"} for r in results]}
        if args.tinygrad:
            # scripts/, beside this file
            from uapi_peer_tinygrad import ours_on_the_same_scale, score_tinygrad

            start = time.perf_counter()
            tg = score_tinygrad(args.tinygrad.resolve(), env, headers, results, work, args.jobs)
            tg["total"]["wall_s"] = round(time.perf_counter() - start, 1)
            report["tinygrad"] = tg
            report["ours_scored_like_tinygrad"] = ours = ours_on_the_same_scale(results)
            print_peer(total, ours, tg["total"])
        if args.sample:
            ok = sorted((r for r in results if r.status == "ok"), key=lambda r: -r.hardness)
            print(f"\nhardest {args.sample}:", " ".join(r.header for r in ok[: args.sample]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, default=str))
    print(f"JSON: {args.out}")
    ok = total["generated"] == total["standalone"] and total["mismatches"] == 0
    if not args.gen_only:
        ok = ok and total["status"].get("probe-error", 0) == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
