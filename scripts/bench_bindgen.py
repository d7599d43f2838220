#!/usr/bin/env python3
"""Benchmarks bindgen against its peers in one run; prints a table and writes JSON.

What is measured (docs/benchmarks.md has the method and the latest figures):

1. ``python -m bindgen regen GROUP --cache DIR --jobs 2`` and ``--jobs 1`` for each group
   (linux, amd, nv): cold (a fresh, empty cache: the sources are first resolved into it and that
   download/unpack is timed on its own, then generation is timed), warm (cache populated, the
   group's outputs removed so every file is written) and no-op (outputs already identical). Always
   on a temporary copy of ``bindgen/``, ``generated/`` and ``pyproject.toml``: the working tree is
   never written.
2. ``python -X importtime -c "import X"`` for every generated module, ``bindgen_rt`` and
   ``ctypes``: self and cumulative, median of N fresh interpreters, (a) with bytecode caches
   (compileall into a temporary copy) and (b) without (``PYTHONDONTWRITEBYTECODE=1``, no caches).
   The interpreter is a clean virtual environment (``--without-pip``, so no ``.pth`` of this
   machine preloads typing, re or enum and hides their cost). Lazy modules: the first attribute
   access and ``__materialize_all__``.
3. Peers from PyPI, each in its own virtual environment under the cache folder: tinygrad 0.14.0
   autogen (its ``gen`` called with our header lists and include arguments), ctypeslib2 2.4.0
   (``clang2py``), ctypesgen 1.1.1, on the very headers our specs resolve: generation time, import
   time of their output (same interpreter, same two bytecode modes), and cheap spot checks against
   our modules (whose layouts are verified against clang when generated). Comparisons run in
   rounds: each round generates (or imports) once with every tool in turn, so whatever the
   machine's load does, it does to all of them alike; figures are medians with their quartiles.
   tinygrad's shipped modules for the same headers are imported in the same rounds.
4. With ``--baseline REF``: ``bindgen_rt/`` and ``generated/`` of that commit are imported in the
   same rounds as ours (peer targets, and import plus first use of every name the NVIDIA driver
   spells), so a before/after comparison comes from one run.
5. PASS/FAIL lines for the targets in the issues, and ratios ours vs each peer.

Usage: python scripts/bench_bindgen.py [--quick] [--no-peers] [--baseline REF] [--out FILE]
[--groups linux,amd,nv]. Every subprocess runs with a timeout; failures are reported in the table,
never as a traceback.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "bench_out" / "bench_bindgen.json"
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bindgen-bench"
GROUPS = ("linux", "amd", "nv")
NV_SOURCES = {  # environment variable -> default mirror on this machine
    "BINDGEN_SOURCE_OGKM_580": "/work/.mirror/NVIDIA+open-gpu-kernel-modules/repo",
    "BINDGEN_SOURCE_OGD": "/work/.mirror/NVIDIA+open-gpu-doc/repo",
}
# name -> pinned PyPI requirements (ctypeslib2 needs clang bindings matching Debian's libclang 16)
PEERS = {
    "tinygrad": ["tinygrad==0.14.0"],
    "ctypeslib2": ["ctypeslib2==2.4.0", "clang==16.0.6"],
    "ctypesgen": ["ctypesgen==1.1.1"],
}
# which of our targets each peer is run on (ctypeslib2 crashes on the NV set: guide §2)
PEER_TARGETS = {
    "tinygrad": ("kfd_ioctl", "amdgpu_drm", "vfio", "pci_regs", "rm_580"),
    "ctypeslib2": ("kfd_ioctl", "amdgpu_drm", "vfio", "pci_regs"),
    "ctypesgen": ("kfd_ioctl", "amdgpu_drm", "vfio", "pci_regs", "rm_580"),
}
# tinygrad's own modules for the same headers, as shipped in its wheel (compiled by pip at install,
# so measured with bytecode only)
TINYGRAD_SHIPPED = {
    "kfd_ioctl": "tinygrad.runtime.autogen.kfd",
    "amdgpu_drm": "tinygrad.runtime.autogen.amdgpu_drm",
    "vfio": "tinygrad.runtime.autogen.vfio",
    "pci_regs": "tinygrad.runtime.autogen.pci",
    "rm_580": "tinygrad.runtime.autogen.nv_580",
}
# tinygrad's own rules for its nv_5xx targets (autogen/__init__.py): NV bit ranges -> tuples.
TINYGRAD_NV_RULES = [[r"MW\(([^:]+):(.+)\)", r"(\1, \2)"], [r"(\d+):(\d+)", r"(\1, \2)"]]
LAZY_ATTR = {
    "rm_580": "NVOS21_PARAMETERS",
    "classes": "Nvc56fControl_struct",
    "gc_11_0_0": "regCOMPUTE_PGM_LO",
}
# Spot checks: names whose value (sizeof for records, value for constants) must equal ours.
SPOT = {
    "kfd_ioctl": [
        "kfd_ioctl_svm_args",
        "kfd_ioctl_create_queue_args",
        "kfd_ioctl_criu_args",
        "kfd_ioctl_set_xnack_mode_args",
        "KFD_IOCTL_SVM_FLAG_HOST_ACCESS",
    ],
    "vfio": [
        "vfio_irq_set",
        "vfio_pci_hot_reset_info",
        "vfio_region_info",
        "vfio_iommu_type1_dma_map",
        "VFIO_IRQ_SET_DATA_EVENTFD",
    ],
    "amdgpu_drm": [
        "drm_amdgpu_gem_create",
        "drm_amdgpu_cs_chunk_fence",
        "drm_version",
        "drm_amdgpu_info",
        "AMDGPU_GEM_DOMAIN_VRAM",
    ],
    "pci_regs": [
        "PCI_CAP_ID_EXP",
        "PCI_EXP_DEVCTL_READRQ",
        "PCI_STD_HEADER_SIZEOF",
        "PCI_EXP_LNKSTA_CLS",
    ],
    "rm_580": [
        "NVOS21_PARAMETERS",
        "NVOS54_PARAMETERS",
        "NVOS64_PARAMETERS",
        "NVC56F_SEM_EXECUTE_OPERATION",
        "NV2080_CTRL_CMD_GPU_GET_INFO_V2",
        "NV_ERR_INVALID_ARGUMENT",
    ],
}
# Synthetic cases the real headers lack (no octal literal, no bitfield in the linux/rm_580 sets):
# octal macros, packed mixed-type bitfields, signed and zero-width bitfields, a flexible array.
# gcc is the truth (TRICKY_PROBE); every tool's module is probed the same way (TRICKY_SCRIPT).
TRICKY_H = """\
#define BENCH_OCT_MODE 0755
#define BENCH_S_IFMT 00170000
struct bench_packed {
    unsigned char a : 3;
    unsigned int b : 20;
    unsigned short c : 9;
    unsigned long long d : 40;
} __attribute__((packed));
struct bench_signed {
    int s : 5;
    unsigned int u : 3;
    int : 0;
    _Bool f : 1;
    int neg : 4;
};
struct bench_fam {
    unsigned int n;
    unsigned long long data[];
};
"""
# (struct, field, value written into a zeroed object); the bytes after the write are compared
TRICKY_FIELDS = [
    ("bench_packed", "a", 7),
    ("bench_packed", "b", 0xFFFFF),
    ("bench_packed", "c", 0x1FF),
    ("bench_packed", "d", 0xFFFFFFFFFF),
    ("bench_signed", "s", 0x1F),
    ("bench_signed", "f", 1),
    ("bench_signed", "neg", 0xF),
]
TRICKY_PROBE = """\
#include <stdio.h>
#include <string.h>
#include "tricky.h"
#define SIZE(T) printf("sizeof %s %zu\\n", #T, sizeof(struct T));
#define BYTES(T, F, V) { struct T x; memset(&x, 0, sizeof x); x.F = V; \\
    const unsigned char *p = (const unsigned char *)&x; printf("bytes %s.%s ", #T, #F); \\
    for (size_t i = 0; i < sizeof x; i++) printf("%02x", p[i]); printf("\\n"); }
int main(void) {
    SIZE(bench_packed) SIZE(bench_signed) SIZE(bench_fam)
@BYTES@
    { struct bench_signed y; memset(&y, 0, sizeof y); y.s = -3; y.neg = -8;
      printf("read bench_signed.s %d\\nread bench_signed.neg %d\\n", y.s, y.neg); }
    printf("macro BENCH_OCT_MODE %d\\nmacro BENCH_S_IFMT %d\\n", BENCH_OCT_MODE, BENCH_S_IFMT);
    return 0;
}
"""
TRICKY_SPEC = """\
# written by scripts/bench_bindgen.py into a temporary copy only
group: bench
sources:
  tricky: {kind: system, path: "%(dir)s", package: none}
targets:
  bench_tricky:
    output: bench/bench_tricky.py
    headers: ["tricky:tricky.h"]
"""
# Record operations, ours against plain ctypes (a ctypes.Structure with ctypes bitfields), in a
# fresh interpreter: ns per operation, best of 5 rounds.
RECORD_PROBE = r"""
import ctypes, json, timeit
import bindgen_rt as rt
class Ours(rt.Struct):
    __slots__ = ()  # as generated records declare
Ours._layout_(16, 8, [("a", ctypes.c_uint32, 0), ("b", ctypes.c_uint32, 32, 5, False),
                      ("c", ctypes.c_uint32, 37, 11, True), ("d", ctypes.c_uint64, 64)])
class Plain(ctypes.Structure):
    _fields_ = [("a", ctypes.c_uint32), ("b", ctypes.c_uint32, 5), ("c", ctypes.c_int32, 11),
                ("d", ctypes.c_uint64)]
o, p = Ours(), Plain()
def ns(stmt):
    n = 100000
    return min(timeit.repeat(stmt, globals=globals(), number=n, repeat=5)) / n * 1e9
out = {}
for label, stmt in (("bitfield write", "{}.b = 7"), ("bitfield read", "{}.b"),
                    ("signed bitfield read", "{}.c"), ("field write", "{}.a = 7"),
                    ("construct from 4 keywords", "{}(a=1, b=2, c=3, d=4)")):
    if label.startswith("construct"):
        out[label] = {"ours": ns(stmt.format("Ours")), "ctypes": ns(stmt.format("Plain"))}
    else:
        out[label] = {"ours": ns(stmt.format("o")), "ctypes": ns(stmt.format("p"))}
print(json.dumps(out))
"""

PASS_TARGETS = {  # from the issues
    "linux_warm_regen_s": 1.0,
    "linux_import_bc_ms": 3.0,
    "linux_import_nobc_ms": 15.0,
    "nv_regen_s": 3.0,
    "nv_import_bc_ms": 10.0,
    "nv_import_nobc_ms": 30.0,
    "amd_import_ms": 10.0,
    "kfd_ioctl_import_bc_ms": 3.0,  # an eager module
    "rm_580_import_bc_ms": 10.0,  # a lazy module
    "record_ops_vs_ctypes": 1.5,  # bitfields and construction within 1.5x of ctypes
}


# ---------------------------------------------------------------- subprocesses


@dataclass
class Proc:
    cmd: list[str]
    rc: int | None
    out: str
    err: str
    seconds: float
    error: str | None = None  # timeout / could not start / non-zero exit, one line

    @property
    def ok(self) -> bool:
        return self.error is None


def run(
    cmd: list[str],
    *,
    timeout: float,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    check: bool = True,
) -> Proc:
    """Runs ``cmd`` with a timeout; never raises. ``check``: a non-zero exit is an error."""
    start = time.perf_counter()
    try:
        r = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd, errors="replace"
        )
    except subprocess.TimeoutExpired as e:

        def s(x: Any) -> str:
            return x.decode(errors="replace") if isinstance(x, bytes) else (x or "")

        return Proc(
            cmd,
            None,
            s(e.stdout),
            s(e.stderr),
            time.perf_counter() - start,
            f"timed out after {timeout:.0f} s",
        )
    except OSError as e:
        return Proc(cmd, None, "", "", time.perf_counter() - start, f"cannot run {cmd[0]}: {e}")
    p = Proc(cmd, r.returncode, r.stdout, r.stderr, time.perf_counter() - start)
    if check and r.returncode:
        text = r.stderr.strip() or r.stdout.strip()
        lines = [t.strip() for t in text.splitlines() if t.strip()]
        tail = lines[-1:] if "Traceback (most recent call last)" in text else lines[-3:]
        p.error = f"exit {r.returncode}: " + " | ".join(tail)[:400]
    return p


def median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def quartiles(xs: list[float]) -> dict[str, Any]:
    """Median, quartiles and range of repeated timings: on a loaded machine one run can be off by
    2x, so comparisons use medians and every figure is printed with its spread."""
    if not xs:
        return {}
    ys = sorted(xs)
    q = statistics.quantiles(ys, n=4, method="inclusive") if len(ys) > 1 else [ys[0]] * 3
    return {"median": statistics.median(ys), "q1": q[0], "q3": q[2], "min": ys[0],
            "max": ys[-1], "n": len(ys)}


def fmt_quartiles(st: dict | None, nd: int = 2) -> str:
    """``median [q1–q3]`` of ``quartiles``."""
    if not st or st.get("median") is None:
        return "-"
    return f"{st['median']:.{nd}f} [{st['q1']:.{nd}f}–{st['q3']:.{nd}f}]"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def base_env(**extra: str | None) -> dict[str, str]:
    """This process's environment without anything that changes how Python imports, plus ``extra``
    (None removes a variable)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "PYTHONPATH",
            "PYTHONPYCACHEPREFIX",
            "PYTHONSTARTUP",
            "PYTHONHOME",
            "PYTHONNOUSERSITE",
            "PYTHONSAFEPATH",
            "PYTHONPROFILEIMPORTTIME",
        )
    }
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


# ---------------------------------------------------------------- helper run inside the repo copy

HELPER = textwrap.dedent(r"""
    import json, sys, time
    from pathlib import Path
    out = {}
    try:
        from bindgen.errors import BindgenError
        from bindgen.sources import Sources
        from bindgen.project import load_project
        from bindgen.spec import load_all
        cmd = sys.argv[1]
        targets = load_all(load_project().specs)
        if cmd == "info":
            out["targets"] = [{"name": t.name, "group": t.group, "output": t.output, "lazy": t.lazy,
                               "sources": [s.name for s in t.sources]} for t in targets]
        else:  # resolve CACHE GROUP: resolve (fetch) every source of the group, then give paths
            cache, group = Path(sys.argv[2]), sys.argv[3]
            srcs = Sources(cache, {})
            tg = [t for t in targets if t.group == group]
            timing, roots = {}, {}
            start = time.perf_counter()
            for t in tg:
                for s in t.sources:
                    if s.name in timing:
                        continue
                    t0 = time.perf_counter()
                    try:
                        r = srcs.resolve(s)
                        roots[s.name] = r.root
                        timing[s.name] = {"kind": s.kind, "seconds": time.perf_counter() - t0,
                                          "how": r.how.split(" ")[0]}
                    except BindgenError as e:
                        timing[s.name] = {"kind": s.kind, "seconds": time.perf_counter() - t0,
                                          "error": str(e)}
            out["sources"], out["seconds"] = timing, time.perf_counter() - start
            details = {}
            for t in tg:
                if any(s.name not in roots for s in t.sources):
                    continue
                hs = []
                for h in t.headers:
                    base = roots[h.source]
                    if "*" in h.path:
                        hs += sorted(str(p) for p in base.glob(h.path) if p.is_file())
                    else:
                        hs.append(str(base / h.path))
                details[t.name] = {
                    "headers": hs, "language": t.language, "clang_args": list(t.clang_args),
                    "include_dirs": [str(roots[i.source] / i.path) for i in t.include_dirs],
                    "preinclude": [str(roots[p.source] / p.path) for p in t.preinclude]}
            out["targets"] = details
    except Exception as e:  # reported by the caller
        out["error"] = f"{type(e).__name__}: {e}"
    print("@@JSON@@" + json.dumps(out))
""")


def helper(copy: Path, env: dict[str, str], args: list[str], timeout: float) -> tuple[dict, Proc]:
    p = run([sys.executable, "-c", HELPER, *args], timeout=timeout, env=env, cwd=copy, check=False)
    m = re.search(r"^@@JSON@@(.*)$", p.out, re.M)
    if not m:
        return {"error": p.error or f"helper printed no result: {(p.err or p.out)[-300:]}"}, p
    data = json.loads(m.group(1))
    return data, p


# ---------------------------------------------------------------- importtime

IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)\s*$")


def parse_importtime(stderr: str, module: str) -> tuple[float, float, list] | None:
    """(self ms, cumulative ms, subtree [(depth, name, self ms, cum ms)]) of ``module``."""
    rows = []
    for line in stderr.splitlines():
        m = IMPORT_LINE.match(line)
        if m:
            rows.append(
                (len(m.group(3)) // 2, m.group(4), int(m.group(1)) / 1000, int(m.group(2)) / 1000)
            )
    for i in range(len(rows) - 1, -1, -1):
        if rows[i][1] == module:
            depth = rows[i][0]
            j = i
            while j > 0 and rows[j - 1][0] > depth:
                j -= 1
            sub = [(d - depth, n, s, c) for d, n, s, c in rows[j:i]]
            return rows[i][2], rows[i][3], sub
    return None


# The import under ``-X importtime`` (wall clock, what the targets are stated in), and the process's
# CPU time for it: a process preempted by other work on a shared machine loses wall time that is
# not the import's, so the CPU time says whether a slow median was the machine or the module.
CPU_IMPORT = (
    "import time; _c = time.process_time(); import {module}; "
    "print('@@CPU@@', (time.process_time() - _c) * 1e3)"
)


@dataclass
class ImportJob:
    label: str  # the column: "ours", "baseline", a peer, "tinygrad shipped"
    mode: str  # "bc" or "nobc"
    module: str
    paths: list[Path]  # PYTHONPATH; the first is the working directory


def measure_interleaved(
    py: str, jobs: list[ImportJob], reps: int, env_of: Callable[[str, list[Path]], dict]
) -> dict[str, dict[str, dict]]:
    """``-X importtime`` of every job, one fresh interpreter each, in rounds: one warm-up round,
    then ``reps`` rounds in which every job runs once in turn. Whatever the machine's load does
    during the rounds, it does to all jobs alike, so their medians compare. label -> mode ->
    {cum_ms (median), cum_spread, self_ms, error}."""
    cums: dict[tuple[str, str], list[float]] = {(j.label, j.mode): [] for j in jobs}
    selfs: dict[tuple[str, str], list[float]] = {(j.label, j.mode): [] for j in jobs}
    parsed_runs: dict[tuple[str, str], list[tuple]] = {(j.label, j.mode): [] for j in jobs}
    cpus: dict[tuple[str, str], list[float]] = {(j.label, j.mode): [] for j in jobs}
    errors: dict[tuple[str, str], str] = {}
    for i in range(reps + 1):
        for j in jobs:
            key = (j.label, j.mode)
            if key in errors:
                continue
            p = run(
                [py, "-X", "importtime", "-c", CPU_IMPORT.format(module=j.module)],
                timeout=300,
                env=env_of(j.mode, j.paths),
                cwd=j.paths[0],
            )
            parsed = parse_importtime(p.err, j.module) if p.ok else None
            cpu = re.search(r"^@@CPU@@ ([\d.]+)$", p.out, re.M)
            if parsed is None or cpu is None:
                errors[key] = p.error or "no importtime line for the module"
                continue
            if i:
                selfs[key].append(parsed[0])
                cums[key].append(parsed[1])
                cpus[key].append(float(cpu.group(1)))
                parsed_runs[key].append(parsed)
    out: dict[str, dict[str, dict]] = {}
    for j in jobs:
        key = (j.label, j.mode)
        r: dict[str, Any] = {"module": j.module, "runs": len(cums[key])}
        if cums[key]:
            r["cum_ms"], r["self_ms"] = median(cums[key]), median(selfs[key])
            r["cum_min_ms"], r["cum_all_ms"] = min(cums[key]), [round(c, 3) for c in cums[key]]
            r["cum_spread"] = quartiles(cums[key])
            r["cpu_ms"], r["cpu_spread"] = median(cpus[key]), quartiles(cpus[key])
            runs = sorted(parsed_runs[key], key=lambda x: x[1])
            r["breakdown"] = breakdown(j.module, runs[len(runs) // 2])  # the median run's
        if key in errors:
            r["error"] = errors[key]
        out.setdefault(j.label, {})[j.mode] = r
    return out


def breakdown(module: str, parsed: tuple) -> dict:
    """Where the cumulative time of one (median) run went: the module itself, ctypes, bindgen_rt
    (self), the generated packages, anything else (top-level children by cumulative)."""
    self_ms, cum_ms, sub = parsed
    out = {"module_self": self_ms, "cum": cum_ms}
    children: dict[str, float] = {}
    for depth, name, _s, c in sub:
        if depth == 1:
            children[name] = children.get(name, 0) + c
    out["children"] = {k: round(v, 3) for k, v in sorted(children.items(), key=lambda kv: -kv[1])}
    out["packages_self"] = sum(
        s
        for depth, name, s, c in sub
        if name in ("bindgen", "hcq_bindings") or re.fullmatch(r"hcq_bindings\.\w+", name)
    )
    for _depth, name, s, c in sub:
        if name == "bindgen_rt":
            out["cabi_self"] = s
            out["cabi_cum"] = c
        if name == "ctypes":
            out["ctypes_cum"] = c
        if name == "typing":
            out["typing_cum"] = c
    return out


# Import plus first use of every rm_580/classes name runtime/drivers/nv spells (``rm.X``, ``cl.X``):
# what the NVIDIA driver pays for its bindings in a fresh process (the records it touches are built,
# ctypes is imported on the way).
DRIVER_NAMES_SCRIPT = textwrap.dedent("""
    import json, sys, time
    names = json.loads(sys.argv[1])
    t0 = time.perf_counter()
    from hcq_bindings.nv import classes as cl, rm_580 as rm
    t1 = time.perf_counter()
    found = sum(getattr(rm if m == "rm" else cl, n, None) is not None for m, n in names)
    t2 = time.perf_counter()
    print("@@JSON@@" + json.dumps({"import_ms": (t1 - t0) * 1e3, "use_ms": (t2 - t1) * 1e3,
                                   "total_ms": (t2 - t0) * 1e3, "found": found}))
""")


def driver_names() -> list[tuple[str, str]]:
    """(``rm`` or ``cl``, name) for every binding name runtime/drivers/nv spells."""
    names = set()
    for f in sorted((REPO / "runtime" / "drivers" / "nv").glob("*.py")):
        names |= set(re.findall(r"\b(rm|cl)\.([A-Za-z_]\w*)", f.read_text()))
    return sorted(names)


LAZY_SCRIPT = textwrap.dedent("""
    import json, sys, time
    t0 = time.perf_counter()
    import {module} as m
    t1 = time.perf_counter()
    v = getattr(m, {attr!r})
    t2 = time.perf_counter()
    w = getattr(m, {attr!r})
    t3 = time.perf_counter()
    out = {{"import_ms": (t1 - t0) * 1e3, "first_attr_ms": (t2 - t1) * 1e3,
           "second_attr_ms": (t3 - t2) * 1e3}}
    if {full}:
        m.__materialize_all__()
        out["materialize_all_ms"] = (time.perf_counter() - t3) * 1e3
        out["names"] = len([k for k in vars(m) if not k.startswith("__")])
    print("@@JSON@@" + json.dumps(out))
""")


def measure_lazy(
    py: str, module: str, attr: str, env: dict[str, str], cwd: Path, reps: int
) -> dict:
    vals: dict[str, list[float]] = {}
    res: dict[str, Any] = {"attr": attr}
    for i in range(reps + 2):
        full = i == reps + 1  # last run: materialise everything once
        p = run(
            [py, "-c", LAZY_SCRIPT.format(module=module, attr=attr, full=full)],
            timeout=300,
            env=env,
            cwd=cwd,
        )
        m = re.search(r"^@@JSON@@(.*)$", p.out, re.M)
        if not p.ok or not m:
            res["error"] = p.error or "no result"
            break
        d = json.loads(m.group(1))
        if i == 0:
            continue
        if full:
            res["materialize_all_ms"] = d["materialize_all_ms"]
            res["names"] = d["names"]
        else:
            for k, v in d.items():
                vals.setdefault(k, []).append(v)
    for k, v in vals.items():
        res[k] = median(v)
    return res


# ---------------------------------------------------------------- the benchmark


@dataclass
class Bench:
    args: argparse.Namespace
    tmp: Path
    results: dict = field(default_factory=dict)
    targets: list[dict] = field(default_factory=list)  # our targets (name, group, output, lazy)
    resolved: dict[str, dict] = field(default_factory=dict)  # group -> helper resolve output
    caches: dict[str, Path] = field(default_factory=dict)  # group -> populated bindgen cache
    clean_py: str = sys.executable
    import_trees: dict[str, Path] = field(default_factory=dict)  # "bc"/"nobc" -> tree of ours
    baseline_trees: dict[str, Path] = field(default_factory=dict)  # the same of --baseline REF

    # -- setup
    def copy_repo(self, dest: Path) -> Path:
        dest.mkdir(parents=True)
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".*.tmp")
        for name in ("bindgen", "bindgen_rt", "generated"):
            shutil.copytree(REPO / name, dest / name, ignore=ignore)
        # setup.py installs generated/ as the package hcq_bindings; in the copy a link says so
        (dest / "hcq_bindings").symlink_to("generated", target_is_directory=True)
        shutil.copy2(REPO / "pyproject.toml", dest / "pyproject.toml")
        return dest

    def regen_env(self, copy: Path, bytecode: bool = False) -> dict[str, str]:
        env = base_env(PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE=None if bytecode else "1")
        for k, default in NV_SOURCES.items():
            env[k] = os.environ.get(k) or default
        return env

    def setup_clean_python(self) -> None:
        """A venv without pip: site runs as usual but no .pth of this machine preloads modules."""
        d = self.args.cache_dir / "venvs" / f"clean-py{sys.version_info[0]}.{sys.version_info[1]}"
        py = d / "bin" / "python"
        if not py.exists():
            p = run([sys.executable, "-m", "venv", "--without-pip", str(d)], timeout=120)
            if not p.ok:
                log(f"  clean venv failed ({p.error}); measuring imports with {sys.executable} -S")
                self.clean_py = sys.executable
                self.results["import_interpreter"] = f"{sys.executable} (venv failed: {p.error})"
                return
        self.clean_py = str(py)
        self.results["import_interpreter"] = f"{py} (venv --without-pip of {sys.executable})"

    # -- 1. regen
    def bench_regen(self) -> None:
        copy = self.copy_repo(self.tmp / "regen")
        env = self.regen_env(copy)
        info, p = helper(copy, env, ["info"], 120)
        if "error" in info:
            self.results["regen"] = {"error": f"cannot list targets: {info['error']}"}
            return
        self.targets = info["targets"]
        out: dict[str, Any] = {}
        self.results["regen"] = out
        groups = [g for g in self.args.groups if g in GROUPS]
        self.copy_repo(self.tmp / "regen-bc")  # the generator with bytecode caches (its own copy:
        # PYTHONDONTWRITEBYTECODE=1 still reads caches, so the plain copy must never get any)
        out["startup"] = self.bench_startup(copy, env)
        for g in groups:
            log(f"[regen] {g}")
            try:
                out[g] = self.bench_group(g, copy, env)
            except Exception as e:  # keep going: the table reports it
                out[g] = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}

    def bench_startup(self, copy: Path, env: dict[str, str]) -> dict:
        """Interpreter start plus importing the generator, without and with bytecode caches."""
        ts = []
        for _ in range(3):
            p = run(
                [sys.executable, "-c", "import bindgen.cli, bindgen.generate"],
                timeout=60,
                env=env,
                cwd=copy,
            )
            if not p.ok:
                return {"error": p.error}
            ts.append(p.seconds)
        bare = [
            run([sys.executable, "-c", "pass"], timeout=60, env=env, cwd=copy).seconds
            for _ in range(3)
        ]
        # with bytecode caches for bindgen/ (compiled into the other copy)
        bc_copy = self.tmp / "regen-bc"
        bc_env = self.regen_env(bc_copy, bytecode=True)
        run(
            [sys.executable, "-m", "compileall", "-q", "bindgen"],
            timeout=120,
            env=bc_env,
            cwd=bc_copy,
        )
        tb = [
            run(
                [sys.executable, "-c", "import bindgen.cli, bindgen.generate"],
                timeout=60,
                env=bc_env,
                cwd=bc_copy,
            ).seconds
            for _ in range(3)
        ]
        return {
            "import_generator_s": median(ts),
            "import_generator_bc_s": median(tb),
            "bare_python_s": median(bare),
        }

    def group_outputs(self, copy: Path, group: str) -> list[Path]:
        files = []
        for t in self.targets:
            if t["group"] == group:
                base = copy / "generated" / t["output"]
                files += [base, base.with_suffix(".report.txt"), base.with_name("_" + base.name)]
        return files

    def regen_once(
        self,
        copy: Path,
        env: dict[str, str],
        group: str,
        cache: Path,
        jobs: int,
        clean: bool,
        timeout: float,
    ) -> dict:
        if clean:
            for f in self.group_outputs(copy, group):
                f.unlink(missing_ok=True)
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        p = run(
            [
                sys.executable,
                "-m",
                "bindgen",
                "regen",
                group,
                "--cache",
                str(cache),
                "--jobs",
                str(jobs),
            ],
            timeout=timeout,
            env=env,
            cwd=copy,
        )
        res: dict[str, Any] = {"wall_s": p.seconds, "load": load}
        m = re.search(r"^regen: (\d+) ok, (\d+) failed in ([\d.]+) s", p.out, re.M)
        if m:
            res["ok"], res["failed"], res["inproc_s"] = (
                int(m.group(1)),
                int(m.group(2)),
                float(m.group(3)),
            )
        per = {}
        for mm in re.finditer(r"^\s+(wrote|same)\s+(\S+)\s+(\d+) ms", p.out, re.M):
            per[mm.group(2)] = (mm.group(1), int(mm.group(3)))
        res["targets"] = {k: v[1] for k, v in per.items()}
        res["wrote"] = sum(1 for v in per.values() if v[0] == "wrote")
        res["same"] = sum(1 for v in per.values() if v[0] == "same")
        if not p.ok:
            res["error"] = p.error
        elif m and int(m.group(2)):
            res["error"] = (
                f"{m.group(2)} target(s) failed: "
                + " | ".join(line.strip() for line in p.err.splitlines() if "FAIL" in line)[:400]
            )
        return res

    def bench_group(self, group: str, copy: Path, env: dict[str, str]) -> dict:
        res: dict[str, Any] = {}
        tnames = [t["name"] for t in self.targets if t["group"] == group]
        res["targets"] = tnames
        if group == "nv":
            missing = [f"{k}={env[k]}" for k in NV_SOURCES if not Path(env[k]).is_dir()]
            if missing:
                res["skipped"] = f"NV git mirrors not found: {', '.join(missing)}"
                log(f"  skip nv: {res['skipped']}")
                return res
        timeout = {"linux": 180, "amd": 400, "nv": 400}[group]
        reps = (
            self.args.regen_reps
            if self.args.regen_reps
            else {"linux": (3, 5), "nv": (1, 3)}.get(group, (1, 2))[0 if self.args.quick else 1]
        )
        if self.args.no_cold:
            cache = Path(self.args.bindgen_cache) if self.args.bindgen_cache else None
            cache = cache or Path(os.environ.get("BINDGEN_CACHE") or Path.home() / ".cache/bindgen")
            data, p = helper(copy, env, ["resolve", str(cache), group], 900)
            res["cold"] = {"skipped": "--no-cold"}
        else:
            cache = self.tmp / f"cache-{group}"
            data, p = helper(copy, env, ["resolve", str(cache), group], 900)
            res["resolve"] = {
                "wall_s": p.seconds,
                "inproc_s": data.get("seconds"),
                "sources": data.get("sources", {}),
            }
            bad = {k: v["error"] for k, v in data.get("sources", {}).items() if "error" in v}
            if "error" in data or bad:
                res["error"] = data.get("error") or "; ".join(f"{k}: {v}" for k, v in bad.items())
                log(f"  {group}: sources unavailable: {res['error'][:300]}")
                return res
            log(f"  resolved into a fresh cache in {p.seconds:.1f} s")
            res["cold"] = self.regen_once(copy, env, group, cache, 2, True, timeout)
            log(f"  cold gen: {res['cold'].get('wall_s', 0):.2f} s {res['cold'].get('error', '')}")
        if "error" in data:
            res["error"] = data["error"]
            return res
        self.resolved[group] = data
        self.caches[group] = cache
        for kind, clean in (("warm", True), ("noop", False)):
            res[kind] = {}
            # --jobs 2 and 1 alternate, so that both see the same load; no-op follows warm: the
            # outputs are in place and current
            runs: dict[int, list[dict]] = {2: [], 1: []}
            for _ in range(reps):
                for jobs in (2, 1):
                    runs[jobs].append(
                        self.regen_once(copy, env, group, cache, jobs, clean, timeout)
                    )
            for jobs in (2, 1):
                res[kind][f"j{jobs}"] = summarise_runs(runs[jobs])
                r = res[kind][f"j{jobs}"]
                log(
                    f"  {kind} --jobs {jobs}: {fmt(r.get('wall_s'), 2)} s wall "
                    f"({spread(r)}), {fmt(r.get('inproc_s'), 2)} s in-process "
                    f"{r.get('error', '')}"
                )
        # The same warm run where the generator's own modules have bytecode caches (a normal Python;
        # this machine sets PYTHONDONTWRITEBYTECODE=1, so every run above recompiles bindgen/).
        bc_copy = self.tmp / "regen-bc"
        bc_env = self.regen_env(bc_copy, bytecode=True)
        self.regen_once(bc_copy, bc_env, group, cache, 2, False, timeout)  # writes the caches
        bc_runs = [
            self.regen_once(bc_copy, bc_env, group, cache, 2, True, timeout) for _ in range(reps)
        ]
        res["warm_bc"] = {"j2": summarise_runs(bc_runs)}
        log(f"  warm --jobs 2 with bytecode: {fmt(res['warm_bc']['j2'].get('wall_s'), 2)} s wall")
        return res

    def compare_generation(self, jobs: dict[str, dict], out_root: Path) -> None:
        """Generation time per target, ours (``regen TARGET --jobs 1``, warm, the generator with
        bytecode caches as the peers' tools have in their site-packages) and each peer's, in the
        same rounds: each round runs every tool once in turn, so a change in the machine's load
        hits all of them alike. rm_580 gets one round (tinygrad takes ~40 s on it)."""
        copy = self.tmp / "regen-bc"
        env = self.regen_env(copy, bytecode=True)
        out: dict[str, Any] = {}
        self.results.setdefault("peers", {})["generation"] = out
        for name in sorted({t for ts in PEER_TARGETS.values() for t in ts}):
            group = next((t["group"] for t in self.targets if t["name"] == name), None)
            tools: list[tuple[str, Callable[[], tuple[float, float | None, str | None]]]] = []
            if group in self.caches:

                def ours(name: str = name, group: str = group) -> tuple:
                    r = self.regen_once(copy, env, name, self.caches[group], 1, False, 300)
                    return r["wall_s"], r.get("targets", {}).get(name), r.get("error")

                tools.append(("ours", ours))
            for peer in PEERS:
                pt = self.results["peers"].get(peer, {}).get("targets", {}).get(name)
                if not pt or "lines" not in pt or name not in jobs:
                    continue
                venv, _ = self.ensure_venv(peer, PEERS[peer])
                tmp_out = out_root / "gen-rounds" / peer / f"{peer}_{name}.py"
                tmp_out.parent.mkdir(parents=True, exist_ok=True)

                def theirs(peer: str = peer, venv: Path = venv, tmp_out: Path = tmp_out) -> tuple:
                    q, info = self.peer_generate(peer, venv, name, jobs[name], tmp_out, 600)
                    gen = info.get("gen_s")
                    return q.seconds, gen * 1e3 if gen is not None else None, q.error

                tools.append((peer, theirs))
            rounds = 1 if name == "rm_580" or self.args.quick else 3
            walls: dict[str, list[float]] = {t: [] for t, _ in tools}
            inproc: dict[str, list[float]] = {t: [] for t, _ in tools}
            errors: dict[str, str] = {}
            for _ in range(rounds):
                for tool, fn in tools:
                    if tool in errors:
                        continue
                    wall, ms, err = fn()
                    if err:
                        errors[tool] = err
                        continue
                    walls[tool].append(wall)
                    if ms is not None:
                        inproc[tool].append(ms)
            out[name] = {
                tool: {
                    "wall": quartiles(walls[tool]),
                    "inproc_ms": median(inproc[tool]),
                    **({"error": errors[tool]} if tool in errors else {}),
                }
                for tool, _ in tools
            }
            log(
                f"[generation] {name}: "
                + ", ".join(f"{t} {fmt_quartiles(v['wall'])} s" for t, v in out[name].items())
            )

    # -- records and check
    def bench_runtime(self) -> None:
        """Record operations against plain ctypes, and ``bindgen check --fast`` on an unchanged
        tree (fingerprints unchanged: nothing is regenerated; a plain ``check`` regenerates
        every target)."""
        copy = self.copy_repo(self.tmp / "runtime")
        env = base_env(PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE=None)
        out: dict[str, Any] = {}
        self.results["runtime"] = out
        p = run([self.clean_py, "-c", RECORD_PROBE], timeout=300, env=env, cwd=copy)
        out["records"] = json.loads(p.out) if p.ok else {"error": p.error}
        cache = Path(os.environ.get("BINDGEN_CACHE") or Path.home() / ".cache/bindgen")
        env = self.regen_env(copy, bytecode=True)
        walls = []
        for _ in range(3):
            p = run([sys.executable, "-m", "bindgen", "-q", "check", "--fast", "--cache",
                     str(cache)],
                    timeout=600, env=env, cwd=copy)
            if not p.ok:
                out["check"] = {"error": p.error}
                break
            walls.append(p.seconds)
        else:
            out["check"] = {"wall_s": median(walls), "runs": walls}
        log(f"[runtime] records {out['records']}; check {out['check']}")

    # -- 2. imports
    def bench_imports(self) -> None:
        bc = self.copy_repo(self.tmp / "imp-bc")
        nobc = self.copy_repo(self.tmp / "imp-nobc")
        self.import_trees = {"bc": bc, "nobc": nobc}
        p = run(
            [self.clean_py, "-m", "compileall", "-q", "bindgen", "bindgen_rt", "hcq_bindings"],
            timeout=300,
            env=base_env(PYTHONDONTWRITEBYTECODE=None),
            cwd=bc,
        )
        res: dict[str, Any] = {"compileall": p.error or "ok"}
        self.results["imports"] = res
        modules = ["ctypes", "bindgen_rt"] + [
            "hcq_bindings." + t["output"][:-3].replace("/", ".")
            for t in self.targets
            if t["group"] in self.args.groups
        ]
        # in rounds over every module and mode: a slow stretch of the machine hits one round of
        # all of them rather than every run of one module
        jobs = [
            ImportJob(mod, mode, mod, [tree])
            for mod in modules
            for mode, tree in self.import_trees.items()
        ]
        res.update(measure_interleaved(self.clean_py, jobs, self.args.reps, self.import_env))
        for mod in modules:
            log(
                f"[import] {mod}: bc {fmt_quartiles(res[mod]['bc'].get('cum_spread'))} ms, "
                f"no bc {fmt_quartiles(res[mod]['nobc'].get('cum_spread'))} ms cumulative "
                f"{res[mod]['bc'].get('error') or res[mod]['nobc'].get('error') or ''}"
            )
        lazy: dict[str, Any] = {}
        self.results["lazy"] = lazy
        for t in self.targets:
            if not t["lazy"] or t["group"] not in self.args.groups:
                continue
            mod = "hcq_bindings." + t["output"][:-3].replace("/", ".")
            attr = self.lazy_attr(t)
            lazy[mod] = {
                mode: measure_lazy(
                    self.clean_py,
                    mod,
                    attr,
                    self.import_env(mode, [tree]),
                    tree,
                    3 if not self.args.quick else 2,
                )
                for mode, tree in self.import_trees.items()
            }
            log(f"[lazy] {mod}.{attr}: first access {fmt(lazy[mod]['bc'].get('first_attr_ms'))} ms")

    def make_baseline_trees(self) -> str | None:
        """``bindgen_rt/`` and ``generated/`` of ``--baseline REF`` (git archive), as a bytecode and
        a source-only tree like ours; an error message, or None."""
        ref = self.args.baseline
        for mode in ("bc", "nobc"):
            d = self.tmp / f"baseline-{mode}"
            d.mkdir(parents=True)
            arch = subprocess.run(
                ["git", "-C", str(REPO), "archive", "--format=tar", ref, "bindgen_rt", "generated"],
                capture_output=True, timeout=120,
            )
            if arch.returncode:
                return f"git archive {ref}: {arch.stderr.decode(errors='replace').strip()}"
            subprocess.run(["tar", "-x", "-C", str(d)], input=arch.stdout, check=True, timeout=120)
            (d / "hcq_bindings").symlink_to("generated", target_is_directory=True)
            self.baseline_trees[mode] = d
        p = run(
            [self.clean_py, "-m", "compileall", "-q", "bindgen_rt", "hcq_bindings"],
            timeout=300,
            env=base_env(PYTHONDONTWRITEBYTECODE=None),
            cwd=self.baseline_trees["bc"],
        )
        return p.error

    # -- 2b. imports side by side, interleaved
    def compare_imports(self) -> None:
        """Per peer target: our module, the peers' output for the same headers, tinygrad's shipped
        module and (``--baseline``) ours at another commit, imported in the same rounds
        (``measure_interleaved``); then the NVIDIA driver's names, ours against the baseline."""
        out: dict[str, Any] = {}
        self.results["compare"] = out
        if self.args.baseline:
            err = self.make_baseline_trees()
            out["baseline"] = {"ref": self.args.baseline, **({"error": err} if err else {})}
            if err:
                log(f"[compare] baseline {self.args.baseline}: {err}")
                self.baseline_trees = {}
        ours_mod = {
            t["name"]: "hcq_bindings." + t["output"][:-3].replace("/", ".") for t in self.targets
        }
        peers = self.results.get("peers", {})
        out_root = self.tmp / "peer-out"
        tg = self.args.cache_dir / "venvs"
        tg_site = [
            p for v in tg.glob("tinygrad-*") if (v / ".bench-ok").exists()
            for p in self.site_packages(v)
        ]
        imports: dict[str, Any] = {}
        out["imports"] = imports
        for name in sorted({t for ts in PEER_TARGETS.values() for t in ts},
                           key=lambda t: (t == "rm_580", t)):
            jobs: list[ImportJob] = []
            if name in ours_mod:
                for mode in ("bc", "nobc"):
                    if mode in self.import_trees:
                        jobs.append(ImportJob("ours", mode, ours_mod[name],
                                              [self.import_trees[mode]]))
                    if mode in self.baseline_trees:
                        jobs.append(ImportJob("baseline", mode, ours_mod[name],
                                              [self.baseline_trees[mode]]))
            for peer in PEERS:
                pt = peers.get(peer, {}).get("targets", {}).get(name)
                if not pt or "lines" not in pt or "error" in pt:
                    continue
                site = tg_site if peer == "tinygrad" else []
                for mode in ("bc", "nobc"):
                    jobs.append(ImportJob(peer, mode, pt["module"],
                                          [out_root / f"imp-{mode}" / peer, *site]))
            if name in TINYGRAD_SHIPPED and tg_site:
                jobs.append(ImportJob("tinygrad shipped", "bc", TINYGRAD_SHIPPED[name], tg_site))
            if not jobs:
                continue
            reps = self.args.reps if name != "rm_580" else max(3, self.args.reps // 2)
            imports[name] = measure_interleaved(self.clean_py, jobs, reps, self.import_env)
            log(
                f"[compare] import {name}: "
                + ", ".join(
                    f"{label} {mode} {fmt_quartiles(r.get('cum_spread'))}"
                    for label, modes in imports[name].items()
                    for mode, r in modes.items()
                )
            )
        self.compare_driver_names(out)

    def compare_driver_names(self, out: dict) -> None:
        """Import plus first use of every rm_580/classes name runtime/drivers/nv spells, in a fresh
        interpreter with bytecode: ours and the baseline in the same rounds."""
        names = driver_names()
        trees = {"ours": self.import_trees.get("bc")}
        if "bc" in self.baseline_trees:
            trees["baseline"] = self.baseline_trees["bc"]
        vals: dict[str, dict[str, list[float]]] = {k: {} for k in trees if trees[k]}
        res: dict[str, Any] = {"names": len(names)}
        out["driver_names"] = res
        # more rounds than an import gets: first use varies more
        for i in range(max(15, 2 * self.args.reps) + 1):
            for label in vals:
                tree = trees[label]
                assert tree is not None
                p = run(
                    [self.clean_py, "-c", DRIVER_NAMES_SCRIPT, json.dumps(names)],
                    timeout=300,
                    env=self.import_env("bc", [tree]),
                    cwd=tree,
                )
                m = re.search(r"^@@JSON@@(.*)$", p.out, re.M)
                if not p.ok or not m:
                    res.setdefault(label, {})["error"] = p.error or "no result"
                    continue
                d = json.loads(m.group(1))
                res.setdefault(label, {})["found"] = d.pop("found")
                if i:
                    for k, v in d.items():
                        vals[label].setdefault(k, []).append(v)
        for label, d in vals.items():
            for k, v in d.items():
                res.setdefault(label, {})[k] = quartiles(v)
        o, b = vals.get("ours", {}).get("total_ms"), vals.get("baseline", {}).get("total_ms")
        if o and b and len(o) == len(b):
            # ours over the baseline within each round, where both saw the same load
            res["paired_ratio"] = quartiles([x / y for x, y in zip(o, b)])
        log(
            f"[compare] NV driver names ({len(names)}): "
            + ", ".join(
                f"{label} {fmt_quartiles(res.get(label, {}).get('total_ms'))} ms" for label in vals
            )
        )

    def lazy_attr(self, t: dict) -> str:
        want = LAZY_ATTR.get(t["name"], "")
        out = REPO / "generated" / t["output"]
        defs = out.with_name("_" + out.name)  # a lazy target's definitions module and its index
        try:
            with defs.open(encoding="utf-8") as f:
                first = ""
                for line in f:
                    if not line.startswith("#@ "):
                        continue
                    name = line.split()[1]
                    first = first or ("" if name.startswith("_") else name)
                    if name == want:
                        return want
            return first or want
        except OSError:
            return want

    def import_env(self, mode: str, paths: list[Path]) -> dict[str, str]:
        pp = os.pathsep.join(str(p) for p in paths)
        if mode == "bc":
            return base_env(PYTHONPATH=pp, PYTHONDONTWRITEBYTECODE=None)
        return base_env(PYTHONPATH=pp, PYTHONDONTWRITEBYTECODE="1")

    # -- 3. peers
    def bench_peers(self) -> None:
        peers: dict[str, Any] = self.results.setdefault("peers", {})
        jobs = self.peer_jobs()
        if not jobs:
            peers["error"] = "no resolved linux/nv targets to run the peers on"
            return
        out_root = self.tmp / "peer-out"
        for peer, reqs in PEERS.items():
            log(f"[peer] {peer}: {' '.join(reqs)}")
            pr: dict[str, Any] = {"requirements": reqs}
            peers[peer] = pr
            try:
                venv, err = self.ensure_venv(peer, reqs)
                if err:
                    pr["available"], pr["error"] = False, err
                    log(f"  {peer} unavailable: {err}")
                    continue
                pr["available"] = True
                pr["targets"] = {}
                for name in PEER_TARGETS[peer]:
                    if name not in jobs:
                        continue
                    pr["targets"][name] = self.peer_target(peer, venv, name, jobs[name], out_root)
            except Exception as e:
                pr["error"] = f"{type(e).__name__}: {e}"
                pr["trace"] = traceback.format_exc()
        self.compare_generation(jobs, out_root)
        self.spot_checks(out_root)
        try:
            self.bench_tricky()
        except Exception as e:
            self.results["peers"].setdefault("tricky", {})["error"] = f"{type(e).__name__}: {e}"

    def bench_tricky(self) -> None:
        """Synthetic layout and macro cases through every tool, against gcc."""
        res: dict[str, Any] = {}
        self.results.setdefault("peers", {})["tricky"] = res
        d = self.tmp / "tricky"
        d.mkdir()
        (d / "tricky.h").write_text(TRICKY_H)
        probes = "\n".join(f"    BYTES({t}, {f}, {v:#x})" for t, f, v in TRICKY_FIELDS)
        (d / "probe.c").write_text(TRICKY_PROBE.replace("@BYTES@", probes))
        p = run(["gcc", "-O0", "-o", str(d / "probe"), str(d / "probe.c")], timeout=120, cwd=d)
        if p.ok:
            p = run([str(d / "probe")], timeout=60, cwd=d)
        if not p.ok:
            res["error"] = f"gcc probe: {p.error}"
            return
        truth = {}
        for line in p.out.splitlines():
            k1, k2, v = line.split(" ", 2)
            truth[f"{k1} {k2}"] = v.strip()
        res["truth"] = truth
        fields = json.dumps([list(x) for x in TRICKY_FIELDS])
        # ours: a spec in a temporary copy of the repository
        copy = self.copy_repo(self.tmp / "tricky-repo")
        (copy / "bindgen" / "specs" / "zz_bench_tricky.yaml").write_text(TRICKY_SPEC % {"dir": d})
        env = self.regen_env(copy)
        g = run(
            [sys.executable, "-m", "bindgen", "regen", "bench_tricky", "--jobs", "1"],
            timeout=180,
            env=env,
            cwd=copy,
        )
        outputs = {}
        if g.ok:
            outputs["ours"] = ("hcq_bindings.bench.bench_tricky", [copy], json.dumps([""]))
        else:
            res["ours"] = {"error": f"regen: {g.error}"}
        for peer, reqs in PEERS.items():
            pr = self.results["peers"].get(peer, {})
            if not pr.get("available"):
                continue
            venv, err = self.ensure_venv(peer, reqs)
            out = d / f"{peer}_tricky.py"
            job = {
                "headers": [str(d / "tricky.h")],
                "include_dirs": [],
                "preinclude": [],
                "clang_args": [],
            }
            q, _ = self.peer_generate(peer, venv, "tricky", job, out, 180)
            if not q.ok or not out.exists():
                res[peer] = {"error": f"generation: {q.error or 'no output'}"}
                continue
            site = self.site_packages(venv) if peer == "tinygrad" else []
            outputs[peer] = (f"{peer}_tricky", [d, *site], json.dumps(["struct_", ""]))
        for tool, (mod, paths, prefixes) in outputs.items():
            q = run(
                [self.clean_py, "-c", TRICKY_SCRIPT, mod, prefixes, fields],
                timeout=120,
                env=self.import_env("nobc", paths),
                cwd=paths[0],
            )
            m = re.search(r"^@@JSON@@(.*)$", q.out, re.M)
            got = json.loads(m.group(1)) if m else {"error": q.error or "no result"}
            if "error" in got:
                res[tool] = {"error": got["error"]}
                continue
            wrong = {k: got.get(k, "missing") for k, v in truth.items() if got.get(k) != v}
            res[tool] = {"correct": len(truth) - len(wrong), "of": len(truth), "wrong": wrong}
        log(
            "[tricky] "
            + ", ".join(
                f"{k} {v['correct']}/{v['of']}" if "correct" in v else f"{k} error"
                for k, v in res.items()
                if isinstance(v, dict) and k != "truth"
            )
        )

    def peer_jobs(self) -> dict[str, dict]:
        jobs = {}
        for group in ("linux", "nv"):
            for name, d in self.resolved.get(group, {}).get("targets", {}).items():
                if any(name in ts for ts in PEER_TARGETS.values()):
                    jobs[name] = d
        return jobs

    def ensure_venv(self, peer: str, reqs: list[str]) -> tuple[Path, str | None]:
        key = hashlib.sha256(" ".join(reqs).encode()).hexdigest()[:8]
        d = self.args.cache_dir / "venvs" / f"{peer}-{key}"
        marker = d / ".bench-ok"
        if marker.exists():
            return d, None
        shutil.rmtree(d, ignore_errors=True)
        p = run([sys.executable, "-m", "venv", str(d)], timeout=180)
        if not p.ok:
            return d, f"python -m venv failed: {p.error}"
        p = run([str(d / "bin" / "python"), "-m", "pip", "install", "-q", *reqs], timeout=900)
        if not p.ok:
            print(f"pip install {' '.join(reqs)} failed:\n{(p.err or p.out)[-2000:]}", flush=True)
            return d, f"pip install failed: {p.error}"
        marker.write_text(" ".join(reqs) + "\n")
        return d, None

    def clang_args(self, d: dict, tinygrad: bool = False) -> list[str]:
        args = ["-nostdinc", "--target=x86_64-linux-gnu", "-std=gnu11"]
        args += [f"-I{i}" for i in d["include_dirs"]]
        for pre in d["preinclude"]:
            args += ["-include", pre]
        return args + d["clang_args"]

    def peer_generate(
        self, peer: str, venv: Path, name: str, d: dict, out: Path, timeout: float
    ) -> tuple[Proc, dict]:
        """One run of ``peer`` on the headers of ``d``, writing ``out``."""
        out.unlink(missing_ok=True)
        info: dict[str, Any] = {}
        if peer == "tinygrad":
            job = {
                "name": name,
                "files": d["headers"],
                "args": self.clang_args(d),
                "out": str(out),
                "rules": TINYGRAD_NV_RULES if name == "rm_580" else [],
            }
            env = base_env(**({"LIBCLANG_PATH": self.args.libclang} if self.args.libclang else {}))
            p = run(
                [str(venv / "bin" / "python"), "-c", TINYGRAD_DRIVER, json.dumps(job)],
                timeout=timeout,
                env=env,
                cwd=out.parent,
            )
            m = re.search(r"^@@JSON@@(.*)$", p.out, re.M)
            if m:
                info = json.loads(m.group(1))
        elif peer == "ctypeslib2":
            p = run(
                [
                    str(venv / "bin" / "clang2py"),
                    "-q",
                    "-k",
                    "cdefstum",
                    "--clang-args",
                    " ".join(self.clang_args(d)),
                    "-o",
                    str(out),
                    *d["headers"],
                ],
                timeout=timeout,
                env=base_env(),
                cwd=out.parent,
            )
        else:
            cpp = ["gcc", "-E", "-nostdinc"]
            for pre in d["preinclude"]:
                cpp += ["-include", pre]
            defs = []
            for a in d["clang_args"]:
                if a.startswith("-D"):
                    defs += ["-D", a[2:]]
            p = run(
                [
                    str(venv / "bin" / "ctypesgen"),
                    "--cpp",
                    shlex.join(cpp),
                    "--allow-gnu-c",
                    *[f"-I{i}" for i in d["include_dirs"]],
                    *defs,
                    "--no-macro-warnings",
                    "-o",
                    str(out),
                    *d["headers"],
                ],
                timeout=timeout,
                env=base_env(),
                cwd=out.parent,
            )
        return p, info

    def peer_target(self, peer: str, venv: Path, name: str, d: dict, out_root: Path) -> dict:
        """One run of ``peer`` on target ``name``: its output, copied into a bytecode tree and a
        source-only tree for ``compare_imports`` (timings come from the interleaved rounds of
        ``compare_generation`` and ``compare_imports``)."""
        out_dir = out_root / peer
        out_dir.mkdir(parents=True, exist_ok=True)
        mod = f"{peer}_{name}"
        out = out_dir / f"{mod}.py"
        res: dict[str, Any] = {"module": mod}
        p, info = self.peer_generate(peer, venv, name, d, out, 600 if name == "rm_580" else 180)
        res["first_gen_wall_s"] = p.seconds
        if "skipped" in info:
            res["skipped_macros"] = info["skipped"]
        if not p.ok:
            res["error"] = p.error
        elif not out.exists():
            res["error"] = "no output written"
        log(f"  {peer} {name}: {fmt(p.seconds, 2)} s {res.get('error', '')}")
        if "error" in res:
            return res
        res["lines"] = out.read_text(errors="replace").count("\n")
        for mode in ("bc", "nobc"):
            tree = out_root / f"imp-{mode}" / peer
            tree.mkdir(parents=True, exist_ok=True)
            shutil.copy2(out, tree / out.name)
        q = run(
            [self.clean_py, "-m", "compileall", "-q", str(out_root / "imp-bc" / peer / out.name)],
            timeout=300,
            env=base_env(PYTHONDONTWRITEBYTECODE=None),
        )
        if not q.ok:
            res["error"] = f"compileall: {q.error}"
        return res

    def site_packages(self, venv: Path) -> list[Path]:
        return sorted(venv.glob("lib/python*/site-packages"))

    def spot_checks(self, out_root: Path) -> None:
        """Values of a few records (sizeof) and constants in each peer's output versus ours."""
        checks: dict[str, Any] = {}
        self.results["peers"]["spot_checks"] = checks
        tree = self.import_trees.get("bc")
        if tree is None:
            return
        ours_mod = {
            t["name"]: "hcq_bindings." + t["output"][:-3].replace("/", ".") for t in self.targets
        }
        for name, names in SPOT.items():
            if name not in ours_mod:
                continue
            want = self.spot_values(ours_mod[name], names, [tree], tree, ours=True)
            checks[name] = {"ours": want}
            for peer in PEERS:
                pt = self.results["peers"].get(peer, {}).get("targets", {}).get(name)
                if not pt or "lines" not in pt:
                    continue
                venv = self.args.cache_dir / "venvs"
                site = [p for v in venv.glob(f"{peer}-*") for p in self.site_packages(v)]
                ptree = out_root / "imp-bc" / peer
                got = self.spot_values(pt["module"], names, [ptree, *site], ptree, ours=False)
                if "error" in got or "error" in want:
                    checks[name][peer] = {"error": got.get("error") or want.get("error")}
                    continue
                match = [
                    n
                    for n in names
                    if n in got["values"] and got["values"][n] == want["values"].get(n)
                ]
                checks[name][peer] = {
                    "match": len(match),
                    "of": len(names),
                    "values": got["values"],
                    "mismatch": [n for n in names if n not in match],
                }

    def spot_values(
        self, module: str, names: list[str], paths: list[Path], cwd: Path, ours: bool
    ) -> dict:
        prefixes = [""] if ours else ["", "struct_", "union_"]
        p = run(
            [self.clean_py, "-c", SPOT_SCRIPT, module, json.dumps(names), json.dumps(prefixes)],
            timeout=300,
            env=self.import_env("bc", paths),
            cwd=cwd,
        )
        m = re.search(r"^@@JSON@@(.*)$", p.out, re.M)
        if not m:
            return {"error": p.error or "no result"}
        return json.loads(m.group(1))


TINYGRAD_DRIVER = textwrap.dedent("""
    import contextlib, io, json, sys, time
    job = json.loads(sys.argv[1])
    t0 = time.perf_counter()
    from tinygrad.runtime.support.autogen import gen
    t1 = time.perf_counter()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rules = [tuple(r) for r in job["rules"]]
        text = gen(job["name"], job["files"], args=job["args"], rules=rules)
    t2 = time.perf_counter()
    with open(job["out"], "w") as f:
        f.write(text)
    print("@@JSON@@" + json.dumps({"import_s": t1 - t0, "gen_s": t2 - t1,
                                   "skipped": buf.getvalue().count("skipping ")}))
""")

TRICKY_SCRIPT = textwrap.dedent("""
    import ctypes, importlib, json, sys
    out = {}
    try:
        m = importlib.import_module(sys.argv[1])
    except BaseException as e:
        print("@@JSON@@" + json.dumps({"error": f"import failed: {type(e).__name__}: {e}"[:300]}))
        raise SystemExit(0)
    def rec(name):
        for pre in json.loads(sys.argv[2]):
            t = getattr(m, pre + name, None)
            if t is not None:
                return t
        raise LookupError(name + " missing")
    def probe(key, fn):
        try:
            out[key] = fn()
        except BaseException as e:
            out[key] = f"error: {type(e).__name__}: {e}"[:120]
    for name in ("bench_packed", "bench_signed", "bench_fam"):
        probe(f"sizeof {name}", lambda: str(ctypes.sizeof(rec(name))))
    def write(t, f, v):
        x = rec(t)()
        setattr(x, f, v)
        return bytes(x).hex()
    for t, f, v in json.loads(sys.argv[3]):
        probe(f"bytes {t}.{f}", lambda: write(t, f, v))
    def read(f, v):
        x = rec("bench_signed")()
        setattr(x, f, v)
        return str(getattr(x, f))
    probe("read bench_signed.s", lambda: read("s", -3))
    probe("read bench_signed.neg", lambda: read("neg", -8))
    for k in ("BENCH_OCT_MODE", "BENCH_S_IFMT"):
        probe(f"macro {k}", lambda: str(getattr(m, k)) if hasattr(m, k) else "missing")
    print("@@JSON@@" + json.dumps(out))
""")

SPOT_SCRIPT = textwrap.dedent("""
    import ctypes, importlib, json, sys
    out = {"values": {}}
    try:
        m = importlib.import_module(sys.argv[1])
        for n in json.loads(sys.argv[2]):
            for pre in json.loads(sys.argv[3]):
                v = getattr(m, pre + n, None)
                if v is None:
                    continue
                if isinstance(v, type):
                    try:
                        v = ["sizeof", ctypes.sizeof(v)]
                    except TypeError as e:
                        v = ["sizeof", "error: " + str(e)]
                elif isinstance(v, (int, float, str, tuple)):
                    v = int(v) if isinstance(v, int) else v
                else:
                    v = repr(type(v))
                out["values"][n] = v
                break
    except BaseException as e:
        out = {"error": f"import failed: {type(e).__name__}: {e}"[:300]}
    print("@@JSON@@" + json.dumps(out))
""")


def summarise_runs(runs: list[dict]) -> dict:
    ok = [r for r in runs if "error" not in r]
    s: dict[str, Any] = {"runs": len(ok)}
    errs = [r["error"] for r in runs if "error" in r]
    if errs:
        s["error"] = errs[0]
    if ok:
        s["wall_s"] = median([r["wall_s"] for r in ok])
        s["wall_all_s"] = [round(r["wall_s"], 3) for r in ok]
        loads = [r["load"] for r in ok if r.get("load") is not None]
        s["load"] = [round(min(loads), 2), round(max(loads), 2)] if loads else None
        ip = [r["inproc_s"] for r in ok if "inproc_s" in r]
        s["inproc_s"] = median(ip)
        s["wrote"], s["same"] = ok[-1].get("wrote"), ok[-1].get("same")
        names = set().union(*(r.get("targets", {}).keys() for r in ok))
        s["targets"] = {
            n: median([r["targets"][n] for r in ok if n in r.get("targets", {})]) for n in names
        }
    return s


# ---------------------------------------------------------------- reporting


def spread(r: dict) -> str:
    """``N runs, MIN-MAX s, load A-B`` of a summary of regen runs: how far one figure is to
    trust."""
    walls = r.get("wall_all_s") or []
    if not walls:
        return "no runs"
    load = r.get("load")
    at = f", load {load[0]:.1f}-{load[1]:.1f}" if load else ""
    return f"{len(walls)} runs, {min(walls):.2f}-{max(walls):.2f} s{at}"


def fmt(v: Any, nd: int = 1) -> str:
    if v is None:
        return "-"
    if isinstance(v, (int, float)):
        return f"{v:.{nd}f}"
    return str(v)


def table(headers: list[str], rows: list[list[str]]) -> str:
    w = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=False)]
    line = lambda r: "| " + " | ".join(str(x).ljust(w[i]) for i, x in enumerate(r)) + " |"
    return "\n".join(
        [line(headers), "|" + "|".join("-" * (n + 2) for n in w) + "|"] + [line(r) for r in rows]
    )


def evaluate(res: dict) -> tuple[list[dict], list[dict]]:
    """PASS/FAIL of the issue targets and the ours-vs-peer ratios."""
    checks: list[dict] = []
    regen, imports = res.get("regen", {}), res.get("imports", {})

    def add(name: str, ok: bool | None, detail: str) -> None:
        checks.append(
            {
                "target": name,
                "result": "PASS" if ok else ("FAIL" if ok is False else "N/A"),
                "detail": detail,
            }
        )

    lw = regen.get("linux", {}).get("warm", {}).get("j2", {})
    if lw.get("wall_s") is not None:
        add(
            "linux group warm regen < 1 s (--jobs 2, wall)",
            lw["wall_s"] < PASS_TARGETS["linux_warm_regen_s"],
            f"{lw['wall_s']:.2f} s wall, median of {spread(lw)} ({fmt(lw.get('inproc_s'), 2)} s "
            f"in-process; --jobs 1 alternating with it: "
            f"{fmt(regen['linux']['warm'].get('j1', {}).get('wall_s'), 2)} s)",
        )
    else:
        add(
            "linux group warm regen < 1 s",
            None,
            regen.get("linux", {}).get("error", "not measured"),
        )
    nw = regen.get("nv", {}).get("warm", {}).get("j2", {})
    if nw.get("wall_s") is not None:
        add(
            "nv group generated < 3 s on 2 cores (--jobs 2, wall)",
            nw["wall_s"] < PASS_TARGETS["nv_regen_s"],
            f"{nw['wall_s']:.2f} s wall, median of {spread(nw)} ({fmt(nw.get('inproc_s'), 2)} s "
            f"in-process; --jobs 1: {fmt(regen['nv']['warm'].get('j1', {}).get('wall_s'), 2)} s; "
            f"per target ms: {nw.get('targets')})",
        )
    else:
        nvr = regen.get("nv", {})
        add(
            "nv group generated < 3 s",
            None,
            nvr.get("skipped") or nvr.get("error") or "not measured",
        )

    def mods(group: str) -> list[str]:
        return [m for m in imports if m.startswith(f"hcq_bindings.{group}.")]

    for group, lim_bc, lim_nobc in (
        ("linux", PASS_TARGETS["linux_import_bc_ms"], PASS_TARGETS["linux_import_nobc_ms"]),
        ("nv", PASS_TARGETS["nv_import_bc_ms"], PASS_TARGETS["nv_import_nobc_ms"]),
        ("amd", PASS_TARGETS["amd_import_ms"], None),
    ):
        for mode, lim in (("bc", lim_bc), ("nobc", lim_nobc)):
            if lim is None:
                continue
            ms = mods(group)
            vals = {m: imports[m][mode].get("cum_ms") for m in ms}
            how = "with" if mode == "bc" else "without"
            label = f"{group} modules import < {lim:g} ms cumulative ({how} bytecode)"
            if not ms or any(v is None for v in vals.values()):
                add(
                    label,
                    None,
                    "not measured: "
                    + "; ".join(
                        f"{m}: {imports[m][mode].get('error')}" for m in ms if vals[m] is None
                    )
                    if ms
                    else "not measured",
                )
                continue
            worst = max(vals, key=lambda m: vals[m])
            floor = imports.get("ctypes", {}).get(mode, {}).get("cum_ms")
            add(
                label,
                all(v < lim for v in vals.values()),
                ", ".join(f"{m.split('.')[-1]} {v:.2f}" for m, v in vals.items())
                + f" (worst {worst.split('.')[-1]}"
                + (f"; `import ctypes` alone: {floor:.2f})" if floor is not None else ")"),
            )
    # informational: AMD without bytecode against the same 10 ms
    ms = mods("amd")
    if ms and all(imports[m]["nobc"].get("cum_ms") is not None for m in ms):
        vals = {m: imports[m]["nobc"]["cum_ms"] for m in ms}
        checks.append(
            {
                "target": "amd modules < 10 ms without bytecode (stricter reading, informational)",
                "result": "PASS" if all(v < 10 for v in vals.values()) else "INFO-FAIL",
                "detail": ", ".join(f"{m.split('.')[-1]} {v:.2f}" for m, v in vals.items()),
            }
        )

    for mod, key in (("hcq_bindings.linux.kfd_ioctl", "kfd_ioctl_import_bc_ms"),
                     ("hcq_bindings.nv.rm_580", "rm_580_import_bc_ms")):
        b = imports.get(mod, {}).get("bc", {})
        v = b.get("cum_ms")
        lim = PASS_TARGETS[key]
        add(f"{mod.rsplit('.', 1)[1]} import < {lim:g} ms with bytecode", None if v is None
            else v < lim, f"{fmt_quartiles(b.get('cum_spread'))} ms cumulative, median [quartiles]; "
            f"CPU time {fmt_quartiles(b.get('cpu_spread'))} ms" if v is not None
            else "not measured")
    rec = res.get("runtime", {}).get("records", {})
    lim = PASS_TARGETS["record_ops_vs_ctypes"]
    for label, d in rec.items():
        if isinstance(d, dict) and "ours" in d:
            ratio = d["ours"] / d["ctypes"]
            add(f"{label} within {lim:g}x of plain ctypes", ratio <= lim,
                f"ours {d['ours']:.0f} ns, ctypes {d['ctypes']:.0f} ns ({ratio:.2f}x)")
    chk = res.get("runtime", {}).get("check", {})
    add("bindgen check --fast on an unchanged tree regenerates nothing (< 2 s wall)",
        None if "wall_s" not in chk else chk["wall_s"] < 2.0,
        f"{fmt(chk.get('wall_s'), 2)} s wall (median of 3)" if "wall_s" in chk
        else chk.get("error", "not measured"))

    ratios: list[dict] = []
    gen = res.get("peers", {}).get("generation", {})
    imp = res.get("compare", {}).get("imports", {})
    for peer in (*PEERS, "tinygrad shipped"):
        for name in sorted(set(gen) | set(imp), key=lambda t: (t == "rm_580", t)):
            r: dict[str, Any] = {"peer": peer, "target": name}
            pw = gen.get(name, {}).get(peer, {}).get("wall", {}).get("median")
            ow = gen.get(name, {}).get("ours", {}).get("wall", {}).get("median")
            if pw and ow:
                r["gen_wall_peer_over_ours"] = pw / ow
            for mode in ("bc", "nobc"):
                pc = imp.get(name, {}).get(peer, {}).get(mode, {}).get("cum_ms")
                oc = imp.get(name, {}).get("ours", {}).get(mode, {}).get("cum_ms")
                if pc and oc:
                    r[f"import_{mode}_peer_over_ours"] = pc / oc
            if len(r) > 2:
                ratios.append(r)
    dn = res.get("compare", {}).get("driver_names", {})
    ratio = dn.get("paired_ratio", {}).get("median")
    if ratio is not None:
        add(
            "NVIDIA driver's names: import + first use no slower than the baseline (median of "
            "per-round ratios <= 1.05)",
            ratio <= 1.05,
            f"ours {fmt_quartiles(dn['ours']['total_ms'])} ms, baseline "
            f"{fmt_quartiles(dn['baseline']['total_ms'])} ms; ours / baseline per round "
            f"{fmt_quartiles(dn['paired_ratio'])}",
        )
    return checks, ratios


def render(res: dict) -> str:
    out: list[str] = []
    meta = res["meta"]
    out.append(
        f"bindgen benchmark {meta['date']}  ({meta['host']}; {meta['cpus']} cores; Python "
        f"{meta['python']}; mode {meta['mode']}; git {meta['git']}; load average at start "
        f"{meta.get('loadavg_start')}, at end {meta.get('loadavg_end')})"
    )
    regen = res.get("regen", {})
    if regen.get("error"):
        out.append(f"\nregen: ERROR {regen['error']}")
    st = regen.get("startup", {})
    if st:
        out.append(
            f"\nGenerator start-up (python + import bindgen.generate): "
            f"{fmt(st.get('import_generator_s'), 3)} s without bytecode, "
            f"{fmt(st.get('import_generator_bc_s'), 3)} s with (bare python "
            f"{fmt(st.get('bare_python_s'), 3)} s) {st.get('error', '')}"
        )
    rows = []
    for g in GROUPS:
        r = regen.get(g)
        if r is None:
            continue
        if r.get("skipped"):
            rows.append([g, "-", "skipped: " + r["skipped"], "", "", "", "", ""])
            continue
        res_s = r.get("resolve", {})
        cold = r.get("cold", {})
        for jobs in ("j2", "j1"):
            w = r.get("warm", {}).get(jobs, {})
            n = r.get("noop", {}).get(jobs, {})
            wb = r.get("warm_bc", {}).get(jobs, {})
            err = (
                r.get("error")
                or w.get("error")
                or n.get("error")
                or (cold.get("error") if jobs == "j2" else None)
            )
            rows.append(
                [
                    g,
                    jobs[1:],
                    fmt(res_s.get("wall_s"), 1) if jobs == "j2" and res_s else "",
                    (
                        f"{fmt(cold.get('wall_s'), 2)} ({fmt(cold.get('inproc_s'), 2)})"
                        if jobs == "j2" and "wall_s" in cold
                        else ("" if jobs == "j1" else cold.get("skipped", "-"))
                    ),
                    f"{fmt(w.get('wall_s'), 2)} ({fmt(w.get('inproc_s'), 2)})",
                    (f"{fmt(wb.get('wall_s'), 2)} ({fmt(wb.get('inproc_s'), 2)})" if wb else ""),
                    f"{fmt(n.get('wall_s'), 2)} ({fmt(n.get('inproc_s'), 2)}) "
                    f"same {n.get('same', '-')}/{len(r.get('targets', []))}",
                    (err or "")[:120],
                ]
            )
    if rows:
        out.append("\n## Regeneration (seconds: process wall (in-process `regen:` total); median)")
        out.append(
            table(
                [
                    "group",
                    "jobs",
                    "download+unpack (fresh cache)",
                    "cold gen",
                    "warm",
                    "warm, bindgen/ with bytecode",
                    "no-op",
                    "error",
                ],
                rows,
            )
        )
        spreads = [
            f"{g} --jobs {j[1:]}: {spread(regen[g]['warm'][j])}"
            for g in GROUPS
            for j in ("j2", "j1")
            if regen.get(g, {}).get("warm", {}).get(j, {}).get("wall_all_s")
        ]
        if spreads:
            out.append("Warm runs (the two job counts alternate): " + "; ".join(spreads))
        per = []
        for g in GROUPS:
            t = regen.get(g, {}).get("warm", {}).get("j1", {}).get("targets")
            if t:
                per.append(f"{g}: " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(t.items())))
        if per:
            out.append("Per-target generation, ms in-process (warm, --jobs 1): " + "; ".join(per))
        srcs = []
        for g in GROUPS:
            for name, s in regen.get(g, {}).get("resolve", {}).get("sources", {}).items():
                if s.get("seconds", 0) >= 0.05:
                    srcs.append(f"{g}/{name} ({s.get('kind')}) {s['seconds']:.1f} s")
        if srcs:
            out.append("Source resolution into a fresh cache: " + "; ".join(srcs))

    imports = res.get("imports", {})
    if imports:
        out.append(
            f"\n## Import time (ms, median [quartiles] of {meta['reps']} fresh interpreters; "
            "`-X importtime`; interpreter: clean venv)"
        )
        rows = []
        for mod, r in imports.items():
            if not isinstance(r, dict) or "bc" not in r:
                continue
            b, n = r["bc"], r["nobc"]
            bd = b.get("breakdown", {})
            nd = n.get("breakdown", {})
            rows.append(
                [
                    mod,
                    fmt(b.get("self_ms"), 2),
                    fmt_quartiles(b.get("cum_spread")),
                    fmt(b.get("cpu_ms"), 2),
                    fmt(n.get("self_ms"), 2),
                    fmt_quartiles(n.get("cum_spread")),
                    f"{fmt(bd.get('ctypes_cum'), 2)} / {fmt(nd.get('ctypes_cum'), 2)}",
                    f"{fmt(bd.get('cabi_self'), 2)} / {fmt(nd.get('cabi_self'), 2)}",
                    (b.get("error") or n.get("error") or "")[:80],
                ]
            )
        out.append(
            table(
                [
                    "module",
                    "bc self",
                    "bc cum [q1–q3]",
                    "bc cpu",
                    "no-bc self",
                    "no-bc cum [q1–q3]",
                    "of which ctypes (bc / no-bc)",
                    "cabi self (bc / no-bc)",
                    "error",
                ],
                rows,
            )
        )
    lazy = res.get("lazy", {})
    if lazy:
        out.append(
            "\n## Lazy modules (ms, in-process perf_counter: import, first attribute, "
            "then everything)"
        )
        rows = []
        for mod, r in lazy.items():
            for mode in ("bc", "nobc"):
                x = r.get(mode, {})
                rows.append(
                    [
                        mod,
                        mode,
                        x.get("attr", "-"),
                        fmt(x.get("import_ms"), 2),
                        fmt(x.get("first_attr_ms"), 2),
                        fmt(x.get("second_attr_ms"), 3),
                        fmt(x.get("materialize_all_ms"), 0),
                        fmt(x.get("names"), 0),
                        x.get("error", ""),
                    ]
                )
        out.append(
            table(
                [
                    "module",
                    "mode",
                    "attribute",
                    "import",
                    "first access",
                    "second access",
                    "__materialize_all__",
                    "names",
                    "error",
                ],
                rows,
            )
        )

    peers = res.get("peers", {})
    if peers.get("skipped"):
        out.append(f"\n## Peers: skipped ({peers['skipped']})")
    elif peers:
        if peers.get("error"):
            out.append(f"\n## Peers: ERROR {peers['error']}")
        gen = peers.get("generation", {})
        names = sorted(gen, key=lambda t: (t == "rm_580", t))
        rows = []
        for t in names:
            row = [t]
            for tool in ("ours", *PEERS):
                g = gen[t].get(tool)
                if g is None:
                    available = tool == "ours" or peers.get(tool, {}).get("available", True)
                    err = peers.get(tool, {}).get("targets", {}).get(t, {}).get("error")
                    row.append(f"ERROR: {err[:60]}" if err else ("-" if available
                                                                   else "unavailable"))
                    continue
                extra = f" ({g['inproc_ms']:.0f} ms)" if g.get("inproc_ms") is not None else ""
                cell = fmt_quartiles(g.get("wall")) + extra
                row.append(f"{cell} ERROR: {g['error'][:60]}" if g.get("error") else cell)
            rows.append(row)
        out.append(
            "\n## Peers: generation per target (s, process wall, median [quartiles] of rounds that "
            "run every tool in turn; in-process ms in brackets: ours `regen TARGET --jobs 1` with "
            "bytecode for bindgen/, tinygrad's `gen`)"
        )
        out.append(table(["target", "ours", *PEERS], rows))
        for p in PEERS:
            if peers.get(p, {}).get("available") is False:
                out.append(f"{p}: unavailable: {peers[p].get('error')}")
        sc = peers.get("spot_checks", {})
        if sc:
            rows = []
            for t, r in sc.items():
                row = [t]
                for p in PEERS:
                    x = r.get(p)
                    if x is None:
                        row.append("-")
                    elif "error" in x:
                        row.append(f"ERROR: {x['error'][:70]}")
                    else:
                        bad = ", ".join(
                            f"{n}={x['values'].get(n, 'missing')} "
                            f"(ours {r['ours']['values'].get(n)})"
                            for n in x["mismatch"]
                        )
                        row.append(f"{x['match']}/{x['of']}" + (f" [{bad}]" if bad else ""))
                rows.append(row)
            out.append(
                "\n## Spot checks: sizeof / constant values equal to ours "
                "(ours are verified against clang)"
            )
            out.append(table(["target", *PEERS], rows))

    cmp = res.get("compare", {})
    if cmp.get("imports"):
        cols = ["ours"] + (["baseline"] if "baseline" in cmp and "error" not in cmp["baseline"]
                           else []) + [*PEERS, "tinygrad shipped"]
        rows = []
        for t, r in cmp["imports"].items():
            row = [t]
            for c in cols:
                modes = r.get(c)
                if not modes:
                    row.append("-")
                    continue
                cells = []
                for mode in ("bc", "nobc"):
                    x = modes.get(mode)
                    if x is None:
                        continue
                    cells.append(f"ERROR: {x['error'][:50]}" if x.get("error")
                                 else fmt_quartiles(x.get("cum_spread")))
                row.append(" / ".join(cells))
            rows.append(row)
        base = cmp.get("baseline", {})
        out.append(
            "\n## Imports side by side (ms cumulative, with / without bytecode; median [quartiles] "
            f"of {meta['reps']} rounds, each importing every column once in turn, fresh "
            "interpreters, clean venv"
            + (f"; baseline = ours at {base['ref']}" if base.get("ref") else "")
            + "; tinygrad shipped = its wheel's module for the same header, bytecode only)"
        )
        if base.get("error"):
            out.append(f"baseline {base.get('ref')}: ERROR {base['error']}")
        out.append(table(["target", *cols], rows))
    dn = cmp.get("driver_names")
    if dn:
        parts = []
        for label in ("ours", "baseline"):
            x = dn.get(label)
            if not x:
                continue
            if "total_ms" in x:
                parts.append(
                    f"{label} {fmt_quartiles(x['total_ms'])} ms (import {fmt_quartiles(x['import_ms'])}, "
                    f"first use {fmt_quartiles(x['use_ms'])}; {x.get('found')} of the "
                    f"{dn['names']} names spelled `rm.X`/`cl.X` are bindings)"
                )
            else:
                parts.append(f"{label} ERROR {x.get('error')}")
        out.append(
            "\nNVIDIA driver's names (import rm_580 and classes, then first use of every name "
            "runtime/drivers/nv spells; fresh interpreter, bytecode, same rounds): " + "; ".join(parts)
        )

    tricky = peers.get("tricky", {}) if isinstance(peers, dict) else {}
    if tricky.get("truth"):
        tools = [k for k in ("ours", *PEERS) if k in tricky]
        rows = []
        for key, want in tricky["truth"].items():
            row = [key, want]
            for tool in tools:
                r = tricky[tool]
                if "error" in r:
                    row.append("ERROR")
                else:
                    row.append("ok" if key not in r["wrong"] else f"WRONG {r['wrong'][key]}"[:40])
            rows.append(row)
        total = ["correct", ""]
        for tool in tools:
            r = tricky[tool]
            total.append(
                f"{r['correct']}/{r['of']}" if "correct" in r else f"ERROR: {r['error']}"[:70]
            )
        rows.append(total)
        out.append(
            "\n## Synthetic cases (octal macros, packed / signed / zero-width bitfields, flexible "
            "array), gcc is the truth (bytes after writing the field into a zeroed object)"
        )
        out.append(table(["case", "gcc", *tools], rows))
    elif tricky.get("error"):
        out.append(f"\nSynthetic cases: ERROR {tricky['error']}")

    checks, ratios = res.get("checks", []), res.get("ratios", [])
    if ratios:
        out.append("\n## Ratios of medians from the same rounds (peer / ours; > 1 means we are "
                   "faster)")
        out.append(
            table(
                ["peer", "target", "generation", "import (bc)", "import (no bc)"],
                [
                    [
                        r["peer"],
                        r["target"],
                        fmt(r.get("gen_wall_peer_over_ours"), 2),
                        fmt(r.get("import_bc_peer_over_ours"), 2),
                        fmt(r.get("import_nobc_peer_over_ours"), 2),
                    ]
                    for r in ratios
                ],
            )
        )
    if checks:
        out.append("\n## Targets")
        for c in checks:
            out.append(f"{c['result']:<9} {c['target']}: {c['detail']}")
    if res.get("diagnosis"):
        out.append(
            "\n## Where the import time goes (median run, ms; typing and ctypes are cumulative, "
            "`cabi body` is bindgen_rt's own, packages = generated, generated.GROUP, bindgen)"
        )
        out.extend(res["diagnosis"])
    if res.get("errors"):
        out.append("\n## Errors")
        out.extend(res["errors"])
    return "\n".join(out)


def diagnose(res: dict) -> list[str]:
    """For each generated module (median run): cumulative = the module's own body + ctypes + typing
    + bindgen_rt's own body + the packages (generated, generated.X, bindgen) + anything else."""
    lines = []
    imports = res.get("imports", {})
    for mode in ("bc", "nobc"):
        for mod, r in imports.items():
            if not (
                mod.startswith("hcq_bindings.") or mod == "bindgen_rt"
            ) or "breakdown" not in r.get(mode, {}):
                continue
            b = r[mode]["breakdown"]
            parts = {
                "self": b["module_self"],
                "ctypes": b.get("ctypes_cum", 0.0),
                "typing": b.get("typing_cum", 0.0),
                "cabi body": b.get("cabi_self", 0.0),
                "packages": b.get("packages_self", 0.0),
            }
            other = b["cum"] - sum(parts.values())
            lines.append(
                f"{mode:<4} {mod:<28} cum {b['cum']:6.2f} = "
                + " + ".join(f"{k} {v:.2f}" for k, v in parts.items())
                + f" + other {other:.2f}"
            )
    return lines


def loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"JSON output (default {DEFAULT_OUT})"
    )
    ap.add_argument("--quick", action="store_true", help="fewer repetitions, no peers")
    ap.add_argument("--no-peers", action="store_true", help="skip the peer generators")
    ap.add_argument(
        "--no-cold",
        action="store_true",
        help="skip the fresh-cache run (warm runs use --bindgen-cache / the default cache)",
    )
    ap.add_argument(
        "--groups", default=",".join(GROUPS), help="comma-separated groups (default all)"
    )
    ap.add_argument(
        "--reps", type=int, default=None, help="import repetitions (default 7, --quick 3)"
    )
    ap.add_argument(
        "--regen-reps",
        type=int,
        default=None,
        help="warm/no-op repetitions (default linux 5, nv 3, amd 2; --quick: linux 3, others 1)",
    )
    ap.add_argument(
        "--cache-dir",
        type=Path,
        default=DEFAULT_CACHE,
        help=f"where peer virtual environments are kept (default {DEFAULT_CACHE})",
    )
    ap.add_argument("--bindgen-cache", default=None, help="populated bindgen cache for --no-cold")
    ap.add_argument(
        "--libclang",
        default=None,
        help="libclang.so for tinygrad (default: the pip libclang 18 that bindgen uses)",
    )
    ap.add_argument(
        "--baseline",
        default=None,
        metavar="REF",
        help="also import bindgen_rt/ and generated/ of this git commit, in the same rounds as "
        "ours (the peer targets and the NVIDIA driver's names)",
    )
    ap.add_argument("--keep-tmp", action="store_true", help="keep the temporary folder")
    args = ap.parse_args(argv)
    args.groups = [g.strip() for g in args.groups.split(",") if g.strip()]
    unknown = [g for g in args.groups if g not in GROUPS]
    if unknown:
        print(
            f"bench_bindgen: unknown group(s) {unknown}; known: {', '.join(GROUPS)}",
            file=sys.stderr,
        )
        return 2
    args.reps = args.reps or (3 if args.quick else 7)
    if args.libclang is None:
        try:
            import importlib.util

            spec = importlib.util.find_spec("clang")
            if spec and spec.submodule_search_locations:
                cand = Path(list(spec.submodule_search_locations)[0]) / "native" / "libclang.so"
                args.libclang = str(cand) if cand.exists() else ""
        except Exception:
            args.libclang = ""
    args.cache_dir.mkdir(parents=True, exist_ok=True)

    start = time.perf_counter()
    git = run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], timeout=30)
    dirty = run(
        ["git", "-C", str(REPO), "status", "--porcelain", "--", "bindgen", "bindgen_rt", "generated"],
        timeout=30,
    )
    res: dict[str, Any] = {
        "meta": {
            "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            "host": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "git": (git.out.strip() or "?")
            + (" (bindgen/ or generated/ modified)" if dirty.out.strip() else ""),
            "mode": "quick" if args.quick else ("no-peers" if args.no_peers else "full"),
            "reps": args.reps,
            "argv": sys.argv[1:],
            "loadavg_start": loadavg(),
            "libclang_for_tinygrad": args.libclang or None,
        }
    }
    errors: list[str] = []
    tmp = Path(tempfile.mkdtemp(prefix="bench_bindgen_"))
    bench = Bench(args, tmp, res)
    phases: list[tuple[str, Callable[[], None]]] = [
        ("clean interpreter", bench.setup_clean_python),
        ("regen", bench.bench_regen),
        ("imports", bench.bench_imports),
        ("records and check", bench.bench_runtime),
    ]
    if args.quick or args.no_peers:
        res["peers"] = {"skipped": "--quick" if args.quick else "--no-peers"}
    else:
        phases.append(("peers", bench.bench_peers))
    phases.append(("import comparison", bench.compare_imports))
    try:
        for name, fn in phases:
            try:
                fn()
            except KeyboardInterrupt:
                errors.append(f"{name}: interrupted")
                break
            except Exception as e:
                errors.append(f"{name}: {type(e).__name__}: {e}")
                log(traceback.format_exc())
        try:
            res["checks"], res["ratios"] = evaluate(res)
            res["diagnosis"] = diagnose(res)
        except Exception as e:
            errors.append(f"evaluate: {type(e).__name__}: {e}")
        res["errors"] = errors
        res["meta"]["total_s"] = round(time.perf_counter() - start, 1)
        res["meta"]["loadavg_end"] = loadavg()
        try:
            text = render(res)
        except Exception as e:
            text = f"(rendering failed: {type(e).__name__}: {e}; see the JSON)"
        print(text)
        print(f"\ntotal {res['meta']['total_s']:.0f} s")
        try:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(res, indent=1, default=str) + "\n")
            print(f"JSON: {args.out}")
        except OSError as e:
            print(f"cannot write {args.out}: {e}", file=sys.stderr)
    finally:
        if args.keep_tmp:
            print(f"temporary folder kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    failed = [c for c in res.get("checks", []) if c["result"] == "FAIL"]
    return 1 if failed or errors else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
