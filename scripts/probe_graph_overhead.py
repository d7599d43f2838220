#!/usr/bin/env python3
"""Where a graph replay's wall time goes beyond its GPU time, on a real NVIDIA GPU.

A replay's wall (from the call of `replay()` to the CPU seeing the timeline value, the CPU
polling throughout) exceeds the GPU time its own timestamps give (first to last) by a few
microseconds of head (CPU to doorbell, the channel fetching the submission) and tail (the
release, the CPU's next poll). This probe replays chains of n = 1 ... 3000 dependent launches
(the tiny kernel of scripts/bench_graphs.py; plain and early-start) and fits wall and GPU time
against n: if the overhead is a head and a tail, wall - GPU is the same at every n and both
slopes agree; a wall slope above the GPU slope means the GPU's timer runs slow against the
host's clock (the timestamps then understate every GPU time), or that per-launch work happens
outside the timestamps.

It also prints the hot path's launch + wait in the same process, and can move what the
graphs' launch blocks sit on (--prealloc-mb, --huge-kernargs) or launch through the hot path
before any graph is built (--hot-first), to tell placement and first use from the mechanism.
`--placements K` then replays the plain chain of 1000 with its data at K places in one 64 MiB
buffer (offsets a multiple of 68 KiB apart, so they fall on different memory partitions and
L2 slices), first and last at the same place: whether where the kernel's data lies sets the
chain's GPU time. `--split` splits a replay's wall in host time: the CPU polls the replay's
first timestamp, its last, and the timeline's value, and notes when each changes (head: call
to first timestamp; body: first to last; tail: last timestamp to the value), for chains of 1
and 100 plain launches, with the CPU it ran on.

    python scripts/probe_graph_overhead.py [--device nv:0] [--sizes 1,10,100,1000,3000]
        [--replays 31] [--warmup-s 1] [--hot-first] [--prealloc-mb N] [--huge-kernargs]
        [--placements K] [--split] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_graphs import SRC  # noqa: E402  (beside this script: the same kernels)

SIZES = (1, 10, 100, 1000, 3000)


def fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line through (xs, ys)."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - slope * mx, slope


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="nv:0")
    ap.add_argument("--json", default="")
    ap.add_argument("--replays", type=int, default=31)
    ap.add_argument("--warmup-s", type=float, default=1.0, help="seconds of replays first")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="chain lengths")
    ap.add_argument("--prealloc-mb", type=int, default=0,
                    help="allocate this much VRAM before the graphs (moves where they land)")
    ap.add_argument("--hot-first", action="store_true",
                    help="the hot path's launches before any graph is built")
    ap.add_argument("--huge-kernargs", action="store_true",
                    help="graphs' launch blocks in 2 MiB pages (allocated as 8 MiB)")
    ap.add_argument("--placements", type=int, default=0,
                    help="the plain chain of 1000 with its data at this many places")
    ap.add_argument("--split", action="store_true",
                    help="a replay's head, body and tail in host time")
    args = ap.parse_args()

    import numpy as np

    from runtime.drivers.nv.device import NVDevice
    from runtime.hcq import Launch

    dev = NVDevice(args.device)
    lib = dev.compiler.compile(SRC)
    kernels = {"plain": dev.program(lib, "inc"), "early": dev.program(lib, "inc_wait")}
    x = dev.alloc(4096)
    if args.prealloc_mb:
        dev.alloc(args.prealloc_mb << 20)
    if args.huge_kernargs:
        from runtime.hcq.memory import MemKind
        dev.alloc_kernargs = lambda size: dev.alloc(  # type: ignore[method-assign]
            max(size, 8 << 20), kind=MemKind.VRAM, cpu_access=True)
    dev.copyin(x, np.zeros(1024, np.uint32))
    gs, ls = (4, 1, 1), (256, 1, 1)
    dev.wait_spin_s = 0.05   # poll throughout (the comparison with CUDA's spin synchronization)
    tl = dev.timeline_signal
    out: dict[str, Any] = {}
    total = 0

    def launch_wait() -> int:
        """The hot path's launch + wait (the same head and tail without a graph): its median
        into `out`; the number of launches."""
        lat = []
        for _ in range(2000):
            t = time.perf_counter()
            kernels["plain"](x, 1024, global_size=gs, local_size=ls)
            tl.wait(dev.timeline_value)
            lat.append(time.perf_counter() - t)
        out["launch_wait_us"] = statistics.median(lat) * 1e6
        print(f"launch + wait median {out['launch_wait_us']:.2f} us", flush=True)
        return 2000

    if args.hot_first:
        total += launch_wait()
    # Warm-up: the GPU's clocks rise under load (the first form measured on an idle GPU came out
    # several percent slower per launch than the same form later in the run).
    warm = dev.graph([Launch(kernels["plain"], (x, 1024), gs, ls) for _ in range(1000)])
    t_end = time.perf_counter() + args.warmup_s
    while time.perf_counter() < t_end:
        warm.replay(wait=True)
        total += 1000
    warm.free()
    if not args.hot_first:
        total += launch_wait()
    for form, prg in kernels.items():
        rows = []
        for n in map(int, args.sizes.split(",")):
            g = dev.graph([Launch(prg, (x, 1024), gs, ls, early_start=form == "early")
                           for _ in range(n)])
            g.replay(wait=True)
            walls, cpus = [], []
            for _ in range(args.replays):
                dev.synchronize()
                t = time.perf_counter()
                g.replay()
                cpus.append(time.perf_counter() - t)
                tl.wait(dev.timeline_value)
                walls.append(time.perf_counter() - t)
            gpus = [g.replay(wait=True) for _ in range(7)]
            total += n * (1 + args.replays + 7)
            wall, gpu = statistics.median(walls) * 1e6, statistics.median(gpus) * 1e6
            rows.append({"n": n, "wall_us": wall, "gpu_us": gpu, "over_us": wall - gpu,
                         "replay_cpu_us": statistics.median(cpus) * 1e6,
                         "wall_min_us": min(walls) * 1e6})
            print(f"{form:5s} n={n:5d}  wall {wall:9.2f} us  gpu {gpu:9.2f} us  "
                  f"wall-gpu {wall - gpu:6.2f} us  replay() {rows[-1]['replay_cpu_us']:.2f} us",
                  flush=True)
            g.free()
        ns = [float(r["n"]) for r in rows]
        if len(set(ns)) < 2:
            out[form] = {"rows": rows}
            continue
        wa, wb = fit(ns, [r["wall_us"] for r in rows])
        ga, gb = fit(ns, [r["gpu_us"] for r in rows])
        out[form] = {"rows": rows, "wall_fit": [wa, wb], "gpu_fit": [ga, gb],
                     "slope_ratio": wb / gb}
        print(f"{form:5s} fit: wall {wa:.2f} + {wb * 1e3:.2f} ns * n; gpu {ga:.2f} + "
              f"{gb * 1e3:.2f} ns * n; wall slope / gpu slope {wb / gb:.5f}", flush=True)
    res = np.zeros(1024, np.uint32)
    dev.copyout(res, x)
    out["ok"] = bool((res == total).all())
    if args.split:
        out["split"] = split(dev, kernels["plain"], x, gs, ls)
        dev.copyout(res, x)
        total += out["split"]["launches"]
        out["ok"] = out["ok"] and bool((res == total).all())
    if args.placements:
        out["placements"] = placements(dev, kernels["plain"], args.placements, gs, ls)
        out["ok"] = out["ok"] and all(p["ok"] for p in out["placements"])
    print("ok:", out["ok"])
    dev.close()
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0 if out["ok"] else 1


def split(dev: Any, prg: Any, x: Any, gs: tuple[int, int, int],
          ls: tuple[int, int, int]) -> dict[str, Any]:
    """Replays of chains of 1 and 100 (the timed form), the CPU polling the first timestamp,
    the last and the timeline's value: medians of 41 of head, body and tail, in host µs."""
    import ctypes

    from runtime.hcq import Launch
    tl = dev.timeline_signal
    res: dict[str, Any] = {"cpu": ctypes.CDLL(None).sched_getcpu(), "launches": 0}
    for n in (1, 100):
        g = dev.graph([Launch(prg, (x, 1024), gs, ls) for _ in range(n)])
        g.replay(wait=True)
        t0, t1 = g._t0.value_view, g._t1.value_view
        fast = g._native.get(True)
        heads, bodies, tails = [], [], []
        for _ in range(41):
            dev.synchronize()
            t0[1] = t1[1] = 0
            clock = time.perf_counter
            start = clock()
            # the timed replay's submission without its wait (replay(wait=True) would block)
            v = fast[0](g._live) if fast else g._submit_segments(True)[0]
            assert v == dev.timeline_value
            while not t0[1]:
                pass
            a = clock()
            while not t1[1]:
                pass
            b = clock()
            while tl.value < v:
                pass
            c = clock()
            heads.append(a - start)
            bodies.append(b - a)
            tails.append(c - b)
        res["launches"] += n * 42
        row = res[f"n{n}"] = {k: statistics.median(vs) * 1e6 for k, vs in
                              (("head", heads), ("body", bodies), ("tail", tails))}
        print(f"split n={n:4d} (cpu {res['cpu']}): head {row['head']:6.2f}  body "
              f"{row['body']:7.2f}  tail {row['tail']:6.2f} us", flush=True)
        g.free()
    return res


def placements(dev: Any, prg: Any, k: int, gs: tuple[int, int, int],
               ls: tuple[int, int, int]) -> list[dict[str, Any]]:
    """The plain chain of 1000 on data at `k` places of one 64 MiB buffer (the first place
    measured again last): median GPU time of 9 replays each, and each place's result checked."""
    import numpy as np

    from runtime.hcq import Launch
    step = 68 << 10
    pool = dev.alloc(64 << 20)
    dev.copyin(pool, np.zeros((64 << 20) // 4, np.uint32))
    offsets = [(i * step) % ((64 << 20) - 4096) for i in range(k)] + [0]
    runs: dict[int, int] = {}
    rows = []
    for off in offsets:
        x = pool.slice(off, 4096)
        g = dev.graph([Launch(prg, (x, 1024), gs, ls) for _ in range(1000)])
        g.replay(wait=True)
        gpus = [g.replay(wait=True) for _ in range(9)]
        g.free()
        runs[off] = runs.get(off, 0) + 10
        res = np.zeros(1024, np.uint32)
        dev.copyout(res, x)
        row = {"offset": off, "va": x.va, "gpu_us": statistics.median(gpus) * 1e6,
               "gpu_min_us": min(gpus) * 1e6, "ok": bool((res == 1000 * runs[off]).all())}
        rows.append(row)
        print(f"place {off:#10x} (va {x.va:#x})  gpu {row['gpu_us']:8.2f} us  "
              f"min {row['gpu_min_us']:8.2f}  ok {row['ok']}", flush=True)
    g_us = [r["gpu_us"] for r in rows]
    print(f"placements: gpu {min(g_us):.2f} .. {max(g_us):.2f} us "
          f"(first {g_us[0]:.2f}, again last {g_us[-1]:.2f})", flush=True)
    return rows


if __name__ == "__main__":
    sys.exit(main())
