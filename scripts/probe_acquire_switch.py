#!/usr/bin/env python3
"""Whether a channel waiting on a semaphore holds other work on the GPU back (real NVIDIA GPU).

A host semaphore acquire that is not met yet either keeps its channel group on the engine, the
channel polling, until the group's timeslice ends, or, with SEM_EXECUTE's ACQUIRE_SWITCH_TSG,
switches the group off the runlist at once. This probe measures this process's launch + wait
(median of 300, the CPU polling) and a graph of 100 chained launches (median wall of 21
replays), alone and beside a channel that waits on a signal nothing sets, with and without the
switch:
- the compute channel of another process (a child started by this script);
- the copy channel of another process;
- this process's own copy channel (the same channel group as its compute channel).

    python scripts/probe_acquire_switch.py [--device nv:0] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_graphs import SRC  # noqa: E402  (beside this script: the same kernels)


def acquire_words(va: int, value: int, switch: bool) -> list[int]:
    """A host semaphore acquire of `value` at `va`, with or without ACQUIRE_SWITCH_TSG."""
    from hcq_bindings.nv import classes as cl

    from runtime.drivers.nv.gpfifo import SEM_ACQUIRE_GEQ_64, host_semaphore
    from runtime.drivers.nv.methods import fval
    bit = fval(cl.NVC56F_SEM_EXECUTE_ACQUIRE_SWITCH_TSG, cl.NVC56F_SEM_EXECUTE_ACQUIRE_SWITCH_TSG_EN)
    return host_semaphore(va, value, (SEM_ACQUIRE_GEQ_64 | bit) if switch
                          else SEM_ACQUIRE_GEQ_64 & ~bit)


def block(dev: Any, engine: str, switch: bool) -> Any:
    """Submits, on `engine`'s channel of `dev`, an acquire of a fresh signal that nothing sets;
    returns the signal (set it to 1 to let the channel go on)."""
    sig = dev.new_signal(0)
    q = dev.compute_queue() if engine == "compute" else dev.copy_queue()
    q.words.extend(acquire_words(sig.va, 1, switch))
    q.submit()
    return sig


def child(device: str, engine: str, switch: bool) -> int:
    """The other process: blocks one of its channels until its stdin closes."""
    from runtime.drivers.nv.device import NVDevice
    dev = NVDevice(device)
    sig = block(dev, engine, switch)
    print("ready", flush=True)
    sys.stdin.read()
    sig.value = 1
    dev.synchronize(timeout_ms=10_000)
    dev.close()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="nv:0")
    ap.add_argument("--json", default="")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)  # ENGINE:switch|poll
    args = ap.parse_args()
    if args.child:
        engine, how = args.child.split(":")
        return child(args.device, engine, how == "switch")

    import numpy as np

    from runtime.drivers.nv.device import NVDevice
    from runtime.hcq import Launch

    dev = NVDevice(args.device)
    dev.wait_spin_s = 0.05  # poll throughout
    prg = dev.compiler.compile(SRC)
    inc = dev.program(prg, "inc")
    x = dev.alloc(4096)
    dev.copyin(x, np.zeros(1024, np.uint32))
    gs, ls = (4, 1, 1), (256, 1, 1)
    tl = dev.timeline_signal
    g = dev.graph([Launch(inc, (x, 1024), gs, ls) for _ in range(100)])
    g.replay(wait=True)
    total = 100

    def measure() -> dict[str, float]:
        nonlocal total
        lat = []
        for _ in range(300):
            t = time.perf_counter()
            inc(x, 1024, global_size=gs, local_size=ls)
            tl.wait(dev.timeline_value)
            lat.append(time.perf_counter() - t)
        walls = []
        for _ in range(21):
            t = time.perf_counter()
            g.replay()
            tl.wait(dev.timeline_value)
            walls.append(time.perf_counter() - t)
        total += 300 + 2100
        return {"launch_wait_us": statistics.median(lat) * 1e6,
                "graph100_us": statistics.median(walls) * 1e6}

    rows: dict[str, dict[str, float]] = {}

    def report(name: str, row: dict[str, float]) -> None:
        rows[name] = row
        print(f"{name:52s} launch + wait {row['launch_wait_us']:9.2f} us   graph of 100 "
              f"{row['graph100_us']:9.2f} us", flush=True)

    report("alone", measure())
    for engine in ("compute", "copy"):
        for switch in (False, True):
            proc = subprocess.Popen(
                [sys.executable, __file__, "--device", args.device, "--child",
                 f"{engine}:{'switch' if switch else 'poll'}"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            try:
                assert proc.stdout is not None and proc.stdin is not None
                if proc.stdout.readline().strip() != "ready":
                    raise RuntimeError(f"the child ({engine}) did not start")
                report(f"another process's {engine} channel waiting, "
                       f"{'switch' if switch else 'no switch'}", measure())
                proc.stdin.close()
                proc.wait(30)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    for switch in (False, True):
        sig = block(dev, "copy", switch)
        report(f"own copy channel waiting, {'switch' if switch else 'no switch'}", measure())
        sig.value = 1
        dev.synchronize()
    report("alone again", measure())
    res = np.zeros(1024, np.uint32)
    dev.copyout(res, x)
    ok = bool((res == total).all())
    print("ok:", ok)
    dev.close()
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "ok": ok}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
