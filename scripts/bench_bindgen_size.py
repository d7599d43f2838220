"""bindgen's time and peak memory against header size (memory must stay linear in it).

Generates headers of N structs, either chained (each points at the previous one: the case whose
memory grew quadratically through ctypes' PEP 3118 pointer formats), independent, or mixed (chained
structs of a few fields, and for every fourth one an enum, a function and a macro), optionally with
M more macros, and runs ``bindgen regen`` on each in a fresh process (one job), then imports the
result in three more: the first imports it and uses its last record, without bytecode and writing
none (what a user gets right after regenerating their own headers: a target whose spec does not
say ``lazy`` is lazy above 1 MiB of module text), the second imports it whole
(``__materialize_all__`` where lazy), compiling it and writing its bytecode cache, the third reads
that cache, as an installed package does; beside that, the same module rewritten into the
shape bindgen wrote before record pointer fields were made on first use (``old_shape``), imported
from its cache the same way. Beside them, libclang alone on the same header in
a fresh process (parse, walk every cursor, with bindgen imported as the generator has it), so the
generator's own memory per record is the difference. Prints wall time and peak RSS (ru_maxrss).

    .venv/bin/python scripts/bench_bindgen_size.py            # 1k, 10k, 50k; chained, independent
    .venv/bin/python scripts/bench_bindgen_size.py --sizes 10000 50000 --kinds mixed
    .venv/bin/python scripts/bench_bindgen_size.py --lazy false   # force eager modules (or true)

Goals (on a 2-core CI-class machine): 50,000 structs in < 60 s and < 2 GB peak; the generator at
most 10 KB a record above libclang alone; the 50,000-record import at most 2 s and 500 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any, NotRequired, TypedDict

REPO = Path(__file__).resolve().parents[1]

_RUN = textwrap.dedent(
    """
    import json, resource, sys, time
    t = time.perf_counter()
    {body}
    print(json.dumps({{"s": time.perf_counter() - t,
                      "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
    """
)


# libclang alone: what the generator's parse step asks of it, with nothing kept in Python
_CLANG_ALONE = textwrap.dedent(
    """
    import bindgen.generate  # the interpreter as the generator has it (imports, not records)
    import clang.cindex as ci
    tu = ci.Index.create().parse("src/h.h", args=["-x", "c", "-std=gnu11", "-nostdinc"])
    n = sum(1 for _ in tu.cursor.walk_preorder())
    """
)


def header(n: int, kind: str, macros: int) -> str:
    """``kind``: "chained", "independent" or "mixed" (see the module docstring)."""
    out = ["struct s0 { int v; };"]
    for i in range(1, n):
        if kind == "mixed":
            out.append(f"struct s{i} {{ struct s{i - 1} *prev; int v; long w; "
                       "unsigned char tag[4]; };")
            if i % 4 == 0:
                out.append(f"enum e{i} {{ E{i}_A, E{i}_B = {i}, E{i}_C }};")
                out.append(f"int f{i}(struct s{i} *p, int x);")
                out.append(f"#define M_{i} (E{i}_B << 2 | 1)")
            continue
        link = f"struct s{i - 1} *prev; " if kind == "chained" else ""
        out.append(f"struct s{i} {{ {link}int v; long w; }};")
    out += [f"#define M{k} ({k} << 2)" for k in range(macros)]
    return "\n".join(out) + "\n"


class Measured(TypedDict):
    """One fresh process's figures (`measure`): wall time, peak RSS, and its error if it failed."""

    s: float
    rss_mb: float
    error: NotRequired[str]


class CaseFigures(TypedDict):
    """A header's figures (`case`): seconds and MB per step, whether the module came out lazy
    (1.0 or 0.0), and the first error of its steps ("" if none)."""

    gen_s: float
    gen_mb: float
    clang_mb: float
    first_s: float
    first_mb: float
    lazy: float
    imp_s: float
    imp_mb: float
    pyc_s: float
    pyc_mb: float
    old_s: float
    old_mb: float
    error: str


def measure(body: str, cwd: Path, bytecode: bool = False) -> Measured:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    r = subprocess.run(
        [sys.executable, "-c", _RUN.format(body=body)],
        cwd=cwd, capture_output=True, text=True, env=env,
    )
    if r.returncode:
        return {"s": float("nan"), "rss_mb": float("nan"), "error": r.stderr.strip()[-300:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def old_shape(text: str) -> str:
    """The module in the shape bindgen wrote before pointer fields were made on first use: every
    ``_rt.ptr(X)`` field a ``POINTER(X)`` made on import, and X's layout making it first
    (``pointee=True``, which keeps pointer formats short)."""
    targets = set(re.findall(r"_rt\.ptr\((\w+)\)", text))
    text = re.sub(r"_rt\.ptr\((\w+)\)", r"POINTER(\1)", text)
    text = text.replace("import bindgen_rt as _rt\n", "from ctypes import POINTER\n"
                        "import bindgen_rt as _rt\n", 1)

    def pointee(m: re.Match) -> str:
        return m.group(0)[:-1] + ", pointee=True)" if m.group(1) in targets else m.group(0)

    return re.sub(r"^(\w+)\._layout_\(.*?^\]\)$", pointee, text, flags=re.M | re.S)


def case(work: Path, n: int, kind: str, macros: int, lazy: bool | None) -> CaseFigures:
    import yaml

    name = f"{kind}_{n}_{macros}"
    d = work / name
    (d / "src").mkdir(parents=True)
    (d / "specs").mkdir()
    (d / "src" / "h.h").write_text(header(n, kind, macros))
    spec: dict[str, Any] = {
        "group": "bench",
        "sources": {"src": {"kind": "system", "path": str(d / "src"), "package": "none"}},
        "targets": {name: {"headers": ["src:h.h"]}},
    }
    if lazy is not None:
        spec["targets"][name]["lazy"] = lazy
    (d / "specs" / "bench.yaml").write_text(yaml.safe_dump(spec))
    gen = measure(
        "from bindgen.cli import main\n"
        f"rc = main(['--specs', 'specs', '--out', 'out', '--package', 'out', 'regen', '-j', '1'])\n"
        "assert rc == 0, rc",
        d,
    )
    clang = measure(_CLANG_ALONE, d)
    first = measure(f"import out.bench.{name} as m\nassert m.s{n - 1}(v=1).v == 1", d)
    use = (
        f"import out.bench.{name} as m\n"
        "getattr(m, '__materialize_all__', lambda: None)()\n"
        f"assert m.s{n - 1}"
    )
    imp = measure(use, d, bytecode=True)  # compiles, and writes the bytecode cache
    cached = measure(use, d, bytecode=True)
    old: Measured = {"s": float("nan"), "rss_mb": float("nan")}
    if not (d / "out" / "bench" / f"_{name}.py").exists():  # eager: the old shape beside it
        (d / "old" / "bench").mkdir(parents=True)
        for f in ("__init__.py", f"{name}.py"):
            (d / "old" / "bench" / f).write_text((d / "out" / "bench" / f).read_text())
        path = d / "old" / "bench" / f"{name}.py"
        path.write_text(old_shape(path.read_text()))
        old_use = use.replace("import out.", "import old.")
        measure(old_use, d, bytecode=True)
        old = measure(old_use, d, bytecode=True)
    return {"gen_s": gen["s"], "gen_mb": gen["rss_mb"], "clang_mb": clang["rss_mb"],
            "first_s": first["s"], "first_mb": first["rss_mb"],
            "lazy": float((d / "out" / "bench" / f"_{name}.py").exists()),
            "imp_s": imp["s"], "imp_mb": imp["rss_mb"],
            "pyc_s": cached["s"], "pyc_mb": cached["rss_mb"],
            "old_s": old["s"], "old_mb": old["rss_mb"],
            "error": gen.get("error") or clang.get("error") or imp.get("error")
            or cached.get("error") or old.get("error") or first.get("error") or ""}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 50000])
    ap.add_argument("--macros", type=int, default=0, help="macros added to every header")
    ap.add_argument("--lazy", choices=["true", "false"], default=None,
                    help="force lazy (or eager) modules; default: the spec leaves it out")
    ap.add_argument("--kinds", nargs="+", default=["chained", "independent"],
                    choices=["chained", "independent", "mixed"])
    args = ap.parse_args()
    lazy = None if args.lazy is None else args.lazy == "true"
    shape = {None: "lazy when over 1 MiB", True: "lazy", False: "eager"}[lazy]
    print(f"bindgen size benchmark ({shape} modules, "
          f"{args.macros} macros per header); goals at 50k: regen < 60 s and < 2048 MB, "
          "<= 10 KB a record above libclang; import <= 2 s and <= 500 MB")
    print("first: import and use of the last record, no bytecode; whole: every definition made, "
          "compiled and bytecode written; cached: whole, from that bytecode")
    print(f"{'header':<22}{'regen s':>9}{'regen MB':>10}{'libclang MB':>12}{'KB/rec':>8}"
          f"{'module':>8}{'first s':>9}{'first MB':>10}"
          f"{'whole s':>9}{'whole MB':>10}{'cached s':>10}{'cached MB':>11}"
          f"{'old shape s':>12}{'old MB':>8}")
    failed = False
    with tempfile.TemporaryDirectory(prefix="bindgen-size-") as tmp:
        for n in args.sizes:
            for kind in args.kinds:
                r = case(Path(tmp), n, kind, args.macros, lazy)
                per = (r["gen_mb"] - r["clang_mb"]) * 1024 / n
                label = f"{n:,} {kind}"
                print(f"{label:<22}{r['gen_s']:9.1f}{r['gen_mb']:10.0f}{r['clang_mb']:12.0f}"
                      f"{per:8.1f}{'lazy' if r['lazy'] else 'eager':>8}{r['first_s']:9.2f}"
                      f"{r['first_mb']:10.0f}{r['imp_s']:9.2f}{r['imp_mb']:10.0f}{r['pyc_s']:10.2f}"
                      f"{r['pyc_mb']:11.0f}{r['old_s']:12.2f}{r['old_mb']:8.0f}", flush=True)
                if r["error"]:
                    print(f"  error: {r['error']}")
                    failed = True
                if n >= 50000 and not (r["gen_s"] < 60 and r["gen_mb"] < 2048):
                    print("  over the goal (< 60 s, < 2048 MB)")
                    failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
