"""What the profiler hooks cost a launch: two source trees (one without the hooks, one with them)
timed alternately in fresh processes on the same GPU, and the cost per launch with a profile open.

    python scripts/bench_profile_cost.py [--tree A=path/to/base --tree B=path/to/this] [--device nv:0]

Each run measures launch+wait (median of 1000) and 1000 back-to-back launches with one wait (best
of 5), in a process of its own that imports the runtime from the given tree. Trees are run in turn,
twice each (A B A B), so that drift of the machine shows. Where the tree has the profiler, the run
also times the same 1000 launches with `runtime.hcq.profile()` open.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

_RUN = r"""
import json, statistics, sys, time
dev_name, cubin = sys.argv[1], sys.argv[2]
from runtime.hcq import open_device
import runtime.hcq as hcq
dev = open_device(dev_name)
prg = dev.program(open(cubin, "rb").read(), "inc")  # the tests' prebuilt kernels (sm_90)
x = dev.alloc(4096)
g, l = (4, 1, 1), (256, 1, 1)
def launch():
    prg(x, 1024, global_size=g, local_size=l)
for _ in range(300):
    launch()
dev.synchronize()
tl = dev.timeline_signal
lat = []
for _ in range(1000):
    t = time.perf_counter(); launch(); tl.wait(dev.timeline_value); lat.append(time.perf_counter() - t)
def b2b():
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(1000):
            launch()
        dev.synchronize()
        best = min(best, time.perf_counter() - t)
    return best
out = {"launch+wait median us": statistics.median(lat) * 1e6, "1000 launches ms": b2b() * 1e3}
if hasattr(hcq, "profile"):
    with hcq.profile() as p:
        out["1000 launches, profile open ms"] = b2b() * 1e3
    out["profiled events"] = len(p.events)
dev.close()
print("JSON" + json.dumps(out))
"""


def run_tree(tree: Path, device: str) -> dict:
    links = tempfile.mkdtemp(prefix="hcq_path_")
    os.symlink(tree.resolve() / "generated", Path(links) / "hcq_bindings")
    env = dict(os.environ, PYTHONPATH=f"{tree.resolve()}:{links}")
    cubin = tree.resolve() / "tests" / "runtime" / "data" / "nv_kernels_cuda13.cubin"
    r = subprocess.run([sys.executable, "-c", _RUN, device, str(cubin)], capture_output=True,
                       text=True,
                       env=env, timeout=300, cwd=tempfile.gettempdir())
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("JSON")), None)
    return json.loads(line[4:]) if line else {"error": (r.stderr or r.stdout)[-1500:]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", default=[],
                    help="NAME=PATH, repeatable (default: this checkout only)")
    ap.add_argument("--device", default="nv:0")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", default="bench_profile_cost.json")
    args = ap.parse_args(argv)
    trees = [(t.split("=", 1)[0], Path(t.split("=", 1)[1])) for t in args.tree] or \
        [("this", Path(__file__).resolve().parents[1])]
    results = []
    for rnd in range(args.rounds):
        for name, path in trees:
            res = run_tree(path, args.device)
            results.append({"tree": name, "round": rnd, **res})
            print(name, rnd, json.dumps(res), flush=True)
    Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
