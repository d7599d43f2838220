"""bindgen's time and peak memory against header size (memory must stay linear in it).

Generates headers of N structs, either chained (each points at the previous one: the case whose
memory grew quadratically through ctypes' PEP 3118 pointer formats) or independent, optionally
with M macros, and runs ``bindgen regen`` on each in a fresh process (one job), then imports the
result in another. Prints wall time and peak RSS (ru_maxrss) of both.

    .venv/bin/python scripts/bench_bindgen_size.py            # 1k, 10k, 50k; chained, independent
    .venv/bin/python scripts/bench_bindgen_size.py --sizes 1000 10000 --lazy

Goal (on a 2-core CI-class machine): 50,000 structs in < 60 s and < 2 GB peak.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

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


def header(n: int, chained: bool, macros: int) -> str:
    out = ["struct s0 { int v; };"]
    for i in range(1, n):
        link = f"struct s{i - 1} *prev; " if chained else ""
        out.append(f"struct s{i} {{ {link}int v; long w; }};")
    out += [f"#define M{k} ({k} << 2)" for k in range(macros)]
    return "\n".join(out) + "\n"


def measure(body: str, cwd: Path) -> dict[str, float]:
    r = subprocess.run(
        [sys.executable, "-c", _RUN.format(body=body)],
        cwd=cwd, capture_output=True, text=True,
    )
    if r.returncode:
        return {"s": float("nan"), "rss_mb": float("nan"), "error": r.stderr.strip()[-300:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def case(work: Path, n: int, chained: bool, macros: int, lazy: bool) -> dict[str, float]:
    import yaml

    name = f"{'chain' if chained else 'indep'}_{n}_{macros}"
    d = work / name
    (d / "src").mkdir(parents=True)
    (d / "specs").mkdir()
    (d / "src" / "h.h").write_text(header(n, chained, macros))
    spec = {
        "group": "bench",
        "sources": {"src": {"kind": "system", "path": str(d / "src"), "package": "none"}},
        "targets": {name: {"headers": ["src:h.h"], "lazy": lazy}},
    }
    (d / "specs" / "bench.yaml").write_text(yaml.safe_dump(spec))
    gen = measure(
        "from bindgen.cli import main\n"
        f"rc = main(['--specs', 'specs', '--out', 'out', '--package', 'out', 'regen', '-j', '1'])\n"
        "assert rc == 0, rc",
        d,
    )
    imp = measure(
        f"import out.bench.{name} as m\n"
        "getattr(m, '__materialize_all__', lambda: None)()\n"
        f"assert m.s{n - 1}",
        d,
    )
    return {"gen_s": gen["s"], "gen_mb": gen["rss_mb"], "imp_s": imp["s"], "imp_mb": imp["rss_mb"],
            "error": gen.get("error") or imp.get("error") or ""}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 50000])
    ap.add_argument("--macros", type=int, default=0, help="macros added to every header")
    ap.add_argument("--lazy", action="store_true", help="generate lazy modules")
    args = ap.parse_args()
    print(f"bindgen size benchmark ({'lazy' if args.lazy else 'eager'} modules, "
          f"{args.macros} macros per header); goal at 50k: < 60 s and < 2048 MB")
    print(f"{'header':<22}{'regen s':>9}{'regen MB':>10}{'import s':>10}{'import MB':>11}")
    failed = False
    with tempfile.TemporaryDirectory(prefix="bindgen-size-") as tmp:
        for n in args.sizes:
            for chained in (True, False):
                r = case(Path(tmp), n, chained, args.macros, args.lazy)
                label = f"{n:,} {'chained' if chained else 'independent'}"
                print(f"{label:<22}{r['gen_s']:9.1f}{r['gen_mb']:10.0f}{r['imp_s']:10.2f}"
                      f"{r['imp_mb']:11.0f}", flush=True)
                if r["error"]:
                    print(f"  error: {r['error']}")
                    failed = True
                if n >= 50000 and not (r["gen_s"] < 60 and r["gen_mb"] < 2048):
                    print("  over the goal (< 60 s, < 2048 MB)")
                    failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
